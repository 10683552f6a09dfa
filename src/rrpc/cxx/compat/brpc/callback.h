// brpc/callback.h - rrpc's C++ face under brpc's header name (brpc/rrpc_names.h).
#ifndef RRPC_COMPAT_BRPC_CALLBACK_H
#define RRPC_COMPAT_BRPC_CALLBACK_H
#include "brpc/rrpc_names.h"
#endif
