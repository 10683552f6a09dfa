/* test/common/pieces_model.h - a model of one direction of an elastic ring
 * (transport/rdma/wire/pieces.h): a sender and a receiver, the memory of the
 * receiver's pieces, and the two in-order queues of one RC QP between them.
 * Shared by test/rdma_pieces_unittest.cc (random schedules) and
 * test/fuzz/pieces_fuzzer.c (fuzzer-chosen schedules), so it is C that also
 * compiles as C++. Every step is checked:
 *   - a write lands only in a piece that is registered under the key it was
 *     granted with, inside it, and over no byte that is not yet released;
 *   - every piece the sender may write is registered (nothing is
 *     deregistered while the sender may write it);
 *   - every byte arrives once, in order, where the sender put it, and bytes
 *     the application holds never change;
 *   - both sides' byte accounting matches their lists and stays within caps.
 * pm_drain then checks liveness (held pieces do not stall the stream while
 * the caps allow) and pm_idle the idle floor. A failed check calls
 * pm_fail (abort with a message). Control messages go through the codec. */
#ifndef RRPC_TEST_COMMON_PIECES_MODEL_H
#define RRPC_TEST_COMMON_PIECES_MODEL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/grant.h"
#include "transport/rdma/wire/pieces.h"

#define PM_QUEUE 1024
#define PM_HELD 256
#define PM_FOREVER 4 /* slices held through pm_drain, per run: the caps of
                        the test cases leave room to retire that many */
#define PM_TOKEN_R 0x52525252u /* the receiver's alert token */
#define PM_TOKEN_S 0x53535353u

static void pm_fail(const char *what, int line) {
  fprintf(stderr, "pieces model: check failed at line %d: %s\n", line, what);
  abort();
}
#define PM_CHECK(c, what) \
  do {                    \
    if (!(c)) pm_fail(what, __LINE__); \
  } while (0)

/* Where choices come from: fuzzer bytes (then exhausted = stop), or a PRNG. */
struct pm_src {
  const uint8_t *p;
  size_t n;
  uint64_t rng;
  int bytes;
};

static inline int pm_src_done(const struct pm_src *s) { return s->bytes && s->n == 0; }

static uint32_t pm_pick(struct pm_src *s, uint32_t mod) {
  uint32_t v;
  if (s == NULL || mod <= 1) return 0;
  if (s->bytes) {
    v = 0;
    if (s->n > 0) {
      v = s->p[0];
      if (mod > 256 && s->n > 1) {
        v = v << 8 | s->p[1];
        s->p++;
        s->n--;
      }
      s->p++;
      s->n--;
    }
  } else {
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    v = (uint32_t)(s->rng >> 11);
  }
  return v % mod;
}

struct pm_mem {
  uint8_t *buf;   /* the piece's bytes; NULL when not registered */
  uint8_t *unrel; /* 1 = written and not released */
  uint32_t len;
  uint32_t rkey;
};

/* An item on one of the QP's two queues. */
struct pm_item {
  uint8_t kind; /* 1 write, 2 control message, 3 pure ACK */
  uint16_t piece;
  uint32_t rkey, off, len;
  uint8_t returns; /* immediate of a control message or an ACK */
  uint8_t msg[RRPC_GRANT_MSG_LEN];
};

struct pm_queue {
  struct pm_item it[PM_QUEUE];
  uint32_t head, n;
};

struct pm_slice {
  uint16_t piece;
  uint32_t off, len;
  uint64_t stream;
  uint8_t forever; /* held through pm_drain ("for seconds") */
};

struct pm {
  struct rrpc__ptx tx;
  struct rrpc__prx rx;
  struct rrpc__ctl_seq sseq, rseq; /* the sender's and the receiver's endpoint */
  struct pm_mem mem[RRPC_PIECES_SLOTS + 1];
  struct pm_queue s2r, r2s;
  struct pm_slice held[PM_HELD];
  uint32_t nheld;
  uint32_t nforever;
  uint64_t submitted, written, received;
  uint32_t next_rkey;
  uint32_t max_msg;
  int grant_fail_1_in; /* the piece cache fails one grant in N (0 = never) */
  int closed;          /* a hostile message was accepted or refused: stop */
};

static uint8_t pm_byte(uint64_t off) { return (uint8_t)((off * 2654435761u) >> 13 ^ (off >> 9)); }

