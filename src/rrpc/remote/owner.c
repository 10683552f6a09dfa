/* remote/owner.c - the owner table of a connection's remote memory
 * (table.h): regions this side registered, ids, revoke-once. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/remote/table.h"

int rrpc__rmt_conn_init(struct rrpc__rmt_conn *c, uint64_t conn_id, uint32_t gen_seed,
                        uint32_t max_entries) {
  if (conn_id == 0) return -EINVAL;
  memset(c, 0, sizeof(*c));
  c->conn_id = conn_id;
  c->next_id = 1;
  c->next_gen = gen_seed;
  c->max_entries = max_entries ? max_entries : RRPC_RMT_MAX_ENTRIES_DEFAULT;
  return 0;
}

void rrpc__rmt_conn_fini(struct rrpc__rmt_conn *c) {
  free(c->own);
  free(c->peer);
  c->own = NULL;
  c->peer = NULL;
  c->n_own = c->cap_own = c->n_peer = c->cap_peer = 0;
}

/* Binary search over ids sorted ascending; returns the index of id or
 * where it would go. */
static uint32_t own_pos(const struct rrpc__rmt_conn *c, uint32_t id) {
  uint32_t lo = 0, hi = c->n_own;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (c->own[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const struct rrpc__rmt_region *rrpc__rmt_own_find(const struct rrpc__rmt_conn *c, uint32_t id) {
  uint32_t i = own_pos(c, id);
  return i < c->n_own && c->own[i].id == id ? &c->own[i] : NULL;
}

static int own_grow(struct rrpc__rmt_conn *c) {
  uint64_t cap = c->cap_own ? (uint64_t)c->cap_own * 2 : 8;
  struct rrpc__rmt_region *p;
  if (cap > c->max_entries) cap = c->max_entries;
  p = realloc(c->own, (size_t)cap * sizeof(*p));
  if (!p) return -ENOMEM;
  c->own = p;
  c->cap_own = (uint32_t)cap;
  return 0;
}

int rrpc__rmt_own_add(struct rrpc__rmt_conn *c, uint8_t rights, uint64_t length, void *ctx,
                      struct rrpc__rmt_region *out) {
  struct rrpc__rmt_region *r;
  if (rights == 0 || (rights & ~RRPC_RMT_RIGHTS_ALL) || length == 0) return -EINVAL;
  if (c->n_own >= c->max_entries || c->next_id == 0) {
    c->stats.refused_full++;
    return -ENOSPC;
  }
  if (c->n_own == c->cap_own) {
    int rc = own_grow(c);
    if (rc) return rc;
  }
  r = &c->own[c->n_own++];
  r->id = c->next_id++; /* wraps to 0 after UINT32_MAX: "exhausted" above */
  r->generation = c->next_gen++;
  r->rights = rights;
  r->length = length;
  r->ctx = ctx;
  *out = *r;
  return 0;
}

int rrpc__rmt_own_revoke(struct rrpc__rmt_conn *c, uint32_t id, struct rrpc__rmt_region *out) {
  uint32_t i = own_pos(c, id);
  if (i >= c->n_own || c->own[i].id != id) return -ENOENT;
  *out = c->own[i];
  memmove(&c->own[i], &c->own[i + 1], (size_t)(c->n_own - i - 1) * sizeof(c->own[0]));
  c->n_own--;
  return 1;
}

uint32_t rrpc__rmt_own_revoke_all(struct rrpc__rmt_conn *c,
                                  void (*fn)(const struct rrpc__rmt_region *r, void *arg),
                                  void *arg) {
  uint32_t n = c->n_own;
  /* Empty the table first: fn may re-enter (e.g. try a revoke), and must
   * then find nothing left to invalidate. */
  c->n_own = 0;
  for (uint32_t i = 0; i < n; i++) fn(&c->own[i], arg);
  return n;
}

int rrpc__rmt_own_token(const struct rrpc__rmt_conn *c, uint32_t id, uint32_t rkey, uint64_t addr,
                        uint8_t out[RRPC_RMT_TOKEN_LEN]) {
  const struct rrpc__rmt_region *r = rrpc__rmt_own_find(c, id);
  struct rrpc__rmt_token t;
  if (!r) return -RRPC_EREMOTEREVOKED;
  t.rights = r->rights;
  t.id = r->id;
  t.generation = r->generation;
  t.conn_id = c->conn_id;
  t.length = r->length;
  t.rkey = rkey;
  t.addr = addr;
  return rrpc__rmt_token_encode(&t, out);
}

int rrpc__rmt_own_check(const struct rrpc__rmt_conn *c, uint32_t id, uint32_t generation,
                        uint64_t off, uint64_t len, uint8_t rights,
                        const struct rrpc__rmt_region **out) {
  const struct rrpc__rmt_region *r = rrpc__rmt_own_find(c, id);
  if (!r) return id != 0 && id < c->next_id ? -RRPC_EREMOTEREVOKED : -RRPC_EREMOTENOENT;
  if (r->generation != generation) return -RRPC_EREMOTEREVOKED;
  if ((r->rights & rights) != rights) return -RRPC_EREMOTERIGHTS;
  if (!rrpc__rmt_in_range(r->length, off, len)) return -RRPC_EREMOTERANGE;
  *out = r;
  return 0;
}
