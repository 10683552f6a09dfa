/* admission.c - fail-fast concurrency gates (max_concurrency). A place is
 * taken with one atomic add and given back if the gate turns out full, so
 * the count may pass max for an instant, but no request runs past it. */
#include "rrpc/internal/admission.h"

#include <stddef.h>

#include "rrpc/errors.h"
#include "rrpc/internal/limits.h"

static int enter(rrpc__gate *g) {
  if (g == NULL || g->max <= 0) return 1;
  if (atomic_fetch_add(&g->running, 1) < g->max) return 1;
  atomic_fetch_sub(&g->running, 1);
  return 0;
}

static void leave(rrpc__gate *g) {
  if (g != NULL && g->max > 0) atomic_fetch_sub(&g->running, 1);
}

int rrpc__gates_enter_limited(rrpc__gate *a, rrpc__gate *b) {
  if (enter(a)) {
    if (enter(b)) return 0;
    leave(a);
  }
  rrpc__limit_count(RRPC__LC_CONCURRENCY_REJECTS);
  return -RRPC_ELIMIT;
}

void rrpc__gates_leave_limited(rrpc__gate *a, rrpc__gate *b) {
  leave(a);
  leave(b);
}
