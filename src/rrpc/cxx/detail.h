// detail.h - private to src/rrpc/cxx: helpers the Server, Channel and flag
// files share. Not installed; applications never include it.
#ifndef RRPC_CXX_DETAIL_H
#define RRPC_CXX_DETAIL_H

#include <google/protobuf/message.h>

#include <string>

#include "rrpc/iobuf.h"

namespace rrpc {
namespace detail {

// InitRuntimeOnce - route the C core's log sink to glog (once per process).
// Thread-safe; cheap after the first call.
void InitRuntimeOnce();

// ApplyLimitFlags - hand the limit flags that were set (not left at their
// defaults) to rrpc_limits_set. Any thread.
void ApplyLimitFlags();

// ApplyLoopFlags - hand --event_dispatcher_num to the C core before its
// process-wide loops start (Channel::Init, Server::Start). Once they run the
// count is fixed; a different non-zero flag then logs a warning once.
void ApplyLoopFlags();

// ApplyObservabilityFlags - hand --enable_metrics and the builtin_* flags to
// the C core and let /flags list every gflag. Cheap; called by every Server
// start and Channel init so flags set after parsing still apply.
void ApplyObservabilityFlags();

// PrepareRdma - start the RDMA runtime from the rdma_* flags (once; a runtime
// someone else started already is fine). 0, or -1 after logging why (for a
// build without RDMA: how to build with it); `why`, when given, gets the
// same text.
int PrepareRdma(std::string* why = nullptr);

// SerializeToIOBuf - append `m`'s bytes to `out` (small messages are copied
// into the tail block, large ones written straight into fresh blocks). 0, or
// a negative code with *why set: -RRPC_EREQUEST-style callers choose the
// code, so this returns -EINVAL for missing required fields and -ENOMEM for
// allocation failures. Thread-compatible.
int SerializeToIOBuf(const google::protobuf::Message& m, rrpc_iobuf* out, std::string* why);

// ParseFromIOBuf - parse `in` (all of it) into `m` without flattening it.
// false if the bytes are malformed or required fields are missing.
bool ParseFromIOBuf(google::protobuf::Message* m, const rrpc_iobuf* in);

// ErrorText for a code from the C API: "[E1008]RPC timed out"-like.
std::string DescribeCode(int neg_code);

}  // namespace detail
}  // namespace rrpc

#endif  // RRPC_CXX_DETAIL_H
