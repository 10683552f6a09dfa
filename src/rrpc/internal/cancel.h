/* internal/cancel.h - private to the rrpc core: how a call in flight is
 * cancelled through its controller (rrpc_controller_cancel).
 *
 * Contract between the controller and whoever issues a call on it (the
 * single-server channel today; a cluster layer over it may install its own):
 * - rrpc__controller_call_begin when the call starts: the controller is in a
 *   call, not cancelled, with no canceler.
 * - rrpc__controller_set_canceler once the call can be found and ended (it
 *   is about to sit in a pending map): `fn(arg)` is what a cancel runs. If a
 *   cancel came between begin and now, fn runs at once (inside this
 *   function) and it returns -ECANCELED.
 * - rrpc__controller_call_end BEFORE the call's completion is delivered (the
 *   done callback may free the controller; a sync caller may return): after
 *   it, cancel is a no-op and fn never runs again.
 * fn runs under the controller's cancel lock, so `arg` stays valid for its
 * whole run (call_end waits for it); fn must therefore not complete the call
 * itself nor call anything that takes the same lock (call_end, set_canceler):
 * it hands the completion to another thread (the connection's loop) and
 * returns. It may run on any thread.
 *
 * Inline: these run on every call, and a call that is never cancelled
 * should pay a store, two lock round trips and no function calls for them.
 */
#ifndef RRPC_INTERNAL_CANCEL_H
#define RRPC_INTERNAL_CANCEL_H

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>

#include "rrpc/internal/controller.h"

typedef void (*rrpc__canceler_fn)(void *arg);

enum { RRPC__CANCEL_IN_CALL = 1, RRPC__CANCEL_CANCELED = 2 };

/* A spin lock, not a mutex: almost never contended, and held only for a
 * few stores or one canceler run (a task post). */
static inline void rrpc__cancel_lock(rrpc_controller *c) {
  while (atomic_exchange_explicit(&c->cancel_lock, 1, memory_order_acquire) != 0) {
    while (atomic_load_explicit(&c->cancel_lock, memory_order_relaxed) != 0) sched_yield();
  }
}

static inline void rrpc__cancel_unlock(rrpc_controller *c) {
  atomic_store_explicit(&c->cancel_lock, 0, memory_order_release);
}

/* No lock: the state is 0 (the last call ended, fn is NULL), and a cancel
 * changes nothing until it sees IN_CALL. */
static inline void rrpc__controller_call_begin(rrpc_controller *c) {
  atomic_store_explicit(&c->cancel_state, RRPC__CANCEL_IN_CALL, memory_order_release);
}

static inline int rrpc__controller_set_canceler(rrpc_controller *c, rrpc__canceler_fn fn, void *arg) {
  int rc = 0;
  rrpc__cancel_lock(c);
  if (atomic_load_explicit(&c->cancel_state, memory_order_relaxed) & RRPC__CANCEL_CANCELED) {
    fn(arg); /* the cancel came before the call could be found */
    rc = -ECANCELED;
  } else {
    c->cancel_fn = fn;
    c->cancel_arg = arg;
  }
  rrpc__cancel_unlock(c);
  return rc;
}

static inline void rrpc__controller_call_end(rrpc_controller *c) {
  rrpc__cancel_lock(c);
  atomic_store_explicit(&c->cancel_state, 0, memory_order_relaxed);
  c->cancel_fn = NULL;
  c->cancel_arg = NULL;
  rrpc__cancel_unlock(c);
}

/* rrpc__controller_try_cancel - rrpc_controller_cancel unless the cancel
 * lock is held (-EBUSY, nothing done): for a loop thread, which must not
 * wait for a holder that may have been preempted. 0 once it ran. */
int rrpc__controller_try_cancel(rrpc_controller *c);

#endif /* RRPC_INTERNAL_CANCEL_H */
