/* lb_chash.c - consistent hashing ("c_murmurhash"): every server owns
 * REPLICAS points on a 32-bit ring (murmur3 of "addr-tag-i"); a call goes to
 * the first usable server at or after murmur3(request_code). Removing one
 * server moves only the keys it owned (about 1/N); an isolated server's
 * keys go to the next server on the ring and come back when it does.
 * Runs under the cluster's lock. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/internal/cluster.h"

#define REPLICAS 100

typedef struct point {
  uint32_t hash;
  uint32_t node; /* index into the list */
} point;

typedef struct ring {
  point *pts;
  size_t n;
  size_t nnodes; /* list size the ring was built for */
} ring;

static int cmp_point(const void *a, const void *b) {
  const point *x = a, *y = b;
  if (x->hash != y->hash) return x->hash < y->hash ? -1 : 1;
  return x->node < y->node ? -1 : x->node > y->node;
}

static int ch_create(void **state) {
  *state = calloc(1, sizeof(ring));
  return *state ? 0 : -ENOMEM;
}

static void ch_destroy(void *state) {
  ring *r = state;
  free(r->pts);
  free(r);
}

static int ch_reset(void *state, rrpc__node *const *nodes, size_t n) {
  ring *r = state;
  point *pts = n ? malloc(n * REPLICAS * sizeof *pts) : NULL;
  if (n && pts == NULL) return -ENOMEM;
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < REPLICAS; k++) {
      char key[RRPC_NAMING_ADDR_MAX + RRPC_NAMING_TAG_MAX + 16];
      int len = snprintf(key, sizeof key, "%s-%s-%d", nodes[i]->entry.addr, nodes[i]->entry.tag, k);
      pts[i * REPLICAS + (size_t)k] = (point){rrpc__murmur3_32(key, (size_t)len, 0), (uint32_t)i};
    }
  }
  if (n) qsort(pts, n * REPLICAS, sizeof *pts, cmp_point);
  free(r->pts);
  r->pts = pts;
  r->n = n * REPLICAS;
  r->nnodes = n;
  return 0;
}

/* The first point with hash >= h (r->n if none: wrap to 0). */
static size_t lower_bound(const ring *r, uint32_t h) {
  size_t lo = 0, hi = r->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (r->pts[mid].hash < h)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

static rrpc__node *ch_pick(void *state, rrpc__node *const *nodes, size_t n, const rrpc__lb_input *in) {
  ring *r = state;
  if (r->n == 0 || r->nnodes != n) return NULL; /* a failed reset: nothing safe to say */
  uint8_t code[8];
  for (int i = 0; i < 8; i++) code[i] = (uint8_t)(in->request_code >> (8 * i));
  size_t at = lower_bound(r, rrpc__murmur3_32(code, sizeof code, 0));
  for (size_t k = 0; k < r->n; k++) {
    const point *p = &r->pts[(at + k) % r->n];
    if (rrpc__lb_usable(nodes[p->node], in)) return nodes[p->node];
  }
  return NULL;
}

const rrpc__lb_ops rrpc__lb_chash = {.name = "c_murmurhash",
                                     .create = ch_create,
                                     .destroy = ch_destroy,
                                     .reset = ch_reset,
                                     .pick = ch_pick};
