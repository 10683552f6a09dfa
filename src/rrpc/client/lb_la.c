/* lb_la.c - locality-aware ("la"): a weighted random pick where a server's
 * weight falls with its smoothed latency and with the calls it already has
 * in flight, so slow or busy servers get less and a fast one more, while
 * every usable server keeps getting some (its latency stays measured).
 * Latency and in-flight counts are kept on the nodes by the call path.
 * Runs under the cluster's lock. */
#include <stdatomic.h>

#include "rrpc/internal/cluster.h"

/* A server never measured counts as this fast, so new servers get tried. */
#define UNMEASURED_US 1000

static int la_create(void **state) {
  *state = NULL;
  return 0;
}

static void la_destroy(void *state) { (void)state; }

static int la_reset(void *state, rrpc__node *const *nodes, size_t n) {
  (void)state, (void)nodes, (void)n;
  return 0;
}

static double la_weight(const rrpc__node *node) {
  int64_t lat = atomic_load_explicit(&node->ewma_us, memory_order_relaxed);
  if (lat <= 0) lat = UNMEASURED_US;
  int inflight = atomic_load_explicit(&node->inflight, memory_order_relaxed);
  if (inflight < 0) inflight = 0;
  return 1e9 / ((double)lat * (double)(inflight + 1));
}

static rrpc__node *la_pick(void *state, rrpc__node *const *nodes, size_t n, const rrpc__lb_input *in) {
  (void)state;
  double total = 0;
  for (size_t i = 0; i < n; i++)
    if (rrpc__lb_usable(nodes[i], in)) total += la_weight(nodes[i]);
  if (total <= 0) return NULL;
  double x = (double)(rrpc__lb_rand() >> 11) / (double)(1ull << 53) * total;
  rrpc__node *last = NULL;
  for (size_t i = 0; i < n; i++) {
    if (!rrpc__lb_usable(nodes[i], in)) continue;
    last = nodes[i];
    x -= la_weight(nodes[i]);
    if (x < 0) return nodes[i];
  }
  return last; /* rounding */
}

const rrpc__lb_ops rrpc__lb_la = {
    .name = "la", .create = la_create, .destroy = la_destroy, .reset = la_reset, .pick = la_pick};
