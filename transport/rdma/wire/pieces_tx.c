/* wire/pieces_tx.c - the sender's side of the elastic ring (see pieces.h):
 * its writable and full piece lists, the write plan, WANT and the idle
 * handback. Also the control-message sequence numbers both roles share. */
#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/pieces.h"

uint16_t rrpc__ctl_seq_next(struct rrpc__ctl_seq *s) { return ++s->out; }

int rrpc__ctl_seq_check(struct rrpc__ctl_seq *s, uint16_t seq) {
  if (seq != (uint16_t)(s->in + 1)) return -RRPC_EPARSE;
  s->in = seq;
  return 0;
}

void rrpc__ptx_init(struct rrpc__ptx *tx, uint64_t max_granted) {
  memset(tx, 0, sizeof(*tx));
  tx->max_granted = max_granted;
}

uint64_t rrpc__ptx_space(const struct rrpc__ptx *tx) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < tx->nw; i++) s += tx->w[i].len - tx->w[i].off;
  return s;
}

int rrpc__ptx_plan_writes(const struct rrpc__ptx *tx, uint64_t pending, uint32_t max_segs,
                   struct rrpc__ptx_plan *plan) {
  memset(plan, 0, sizeof(*plan));
  if (max_segs > RRPC_PTX_SEGS_MAX) max_segs = RRPC_PTX_SEGS_MAX;
  for (uint32_t i = 0; i < tx->nw && plan->nseg < max_segs && plan->len < pending; i++) {
    const struct rrpc__ptx_piece *p = &tx->w[i];
    uint64_t take = p->len - p->off;
    if (take > pending - plan->len) take = pending - plan->len;
    if (take == 0) break; /* only an unwritten piece can be empty-handed: none */
    struct rrpc__ptx_seg *s = &plan->seg[plan->nseg++];
    s->piece = p->id;
    s->rkey = p->rkey;
    s->off = p->off;
    s->addr = p->addr + p->off;
    s->len = (uint32_t)take;
    plan->len += take;
  }
  return plan->nseg > 0 ? 0 : -EAGAIN;
}

/* A plan fits when its segments are the writable pieces in order, at their
 * write offsets, and every segment but the last fills its piece. */
static int plan_fits(const struct rrpc__ptx *tx, const struct rrpc__ptx_plan *plan) {
  if (plan->nseg == 0 || plan->nseg > RRPC_PTX_SEGS_MAX || plan->nseg > tx->nw) return 0;
  for (uint32_t i = 0; i < plan->nseg; i++) {
    const struct rrpc__ptx_piece *p = &tx->w[i];
    const struct rrpc__ptx_seg *s = &plan->seg[i];
    if (s->piece != p->id || s->off != p->off || s->len == 0 || s->len > p->len - p->off) return 0;
    if (i + 1 < plan->nseg && s->len != p->len - p->off) return 0;
  }
  return 1;
}

int rrpc__ptx_commit(struct rrpc__ptx *tx, const struct rrpc__ptx_plan *plan) {
  if (!plan_fits(tx, plan)) return -EINVAL;
  for (uint32_t i = 0; i < plan->nseg; i++) {
    struct rrpc__ptx_piece *p = &tx->w[0];
    p->off += plan->seg[i].len;
    if (p->off < p->len) break; /* only the last segment may stop short */
    tx->f[tx->nf++] = *p;
    memmove(&tx->w[0], &tx->w[1], (tx->nw - 1) * sizeof(tx->w[0]));
    tx->nw--;
  }
  return 0;
}

static int find(const struct rrpc__ptx_piece *a, uint32_t n, uint16_t id) {
  for (uint32_t i = 0; i < n; i++)
    if (a[i].id == id) return (int)i;
  return -1;
}

