/* window_fuzzer.c - libFuzzer target for the RDMA window/credit accounting
 * and receive-ring reclaim (transport/rdma/wire/window.h, rx_reclaim.h).
 *
 * Mode 0 (honest peers): two endpoints with fuzzer-chosen ring sizes,
 * receive depths, reserve and event/polling mode exchange data; the fuzzer
 * picks every step (queue data, write, ACK, deliver, process completions,
 * repost, release a block). Data lands in the peer's ring when POSTED, so an
 * overrun would clobber bytes the peer still holds; blocks are checked
 * against the stream pattern when handed out and when released. After the
 * fuzzer's steps the applications release everything and the endpoints run
 * the real rules only: all data must arrive (no deadlock) and the ACKs must
 * then die out. Credit and byte conservation is checked after every step.
 *
 * Mode 1 (hostile peer): one tx window, one rx window and one reclaim tracker
 * driven with arbitrary calls and immediates; errors must leave the state
 * unchanged and the local invariants must hold. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/rx_reclaim.h"
#include "transport/rdma/wire/window.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "window_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

/* ---- input ---------------------------------------------------------------- */

struct input {
  const uint8_t *p;
  size_t n;
};

static uint32_t get(struct input *in, int bytes) {
  uint32_t v = 0;
  while (bytes-- > 0) {
    v <<= 8;
    if (in->n > 0) {
      v |= *in->p++;
      in->n--;
    }
  }
  return v;
}

/* ---- mode 0: honest peers ----------------------------------------------- */

enum { QCAP = 256, HCAP = 2048, MAX_RING = 512, BUDGET = 1 << 12 };

struct msg {
  uint32_t len;
  uint32_t imm;
  uint8_t sol;
};

struct queue {
  struct msg m[QCAP];
  unsigned head, n;
};

struct block {
  uint64_t s, e;
};

struct ep {
  struct rrpc__tx_window tx;
  struct rrpc__rx_window rx;
  struct rrpc__rx_reclaim rc;
  uint8_t ring[MAX_RING];
  uint64_t pending, sent, delivered; /* delivered: bytes of mine the peer released */
  struct queue cq;
  int woken, event_mode, peer_req;
  struct block held[HCAP];
  unsigned nheld;
};

static struct ep eps[2];
static struct queue wire[2];

static void q_push(struct queue *q, struct msg m) {
  check(q->n < QCAP, "queue overflow: more messages than credits", __LINE__);
  q->m[(q->head + q->n) % QCAP] = m;
  q->n++;
}

static struct msg q_pop(struct queue *q) {
  struct msg m = q->m[q->head];
  q->head = (q->head + 1) % QCAP;
  q->n--;
  return m;
}

static uint8_t pattern(int dir, uint64_t s) {
  return (uint8_t)(s * 131 + (uint64_t)dir * 71 + (s >> 9));
}

static void check_bytes(int j, uint64_t s, uint64_t e) {
  struct ep *x = &eps[j];
  for (; s < e; s++)
    check(x->ring[s % x->rx.ring_size] == pattern(1 - j, s), "ring byte overwritten", __LINE__);
}

