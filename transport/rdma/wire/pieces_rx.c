/* wire/pieces_rx.c - the receiver's side of the elastic ring (see
 * pieces.h): its piece table, the byte accounting against the caps, and
 * when to grant, return, retire and shrink. */
#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/pieces.h"

static int is_piece_len(uint32_t len) {
  uint8_t code;
  return rrpc__grant_piece_code(len, &code) == 0;
}

int rrpc__prx_init(struct rrpc__prx *rx, const struct rrpc__prx_cfg *cfg) {
  struct rrpc__prx_cfg c = *cfg;
  if (!is_piece_len(c.piece_min) || !is_piece_len(c.piece_max) || c.piece_min > c.piece_max ||
      c.piece_max > c.ring_max)
    return -EINVAL;
  /* At most RRPC_PIECES_MAX pieces in flight: keep ring_max reachable with
   * half of them. */
  while ((uint64_t)c.piece_max * (RRPC_PIECES_MAX / 2) < c.ring_max && c.piece_max < rrpc__grant_piece_len(RRPC_PIECE_CODE_MAX))
    c.piece_max <<= 1;
  memset(rx, 0, sizeof(*rx));
  rx->cfg = c;
  return 0;
}

uint64_t rrpc__prx_pinned(const struct rrpc__prx *rx) { return rx->granted + rx->retired; }

static struct rrpc__prx_piece *piece(struct rrpc__prx *rx, uint16_t id) {
  if (id == RRPC_PIECE_ID_NONE || id > RRPC_PIECES_SLOTS) return NULL;
  return &rx->p[id - 1];
}

static void drop_at(uint16_t *a, uint32_t *n, uint32_t i) {
  memmove(&a[i], &a[i + 1], (*n - i - 1) * sizeof(a[0]));
  (*n)--;
}

int rrpc__prx_on_write(struct rrpc__prx *rx, uint16_t id, uint32_t n, uint32_t *off) {
  *off = 0;
  if (n == 0) return 0;
  if (rx->ng == 0 || rx->g[0] != id) goto violation;
  struct rrpc__prx_piece *p = piece(rx, id);
  if (n > p->len - p->written) goto violation;
  *off = p->written;
  p->written += n;
  rx->idle = 0;
  if (p->written == p->len) {
    p->state = RRPC_PRX_FULL;
    drop_at(rx->g, &rx->ng, 0);
    rx->f[rx->nf++] = id;
  }
  return 0;
violation:
  rx->n.violations++;
  return -RRPC_EPARSE;
}

/* The piece leaves every list and is deregistered. */
static void free_piece(struct rrpc__prx *rx, struct rrpc__prx_piece *p) {
  memset(p, 0, sizeof(*p));
  rx->n.frees++;
}

static int on_handback(struct rrpc__prx *rx, const struct rrpc__grant_handback *h, uint16_t *free_id) {
  uint32_t i = 0;
  while (i < rx->ng && rx->g[i] != h->id) i++;
  if (i == rx->ng) return -RRPC_EPARSE;
  struct rrpc__prx_piece *p = piece(rx, h->id);
  /* Only the first writable piece can have bytes in it; the count must be
   * exactly what arrived before this message (RC order). */
  if (h->written != p->written) return -RRPC_EPARSE;
  drop_at(rx->g, &rx->ng, i);
  rx->granted -= p->len;
  rx->n.handbacks++;
  if (p->released == p->written) {
    free_piece(rx, p);
    *free_id = h->id;
  } else {
    p->state = RRPC_PRX_HANDED;
    rx->retired += p->len;
  }
  return 0;
}

int rrpc__prx_on_ctl(struct rrpc__prx *rx, const struct rrpc__grant_msg *m, uint16_t *free_id) {
  int rc = -RRPC_EPARSE;
  *free_id = RRPC_PIECE_ID_NONE;
  /* A WANT only raises what the next grants aim at, within ring_max: one
   * that crossed our answer in flight is honest, so a repeat is no
   * violation (each costs the peer a credit); one beyond the cap is. */
  if (m->type == RRPC_GRANT_T_WANT && m->u.want.bytes <= rx->cfg.ring_max) {
    rx->want_pending = 1;
    rx->want = m->u.want.bytes;
    rx->n.wants++;
    rc = 0;
  } else if (m->type == RRPC_GRANT_T_HANDBACK) {
    rc = on_handback(rx, &m->u.handback, free_id);
  }
  if (rc != 0) rx->n.violations++;
  return rc;
}