static int on_grant(struct rrpc__ptx *tx, const struct rrpc__grant_grant *g) {
  uint32_t len = rrpc__grant_piece_len(g->size_code);
  if (find(tx->w, tx->nw, g->id) >= 0 || find(tx->f, tx->nf, g->id) >= 0) return -RRPC_EPARSE;
  if (tx->nw + tx->nf >= RRPC_PIECES_MAX || tx->granted + len > tx->max_granted) return -RRPC_EPARSE;
  struct rrpc__ptx_piece *p = &tx->w[tx->nw++];
  p->id = g->id;
  p->len = len;
  p->rkey = g->rkey;
  p->addr = g->addr;
  p->off = 0;
  tx->granted += len;
  tx->n.grants++;
  return 0;
}

static int on_retire(struct rrpc__ptx *tx, uint16_t id) {
  int i = find(tx->f, tx->nf, id);
  if (i < 0) return -RRPC_EPARSE; /* only a full piece can be retired */
  tx->granted -= tx->f[i].len;
  memmove(&tx->f[i], &tx->f[i + 1], (tx->nf - (uint32_t)i - 1) * sizeof(tx->f[0]));
  tx->nf--;
  tx->n.retires++;
  return 0;
}

int rrpc__ptx_on_ctl(struct rrpc__ptx *tx, const struct rrpc__grant_msg *m) {
  int rc = -RRPC_EPARSE;
  if (m->type == RRPC_GRANT_T_GRANT) rc = on_grant(tx, &m->u.grant);
  else if (m->type == RRPC_GRANT_T_RETIRE) rc = on_retire(tx, m->u.retire.id);
  if (rc != 0) {
    tx->n.violations++;
    return rc;
  }
  tx->want_out = 0;
  return 0;
}

int rrpc__ptx_on_returns(struct rrpc__ptx *tx, uint32_t k) {
  if (k > tx->nf) {
    tx->n.violations++;
    return -RRPC_EPARSE;
  }
  if (k == 0) return 0;
  for (uint32_t i = 0; i < k; i++) {
    tx->w[tx->nw] = tx->f[i];
    tx->w[tx->nw++].off = 0;
  }
  memmove(&tx->f[0], &tx->f[k], (tx->nf - k) * sizeof(tx->f[0]));
  tx->nf -= k;
  tx->n.returns += k;
  tx->want_out = 0;
  return 0;
}

int rrpc__ptx_want_due(const struct rrpc__ptx *tx, uint64_t pending) {
  return !tx->want_out && tx->granted < tx->max_granted && pending > rrpc__ptx_space(tx);
}

int rrpc__ptx_want(struct rrpc__ptx *tx, uint64_t pending, struct rrpc__grant_msg *m) {
  if (!rrpc__ptx_want_due(tx, pending)) return 0;
  uint64_t short_by = pending - rrpc__ptx_space(tx);
  memset(m, 0, sizeof(*m));
  m->type = RRPC_GRANT_T_WANT;
  if (short_by > tx->max_granted) short_by = tx->max_granted; /* more is refused */
  m->u.want.bytes = short_by > UINT32_MAX ? UINT32_MAX : (uint32_t)short_by;
  tx->want_out = 1;
  tx->n.wants++;
  return 1;
}

int rrpc__ptx_idle_handback(struct rrpc__ptx *tx, uint32_t idle_len, struct rrpc__grant_msg *m) {
  int keep = -1;
  for (uint32_t i = 0; i < tx->nw && keep < 0; i++)
    if (tx->w[i].off == 0 && tx->w[i].len <= idle_len) keep = (int)i;
  int give = keep == 0 ? 1 : 0;
  if ((uint32_t)give >= tx->nw) return 0;
  const struct rrpc__ptx_piece *p = &tx->w[give];
  memset(m, 0, sizeof(*m));
  m->type = RRPC_GRANT_T_HANDBACK;
  m->u.handback.id = p->id;
  m->u.handback.flags = RRPC_HANDBACK_F_IDLE;
  m->u.handback.written = p->off;
  tx->granted -= p->len;
  memmove(&tx->w[give], &tx->w[give + 1], (tx->nw - (uint32_t)give - 1) * sizeof(tx->w[0]));
  tx->nw--;
  tx->n.handbacks++;
  return 1;
}
