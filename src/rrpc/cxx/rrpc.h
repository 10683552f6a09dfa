// rrpc/cxx/rrpc.h - the whole C++ face of rrpc in one include: Server,
// Channel, Controller, IOBuf, the flags, and brpc's helpers (ClosureGuard,
// NewCallback, CallId/Join, EndPoint, printing an IOBuf).
#ifndef RRPC_CXX_RRPC_H
#define RRPC_CXX_RRPC_H

#include "rrpc/cxx/call_id.h"
#include "rrpc/cxx/callback.h"
#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/closure_guard.h"
#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/endpoint.h"
#include "rrpc/cxx/flags.h"
#include "rrpc/cxx/iobuf.h"
#include "rrpc/cxx/printing.h"
#include "rrpc/cxx/server.h"

#endif  // RRPC_CXX_RRPC_H
