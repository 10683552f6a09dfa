// butil/iobuf.h - rrpc::IOBuf under butil's name, printable with <<.
#ifndef RRPC_COMPAT_BUTIL_IOBUF_H
#define RRPC_COMPAT_BUTIL_IOBUF_H

#include "rrpc/cxx/iobuf.h"
#include "rrpc/cxx/printing.h"

namespace butil {
using ::rrpc::IOBuf;
}  // namespace butil

#endif  // RRPC_COMPAT_BUTIL_IOBUF_H
