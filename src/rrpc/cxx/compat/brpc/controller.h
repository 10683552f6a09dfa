// brpc/controller.h - rrpc's C++ face under brpc's header name (brpc/rrpc_names.h).
#ifndef RRPC_COMPAT_BRPC_CONTROLLER_H
#define RRPC_COMPAT_BRPC_CONTROLLER_H
#include "brpc/rrpc_names.h"
#endif
