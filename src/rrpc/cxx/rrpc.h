// rrpc/cxx/rrpc.h - the whole C++ face of rrpc in one include: Server,
// Channel, Controller, IOBuf and the flags.
#ifndef RRPC_CXX_RRPC_H
#define RRPC_CXX_RRPC_H

#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/flags.h"
#include "rrpc/cxx/iobuf.h"
#include "rrpc/cxx/server.h"

#endif  // RRPC_CXX_RRPC_H