static void pm_init(struct pm *m, const struct rrpc__prx_cfg *cfg, uint32_t max_msg) {
  memset(m, 0, sizeof(*m));
  PM_CHECK(rrpc__prx_init(&m->rx, cfg) == 0, "prx_init");
  rrpc__ptx_init(&m->tx, cfg->ring_max);
  m->next_rkey = 0x1000;
  m->max_msg = max_msg;
}

static void pm_free_all(struct pm *m) {
  for (int i = 0; i <= RRPC_PIECES_SLOTS; i++) {
    free(m->mem[i].buf);
    free(m->mem[i].unrel);
    m->mem[i].buf = m->mem[i].unrel = NULL;
  }
}

static int pm_push(struct pm_queue *q, const struct pm_item *it) {
  if (q->n == PM_QUEUE) return -1;
  q->it[(q->head + q->n++) % PM_QUEUE] = *it;
  return 0;
}

static void pm_dereg(struct pm *m, uint16_t id) {
  struct pm_mem *mm = &m->mem[id];
  PM_CHECK(id >= 1 && id <= RRPC_PIECES_SLOTS && mm->buf != NULL, "free of a piece not registered");
  for (uint32_t i = 0; i < m->tx.nw; i++)
    PM_CHECK(!(m->tx.w[i].id == id && m->tx.w[i].rkey == mm->rkey), "deregistered a piece the sender may write");
  free(mm->buf);
  free(mm->unrel);
  mm->buf = mm->unrel = NULL;
}

/* ---- the sender ---------------------------------------------------------- */

static void pm_submit(struct pm *m, struct pm_src *s) { m->submitted += 1 + pm_pick(s, m->max_msg); }

static void pm_send_ctl_s(struct pm *m, struct rrpc__grant_msg *g) {
  struct pm_item it;
  memset(&it, 0, sizeof(it));
  it.kind = 2;
  g->seq = rrpc__ctl_seq_next(&m->sseq);
  g->token = PM_TOKEN_R;
  PM_CHECK(rrpc__grant_encode(g, it.msg) == 0, "encode (sender)");
  PM_CHECK(pm_push(&m->s2r, &it) == 0, "queue full (sender control)");
}

/* Post what the plan allows; the bytes land at post time, as with RDMA. */
static void pm_write(struct pm *m, uint32_t max_segs) {
  struct rrpc__ptx_plan plan;
  struct rrpc__grant_msg g;
  uint64_t pending = m->submitted - m->written;
  if (m->s2r.n + RRPC_PTX_SEGS_MAX + 1 > PM_QUEUE) return;
  if (rrpc__ptx_plan_writes(&m->tx, pending, max_segs, &plan) != 0) {
    if (rrpc__ptx_want(&m->tx, pending, &g)) pm_send_ctl_s(m, &g);
    return;
  }
  for (uint32_t i = 0; i < plan.nseg; i++) {
    const struct rrpc__ptx_seg *sg = &plan.seg[i];
    struct pm_mem *mm = &m->mem[sg->piece <= RRPC_PIECES_SLOTS ? sg->piece : 0];
    struct pm_item it;
    PM_CHECK(mm->buf != NULL && mm->rkey == sg->rkey, "write to a piece that is not registered under that key");
    PM_CHECK(sg->off + (uint64_t)sg->len <= mm->len, "write past a piece's end");
    for (uint32_t j = 0; j < sg->len; j++) {
      PM_CHECK(!mm->unrel[sg->off + j], "write over bytes not released");
      mm->buf[sg->off + j] = pm_byte(m->written + j);
      mm->unrel[sg->off + j] = 1;
    }
    m->written += sg->len;
    memset(&it, 0, sizeof(it));
    it.kind = 1;
    it.piece = sg->piece;
    it.rkey = sg->rkey;
    it.off = sg->off;
    it.len = sg->len;
    PM_CHECK(pm_push(&m->s2r, &it) == 0, "queue full (write)");
  }
  PM_CHECK(rrpc__ptx_commit(&m->tx, &plan) == 0, "commit of a fresh plan");
  PM_CHECK(rrpc__ptx_commit(&m->tx, &plan) == -EINVAL, "a plan committed twice");
  /* Still short after what went: ask now, not after the next stall. */
  if (rrpc__ptx_want(&m->tx, pending - plan.len, &g)) pm_send_ctl_s(m, &g);
}

static void pm_sender_idle(struct pm *m) {
  struct rrpc__grant_msg g;
  if (m->submitted != m->written) return;
  while (m->s2r.n + 1 < PM_QUEUE && rrpc__ptx_idle_handback(&m->tx, m->rx.cfg.piece_min, &g))
    pm_send_ctl_s(m, &g);
}