static int send_data(int i, unsigned max_msgs) {
  struct ep *e = &eps[i], *p = &eps[1 - i];
  struct rrpc__tx_plan plans[64];
  struct rrpc__tx_window sim = e->tx;
  uint64_t left = e->pending;
  unsigned np = 0, k, g;
  int posted = 0;
  if (max_msgs > 64) max_msgs = 64;
  while (left > 0 && np < max_msgs) {
    if (rrpc__tx_window_plan(&sim, left, &plans[np]) != 0) break;
    check(rrpc__tx_window_commit(&sim, &plans[np]) == 0, "commit on copy", __LINE__);
    left -= plans[np].len;
    np++;
  }
  for (k = 0; k < np; k++) {
    const struct rrpc__tx_plan *pl = &plans[k];
    int sol = rrpc__tx_window_want_solicited(&e->tx, pl, k + 1 == np, e->peer_req);
    int req = rrpc__tx_window_ack_request(&e->tx, pl);
    uint64_t s = e->tx.prod;
    for (g = 0; g < pl->nseg; g++) {
      struct msg m;
      uint32_t b;
      check(pl->seg[g].off + pl->seg[g].len <= p->rx.ring_size, "segment beyond ring", __LINE__);
      for (b = 0; b < pl->seg[g].len; b++) p->ring[pl->seg[g].off + b] = pattern(i, s++);
      m.len = pl->seg[g].len;
      m.imm = g + 1 == pl->nseg ? rrpc__rx_window_take_ack(&e->rx, req) : 0;
      m.sol = (uint8_t)(g + 1 == pl->nseg && sol);
      q_push(&wire[i], m);
      posted++;
    }
    e->peer_req = 0;
    check(rrpc__tx_window_commit(&e->tx, pl) == 0, "commit", __LINE__);
    e->pending -= pl->len;
  }
  return posted;
}

static int send_ack(int i, int early) {
  struct ep *e = &eps[i];
  struct rrpc__tx_plan pl;
  struct msg m;
  if (!early && !rrpc__rx_window_ack_due(&e->rx, e->peer_req)) return 0;
  if (!rrpc__rx_window_owes(&e->rx)) return 0;
  if (rrpc__tx_window_plan_ack(&e->tx, rrpc__rx_window_owes_credits(&e->rx), &pl) != 0) return 0;
  m.len = 0;
  m.sol = (uint8_t)rrpc__tx_window_want_solicited(&e->tx, &pl, 0, e->peer_req);
  check(!rrpc__tx_window_ack_request(&e->tx, &pl), "pure ACK requests an ACK", __LINE__);
  m.imm = rrpc__rx_window_take_ack(&e->rx, 0);
  check(rrpc__tx_window_commit(&e->tx, &pl) == 0, "commit ack", __LINE__);
  e->peer_req = 0;
  q_push(&wire[i], m);
  return 1;
}

static int deliver(int i) {
  struct ep *p = &eps[1 - i];
  struct msg m;
  if (wire[i].n == 0) return 0;
  m = q_pop(&wire[i]);
  q_push(&p->cq, m);
  if (m.sol) p->woken = 1;
  return 1;
}

static int process(int j, unsigned split) {
  struct ep *e = &eps[j];
  int n = 0;
  if (e->cq.n == 0 || (e->event_mode && !e->woken)) return 0;
  e->woken = 0;
  while (e->cq.n > 0) {
    struct msg m = q_pop(&e->cq);
    uint64_t at = e->rx.prod, end;
    check(rrpc__rx_window_on_recv(&e->rx, m.len) == 0, "credit or ring overrun", __LINE__);
    check(rrpc__tx_window_on_ack(&e->tx, m.imm) == 0, "bad ACK from an honest peer", __LINE__);
    if (rrpc__imm_unpack(m.imm).ack_req) e->peer_req = 1;
    end = at + m.len;
    while (at < end) {
      uint64_t len = end - at;
      if (len > 1 && (split & 1) && e->nheld + 1 < HCAP) len = 1 + (split >> 1) % (len - 1);
      split = split * 1103515245u + 12345u;
      check_bytes(j, at, at + len);
      check(e->nheld < HCAP, "too many blocks", __LINE__);
      e->held[e->nheld].s = at;
      e->held[e->nheld].e = at + len;
      e->nheld++;
      at += len;
    }
    n++;
  }
  return n;
}

static int repost(int j, uint32_t n) {
  struct ep *e = &eps[j];
  if (n > e->rx.held) n = e->rx.held;
  if (n == 0) return 0;
  check(rrpc__rx_window_on_repost(&e->rx, n) == 0, "repost", __LINE__);
  return 1;
}

