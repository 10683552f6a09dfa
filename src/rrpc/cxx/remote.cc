// remote.cc - rrpc::RemoteToken over rrpc_remote_token_inspect (cxx/remote.h).
#include "rrpc/cxx/remote.h"

#include <cstring>

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

}  // namespace rrpc