/* A message from the receiver: its body, then the returns of its immediate. */
static void pm_deliver_r2s(struct pm *m) {
  struct pm_item it;
  struct rrpc__grant_msg g;
  if (m->r2s.n == 0) return;
  it = m->r2s.it[m->r2s.head];
  m->r2s.head = (m->r2s.head + 1) % PM_QUEUE;
  m->r2s.n--;
  if (it.kind == 2) {
    PM_CHECK(rrpc__grant_decode(it.msg, sizeof(it.msg), &g) == 0, "decode at the sender");
    PM_CHECK(g.token == PM_TOKEN_S, "token at the sender");
    PM_CHECK(rrpc__ctl_seq_check(&m->sseq, g.seq) == 0, "sequence at the sender");
    PM_CHECK(rrpc__ptx_on_ctl(&m->tx, &g) == 0, "sender refused an honest control message");
  }
  PM_CHECK(rrpc__ptx_on_returns(&m->tx, it.returns) == 0, "sender refused honest returns");
}

/* ---- the receiver -------------------------------------------------------- */

static void pm_release_slice(struct pm *m, uint32_t i) {
  struct pm_slice sl = m->held[i];
  if (sl.forever) m->nforever--;
  struct pm_mem *mm = &m->mem[sl.piece];
  uint16_t free_id;
  PM_CHECK(mm->buf != NULL, "held bytes of a piece that is gone");
  for (uint32_t j = 0; j < sl.len; j++) {
    PM_CHECK(mm->buf[sl.off + j] == pm_byte(sl.stream + j), "bytes the application holds changed");
    mm->unrel[sl.off + j] = 0;
  }
  m->held[i] = m->held[--m->nheld];
  PM_CHECK(rrpc__prx_on_release(&m->rx, sl.piece, sl.len, &free_id) == 0, "release refused");
  if (free_id != RRPC_PIECE_ID_NONE) pm_dereg(m, free_id);
}

static void pm_deliver_write(struct pm *m, const struct pm_item *it, struct pm_src *s, int hold_forever) {
  uint32_t off;
  struct pm_mem *mm = &m->mem[it->piece];
  PM_CHECK(rrpc__prx_on_write(&m->rx, it->piece, it->len, &off) == 0, "receiver refused an honest write");
  PM_CHECK(off == it->off, "the receiver places the write elsewhere than the sender wrote it");
  PM_CHECK(mm->buf != NULL && mm->rkey == it->rkey, "completion for a piece that is gone");
  for (uint32_t j = 0; j < it->len; j++)
    PM_CHECK(mm->buf[off + j] == pm_byte(m->received + j), "stream bytes wrong or out of order");
  PM_CHECK(m->nheld < PM_HELD, "held table");
  m->held[m->nheld].piece = it->piece;
  m->held[m->nheld].off = off;
  m->held[m->nheld].len = it->len;
  m->held[m->nheld].stream = m->received;
  hold_forever = hold_forever && m->nforever < PM_FOREVER;
  m->held[m->nheld].forever = (uint8_t)hold_forever;
  m->nforever += hold_forever ? 1 : 0;
  m->nheld++;
  m->received += it->len;
  /* Small pieces are copied and released at once; others may be held. */
  if (!hold_forever && (m->nheld == PM_HELD || pm_pick(s, 3) == 0)) pm_release_slice(m, m->nheld - 1);
}

static void pm_deliver_s2r(struct pm *m, struct pm_src *s, int hold_forever) {
  struct pm_item it;
  struct rrpc__grant_msg g;
  uint16_t free_id;
  if (m->s2r.n == 0) return;
  it = m->s2r.it[m->s2r.head];
  m->s2r.head = (m->s2r.head + 1) % PM_QUEUE;
  m->s2r.n--;
  if (it.kind == 1) {
    pm_deliver_write(m, &it, s, hold_forever);
    return;
  }
  PM_CHECK(rrpc__grant_decode(it.msg, sizeof(it.msg), &g) == 0, "decode at the receiver");
  PM_CHECK(g.token == PM_TOKEN_R, "token at the receiver");
  PM_CHECK(rrpc__ctl_seq_check(&m->rseq, g.seq) == 0, "sequence at the receiver");
  PM_CHECK(rrpc__prx_on_ctl(&m->rx, &g, &free_id) == 0, "receiver refused an honest control message");
  if (free_id != RRPC_PIECE_ID_NONE) pm_dereg(m, free_id);
}