static int release(int j, unsigned k) {
  struct ep *e = &eps[j];
  struct block b;
  uint64_t adv;
  if (e->nheld == 0) return 0;
  k %= e->nheld;
  b = e->held[k];
  e->held[k] = e->held[--e->nheld];
  check_bytes(j, b.s, b.e);
  check(rrpc__rx_reclaim_release(&e->rc, b.s, b.e, &adv) == 0, "reclaim", __LINE__);
  check(rrpc__rx_window_on_release(&e->rx, adv) == 0, "on_release", __LINE__);
  eps[1 - j].delivered += b.e - b.s;
  return 1;
}

static void invariants(void) {
  int i;
  unsigned k;
  for (i = 0; i < 2; i++) {
    const struct ep *s = &eps[i], *r = &eps[1 - i];
    uint64_t inflight = wire[i].n + r->cq.n, returning = 0, adv = 0, bytes = 0;
    check(s->tx.prod - s->tx.peer_cons <= r->rx.ring_size, "overrun", __LINE__);
    check(s->tx.credits <= s->tx.depth, "credits above depth", __LINE__);
    for (k = 0; k < wire[i].n; k++) bytes += wire[i].m[(wire[i].head + k) % QCAP].len;
    for (k = 0; k < r->cq.n; k++) bytes += r->cq.m[(r->cq.head + k) % QCAP].len;
    for (k = 0; k < wire[1 - i].n; k++) {
      struct rrpc__imm a = rrpc__imm_unpack(wire[1 - i].m[(wire[1 - i].head + k) % QCAP].imm);
      returning += a.credits;
      adv += a.advance;
    }
    for (k = 0; k < s->cq.n; k++) {
      struct rrpc__imm a = rrpc__imm_unpack(s->cq.m[(s->cq.head + k) % QCAP].imm);
      returning += a.credits;
      adv += a.advance;
    }
    check(r->rx.depth == s->tx.credits + inflight + r->rx.held + r->rx.owed + returning,
          "credit conservation", __LINE__);
    check(s->tx.prod == r->rx.prod + bytes, "byte conservation", __LINE__);
    check(r->rx.acked == s->tx.peer_cons + adv, "ack conservation", __LINE__);
    check(r->rx.cons == r->rc.cons, "reclaim vs rx cons", __LINE__);
  }
}

static int round_all(void) {
  int i, progress = 0;
  for (i = 0; i < 2; i++) {
    struct ep *e = &eps[i];
    progress += process(i, 0);
    progress += repost(i, e->rx.held);
    while (e->nheld > 0) progress += release(i, e->nheld - 1);
    progress += send_data(i, 64);
    progress += send_ack(i, 0);
  }
  for (i = 0; i < 2; i++)
    while (deliver(i)) progress++;
  return progress;
}

