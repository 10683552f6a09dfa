/* wire/window.c - window, credit and ACK rules of the write-with-immediate
 * data path (see window.h). Pure integer logic. */
#include "transport/rdma/wire/window.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"

/* The receiver's credit threshold; window.h explains the floor of 2. */
static uint32_t credit_threshold(uint32_t depth) {
  return depth / 4 > 2 ? depth / 4 : 2;
}

static uint64_t byte_threshold(uint32_t ring_size) {
  return ring_size / 4 > 1 ? ring_size / 4 : 1;
}

/* ---- sender ------------------------------------------------------------ */

int rrpc__tx_window_init(struct rrpc__tx_window *tx, uint32_t ring_size,
                         uint32_t depth, uint32_t reserve) {
  if (reserve == 0) reserve = 1;
  if (ring_size == 0 || depth <= reserve ||
      depth - reserve < credit_threshold(depth))
    return -EINVAL;
  memset(tx, 0, sizeof(*tx));
  tx->ring_size = ring_size;
  tx->depth = depth;
  tx->reserve = reserve;
  tx->credits = depth;
  return 0;
}

uint32_t rrpc__tx_window_free(const struct rrpc__tx_window *tx) {
  /* commit/on_ack keep prod - peer_cons within [0, ring_size]. */
  return tx->ring_size - (uint32_t)(tx->prod - tx->peer_cons);
}

int rrpc__tx_window_plan(const struct rrpc__tx_window *tx, uint64_t pending,
                         struct rrpc__tx_plan *plan) {
  uint32_t free_bytes = rrpc__tx_window_free(tx);
  uint32_t off, n, first;

  memset(plan, 0, sizeof(*plan));
  if (pending == 0) return 0;
  if (free_bytes == 0) {
    plan->blocked = RRPC_TX_BLOCKED_SPACE;
    return -EAGAIN;
  }
  if (tx->credits <= tx->reserve) {
    plan->blocked = RRPC_TX_BLOCKED_CREDITS;
    return -EAGAIN;
  }
  n = pending < free_bytes ? (uint32_t)pending : free_bytes;
  off = (uint32_t)(tx->prod % tx->ring_size);
  first = tx->ring_size - off;
  if (n <= first) {
    plan->nseg = 1;
    plan->seg[0].off = off;
    plan->seg[0].len = n;
  } else if (tx->credits - tx->reserve >= 2) {
    plan->nseg = 2;
    plan->seg[0].off = off;
    plan->seg[0].len = first;
    plan->seg[1].off = 0;
    plan->seg[1].len = n - first;
  } else {
    /* One data credit left: write up to the ring's end; the rest waits. */
    plan->nseg = 1;
    plan->seg[0].off = off;
    plan->seg[0].len = first;
    n = first;
  }
  plan->len = n;
  plan->nmsg = plan->nseg;
  return 0;
}

int rrpc__tx_window_can_ack(const struct rrpc__tx_window *tx, int returns_credits) {
  return !(tx->credits == 0 || (tx->credits == 1 && !returns_credits));
}

int rrpc__tx_window_plan_ack(const struct rrpc__tx_window *tx,
                             int returns_credits, struct rrpc__tx_plan *plan) {
  memset(plan, 0, sizeof(*plan));
  if (!rrpc__tx_window_can_ack(tx, returns_credits)) {
    plan->blocked = RRPC_TX_BLOCKED_CREDITS;
    return -EAGAIN;
  }
  plan->nmsg = 1;
  return 0;
}

/* Checks that a data plan is the one rrpc__tx_window_plan would make now,
 * up to its length: the segments start at prod, are contiguous across the
 * ring's end, fit the free space and leave the reserve alone. */
static int data_plan_fits(const struct rrpc__tx_window *tx,
                          const struct rrpc__tx_plan *p) {
  uint64_t sum;
  if (p->nmsg != p->nseg || p->nseg > 2) return 0;
  if (tx->credits < p->nmsg || tx->credits - p->nmsg < tx->reserve) return 0;
  if (p->seg[0].len == 0 || p->seg[0].off != tx->prod % tx->ring_size ||
      p->seg[0].len > tx->ring_size - p->seg[0].off)
    return 0;
  sum = p->seg[0].len;
  if (p->nseg == 2) {
    if (p->seg[0].off + p->seg[0].len != tx->ring_size || p->seg[1].off != 0 ||
        p->seg[1].len == 0)
      return 0;
    sum += p->seg[1].len;
  }
  return sum == p->len && sum <= rrpc__tx_window_free(tx);
}

int rrpc__tx_window_commit(struct rrpc__tx_window *tx,
                           const struct rrpc__tx_plan *plan) {
  if (plan->nmsg == 0) return plan->nseg == 0 && plan->len == 0 ? 0 : -EINVAL;
  if (plan->nseg == 0) {
    if (plan->nmsg != 1 || plan->len != 0 || tx->credits == 0) return -EINVAL;
    tx->credits--;
    return 0;
  }
  if (!data_plan_fits(tx, plan)) return -EINVAL;
  tx->prod += plan->len;
  tx->credits -= plan->nmsg;
  return 0;
}