int rrpc__prx_on_release(struct rrpc__prx *rx, uint16_t id, uint32_t n, uint16_t *free_id) {
  struct rrpc__prx_piece *p = piece(rx, id);
  *free_id = RRPC_PIECE_ID_NONE;
  if (p == NULL || p->state == RRPC_PRX_FREE || n > p->written - p->released) return -EINVAL;
  p->released += n;
  if ((p->state == RRPC_PRX_RETIRED || p->state == RRPC_PRX_HANDED) && p->released == p->written) {
    rx->retired -= p->len;
    free_piece(rx, p);
    *free_id = id;
  }
  return 0;
}

void rrpc__prx_set_idle(struct rrpc__prx *rx, int idle) { rx->idle = idle ? 1 : 0; }

static int all_released(const struct rrpc__prx_piece *p) { return p->released == p->written; }

uint32_t rrpc__prx_returns_owed(const struct rrpc__prx *rx) {
  uint32_t k = 0;
  if (rx->idle) return 0;
  while (k < rx->nf && all_released(&rx->p[rx->f[k] - 1])) k++;
  return k;
}

static uint64_t space_left(const struct rrpc__prx *rx) {
  uint64_t s = 0;
  for (uint32_t i = 0; i < rx->ng; i++) s += rx->p[rx->g[i] - 1].len - rx->p[rx->g[i] - 1].written;
  return s;
}

int rrpc__prx_returns_due(const struct rrpc__prx *rx) {
  return rrpc__prx_returns_owed(rx) > 0 && (rx->want_pending || space_left(rx) * 4 < rx->granted);
}

uint8_t rrpc__prx_take_returns(struct rrpc__prx *rx) {
  uint32_t k = rrpc__prx_returns_owed(rx);
  if (k > RRPC_EIMM_RETURNS_MAX) k = RRPC_EIMM_RETURNS_MAX;
  for (uint32_t i = 0; i < k; i++) {
    struct rrpc__prx_piece *p = &rx->p[rx->f[0] - 1];
    /* A returned piece covers that much of what the sender was short by
     * (its space did not count full pieces). */
    rx->want -= rx->want < p->len ? rx->want : p->len;
    p->state = RRPC_PRX_GRANTED;
    p->written = p->released = 0;
    rx->g[rx->ng++] = rx->f[0];
    drop_at(rx->f, &rx->nf, 0);
  }
  if (k > 0) {
    rx->n.returns += k;
    rx->want_pending = 0;
  }
  return (uint8_t)k;
}

static void retire_msg(struct rrpc__prx_action *a, uint16_t id, uint8_t reason) {
  memset(a, 0, sizeof(*a));
  a->act = RRPC_PRX_ACT_RETIRE;
  a->m.type = RRPC_GRANT_T_RETIRE;
  a->m.u.retire.id = id;
  a->m.u.retire.reason = reason;
}

/* The first full piece: retire it if it is released and we shrink, or if it
 * is held while the sender is short. Returns 1 if a is filled. */
