// rrpc/cxx/remote.h - the C++ face of rrpc/remote.h: rrpc::RemoteToken, the
// 40 serializable bytes that name a peer's remote-memory region in an RPC
// (put them in a protobuf `bytes` field with bytes(), take them back with
// Parse). docs/remote-memory.md gives the model; the calls that register
// regions and move bytes come with the transports that carry them.
//
// [thread-compatible] value type; no exceptions.
#ifndef RRPC_CXX_REMOTE_H
#define RRPC_CXX_REMOTE_H

#include <cstddef>
#include <cstdint>
#include <string>

#include "rrpc/remote.h"

namespace rrpc {

enum RemoteRights : unsigned {
  REMOTE_READ = RRPC_REMOTE_READ,
  REMOTE_WRITE = RRPC_REMOTE_WRITE,
};

class RemoteToken {
 public:
  RemoteToken() = default;

  // Check and take data (len bytes, e.g. a received bytes field): 0, or the
  // negative code of rrpc_remote_token_inspect (this token is then empty).
  int Parse(const void* data, size_t len);
  int Parse(const std::string& bytes) { return Parse(bytes.data(), bytes.size()); }

  // False for a default-constructed token or after a failed Parse.
  bool valid() const { return valid_; }
  // The 40 bytes ("" when not valid).
  std::string bytes() const;

  uint32_t id() const { return info_.id; }
  uint32_t generation() const { return info_.generation; }
  uint64_t conn_id() const { return info_.conn_id; }
  uint64_t length() const { return info_.length; }
  unsigned rights() const { return info_.rights; }
  bool can_read() const { return (info_.rights & RRPC_REMOTE_READ) != 0; }
  bool can_write() const { return (info_.rights & RRPC_REMOTE_WRITE) != 0; }

 private:
  bool valid_ = false;
  rrpc_remote_token tok_{};
  rrpc_remote_token_info info_{};
};

}  // namespace rrpc

#endif  // RRPC_CXX_REMOTE_H