static void honest(struct input *in) {
  uint32_t ring[2], depth[2], reserve;
  int i, rounds;
  memset(eps, 0, sizeof(eps));
  memset(wire, 0, sizeof(wire));
  for (i = 0; i < 2; i++) {
    ring[i] = 1 + get(in, 2) % MAX_RING;
    depth[i] = 3 + get(in, 1) % 48;
  }
  reserve = 1 + get(in, 1) % 3;
  for (i = 0; i < 2; i++) {
    eps[i].event_mode = (get(in, 1) & 1) == 0;
    check(rrpc__rx_window_init(&eps[i].rx, ring[i], depth[i]) == 0, "rx init", __LINE__);
    rrpc__rx_reclaim_init(&eps[i].rc, 0, 0);
  }
  for (i = 0; i < 2; i++)
    if (rrpc__tx_window_init(&eps[i].tx, ring[1 - i], depth[1 - i], reserve) != 0) goto out;

  while (in->n > 0) {
    uint32_t op = get(in, 1);
    int who = (int)(op >> 7);
    switch ((op & 0x7f) % 8) {
      case 0: {
        uint32_t n = 1 + get(in, 2) % (2 * MAX_RING);
        /* A few ring-fulls per direction keep the drain short. */
        if (eps[who].sent + n <= 8u * eps[who].tx.ring_size + 64 && eps[who].sent + n <= BUDGET) {
          eps[who].pending += n;
          eps[who].sent += n;
        }
        break;
      }
      case 1: send_data(who, 1 + get(in, 1) % 8); break;
      case 2: send_ack(who, (int)(get(in, 1) & 1)); break;
      case 3: deliver(who); break;
      case 4:
        if (eps[who].event_mode || (get(in, 1) & 1)) process(who, get(in, 2));
        break;
      case 5: repost(who, 1 + get(in, 1) % 8); break;
      case 6: release(who, get(in, 2)); break;
      default: {
        /* Several deliveries at once. */
        uint32_t k = get(in, 1) % 16;
        while (k-- > 0 && deliver(who)) {
        }
        break;
      }
    }
    invariants();
  }

  /* Drain: only the real rules; progress until every byte is through. */
  for (rounds = 0;; rounds++) {
    int progress, done = 1;
    check(rounds < 1000000, "drain never ends (ACK storm?)", __LINE__);
    progress = round_all();
    invariants();
    for (i = 0; i < 2; i++)
      done = done && eps[i].pending == 0 && wire[i].n == 0 && eps[i].cq.n == 0 &&
             eps[i].nheld == 0 && eps[i].delivered == eps[i].sent;
    if (done) break;
    check(progress > 0, "deadlock: no progress with data outstanding", __LINE__);
  }
  for (rounds = 0; round_all() > 0; rounds++) check(rounds < 100, "pure ACKs never settle", __LINE__);
out:
  for (i = 0; i < 2; i++) rrpc__rx_reclaim_destroy(&eps[i].rc);
}

/* ---- mode 1: hostile peer ----------------------------------------------- */

