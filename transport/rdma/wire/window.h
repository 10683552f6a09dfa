/* wire/window.h - private to the RDMA transport: the window and credit
 * accounting of rrpc's write-with-immediate data path, as pure logic over
 * integers (no verbs). It owns the rules of when a sender may write, where,
 * and how much, the 32-bit immediate that carries ACKs, and when an ACK or a
 * solicited event is due; the endpoint code turns its answers into work
 * requests.
 *
 * Per direction: the sender RDMA-WRITEs into the receiver's ring at its
 * producer offset, one WRITE_WITH_IMM per contiguous segment (a write whose
 * free area wraps is two segments: verbs report only the length of a write
 * that carries an immediate, so both must carry one). Every message an
 * endpoint sends (data segment or pure ACK) consumes one receive the peer
 * posted (a "credit") and carries an immediate with the ACK for the other
 * direction.
 *
 * Thread safety: none; a window belongs to its endpoint, which serializes
 * calls. Nothing here blocks or allocates. */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_WINDOW_H
#define RRPC_TRANSPORT_RDMA_WIRE_WINDOW_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the immediate -------------------------------------------------------
 * Host-order value, sent with htonl (verbs carry imm_data in network order):
 *   bit 31      ack requested: the sender is blocked or nearly so; the
 *               receiver should ACK as soon as it consumes or reposts
 *               anything. Never set on a pure ACK (two blocked peers would
 *               otherwise ACK each other's ACKs forever).
 *   bits 30..24 receive-WR credits returned (0..127)
 *   bits 23..0  consumer-cursor advance in bytes (0..16 MiB-1)
 * Larger amounts go out in several messages. */
enum {
  RRPC_IMM_CREDITS_SHIFT = 24,
  RRPC_IMM_CREDITS_MAX = 127,
  RRPC_IMM_ADVANCE_MAX = 0xffffff,
};

struct rrpc__imm {
  uint8_t ack_req;  /* 0 or 1 */
  uint8_t credits;  /* <= RRPC_IMM_CREDITS_MAX */
  uint32_t advance; /* <= RRPC_IMM_ADVANCE_MAX */
};

/* rrpc__imm_pack - host-order immediate; fields beyond their width are
 * truncated to it (callers keep them in range). */
static inline uint32_t rrpc__imm_pack(const struct rrpc__imm *a) {
  return (a->ack_req ? 0x80000000u : 0u) |
         ((uint32_t)(a->credits & RRPC_IMM_CREDITS_MAX)
          << RRPC_IMM_CREDITS_SHIFT) |
         (a->advance & RRPC_IMM_ADVANCE_MAX);
}

static inline struct rrpc__imm rrpc__imm_unpack(uint32_t imm) {
  struct rrpc__imm a;
  a.ack_req = (uint8_t)(imm >> 31);
  a.credits = (uint8_t)((imm >> RRPC_IMM_CREDITS_SHIFT) & RRPC_IMM_CREDITS_MAX);
  a.advance = imm & RRPC_IMM_ADVANCE_MAX;
  return a;
}

/* ---- sender side: my view of the peer's ring ----------------------------- */

struct rrpc__tx_window {
  uint32_t ring_size; /* peer's ring, bytes */
  uint32_t depth;     /* receives the peer posted for me = initial credits */
  uint32_t reserve;   /* credits data may not take (kept for pure ACKs) */
  uint32_t credits;   /* receives I may still consume */
  uint64_t prod;      /* bytes written since the start */
  uint64_t peer_cons; /* bytes the peer released, from its ACKs */
};

enum rrpc__tx_blocked {
  RRPC_TX_NOT_BLOCKED = 0,
  RRPC_TX_BLOCKED_SPACE = 1,   /* the peer's ring is full */
  RRPC_TX_BLOCKED_CREDITS = 2, /* no credit this message may take */
};

struct rrpc__tx_seg {
  uint32_t off; /* offset in the peer's ring */
  uint32_t len;
};

/* What to send now. A data plan has nseg 1 or 2 (one WRITE_WITH_IMM each,
 * in order; the ACK rides on the last, the first carries an empty one), a
 * pure-ACK plan nseg 0 and nmsg 1, an empty plan nmsg 0. */
struct rrpc__tx_plan {
  uint32_t nseg;
  struct rrpc__tx_seg seg[2];
  uint32_t len;     /* data bytes in all segments */
  uint32_t nmsg;    /* messages = credits the plan takes */
  uint8_t blocked;  /* enum rrpc__tx_blocked, set when planning failed */
};

/* rrpc__tx_window_init - ring_size > 0; depth = the peer's posted receives;
 * reserve 0 means the default 1. Requires depth - reserve >= max(2,
 * depth / 4) (the peer's ACK threshold, see rrpc__rx_window_ack_due), so a
 * sender that runs out of data credits always leaves the peer owing enough
 * to ACK. Returns 0 or -EINVAL. */
int rrpc__tx_window_init(struct rrpc__tx_window *tx, uint32_t ring_size,
                         uint32_t depth, uint32_t reserve);

/* rrpc__tx_window_free - free bytes in the peer's ring. */
uint32_t rrpc__tx_window_free(const struct rrpc__tx_window *tx);

/* rrpc__tx_window_plan - how much of pending bytes to write now: min(pending,
 * free), in one segment, or two when the free area wraps and two credits
 * above the reserve are left (else the first segment only, up to the ring's
 * end). pending 0 gives an empty plan. Returns 0, or -EAGAIN with
 * plan->blocked set when no byte may go (no space, or credits <= reserve).
 * Does not change tx. */
int rrpc__tx_window_plan(const struct rrpc__tx_window *tx, uint64_t pending,
                         struct rrpc__tx_plan *plan);

/* rrpc__tx_window_plan_ack - a pure ACK (SEND_WITH_IMM or CDC). It may take
 * the reserve, but the very last credit only if the ACK returns at least one
 * credit: pass returns_credits = rrpc__rx_window_owes_credits(rx) (NOT
 * rrpc__rx_window_owes, which also counts bytes). Then the peer can always
 * answer, and two peers can never both end at zero credits (the model test
 * finds that deadlock without this rule). Returns 0 or -EAGAIN (blocked =
 * RRPC_TX_BLOCKED_CREDITS). */
int rrpc__tx_window_plan_ack(const struct rrpc__tx_window *tx,
                             int returns_credits, struct rrpc__tx_plan *plan);

/* rrpc__tx_window_can_ack - whether rrpc__tx_window_plan_ack would return 0
 * now: the same rule, without building a plan (asked before every control
 * message, several times a message). */
int rrpc__tx_window_can_ack(const struct rrpc__tx_window *tx, int returns_credits);

/* rrpc__tx_window_commit - the plan was posted: advance prod by its bytes
 * and take its credits. Returns 0, or -EINVAL for a plan that no longer fits
 * the state (not made from it, or already committed); tx is then unchanged. */
int rrpc__tx_window_commit(struct rrpc__tx_window *tx,
                           const struct rrpc__tx_plan *plan);

/* rrpc__tx_window_on_ack - apply the immediate of a message from the peer:
 * credits returned and consumer advance. Returns 0, or -RRPC_EPARSE for a
 * protocol violation (advance beyond the bytes written and not yet
 * acknowledged, or credits beyond the depth); tx is then unchanged and the
 * connection must fail. The ack-request bit is not for this side: pass it to
 * the receive side's rrpc__rx_window_ack_due. */
int rrpc__tx_window_on_ack(struct rrpc__tx_window *tx, uint32_t imm);

/* rrpc__tx_window_want_solicited - whether the last message of plan should
 * raise a solicited event at the peer: for data, at the end of a write
 * batch, when the credits left after it are <= reserve + 1, when the peer's
 * free space after it is below ring/8, or when it answers an ACK request of
 * the peer; a pure ACK always (it is sent only when due, so the peer may be
 * blocked waiting for it, and an unsolicited one could sit unseen in an
 * event-mode peer's CQ). The first segment of a two-segment plan is never
 * solicited. */
int rrpc__tx_window_want_solicited(const struct rrpc__tx_window *tx,
                                   const struct rrpc__tx_plan *plan,
                                   int end_of_batch, int peer_asked);

/* rrpc__tx_window_ack_request - whether the immediate of plan's last message
 * sets bit 31: a data plan after which the credits left are <= reserve + 1
 * or the free space is below ring/8. Always 0 for a pure ACK. */
int rrpc__tx_window_ack_request(const struct rrpc__tx_window *tx,
                                const struct rrpc__tx_plan *plan);

/* ---- elastic mode: credits only (docs/elastic-rings.md) --------------------
 * Space is the pieces layer's (wire/pieces.h); the window keeps the credit
 * rules. The endpoint initializes both windows with ring_size 1 and never
 * passes bytes: plans, frees and advances are not used, and the credit
 * half of every immediate (bits 31..24) is applied with on_ack after
 * masking the rest off (RRPC_IMM_CREDITS_MASK). */
#define RRPC_IMM_CREDITS_MASK 0xff000000u

/* rrpc__tx_window_data_credits - credits a data message may take now: those
 * above the reserve. */
uint32_t rrpc__tx_window_data_credits(const struct rrpc__tx_window *tx);

/* rrpc__tx_window_commit_msgs - n data messages were posted: take n credits,
 * never the reserve. Returns 0, or -EINVAL (tx unchanged) when they would
 * pass it. */
int rrpc__tx_window_commit_msgs(struct rrpc__tx_window *tx, uint32_t n);

/* ---- receiver side: my ring ---------------------------------------------- */

struct rrpc__rx_window {
  uint32_t ring_size; /* my ring, bytes */
  uint32_t depth;     /* receives I keep posted for the peer */
  uint64_t prod;      /* bytes the peer wrote */
  uint64_t cons;      /* bytes released by the application */
  uint64_t acked;     /* cons as last reported to the peer */
  uint32_t held;      /* receives completed, not yet reposted */
  uint32_t owed;      /* receives reposted, not yet reported (credits) */
};

/* rrpc__rx_window_init - ring_size > 0, depth > 0. Returns 0 or -EINVAL. */
int rrpc__rx_window_init(struct rrpc__rx_window *rx, uint32_t ring_size,
                         uint32_t depth);

/* rrpc__rx_window_on_recv - one receive completed. ring_bytes is the
 * completion's byte_len for RECV_RDMA_WITH_IMM (bytes the peer wrote into the
 * ring at prod), 0 for a SEND. Returns 0, or -RRPC_EPARSE if the peer had no
 * credit left or wrote beyond the free space (prod - cons > ring_size); rx is
 * then unchanged. */
int rrpc__rx_window_on_recv(struct rrpc__rx_window *rx, uint32_t ring_bytes);

/* rrpc__rx_window_on_repost - n completed receives were posted again (each
 * becomes a credit owed to the peer). Returns 0 or -EINVAL (n > held). */
int rrpc__rx_window_on_repost(struct rrpc__rx_window *rx, uint32_t n);

/* rrpc__rx_window_on_release - the consumer cursor moved by n bytes (see
 * rx_reclaim.h). Returns 0 or -EINVAL (beyond prod). */
int rrpc__rx_window_on_release(struct rrpc__rx_window *rx, uint64_t n);

/* rrpc__rx_window_ack_due - whether to send an ACK now (piggybacked if a
 * message is going anyway, else a pure ACK): owed credits >= max(2,
 * depth / 4), or consumed-but-unacknowledged bytes >= max(1, ring / 4), or
 * peer_requested (the last data message from the peer had bit 31; the
 * endpoint clears its flag once it sent an ACK) and anything is owed. The
 * floor of 2 credits keeps two peers from answering each other's pure ACKs
 * forever (each pure ACK makes its receiver owe exactly 1). */
int rrpc__rx_window_ack_due(const struct rrpc__rx_window *rx,
                            int peer_requested);

/* rrpc__rx_window_owes - 1 if any credit or consumed byte is unreported. */
int rrpc__rx_window_owes(const struct rrpc__rx_window *rx);

/* rrpc__rx_window_owes_credits - 1 if a reposted receive is unreported, i.e.
 * the next take_ack returns at least one credit. */
int rrpc__rx_window_owes_credits(const struct rrpc__rx_window *rx);

/* rrpc__rx_window_take_ack - build the immediate for the next outgoing
 * message: returns at most 127 credits and 16 MiB-1 bytes of what is owed,
 * sets bit 31 if ack_req, and records them as reported. An immediate with
 * nothing in it is valid (the first segment of a wrapped write). */
uint32_t rrpc__rx_window_take_ack(struct rrpc__rx_window *rx, int ack_req);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_WINDOW_H */
