/* internal/cancel.h - private to the rrpc core: how a call in flight is
 * cancelled through its controller (rrpc_controller_cancel).
 *
 * Contract between the controller and whoever issues a call on it (the
 * single-server channel today; a cluster layer over it may install its own):
 * - rrpc__controller_call_begin when the call starts: the controller is in a
 *   call, not cancelled, with no canceler.
 * - rrpc__controller_set_canceler once the call can be found and ended (it
 *   sits in a pending map): `fn(arg)` is what a cancel runs. If a cancel came
 *   between begin and now, fn runs at once (inside this function) and it
 *   returns -ECANCELED.
 * - rrpc__controller_call_end BEFORE the call's completion is delivered (the
 *   done callback may free the controller; a sync caller may return): after
 *   it, cancel is a no-op and fn never runs again.
 * fn runs under the controller's cancel lock, so `arg` stays valid for its
 * whole run (call_end waits for it); fn must therefore not complete the call
 * itself nor call anything that takes the same lock (call_end, set_canceler):
 * it hands the completion to another thread (the connection's loop) and
 * returns. It may run on any thread.
 */
#ifndef RRPC_INTERNAL_CANCEL_H
#define RRPC_INTERNAL_CANCEL_H

#include "rrpc/controller.h"

typedef void (*rrpc__canceler_fn)(void *arg);

void rrpc__controller_call_begin(rrpc_controller *c);
int rrpc__controller_set_canceler(rrpc_controller *c, rrpc__canceler_fn fn, void *arg);
void rrpc__controller_call_end(rrpc_controller *c);

#endif /* RRPC_INTERNAL_CANCEL_H */
