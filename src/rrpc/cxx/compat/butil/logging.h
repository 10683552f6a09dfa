// butil/logging.h - brpc's LOG/CHECK/VLOG macros come from glog here, as
// rrpc logs through glog (docs/from-brpc.md).
#ifndef RRPC_COMPAT_BUTIL_LOGGING_H
#define RRPC_COMPAT_BUTIL_LOGGING_H
#include <glog/logging.h>
#endif
