/* ep_lock.c - the endpoint lock (ep->dp.mu) and the rule that makes dropping a
 * ring slice under it harmless.
 *
 * A zero-copy ring slice's deleter takes the mu of the endpoint whose ring
 * it is. Code under some endpoint's mu may drop the last reference to a
 * slice (an iobuf that could not be moved out for lack of memory): of its
 * own ring (taking mu again would self-deadlock) or of another connection's
 * (a proxy forwarding what it received: two loop threads doing that to each
 * other's slices would deadlock in lock order). So a slice released on a
 * thread that holds any endpoint's mu is not released there: it is queued on
 * a per-thread list, without allocating (the list runs through the slices
 * themselves), and released when that thread lets go of its last mu. */
#include "transport/rdma/endpoint.h"

/* How many endpoint locks this thread holds, and what waits for 0. */
static _Thread_local unsigned tls_depth;
static _Thread_local struct rrpc__ep_deferred *tls_head;
static _Thread_local int tls_running; /* running the list: do not recurse */

void rrpc__ep_lock(rrpc__rdma_ep *ep) {
  rrpc__lock_acquire(&ep->dp.mu);
  tls_depth++;
}

/* Run what was deferred, in order; releases may lock (and defer) again. */
static void run_deferred(void) {
  tls_running = 1;
  while (tls_head != NULL) {
    struct rrpc__ep_deferred *d = tls_head;
    tls_head = d->next;
    d->fn(d);
  }
  tls_running = 0;
}

void rrpc__ep_unlock(rrpc__rdma_ep *ep) {
  rrpc__lock_release(&ep->dp.mu);
  if (--tls_depth == 0 && tls_head != NULL && !tls_running) run_deferred();
}

int rrpc__ep_any_locked_here(void) { return tls_depth > 0; }

void rrpc__ep_defer(struct rrpc__ep_deferred *d) {
  /* FIFO is not needed (each release stands alone); LIFO keeps it O(1). */
  d->next = tls_head;
  tls_head = d;
}
