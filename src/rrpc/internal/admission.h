/* internal/admission.h - private to the server: concurrency limits
 * (brpc's max_concurrency, per server and per method). A request is
 * admitted only when every gate it passes has room; it fails fast with
 * ELIMIT otherwise, before any handler runs. */
#ifndef RRPC_INTERNAL_ADMISSION_H
#define RRPC_INTERNAL_ADMISSION_H

#include <stdatomic.h>
#include <stddef.h>

typedef struct rrpc__gate {
  int max;           /* 0 = no limit (set before the server starts) */
  atomic_int running;
} rrpc__gate;

/* rrpc__gates_enter - take a place in `a` and `b` (either may be NULL):
 * 0, or -RRPC_ELIMIT with nothing taken (counted in concurrency_rejects).
 * rrpc__gates_leave gives the places back. Any thread, lock-free. */
int rrpc__gates_enter_limited(rrpc__gate *a, rrpc__gate *b);
void rrpc__gates_leave_limited(rrpc__gate *a, rrpc__gate *b);

/* Gates without a limit (the default) count nothing: answered inline, so
 * a request through two of them makes no call into admission.c (~23
 * instructions a request, enter and leave). */
static inline int rrpc__gate_open(const rrpc__gate *g) { return g == NULL || g->max <= 0; }

static inline int rrpc__gates_enter(rrpc__gate *a, rrpc__gate *b) {
  if (rrpc__gate_open(a) && rrpc__gate_open(b)) return 0;
  return rrpc__gates_enter_limited(a, b);
}

static inline void rrpc__gates_leave(rrpc__gate *a, rrpc__gate *b) {
  if (rrpc__gate_open(a) && rrpc__gate_open(b)) return;
  rrpc__gates_leave_limited(a, b);
}

#endif /* RRPC_INTERNAL_ADMISSION_H */
