// message_io.cc - protobuf messages to and from C iobufs without flattening
// copies (the zero-copy streams of iobuf.h), for the Server and Channel.
#include <google/protobuf/io/coded_stream.h>

#include <cerrno>
#include <climits>
#include <cstdint>

#include "rrpc/cxx/detail.h"
#include "rrpc/cxx/iobuf.h"
#include "rrpc/errors.h"

namespace rrpc {
namespace detail {

namespace {
// Up to this size a message is serialized on the stack and copied into the
// iobuf's tail block: one small memcpy is cheaper than taking a block of its
// own, and consecutive small writes share blocks.
constexpr size_t kCopyThreshold = 4096;
}  // namespace

int SerializeToIOBuf(const google::protobuf::Message& m, rrpc_iobuf* out, std::string* why) {
  if (!m.IsInitialized()) {
    if (why) *why = "missing required fields: " + m.InitializationErrorString();
    return -EINVAL;
  }
  size_t size = m.ByteSizeLong();
  if (size > INT_MAX) {
    if (why) *why = "message larger than 2 GiB";
    return -RRPC_ETOOBIG;
  }
  if (size == 0) return 0;
  if (size <= kCopyThreshold) {
    uint8_t stack[kCopyThreshold];
    m.SerializeWithCachedSizesToArray(stack);
    int rc = rrpc_iobuf_append(out, stack, size);
    if (rc != 0 && why) *why = "out of memory";
    return rc;
  }
  int rc;
  {
    IOBufAsZeroCopyOutputStream zos(out, size);
    {
      google::protobuf::io::CodedOutputStream cos(&zos);
      m.SerializeWithCachedSizes(&cos);
      if (cos.HadError()) {
        if (why) *why = "out of memory";
        return zos.error() != 0 ? zos.error() : -ENOMEM;
      }
    }
    rc = zos.Flush();
  }
  if (rc != 0 && why) *why = "out of memory";
  return rc;
}

bool ParseFromIOBuf(google::protobuf::Message* m, const rrpc_iobuf* in) {
  size_t total = rrpc_iobuf_length(in);
  if (total > INT_MAX) return false;
  if (rrpc_iobuf_piece_count(in) == 1) {
    // One piece (the common case for small messages): parse it in place.
    const void* p;
    size_t len;
    void* region;
    if (rrpc_iobuf_piece(in, 0, &p, &len, &region) != 0) return false;
    return m->ParseFromArray(p, static_cast<int>(len));
  }
  if (total == 0) return m->ParseFromArray(nullptr, 0);
  IOBufAsZeroCopyInputStream zis(in);
  return m->ParseFromZeroCopyStream(&zis);
}

std::string DescribeCode(int neg_code) {
  return std::string("[E") + std::to_string(-neg_code) + "]" + rrpc_strerror(neg_code);
}

}  // namespace detail
}  // namespace rrpc