int rrpc__tx_window_on_ack(struct rrpc__tx_window *tx, uint32_t imm) {
  struct rrpc__imm a = rrpc__imm_unpack(imm);
  if ((uint64_t)a.advance > tx->prod - tx->peer_cons) return -RRPC_EPARSE;
  if ((uint64_t)tx->credits + a.credits > tx->depth) return -RRPC_EPARSE;
  tx->peer_cons += a.advance;
  tx->credits += a.credits;
  return 0;
}

/* Credits and free space that would remain once plan is posted. */
static void after(const struct rrpc__tx_window *tx,
                  const struct rrpc__tx_plan *plan, uint32_t *credits,
                  uint32_t *free_bytes) {
  uint32_t f = rrpc__tx_window_free(tx);
  *credits = tx->credits > plan->nmsg ? tx->credits - plan->nmsg : 0;
  *free_bytes = f > plan->len ? f - plan->len : 0;
}

static int nearly_blocked(const struct rrpc__tx_window *tx,
                          const struct rrpc__tx_plan *plan) {
  uint32_t c, f;
  after(tx, plan, &c, &f);
  return c <= tx->reserve + 1 || f < tx->ring_size / 8;
}

int rrpc__tx_window_want_solicited(const struct rrpc__tx_window *tx,
                                   const struct rrpc__tx_plan *plan,
                                   int end_of_batch, int peer_asked) {
  /* A pure ACK goes out only when due (a threshold or a request), that is
   * when the peer may be blocked waiting for it; left unsolicited it could
   * sit unseen in an event-mode peer's CQ. */
  if (plan->nseg == 0) return 1;
  return end_of_batch || peer_asked || nearly_blocked(tx, plan);
}

int rrpc__tx_window_ack_request(const struct rrpc__tx_window *tx,
                                const struct rrpc__tx_plan *plan) {
  return plan->nseg > 0 && nearly_blocked(tx, plan);
}

uint32_t rrpc__tx_window_data_credits(const struct rrpc__tx_window *tx) {
  return tx->credits > tx->reserve ? tx->credits - tx->reserve : 0;
}

int rrpc__tx_window_commit_msgs(struct rrpc__tx_window *tx, uint32_t n) {
  if (n > rrpc__tx_window_data_credits(tx)) return -EINVAL;
  tx->credits -= n;
  return 0;
}

/* ---- receiver ---------------------------------------------------------- */

int rrpc__rx_window_init(struct rrpc__rx_window *rx, uint32_t ring_size,
                         uint32_t depth) {
  if (ring_size == 0 || depth == 0) return -EINVAL;
  memset(rx, 0, sizeof(*rx));
  rx->ring_size = ring_size;
  rx->depth = depth;
  return 0;
}

int rrpc__rx_window_on_recv(struct rrpc__rx_window *rx, uint32_t ring_bytes) {
  /* Receives the peer may still consume: posted ones it was told about. */
  uint32_t peer_credits = rx->depth - rx->held - rx->owed;
  if (peer_credits == 0) return -RRPC_EPARSE;
  if (rx->prod - rx->cons + ring_bytes > rx->ring_size) return -RRPC_EPARSE;
  rx->held++;
  rx->prod += ring_bytes;
  return 0;
}

int rrpc__rx_window_on_repost(struct rrpc__rx_window *rx, uint32_t n) {
  if (n > rx->held) return -EINVAL;
  rx->held -= n;
  rx->owed += n;
  return 0;
}

int rrpc__rx_window_on_release(struct rrpc__rx_window *rx, uint64_t n) {
  if (n > rx->prod - rx->cons) return -EINVAL;
  rx->cons += n;
  return 0;
}

int rrpc__rx_window_owes(const struct rrpc__rx_window *rx) {
  return rx->owed > 0 || rx->cons > rx->acked;
}

int rrpc__rx_window_owes_credits(const struct rrpc__rx_window *rx) {
  return rx->owed > 0;
}

int rrpc__rx_window_ack_due(const struct rrpc__rx_window *rx,
                            int peer_requested) {
  if (rx->owed >= credit_threshold(rx->depth)) return 1;
  if (rx->cons - rx->acked >= byte_threshold(rx->ring_size)) return 1;
  return peer_requested && rrpc__rx_window_owes(rx);
}

uint32_t rrpc__rx_window_take_ack(struct rrpc__rx_window *rx, int ack_req) {
  struct rrpc__imm a;
  uint64_t unacked = rx->cons - rx->acked;
  a.ack_req = ack_req ? 1 : 0;
  a.credits = (uint8_t)(rx->owed < RRPC_IMM_CREDITS_MAX ? rx->owed
                                                        : RRPC_IMM_CREDITS_MAX);
  a.advance = (uint32_t)(unacked < RRPC_IMM_ADVANCE_MAX ? unacked
                                                        : RRPC_IMM_ADVANCE_MAX);
  rx->owed -= a.credits;
  rx->acked += a.advance;
  return rrpc__imm_pack(&a);
}
