// brpc/closure_guard.h - rrpc's C++ face under brpc's header name (brpc/rrpc_names.h).
#ifndef RRPC_COMPAT_BRPC_CLOSURE_GUARD_H
#define RRPC_COMPAT_BRPC_CLOSURE_GUARD_H
#include "brpc/rrpc_names.h"
#endif
