// remote.cc - rrpc::RemoteToken, RemoteRegion, RemoteLink over the C API
// of rrpc/remote.h (cxx/remote.h).
#include "rrpc/cxx/remote.h"

#include <cerrno>
#include <cstring>
#include <new>
#include <utility>

namespace rrpc {

int RemoteToken::Parse(const void* data, size_t len) {
  rrpc_remote_token_info info;
  int rc = rrpc_remote_token_inspect(data, len, &info);
  if (rc != 0) {
    *this = RemoteToken();
    return rc;
  }
  std::memcpy(tok_.bytes, data, sizeof(tok_.bytes));
  info_ = info;
  valid_ = true;
  return 0;
}

std::string RemoteToken::bytes() const {
  if (!valid_) return std::string();
  return std::string(reinterpret_cast<const char*>(tok_.bytes), sizeof(tok_.bytes));
}

RemoteRegion& RemoteRegion::operator=(RemoteRegion&& o) noexcept {
  if (this != &o) {
    rrpc_remote_region_free(r_);
    r_ = o.r_;
    o.r_ = nullptr;
  }
  return *this;
}

int RemoteRegion::Token(RemoteToken* out) const {
  rrpc_remote_token t;
  int rc = rrpc_remote_region_token(r_, &t);
  return rc != 0 ? rc : out->Parse(t.bytes, sizeof(t.bytes));
}

RemoteLink& RemoteLink::operator=(RemoteLink&& o) noexcept {
  if (this != &o) {
    rrpc_remote_link_release(l_);
    l_ = o.l_;
    o.l_ = nullptr;
  }
  return *this;
}

int RemoteLink::Open(rrpc_channel* ch) {
  rrpc_remote_link* l = nullptr;
  int rc = rrpc_channel_remote_link(ch, &l);
  if (rc == 0) *this = RemoteLink(), l_ = l;
  return rc;
}

int RemoteLink::Open(rrpc_server_call* call) {
  rrpc_remote_link* l = nullptr;
  int rc = rrpc_server_call_remote_link(call, &l);
  if (rc == 0) *this = RemoteLink(), l_ = l;
  return rc;
}

int RemoteLink::Register(void* buf, size_t len, unsigned rights, RemoteRegion* out) {
  rrpc_remote_region* r = nullptr;
  int rc = rrpc_remote_region_register(l_, buf, len, rights, &r);
  if (rc == 0) {
    RemoteRegion made;
    made.r_ = r;
    *out = std::move(made);
  }
  return rc;
}

namespace {
struct Done {
  std::function<void(int)> fn;
};
void run_done(void* arg, int status) {
  Done* d = static_cast<Done*>(arg);
  d->fn(status);
  delete d;
}
}  // namespace

int RemoteLink::Submit(bool write, RemoteRegion& local, uint64_t local_offset, const RemoteToken& token,
                       uint64_t remote_offset, uint64_t length, std::function<void(int)> done, unsigned flags,
                       uint32_t tag) {
  if (!token.valid() || !done) return -EINVAL;
  Done* d = new (std::nothrow) Done{std::move(done)};
  if (d == nullptr) return -ENOMEM;
  rrpc_remote_xfer x = {};
  x.local = local.get();
  x.local_offset = local_offset;
  x.token = &token.tok_;
  x.remote_offset = remote_offset;
  x.length = length;
  x.flags = flags;
  x.tag = tag;
  x.done = run_done;
  x.arg = d;
  int rc = write ? rrpc_remote_write(l_, &x) : rrpc_remote_read(l_, &x);
  if (rc != 0) delete d;
  return rc;
}

int RemoteLink::Write(RemoteRegion& local, uint64_t local_offset, const RemoteToken& token, uint64_t remote_offset,
                      uint64_t length, std::function<void(int)> done, unsigned flags, uint32_t tag) {
  return Submit(true, local, local_offset, token, remote_offset, length, std::move(done), flags, tag);
}

int RemoteLink::Read(RemoteRegion& local, uint64_t local_offset, const RemoteToken& token, uint64_t remote_offset,
                     uint64_t length, std::function<void(int)> done) {
  return Submit(false, local, local_offset, token, remote_offset, length, std::move(done), 0, 0);
}

}  // namespace rrpc