static void pm_send_r(struct pm *m, struct rrpc__grant_msg *g) {
  struct pm_item it;
  memset(&it, 0, sizeof(it));
  if (g != NULL) {
    it.kind = 2;
    g->seq = rrpc__ctl_seq_next(&m->rseq);
    g->token = PM_TOKEN_S;
    PM_CHECK(rrpc__grant_encode(g, it.msg) == 0, "encode (receiver)");
  } else {
    it.kind = 3;
  }
  /* The body's state change is made; the returns are taken after it. */
  it.returns = rrpc__prx_take_returns(&m->rx);
  PM_CHECK(pm_push(&m->r2s, &it) == 0, "queue full (receiver)");
}

/* One control action, if due and the queue has room. Returns 1 if taken. */
static int pm_receiver_poll(struct pm *m, struct pm_src *s) {
  struct rrpc__prx_action a;
  struct rrpc__grant_msg g;
  if (m->r2s.n + 1 >= PM_QUEUE || !rrpc__prx_poll(&m->rx, &a)) return 0;
  if (a.act == RRPC_PRX_ACT_RETIRE) {
    pm_send_r(m, &a.m);
    if (a.free_id != RRPC_PIECE_ID_NONE) pm_dereg(m, a.free_id);
    return 1;
  }
  PM_CHECK(a.act == RRPC_PRX_ACT_GRANT, "unknown action");
  if (s != NULL && m->grant_fail_1_in > 0 && pm_pick(s, (uint32_t)m->grant_fail_1_in) == 0) {
    rrpc__prx_grant_failed(&m->rx);
    return 0;
  }
  PM_CHECK(rrpc__prx_grant(&m->rx, a.grant_len, a.grant_flags, &g) == 0, "grant as polled");
  {
    struct pm_mem *mm = &m->mem[g.u.grant.id];
    PM_CHECK(mm->buf == NULL, "granted a piece id still registered");
    mm->len = a.grant_len;
    mm->buf = (uint8_t *)calloc(mm->len, 1); /* cleared, as a fresh piece is */
    mm->unrel = (uint8_t *)calloc(mm->len, 1);
    PM_CHECK(mm->buf != NULL && mm->unrel != NULL, "out of memory");
    mm->rkey = ++m->next_rkey;
    g.u.grant.rkey = mm->rkey;
    g.u.grant.addr = 0x10000000ull * g.u.grant.id;
  }
  pm_send_r(m, &g);
  return 1;
}

static void pm_ack(struct pm *m) {
  if (m->r2s.n + 1 < PM_QUEUE && rrpc__prx_returns_owed(&m->rx) > 0) pm_send_r(m, NULL);
}

/* ---- invariants ------------------------------------------------------------ */

static void pm_check(const struct pm *m) {
  uint64_t sum = 0, g = 0, r = 0, retired_held = 0;
  for (uint32_t i = 0; i < m->tx.nw; i++) {
    const struct rrpc__ptx_piece *p = &m->tx.w[i];
    sum += p->len;
    PM_CHECK(p->id <= RRPC_PIECES_SLOTS && m->mem[p->id].buf != NULL && m->mem[p->id].rkey == p->rkey,
             "a piece the sender may write is not registered");
    PM_CHECK(i == 0 || p->off == 0, "only the first writable piece can be partly written");
  }
  for (uint32_t i = 0; i < m->tx.nf; i++) sum += m->tx.f[i].len;
  PM_CHECK(sum == m->tx.granted, "sender's granted bytes");
  PM_CHECK(m->tx.granted <= m->tx.max_granted, "sender over the cap");
  for (int i = 0; i < RRPC_PIECES_SLOTS; i++) {
    const struct rrpc__prx_piece *p = &m->rx.p[i];
    if (p->state == RRPC_PRX_GRANTED || p->state == RRPC_PRX_FULL) g += p->len;
    if (p->state == RRPC_PRX_RETIRED || p->state == RRPC_PRX_HANDED) r += p->len;
    if (p->state == RRPC_PRX_RETIRED) retired_held += p->len;
    PM_CHECK((p->state == RRPC_PRX_FREE) == (m->mem[i + 1].buf == NULL), "table and registrations differ");
    PM_CHECK(p->released <= p->written && p->written <= p->len, "piece byte counts");
  }
  PM_CHECK(g == m->rx.granted && r == m->rx.retired, "receiver's byte accounting");
  PM_CHECK(m->rx.granted <= m->rx.cfg.ring_max, "receiver over ring_max");
  PM_CHECK(retired_held <= m->rx.cfg.retired_max, "receiver over retired_max");
  PM_CHECK(m->rx.ng + m->rx.nf <= RRPC_PIECES_MAX, "too many pieces");
  PM_CHECK(m->received <= m->written && m->written <= m->submitted, "stream counters");
}

