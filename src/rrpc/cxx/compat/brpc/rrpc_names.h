// brpc/rrpc_names.h - brpc's namespaces over rrpc's C++ face, for the
// brpc-compatible include directory (pkg-config rrpc-brpc-compat): with it,
// `#include <brpc/server.h>` and `brpc::Server` reach rrpc's. Only in
// programs without brpc itself; a name rrpc lacks fails to compile
// (docs/from-brpc.md lists them and what to use instead).
#ifndef RRPC_COMPAT_BRPC_RRPC_NAMES_H
#define RRPC_COMPAT_BRPC_RRPC_NAMES_H

#include "butil/endpoint.h"  // brpc's headers bring butil's along
#include "butil/iobuf.h"
#include "rrpc/cxx/rrpc.h"

namespace brpc {
using namespace ::rrpc;  // NOLINT(build/namespaces): the point of this header
}  // namespace brpc

#endif  // RRPC_COMPAT_BRPC_RRPC_NAMES_H