static int poll_retire(struct rrpc__prx *rx, struct rrpc__prx_action *a) {
  if (rx->nf == 0) return 0;
  uint16_t id = rx->f[0];
  struct rrpc__prx_piece *p = &rx->p[id - 1];
  if (all_released(p)) {
    if (!rx->idle) return 0; /* a return, not a retire */
    retire_msg(a, id, RRPC_RETIRE_SHRINK);
    drop_at(rx->f, &rx->nf, 0);
    rx->granted -= p->len;
    free_piece(rx, p);
    a->free_id = id;
    rx->n.retires_shrink++;
    rx->want_pending = 0;
    return 1;
  }
  int short_ = rx->ng == 0 || rx->want_pending;
  for (uint32_t i = 1; i < rx->nf && !short_; i++) short_ = all_released(&rx->p[rx->f[i] - 1]);
  if (!short_) return 0;
  if (rx->retired + p->len > rx->cfg.retired_max) {
    rx->n.retire_refused++;
    return 0;
  }
  retire_msg(a, id, RRPC_RETIRE_HELD);
  drop_at(rx->f, &rx->nf, 0);
  p->state = RRPC_PRX_RETIRED;
  rx->granted -= p->len;
  rx->retired += p->len;
  rx->replace += p->len;
  rx->n.retires_held++;
  rx->want_pending = 0;
  return 1;
}

static int free_slot(const struct rrpc__prx *rx) {
  for (int i = 0; i < RRPC_PIECES_SLOTS; i++)
    if (rx->p[i].state == RRPC_PRX_FREE) return i;
  return -1;
}

/* The size of the next grant, 0 if none is due or none fits. */
static uint32_t grant_len(const struct rrpc__prx *rx, uint8_t *flags) {
  *flags = 0;
  if (rx->ng == 0 && rx->nf == 0) {
    *flags = RRPC_GRANT_F_IDLE;
    return rx->granted + rx->cfg.piece_min <= rx->cfg.ring_max ? rx->cfg.piece_min : 0;
  }
  uint64_t target = rx->want > rx->replace ? rx->want : rx->replace;
  if (target == 0) return 0;
  if (target < rx->granted) target = rx->granted; /* grow geometrically */
  uint64_t len = rx->cfg.piece_min;
  while (len < target && len < rx->cfg.piece_max) len <<= 1;
  while (len >= rx->cfg.piece_min && rx->granted + len > rx->cfg.ring_max) len >>= 1;
  return len >= rx->cfg.piece_min ? (uint32_t)len : 0;
}

int rrpc__prx_poll(struct rrpc__prx *rx, struct rrpc__prx_action *a) {
  if (poll_retire(rx, a)) return 1;
  uint8_t flags;
  uint32_t len = grant_len(rx, &flags);
  if (len == 0) return 0;
  if (rx->ng + rx->nf >= RRPC_PIECES_MAX || free_slot(rx) < 0) {
    rx->n.table_full++; /* retired pieces the application holds fill the table */
    return 0;
  }
  memset(a, 0, sizeof(*a));
  a->act = RRPC_PRX_ACT_GRANT;
  a->grant_len = len;
  a->grant_flags = flags;
  return 1;
}

int rrpc__prx_grant(struct rrpc__prx *rx, uint32_t len, uint8_t flags, struct rrpc__grant_msg *m) {
  uint8_t code;
  int slot = free_slot(rx);
  if (rrpc__grant_piece_code(len, &code) != 0 || len < rx->cfg.piece_min || len > rx->cfg.piece_max ||
      rx->granted + len > rx->cfg.ring_max || rx->ng + rx->nf >= RRPC_PIECES_MAX || slot < 0 ||
      (flags & ~RRPC_GRANT_F_IDLE) != 0)
    return -EINVAL;
  struct rrpc__prx_piece *p = &rx->p[slot];
  memset(p, 0, sizeof(*p));
  p->state = RRPC_PRX_GRANTED;
  p->len = len;
  rx->g[rx->ng++] = (uint16_t)(slot + 1);
  rx->granted += len;
  rx->want -= rx->want < len ? rx->want : len;
  rx->replace -= rx->replace < len ? rx->replace : len;
  rx->want_pending = 0;
  rx->n.grants++;
  rx->n.grant_bytes += len;
  memset(m, 0, sizeof(*m));
  m->type = RRPC_GRANT_T_GRANT;
  m->u.grant.id = (uint16_t)(slot + 1);
  m->u.grant.flags = flags;
  m->u.grant.size_code = code;
  return 0;
}

void rrpc__prx_grant_failed(struct rrpc__prx *rx) { rx->n.grant_refused++; }
