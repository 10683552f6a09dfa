// printing.cc - operator<< for rrpc::IOBuf.
#include "rrpc/cxx/printing.h"

#include <ostream>

namespace rrpc {

std::ostream& operator<<(std::ostream& os, const IOBuf& buf) {
  // Block by block: no flattened copy of a large attachment.
  for (size_t i = 0, n = buf.backing_block_num(); i < n; i++) {
    std::string_view b = buf.backing_block(i);
    os.write(b.data(), static_cast<std::streamsize>(b.size()));
  }
  return os;
}

}  // namespace rrpc
