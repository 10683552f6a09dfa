// rrpc/cxx/printing.h - operator<< for rrpc::IOBuf, as brpc prints a
// butil::IOBuf in logs (`LOG(INFO) << cntl->request_attachment()`): the
// bytes as they are, copied out of the blocks.
#ifndef RRPC_CXX_PRINTING_H
#define RRPC_CXX_PRINTING_H

#include <iosfwd>

#include "rrpc/cxx/iobuf.h"

namespace rrpc {

std::ostream& operator<<(std::ostream& os, const IOBuf& buf);

}  // namespace rrpc

#endif  // RRPC_CXX_PRINTING_H
