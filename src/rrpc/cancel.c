/* cancel.c - cancelling a call through its controller: the canceler slot
 * of internal/cancel.h and rrpc_controller_cancel. Knows nothing about how
 * a call is ended; the issuer's canceler does that. */
#include <errno.h>
#include <sched.h>

#include "rrpc/internal/controller.h"

/* A spin lock, not a mutex: it is taken three times per call on the hot
 * path, almost never contended, and held only for a few stores or one
 * canceler run (a map removal and a task post). */
static void lock(rrpc_controller *c) {
  while (atomic_exchange_explicit(&c->cancel_lock, 1, memory_order_acquire) != 0) {
    while (atomic_load_explicit(&c->cancel_lock, memory_order_relaxed) != 0) sched_yield();
  }
}

static void unlock(rrpc_controller *c) { atomic_store_explicit(&c->cancel_lock, 0, memory_order_release); }

void rrpc__controller_call_begin(rrpc_controller *c) {
  lock(c);
  c->in_call = 1;
  c->canceled = 0;
  c->cancel_fn = NULL;
  c->cancel_arg = NULL;
  unlock(c);
}

int rrpc__controller_set_canceler(rrpc_controller *c, rrpc__canceler_fn fn, void *arg) {
  int rc = 0;
  lock(c);
  if (c->canceled) {
    fn(arg); /* the cancel came before the call could be found */
    rc = -ECANCELED;
  } else {
    c->cancel_fn = fn;
    c->cancel_arg = arg;
  }
  unlock(c);
  return rc;
}

void rrpc__controller_call_end(rrpc_controller *c) {
  lock(c);
  c->in_call = 0;
  c->cancel_fn = NULL;
  c->cancel_arg = NULL;
  unlock(c);
}

void rrpc_controller_cancel(rrpc_controller *c) {
  if (c == NULL) return;
  lock(c);
  if (c->in_call && !c->canceled) {
    c->canceled = 1;
    if (c->cancel_fn != NULL) c->cancel_fn(c->cancel_arg);
  }
  unlock(c);
}

int rrpc_controller_is_canceled(const rrpc_controller *c) { return c->error_code == -ECANCELED; }