static void hostile(struct input *in) {
  struct rrpc__tx_window tx, before;
  struct rrpc__rx_window rx, rbefore;
  struct rrpc__rx_reclaim rc;
  uint32_t ring = 1 + get(in, 3);
  uint32_t depth = 1 + get(in, 2);
  uint32_t reserve = get(in, 1);
  int have_tx = rrpc__tx_window_init(&tx, ring, depth, reserve) == 0;
  uint64_t base = (uint64_t)get(in, 4) << 20;
  check(rrpc__rx_window_init(&rx, ring, depth) == 0, "rx init", __LINE__);
  rrpc__rx_reclaim_init(&rc, base, get(in, 1));

  while (in->n > 0) {
    uint32_t op = get(in, 1) % 10;
    struct rrpc__tx_plan plan;
    int rc_;
    uint64_t adv, cons_before;
    if (have_tx) before = tx;
    rbefore = rx;
    switch (op) {
      case 0:
        if (!have_tx) break;
        rc_ = rrpc__tx_window_plan(&tx, get(in, 4), &plan);
        check(memcmp(&before, &tx, sizeof(tx)) == 0, "plan changed tx", __LINE__);
        if (rc_ == 0 && plan.nmsg > 0) {
          check(plan.len <= rrpc__tx_window_free(&tx), "plan beyond free", __LINE__);
          check(rrpc__tx_window_commit(&tx, &plan) == 0, "commit own plan", __LINE__);
          check(rrpc__tx_window_commit(&tx, &plan) == -EINVAL, "double commit", __LINE__);
        }
        break;
      case 1:
        if (!have_tx) break;
        if (rrpc__tx_window_plan_ack(&tx, (int)(get(in, 1) & 1), &plan) == 0)
          check(rrpc__tx_window_commit(&tx, &plan) == 0, "commit ack", __LINE__);
        break;
      case 2:
        if (!have_tx) break;
        /* Forged plan from raw bytes. */
        plan.nseg = get(in, 1) % 4;
        plan.seg[0].off = get(in, 4);
        plan.seg[0].len = get(in, 4);
        plan.seg[1].off = get(in, 4);
        plan.seg[1].len = get(in, 4);
        plan.len = get(in, 4);
        plan.nmsg = get(in, 1) % 4;
        if (rrpc__tx_window_commit(&tx, &plan) != 0)
          check(memcmp(&before, &tx, sizeof(tx)) == 0, "failed commit changed tx", __LINE__);
        break;
      case 3:
        if (!have_tx) break;
        if (rrpc__tx_window_on_ack(&tx, get(in, 4)) != 0)
          check(memcmp(&before, &tx, sizeof(tx)) == 0, "failed ack changed tx", __LINE__);
        break;
      case 4:
        if (rrpc__rx_window_on_recv(&rx, get(in, 4)) != 0)
          check(memcmp(&rbefore, &rx, sizeof(rx)) == 0, "failed recv changed rx", __LINE__);
        break;
      case 5:
        if (rrpc__rx_window_on_repost(&rx, get(in, 2)) != 0)
          check(memcmp(&rbefore, &rx, sizeof(rx)) == 0, "failed repost changed rx", __LINE__);
        break;
      case 6:
        (void)rrpc__rx_window_ack_due(&rx, (int)(get(in, 1) & 1));
        (void)rrpc__rx_window_take_ack(&rx, (int)(get(in, 1) & 1));
        break;
      case 7: {
        uint64_t s = rc.cons + get(in, 2), e = s + get(in, 2);
        if (get(in, 1) & 1) s = rc.cons - (s - rc.cons); /* sometimes below cons */
        cons_before = rc.cons;
        if (rrpc__rx_reclaim_release(&rc, s, e, &adv) == 0) {
          check(rc.cons == cons_before + adv, "reclaim advance", __LINE__);
          if (adv > 0 && adv <= rx.prod - rx.cons)
            check(rrpc__rx_window_on_release(&rx, adv) == 0, "release", __LINE__);
        } else {
          check(rc.cons == cons_before && adv == 0, "failed reclaim moved cons", __LINE__);
        }
        break;
      }
      case 8:
        if (rrpc__rx_window_on_release(&rx, get(in, 3)) != 0)
          check(memcmp(&rbefore, &rx, sizeof(rx)) == 0, "failed release changed rx", __LINE__);
        break;
      default: {
        struct rrpc__imm a = rrpc__imm_unpack(get(in, 4));
        check(rrpc__imm_unpack(rrpc__imm_pack(&a)).advance == a.advance, "imm", __LINE__);
        break;
      }
    }
    if (have_tx) {
      check(tx.prod - tx.peer_cons <= tx.ring_size, "tx overrun", __LINE__);
      check(tx.credits <= tx.depth, "tx credits", __LINE__);
    }
    check(rx.prod - rx.cons <= rx.ring_size && rx.acked <= rx.cons && rx.cons <= rx.prod,
          "rx cursors", __LINE__);
    check(rx.held + rx.owed <= rx.depth, "rx receives", __LINE__);
    {
      uint32_t k;
      for (k = 0; k < rc.n; k++) {
        check(rc.ranges[k].start < rc.ranges[k].end, "empty range", __LINE__);
        check(k > 0 ? rc.ranges[k - 1].end < rc.ranges[k].start : rc.ranges[k].start > rc.cons,
              "ranges unsorted or touching", __LINE__);
      }
      check(rc.max_ranges == 0 || rc.n <= rc.max_ranges, "range bound", __LINE__);
    }
  }
  rrpc__rx_reclaim_destroy(&rc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct input in;
  in.p = data;
  in.n = size;
  if (size == 0) return 0;
  if (get(&in, 1) & 1)
    hostile(&in);
  else
    honest(&in);
  return 0;
}
