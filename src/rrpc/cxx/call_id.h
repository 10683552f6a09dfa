// rrpc/cxx/call_id.h - brpc's CallId and Join: wait for an asynchronous
// call without a callback of one's own.
//
//   rrpc::CallId id = cntl->call_id();           // before or after the call
//   stub.Echo(cntl, &req, &resp, rrpc::NewCallback(&OnDone, cntl, &resp));
//   ...
//   rrpc::Join(id);  // returns once the call ended and OnDone returned
//
// Taken before the call, Join waits until the call's done has RETURNED, so
// `done` may delete the controller (Join never touches it). Taken after the
// call was issued (brpc's `CallMethod(..., DoNothing()); Join(cntl.call_id())`),
// the controller must outlive the call, and Join waits at least until the
// response is in the controller and `done` has started.
// A synchronous call has ended when CallMethod returns. An id of a call that
// ended, of a controller that never made a call and was destroyed or Reset,
// or 0, is joined at once. Join from the call's own done deadlocks.
//
// [thread-safe]: any thread may Join any id, any number of times.
#ifndef RRPC_CXX_CALL_ID_H
#define RRPC_CXX_CALL_ID_H

#include <cstdint>

namespace rrpc {

struct CallId {
  uint64_t value;
};

void Join(CallId id);

namespace detail {
// A new id, in flight until EndCallId.
uint64_t NewCallId();
// The call ended: wake its joiners. Once per id from NewCallId.
void EndCallId(uint64_t id);
}  // namespace detail

}  // namespace rrpc

#endif  // RRPC_CXX_CALL_ID_H
