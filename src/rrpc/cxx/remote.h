// rrpc/cxx/remote.h - the C++ face of rrpc/remote.h: rrpc::RemoteToken, the
// 40 serializable bytes that name a peer's remote-memory region in an RPC
// (put them in a protobuf `bytes` field with bytes(), take them back with
// Parse), and RAII handles over a connection's link and its regions:
// rrpc::RemoteLink (rrpc_remote_link) and rrpc::RemoteRegion
// (rrpc_remote_region). docs/remote-memory.md gives the model.
//
// RemoteToken: [thread-compatible] value type. RemoteLink, RemoteRegion:
// move-only owners, [thread-safe] calls (the C API's). No exceptions.
#ifndef RRPC_CXX_REMOTE_H
#define RRPC_CXX_REMOTE_H

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
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
  friend class RemoteRegion;
  friend class RemoteLink;
};

class RemoteLink;

// A region registered on a link; freed (revoked, deregistered) when it goes.
class RemoteRegion {
 public:
  RemoteRegion() = default;
  ~RemoteRegion() { rrpc_remote_region_free(r_); }
  RemoteRegion(RemoteRegion&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  RemoteRegion& operator=(RemoteRegion&& o) noexcept;
  RemoteRegion(const RemoteRegion&) = delete;
  RemoteRegion& operator=(const RemoteRegion&) = delete;

  bool valid() const { return r_ != nullptr; }
  uint32_t id() const { return rrpc_remote_region_id(r_); }
  // The token for the link's peer: 0 or the C call's code.
  int Token(RemoteToken* out) const;
  // End the peer's access now (1 if this call did).
  int Revoke() { return rrpc_remote_region_revoke(r_); }
  rrpc_remote_region* get() const { return r_; }

 private:
  friend class RemoteLink;
  rrpc_remote_region* r_ = nullptr;
};

// A handle to a connection's link; released when it goes.
class RemoteLink {
 public:
  RemoteLink() = default;
  ~RemoteLink() { rrpc_remote_link_release(l_); }
  RemoteLink(RemoteLink&& o) noexcept : l_(o.l_) { o.l_ = nullptr; }
  RemoteLink& operator=(RemoteLink&& o) noexcept;
  RemoteLink(const RemoteLink&) = delete;
  RemoteLink& operator=(const RemoteLink&) = delete;

  // The link of a channel's connection / of a server call's connection:
  // 0 or the C call's code.
  int Open(rrpc_channel* ch);
  int Open(rrpc_server_call* call);
  bool valid() const { return l_ != nullptr; }
  int failed() const { return l_ ? rrpc_remote_link_failed(l_) : -EINVAL; }

  // rights 0: local use only (the source or target of this side's
  // transfers); else announced to the peer.
  int Register(void* buf, size_t len, unsigned rights, RemoteRegion* out);
  void SetNotify(rrpc_remote_notify_fn fn, void* arg) { rrpc_remote_link_set_notify(l_, fn, arg); }

  // Transfers with a std::function completion (exactly once unless the
  // call returns non-zero). token: the peer's region; tag with
  // RRPC_REMOTE_NOTIFY in flags tells the owner.
  int Write(RemoteRegion& local, uint64_t local_offset, const RemoteToken& token, uint64_t remote_offset,
            uint64_t length, std::function<void(int)> done, unsigned flags = 0, uint32_t tag = 0);
  int Read(RemoteRegion& local, uint64_t local_offset, const RemoteToken& token, uint64_t remote_offset,
           uint64_t length, std::function<void(int)> done);
  rrpc_remote_link* get() const { return l_; }

 private:
  int Submit(bool write, RemoteRegion& local, uint64_t local_offset, const RemoteToken& token,
             uint64_t remote_offset, uint64_t length, std::function<void(int)> done, unsigned flags,
             uint32_t tag);
  rrpc_remote_link* l_ = nullptr;
};

}  // namespace rrpc

#endif  // RRPC_CXX_REMOTE_H
