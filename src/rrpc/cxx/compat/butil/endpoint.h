// butil/endpoint.h - rrpc::EndPoint and its functions under butil's names.
#ifndef RRPC_COMPAT_BUTIL_ENDPOINT_H
#define RRPC_COMPAT_BUTIL_ENDPOINT_H

#include "rrpc/cxx/endpoint.h"

namespace butil {
using ::rrpc::endpoint2str;
using ::rrpc::EndPoint;
using ::rrpc::IP_ANY;
using ::rrpc::IP_NONE;
using ::rrpc::ip2str;
using ::rrpc::ip_t;
using ::rrpc::str2endpoint;
using ::rrpc::str2ip;
}  // namespace butil

#endif  // RRPC_COMPAT_BUTIL_ENDPOINT_H
