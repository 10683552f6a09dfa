/* lb.c - what every balancer shares (the usable test, the per-thread random
 * generator, the name table) and the two stateless-ish ones: rr and random.
 * Balancer ops run under the cluster's lock (see internal/cluster.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rrpc/internal/cluster.h"

int rrpc__lb_usable(const rrpc__node *n, const rrpc__lb_input *in) {
  if (atomic_load_explicit(&n->isolated, memory_order_relaxed)) return 0;
  for (size_t i = 0; i < in->nexclude; i++)
    if (in->exclude[i] == n) return 0;
  return 1;
}

/* splitmix64 per thread, seeded from the clock and the state's address. */
uint64_t rrpc__lb_rand(void) {
  static _Thread_local uint64_t s;
  if (s == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    s = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)&s;
  }
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* The first usable node at or after `start`, wrapping; its index in *at. */
static rrpc__node *scan(rrpc__node *const *nodes, size_t n, size_t start, const rrpc__lb_input *in,
                        size_t *at) {
  for (size_t k = 0; k < n; k++) {
    size_t i = (start + k) % n;
    if (rrpc__lb_usable(nodes[i], in)) {
      *at = i;
      return nodes[i];
    }
  }
  return NULL;
}

/* ---- rr ------------------------------------------------------------------------ */

static int rr_create(void **state) {
  *state = calloc(1, sizeof(size_t));
  return *state ? 0 : -ENOMEM;
}

static int rr_reset(void *state, rrpc__node *const *nodes, size_t n) {
  (void)state, (void)nodes, (void)n;
  return 0;
}

static rrpc__node *rr_pick(void *state, rrpc__node *const *nodes, size_t n, const rrpc__lb_input *in) {
  size_t *next = state;
  if (n == 0) return NULL;
  size_t at;
  rrpc__node *got = scan(nodes, n, *next % n, in, &at);
  if (got != NULL) *next = at + 1;
  return got;
}

const rrpc__lb_ops rrpc__lb_rr = {
    .name = "rr", .create = rr_create, .destroy = free, .reset = rr_reset, .pick = rr_pick};

/* ---- random -------------------------------------------------------------------- */

static rrpc__node *random_pick(void *state, rrpc__node *const *nodes, size_t n,
                               const rrpc__lb_input *in) {
  (void)state;
  if (n == 0) return NULL;
  size_t at;
  return scan(nodes, n, (size_t)(rrpc__lb_rand() % n), in, &at);
}

const rrpc__lb_ops rrpc__lb_random = {
    .name = "random", .create = rr_create, .destroy = free, .reset = rr_reset, .pick = random_pick};

/* ---- names ------------------------------------------------------------------------ */

const rrpc__lb_ops *rrpc__lb_find(const char *name) {
  static const rrpc__lb_ops *const all[] = {&rrpc__lb_rr, &rrpc__lb_random, &rrpc__lb_wrr,
                                            &rrpc__lb_la, &rrpc__lb_chash};
  if (name == NULL || name[0] == '\0') return &rrpc__lb_rr;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (strcmp(all[i]->name, name) == 0) return all[i];
  return NULL;
}
