/* cancel.c - rrpc_controller_cancel: runs the canceler that the issuer of
 * the call in flight installed (internal/cancel.h). Knows nothing about how
 * a call is ended; the canceler does that. */
#include "rrpc/internal/cancel.h"

/* Under the cancel lock: mark a call in flight canceled (once) and run its
 * canceler. */
static void cancel_locked(rrpc_controller *c) {
  int expect = RRPC__CANCEL_IN_CALL;
  if (atomic_compare_exchange_strong_explicit(&c->cancel_state, &expect,
                                              RRPC__CANCEL_IN_CALL | RRPC__CANCEL_CANCELED,
                                              memory_order_acq_rel, memory_order_acquire) &&
      c->cancel_fn != NULL)
    c->cancel_fn(c->cancel_arg);
}

void rrpc_controller_cancel(rrpc_controller *c) {
  if (c == NULL) return;
  rrpc__cancel_lock(c);
  cancel_locked(c);
  rrpc__cancel_unlock(c);
}

int rrpc_controller_is_canceled(const rrpc_controller *c) { return c->error_code == -ECANCELED; }

int rrpc__controller_try_cancel(rrpc_controller *c) {
  if (atomic_exchange_explicit(&c->cancel_lock, 1, memory_order_acquire) != 0) return -EBUSY;
  cancel_locked(c);
  rrpc__cancel_unlock(c);
  return 0;
}
