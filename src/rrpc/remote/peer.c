/* remote/peer.c - the peer table of a connection's remote memory
 * (table.h): what the other side announced, and the accessing side's
 * checks. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/remote/table.h"

static uint32_t peer_pos(const struct rrpc__rmt_conn *c, uint32_t id) {
  uint32_t lo = 0, hi = c->n_peer;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (c->peer[mid].id < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static const struct rrpc__rmt_entry *peer_find(const struct rrpc__rmt_conn *c, uint32_t id) {
  uint32_t i = peer_pos(c, id);
  return i < c->n_peer && c->peer[i].id == id ? &c->peer[i] : NULL;
}

int rrpc__rmt_peer_add(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m) {
  struct rrpc__rmt_entry *e;
  if (m->id <= c->max_peer_id || c->n_peer >= c->max_entries) {
    if (c->n_peer >= c->max_entries) c->stats.refused_full++;
    return -RRPC_EPARSE;
  }
  if (c->n_peer == c->cap_peer) {
    uint64_t cap = c->cap_peer ? (uint64_t)c->cap_peer * 2 : 8;
    if (cap > c->max_entries) cap = c->max_entries;
    e = realloc(c->peer, (size_t)cap * sizeof(*e));
    if (!e) return -RRPC_EPARSE; /* cannot track it: the connection fails */
    c->peer = e;
    c->cap_peer = (uint32_t)cap;
  }
  e = &c->peer[c->n_peer++];
  e->id = m->id;
  e->generation = m->generation;
  e->rights = m->rights;
  e->rkey = m->rkey;
  e->addr = m->addr;
  e->length = m->length;
  c->max_peer_id = m->id;
  return 0;
}

int rrpc__rmt_peer_remove(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m) {
  uint32_t i = peer_pos(c, m->id);
  if (i >= c->n_peer || c->peer[i].id != m->id || c->peer[i].generation != m->generation)
    return -RRPC_EPARSE;
  memmove(&c->peer[i], &c->peer[i + 1], (size_t)(c->n_peer - i - 1) * sizeof(c->peer[0]));
  c->n_peer--;
  return 0;
}

void rrpc__rmt_peer_clear(struct rrpc__rmt_conn *c) {
  c->n_peer = 0;
}

static int entry_check(const struct rrpc__rmt_entry *e, uint64_t off, uint64_t len,
                       uint8_t rights, struct rrpc__rmt_entry *out) {
  if (rights == 0 || (e->rights & rights) != rights) return -RRPC_EREMOTERIGHTS;
  if (!rrpc__rmt_in_range(e->length, off, len)) return -RRPC_EREMOTERANGE;
  *out = *e;
  return 0;
}

int rrpc__rmt_peer_check(const struct rrpc__rmt_conn *c, uint32_t id, uint64_t off, uint64_t len,
                         uint8_t rights, struct rrpc__rmt_entry *out) {
  const struct rrpc__rmt_entry *e = peer_find(c, id);
  if (!e) return id != 0 && id <= c->max_peer_id ? -RRPC_EREMOTEREVOKED : -RRPC_EREMOTENOENT;
  return entry_check(e, off, len, rights, out);
}

int rrpc__rmt_peer_check_token(const struct rrpc__rmt_conn *c, const uint8_t *tok, size_t tok_len,
                               uint64_t off, uint64_t len, uint8_t rights,
                               struct rrpc__rmt_entry *out) {
  struct rrpc__rmt_token t;
  const struct rrpc__rmt_entry *e;
  int rc = rrpc__rmt_token_decode(tok, tok_len, &t);
  if (rc) return rc;
  if (c->peer_conn_id == 0 || t.conn_id != c->peer_conn_id) return -RRPC_EREMOTECONN;
  e = peer_find(c, t.id);
  if (!e) return t.id <= c->max_peer_id ? -RRPC_EREMOTEREVOKED : -RRPC_EREMOTENOENT;
  if (e->generation != t.generation) return -RRPC_EREMOTEREVOKED;
  return entry_check(e, off, len, rights, out);
}
