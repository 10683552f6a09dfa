// brpc/server.h - rrpc's C++ face under brpc's header name (brpc/rrpc_names.h).
#ifndef RRPC_COMPAT_BRPC_SERVER_H
#define RRPC_COMPAT_BRPC_SERVER_H
#include "brpc/rrpc_names.h"
#endif