/* ---- schedules ------------------------------------------------------------- */

/* One random step. */
static void pm_step(struct pm *m, struct pm_src *s) {
  switch (pm_pick(s, 10)) {
  case 0: if (m->submitted - m->written < 4u * m->max_msg) pm_submit(m, s); break;
  case 1: pm_write(m, 1 + pm_pick(s, RRPC_PTX_SEGS_MAX)); break;
  case 2: pm_deliver_s2r(m, s, pm_pick(s, 4) == 0); break;
  case 3: pm_deliver_r2s(m); break;
  case 4: if (m->nheld > 0) pm_release_slice(m, pm_pick(s, m->nheld)); break;
  case 5: (void)pm_receiver_poll(m, s); break;
  case 6: pm_ack(m); break;
  case 7: pm_sender_idle(m); break;
  case 8: rrpc__prx_set_idle(&m->rx, pm_pick(s, 4) == 0); break;
  default: pm_deliver_s2r(m, s, 0); break;
  }
  pm_check(m);
}

/* Run the honest protocol to the end with no new data: every submitted byte
 * must arrive although the slices marked `forever` stay held. Returns the
 * rounds it took; fails the check if it does not finish. */
static int pm_drain(struct pm *m) {
  struct pm_src none;
  memset(&none, 0, sizeof(none));
  none.rng = 1;
  rrpc__prx_set_idle(&m->rx, 0);
  for (int round = 0; round < 100000; round++) {
    int moved = m->s2r.n + m->r2s.n > 0;
    while (m->s2r.n > 0) pm_deliver_s2r(m, &none, 0);
    for (uint32_t i = 0; i < m->nheld;) {
      if (!m->held[i].forever) pm_release_slice(m, i);
      else i++;
    }
    while (pm_receiver_poll(m, NULL)) moved = 1;
    if (rrpc__prx_returns_owed(&m->rx) > 0) {
      pm_ack(m);
      moved = 1;
    }
    while (m->r2s.n > 0) pm_deliver_r2s(m);
    uint64_t before = m->written;
    uint32_t s2r = m->s2r.n;
    pm_write(m, RRPC_PTX_SEGS_MAX);
    moved |= m->written != before || m->s2r.n != s2r;
    pm_check(m);
    if (m->received == m->submitted && m->s2r.n == 0 && m->r2s.n == 0) return round;
    if (!moved) break;
  }
  PM_CHECK(0, "the stream stalled (held pieces or caps stopped it)");
  return -1;
}

/* Release everything, let both sides go idle, and run to quiescence: what
 * stays pinned must be the idle piece alone, and the sender must be able to
 * send a small message without a round trip. */
static void pm_idle(struct pm *m) {
  while (m->nheld > 0) pm_release_slice(m, 0);
  for (int round = 0; round < 1000; round++) {
    int moved = m->s2r.n + m->r2s.n > 0;
    while (m->s2r.n > 0) pm_deliver_s2r(m, NULL, 0);
    while (m->nheld > 0) pm_release_slice(m, 0);
    rrpc__prx_set_idle(&m->rx, 1);
    while (pm_receiver_poll(m, NULL)) moved = 1;
    while (m->r2s.n > 0) pm_deliver_r2s(m);
    {
      uint32_t q = m->s2r.n;
      pm_sender_idle(m);
      moved |= m->s2r.n != q;
    }
    pm_check(m);
    if (!moved) break;
  }
  PM_CHECK(m->s2r.n == 0 && m->r2s.n == 0, "idle: still talking");
  PM_CHECK(rrpc__prx_pinned(&m->rx) == m->rx.cfg.piece_min, "idle: more than the idle piece pinned");
  PM_CHECK(m->tx.nw == 1 && m->tx.nf == 0 && m->tx.w[0].off == 0 && m->tx.w[0].len == m->rx.cfg.piece_min,
           "idle: the sender has not exactly one unwritten idle piece");
  PM_CHECK(rrpc__ptx_space(&m->tx) >= 64, "idle: a 64-byte call would need a round trip");
}

#endif /* RRPC_TEST_COMMON_PIECES_MODEL_H */
