/* lb_wrr.c - weighted round robin ("wrr"), smooth: every pick adds each
 * usable server's weight to its credit and takes the server with the most
 * credit, which then pays the total back. Over any window of sum(weights)
 * picks each server gets its share, interleaved rather than in bursts.
 * Runs under the cluster's lock. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/internal/cluster.h"

typedef struct wrr {
  int64_t *credit; /* per node index */
  size_t cap;
} wrr;

static int wrr_create(void **state) {
  *state = calloc(1, sizeof(wrr));
  return *state ? 0 : -ENOMEM;
}

static void wrr_destroy(void *state) {
  wrr *w = state;
  free(w->credit);
  free(w);
}

static int wrr_reset(void *state, rrpc__node *const *nodes, size_t n) {
  (void)nodes;
  wrr *w = state;
  if (n > w->cap) {
    int64_t *c = realloc(w->credit, n * sizeof *c);
    if (c == NULL) return -ENOMEM;
    w->credit = c;
    w->cap = n;
  }
  if (n > 0) memset(w->credit, 0, n * sizeof *w->credit);
  return 0;
}

static rrpc__node *wrr_pick(void *state, rrpc__node *const *nodes, size_t n, const rrpc__lb_input *in) {
  wrr *w = state;
  if (n > w->cap) n = w->cap; /* a failed reset: use the nodes we have credit for */
  int64_t total = 0;
  size_t best = n;
  for (size_t i = 0; i < n; i++) {
    if (!rrpc__lb_usable(nodes[i], in)) continue;
    int64_t weight = nodes[i]->entry.weight > 0 ? nodes[i]->entry.weight : 1;
    w->credit[i] += weight;
    total += weight;
    if (best == n || w->credit[i] > w->credit[best]) best = i;
  }
  if (best == n) return NULL;
  w->credit[best] -= total;
  return nodes[best];
}

const rrpc__lb_ops rrpc__lb_wrr = {
    .name = "wrr", .create = wrr_create, .destroy = wrr_destroy, .reset = wrr_reset, .pick = wrr_pick};
