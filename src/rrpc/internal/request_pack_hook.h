/* internal/request_pack_hook.h - for tests only: what the channel runs
 * between packing a call's request into its connection's pending output
 * and enrolling the call (NULL, the default: nothing). A test closes the
 * connection or cancels the call from it, on demand, at the one point
 * where the packed bytes must be taken back. Set it while no call is being
 * issued. */
#ifndef RRPC_INTERNAL_REQUEST_PACK_HOOK_H
#define RRPC_INTERNAL_REQUEST_PACK_HOOK_H

#include "rrpc/controller.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__socket;
typedef void (*rrpc__request_packed_fn)(struct rrpc__socket *s, rrpc_controller *cntl);
extern rrpc__request_packed_fn rrpc__request_packed_hook;

#ifdef __cplusplus
}
#endif

#endif
