/* elastic_dp.c - the RDMA data path over granted pieces instead of a ring
 * (docs/elastic-rings.md section 8): the pure protocol is wire/pieces.h and
 * wire/grant.h; this file turns its answers into work requests, piece
 * memory (pieces_mem.h) and deliveries, and feeds it what arrives.
 *
 * send: the write plan covers the first writable pieces of the peer, one
 *   WRITE_WITH_IMM per segment (never across a piece), the elastic
 *   immediate naming the piece; the last segment carries credits and the
 *   returns of pieces the peer filled and we released.
 * receive: the immediate's piece must be the one the peer writes next;
 *   the bytes go up as slices of the piece (zero-copy) or copied and
 *   released at once. A piece the application holds is retired and
 *   replaced instead of stalling the stream.
 * control: GRANT/RETIRE (we as receiver) and WANT/HANDBACK (we as sender)
 *   are 44-byte SEND_WITH_IMM messages, credit-accounted as pure ACKs.
 *
 * Locking: as datapath.c (endpoint.h): the pieces state is under dp.mu. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/imm/pieces_mem.h"

enum {
  PIECE_MIN = 4096,
  PIECE_MAX = 256 << 10,
  PUMP_MAX = 8, /* control messages per pump call: bounded work under mu */
  /* Writes at least this large go up zero-copy (or --rdma_zerocopy_min_size
   * if smaller): where a slice (two small allocations and a locked release)
   * costs about what copying the bytes would, and the smallest piece. */
  ZC_MIN = 4096,
  /* Pieces that slices may pin at once: the receiver's table holds granted
   * and retired-but-held pieces (RRPC_PIECES_SLOTS), and at most
   * RRPC_PIECES_MAX are granted, so slices that pin no more than the rest
   * leave a slot for every grant. Without it, small pieces (a ring that
   * grows from its idle piece, a small --rdma_ring_size with a large
   * --rdma_retired_max_size) held by the application could fill the table
   * within the byte budget below: no grant, and the stream waited for the
   * application (counter piece_table_full). */
  ZC_PIECES_MAX = RRPC_PIECES_SLOTS - RRPC_PIECES_MAX,
};

static void on_piece_slice_released(void *data, void *arg);

int rrpc__edp_is_piece_slice(const rrpc_block *b) { return b->deleter == on_piece_slice_released; }

int rrpc__edp_init(rrpc__rdma_ep *ep) {
  struct rrpc__ep_el *el = &ep->dp.el;
  uint64_t cap = ep->opts->ring_size;
  struct rrpc__prx_cfg cfg = {.ring_max = cap,
                              .retired_max = cap,
                              .piece_min = PIECE_MIN,
                              .piece_max = cap < PIECE_MAX ? (uint32_t)cap : PIECE_MAX};
  int rc = rrpc__prx_init(&el->rx, &cfg);
  if (rc != 0) return rc;
  rrpc__ptx_init(&el->tx, rrpc__clc_ring_size(ep->peer.ring_code));
  memset(&el->seq, 0, sizeof el->seq);
  /* The windows keep only their credit rules here (wire/window.h). */
  el->rx.cfg.retired_max = ep->opts->retired_max_size;
  uint32_t depth = 1u << ep->peer.rq_depth_log2;
  if (depth > 4096) depth = 4096; /* RDMA_QUEUE_MAX, as qp_connect */
  rc = rrpc__tx_window_init(&ep->dp.tx, 1, depth, 0);
  if (rc == 0) rc = rrpc__rx_window_init(&ep->dp.rx, 1, ep->vb.rq_size);
  el->last_tx_us = el->last_rx_us = rrpc__now_us();
  return rc;
}

/* ---- piece memory ------------------------------------------------------------ */

/* Piece id left the pieces layer (freed): its window goes at once, its
 * memory back to the cache. Under mu. */
static void free_piece_locked(rrpc__rdma_ep *ep, uint16_t id) {
  if (id == RRPC_PIECE_ID_NONE || id > RRPC_PIECES_SLOTS) return;
  struct rrpc__piece *p = ep->dp.el.mem[id - 1];
  ep->dp.el.mem[id - 1] = NULL;
  if (p == NULL) return;
  rrpc__piece_unbind(p);
  rrpc__piece_put(p);
}

void rrpc__edp_unbind_all(rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  for (int i = 0; i < RRPC_PIECES_SLOTS; i++)
    if (ep->dp.el.mem[i] != NULL) rrpc__piece_unbind(ep->dp.el.mem[i]);
  rrpc__ep_unlock(ep);
}

void rrpc__edp_free_all(rrpc__rdma_ep *ep) {
  for (int i = 0; i < RRPC_PIECES_SLOTS; i++) {
    struct rrpc__piece *p = ep->dp.el.mem[i];
    ep->dp.el.mem[i] = NULL;
    if (p == NULL) continue;
    rrpc__piece_unbind(p);
    rrpc__piece_put(p);
  }
}

/* ---- control messages --------------------------------------------------------- */

/* Whether one control message (and a window bind before it) may go now:
 * the pure-ACK credit rule of wire/window.h, and room in the send queue. */
static int can_post_ctl(const rrpc__rdma_ep *ep) {
  if (ep->state != EP_UP || ep->dp.qp_dead || ep->dp.closed_sent || ep->vb.qp == NULL) return 0;
  if (rrpc__dp_sq_free(ep) < 3) return 0;
  return rrpc__tx_window_can_ack(&ep->dp.tx, rrpc__rx_window_owes_credits(&ep->dp.rx));
}

uint32_t rrpc__edp_ack_imm_locked(rrpc__rdma_ep *ep) {
  uint32_t imm = rrpc__rx_window_take_ack(&ep->dp.rx, 0) & RRPC_IMM_CREDITS_MASK;
  return imm | (uint32_t)rrpc__prx_take_returns(&ep->dp.el.rx) << RRPC_EIMM_RETURNS_SHIFT;
}

int rrpc__edp_ack_due_locked(const rrpc__rdma_ep *ep) { return rrpc__prx_returns_due(&ep->dp.el.rx); }

/* Post m (its body already applied to our side) with the next sequence
 * number and the peer's token. Under mu, can_post_ctl checked. */
static int post_ctl_locked(rrpc__rdma_ep *ep, struct rrpc__grant_msg *m) {
  uint8_t out[RRPC_GRANT_MSG_LEN];
  m->seq = rrpc__ctl_seq_next(&ep->dp.el.seq);
  m->token = ep->peer.token;
  int rc = rrpc__grant_encode(m, out);
  struct rrpc__tx_plan plan;
  if (rc == 0) rc = rrpc__tx_window_plan_ack(&ep->dp.tx, rrpc__rx_window_owes_credits(&ep->dp.rx), &plan);
  if (rc != 0) {
    /* Our own state gave an unencodable message: a bug, not the peer. */
    RRPC_LOG(ERROR, "rdma qpn=%u: elastic control message 0x%x not sent: %s", ep->vb.qp->qp_num, m->type,
             rrpc_strerror(rc));
    ep->dp.qp_dead = 1;
    return rc;
  }
  /* The body first, then the returns of its own immediate (section 4). */
  rc = rrpc__dp_post_send44(ep, out, rrpc__edp_ack_imm_locked(ep), 1, 0);
  if (rc != 0) return rc;
  rrpc__tx_window_commit(&ep->dp.tx, &plan);
  ep->dp.peer_asked = 0;
  rrpc__rdma_count(RRPC_RDMA_CNT_CDC_SENT, 1);
  return 0;
}

static void piece_ready_task(void *arg) {
  rrpc__rdma_ep *ep = arg;
  rrpc__ep_lock(ep);
  ep->dp.el.waiting = 0;
  rrpc__edp_pump_locked(ep);
  rrpc__ep_unlock(ep);
  rrpc__ep_unref(ep);
}

static void piece_ready_undo(void *arg) {
  rrpc__rdma_ep *ep = arg;
  rrpc__ep_lock(ep);
  ep->dp.el.waiting = 0;
  rrpc__ep_unlock(ep);
  rrpc__ep_unref(ep);
}

/* The cache had no piece: be woken when it refilled (one wake-up at a
 * time; the reference keeps the endpoint for it). Under mu. */
static void wait_for_piece_locked(rrpc__rdma_ep *ep) {
  if (ep->dp.el.waiting) return;
  ep->dp.el.waiting = 1;
  atomic_fetch_add(&ep->refs, 1);
  if (rrpc__piece_wait(ep->loop, piece_ready_task, piece_ready_undo, ep) != 0) {
    ep->dp.el.waiting = 0;
    atomic_fetch_sub(&ep->refs, 1); /* not the last: the caller's is held */
  }
}

/* Whether a window may be bound now: only behind no WR the device may
 * still retry. Soft-RoCE (rxe, kernel 6.1) re-runs every bind still in the
 * send queue behind an unacknowledged WR when it retries that WR (a
 * retransmission timeout, an RNR NAK), and a type-2 window bound once
 * refuses a second bind: IBV_WC_MW_BIND_ERR, the QP fails and the calls on
 * it (docs/elastic-rings.md, "A bind only at a drained send queue"). So a grant waits
 * until every WR posted has completed: meanwhile every WR is signaled (so
 * the drain is seen; a zero-length mark covers an unsignaled tail) and new
 * data waits (so the queue does drain); each completion pumps again. `was`:
 * the last pump waited too (one wait counted once). Under mu. */
static int bind_ready_locked(rrpc__rdma_ep *ep, int was) {
  if (!ep->dev->mw_type2 || ep->dp.wr_done == ep->dp.wr_seq) return 1;
  if (!was) rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_BIND_WAITS, 1);
  ep->dp.el.bind_wait = 1;
  /* -EAGAIN (queue full) is fine: want_signal signaled its last WR. */
  if (ep->dp.unsignaled > 0) (void)rrpc__dp_post_drain_mark(ep);
  return 0;
}

/* GRANT: a cleared, registered piece from the cache, its window bound to
 * our QP before the GRANT that names its key (same send queue, in order).
 * 0, or -EAGAIN when the cache is empty or the bind must wait. Under mu. */
static int grant_locked(rrpc__rdma_ep *ep, uint32_t len, uint8_t flags, int was_waiting) {
  struct rrpc__ep_el *el = &ep->dp.el;
  struct rrpc__piece *p;
  if (!bind_ready_locked(ep, was_waiting)) return -EAGAIN;
  if (rrpc__piece_take(ep->dev, len, &p) != 0) {
    rrpc__prx_grant_failed(&el->rx);
    rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_GRANT_REFUSED, 1);
    wait_for_piece_locked(ep);
    return -EAGAIN;
  }
  struct rrpc__grant_msg m;
  if (rrpc__prx_grant(&el->rx, len, flags, &m) != 0) {
    rrpc__piece_put(p);
    return -EINVAL;
  }
  uint16_t id = m.u.grant.id;
  el->mem[id - 1] = p;
  int rc = rrpc__piece_bind(p, ep->vb.qp, ep->dp.wr_seq + 1);
  if (rc < 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: cannot bind the window of a %u-byte piece: %s; failing the connection",
             ep->vb.qp->qp_num, len, rrpc_strerror(rc));
    ep->dp.qp_dead = 1;
    return -RRPC_ERDMA;
  }
  if (rc == 0) {
    ep->dp.wr_seq++; /* the bind is a signaled WR of its own */
    el->bind_wr = ep->dp.wr_seq;
    el->bind_id = id;
    el->bind_len = len;
  }
  m.u.grant.rkey = p->rkey;
  m.u.grant.addr = (uint64_t)(uintptr_t)p->buf;
  rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_GRANTS, 1);
  return post_ctl_locked(ep, &m);
}

void rrpc__edp_pump_locked(rrpc__rdma_ep *ep) {
  if (!ep->elastic) return;
  struct rrpc__ep_el *el = &ep->dp.el;
  /* Set again below while a grant still waits to bind (so it never
   * outlives the grant it was for: a return may have met the need). */
  int was_waiting = el->bind_wait;
  el->bind_wait = 0;
  for (int i = 0; i < PUMP_MAX && can_post_ctl(ep); i++) {
    struct rrpc__prx_action a;
    uint64_t refused = el->rx.n.retire_refused, full = el->rx.n.table_full;
    int got = rrpc__prx_poll(&el->rx, &a);
    if (el->rx.n.retire_refused != refused) rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_RETIRE_REFUSED, 1);
    if (el->rx.n.table_full != full) rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_TABLE_FULL, 1);
    if (!got) return;
    if (a.act == RRPC_PRX_ACT_RETIRE) {
      uint16_t id = a.m.u.retire.id;
      rrpc__rdma_count(a.m.u.retire.reason == RRPC_RETIRE_HELD ? RRPC_RDMA_CNT_PIECE_RETIRES_HELD
                                                              : RRPC_RDMA_CNT_PIECE_RETIRES_SHRINK,
                       1);
      /* Nothing written through its key may land any more: the window goes
       * before the peer even hears of it. */
      if (a.free_id != RRPC_PIECE_ID_NONE) free_piece_locked(ep, a.free_id);
      else if (el->mem[id - 1] != NULL) rrpc__piece_unbind(el->mem[id - 1]);
      if (post_ctl_locked(ep, &a.m) != 0) return;
    } else if (grant_locked(ep, a.grant_len, a.grant_flags, was_waiting) != 0) {
      return;
    }
  }
}

/* We are the sender and short of space: ask once (WANT). Under mu. */
static void maybe_want_locked(rrpc__rdma_ep *ep, uint64_t pending) {
  struct rrpc__grant_msg m;
  /* Short of space is rare; whether a message could go, asked second. */
  if (!rrpc__ptx_want_due(&ep->dp.el.tx, pending) || !can_post_ctl(ep)) return;
  if (!rrpc__ptx_want(&ep->dp.el.tx, pending, &m)) return;
  rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_WANTS, 1);
  (void)post_ctl_locked(ep, &m);
}

/* ---- idle: shrink to one idle piece per direction ----------------------------------- */

static void idle_tick(void *arg);

/* Under mu. 0 when armed (the endpoint's reference goes with the timer). */
static int idle_arm_locked(rrpc__rdma_ep *ep, uint64_t at) {
  return rrpc__loop_timer_add(ep->loop, at, idle_tick, ep, &ep->dp.el.timer);
}

/* No data written for the idle period: hand back every writable piece
 * but an unwritten idle one. None received: stop returning, so released
 * full pieces are retired (shrink). Under mu. */
static void idle_shrink_locked(rrpc__rdma_ep *ep, uint64_t now, uint64_t idle_us) {
  struct rrpc__ep_el *el = &ep->dp.el;
  if (now - el->last_tx_us >= idle_us) {
    struct rrpc__grant_msg m;
    while (can_post_ctl(ep) && rrpc__ptx_idle_handback(&el->tx, PIECE_MIN, &m))
      if (post_ctl_locked(ep, &m) != 0) return;
  }
  if (now - el->last_rx_us >= idle_us) rrpc__prx_set_idle(&el->rx, 1);
  rrpc__edp_pump_locked(ep);
}

static void idle_tick(void *arg) {
  rrpc__rdma_ep *ep = arg;
  uint64_t idle_us = (uint64_t)ep->opts->ring_idle_ms * 1000, now = rrpc__now_us();
  int rearmed = 0;
  rrpc__ep_lock(ep);
  ep->dp.el.timer = 0;
  if (ep->state == EP_UP && !ep->dp.qp_dead && ep->vb.qp != NULL) {
    idle_shrink_locked(ep, now, idle_us);
    rearmed = idle_arm_locked(ep, now + idle_us) == 0;
  }
  rrpc__ep_unlock(ep);
  if (!rearmed) rrpc__ep_unref(ep);
}

void rrpc__edp_idle_start(rrpc__rdma_ep *ep) {
  atomic_fetch_add(&ep->refs, 1);
  rrpc__ep_lock(ep);
  int rc = idle_arm_locked(ep, rrpc__now_us() + (uint64_t)ep->opts->ring_idle_ms * 1000);
  rrpc__ep_unlock(ep);
  if (rc != 0) rrpc__ep_unref(ep);
}

void rrpc__edp_idle_stop(rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  rrpc__timer_id id = ep->dp.el.timer;
  ep->dp.el.timer = 0;
  rrpc__ep_unlock(ep);
  /* A tick running now sees qp_dead (set before this) and lets go itself. */
  if (id != 0 && rrpc__loop_timer_cancel(ep->loop, id) == 0) rrpc__ep_unref(ep);
}

/* ---- sending data ---------------------------------------------------------------- */

static int write_pieces(rrpc__rdma_ep *ep, rrpc_iobuf *data, const struct rrpc__ptx_plan *plan, rrpc_iobuf *drop) {
  struct rrpc__ep_el *el = &ep->dp.el;
  int end_of_batch = plan->len == rrpc_iobuf_length(data);
  uint64_t space_after = rrpc__ptx_space(&el->tx) - plan->len;
  /* Nearly out of credits or of the peer's space: ask for the ACK (and the
   * returns) now, not when the peer next has something to say. */
  int ack_req = rrpc__tx_window_data_credits(&ep->dp.tx) - plan->nseg <= 1 || space_after * 8 < el->tx.granted;
  int solicited = end_of_batch || ack_req || ep->dp.peer_asked;
  for (uint32_t i = 0; i < plan->nseg; i++) {
    const struct rrpc__ptx_seg *sg = &plan->seg[i];
    int last = i + 1 == plan->nseg;
    rrpc_iobuf seg;
    rrpc__iobuf_init(&seg);
    long cut = rrpc_iobuf_cut(data, sg->len, &seg);
    int rc = cut == (long)sg->len ? 0 : -ENOMEM;
    uint32_t imm = sg->piece;
    if (last) imm |= rrpc__edp_ack_imm_locked(ep) | (ack_req ? 0x80000000u : 0u);
    if (rc == 0) rc = rrpc__dp_post_write(ep, &seg, sg->addr, sg->rkey, imm, last && solicited, drop);
    if (rc != 0) (void)rrpc_iobuf_move(drop, &seg);
    rrpc__iobuf_destroy(&seg);
    if (rc != 0) return rc;
  }
  if (rrpc__ptx_commit(&el->tx, plan) != 0 || rrpc__tx_window_commit_msgs(&ep->dp.tx, plan->nseg) != 0) {
    RRPC_LOG(ERROR, "rdma qpn=%u: an elastic write plan (%u segments) did not fit its own window: failing the "
             "connection", ep->vb.qp->qp_num, (unsigned)plan->nseg);
    ep->dp.qp_dead = 1; /* our own plan did not fit: a bug; stop this connection */
    return -RRPC_ERDMA;
  }
  ep->dp.peer_asked = 0;
  /* The idle check's stamps need seconds, not microseconds: the loop
   * round's clock serves (a clock read is a system call in the VM, ~0.7 us,
   * and this was one per message sent and one per message received). */
  el->last_tx_us = rrpc__round_now_us();
  return 0;
}

int rrpc__edp_write_locked(rrpc__rdma_ep *ep, rrpc_iobuf *data, uint32_t max_sge, rrpc_iobuf *drop) {
  int rc = 0;
  while (rc == 0 && rrpc_iobuf_length(data) > 0) {
    if (ep->dp.qp_dead) return -RRPC_ERDMA;
    if (ep->dp.closed_sent) return -RRPC_ECLOSE;
    /* Our grants and retires go ahead of the returns this write carries. */
    rrpc__edp_pump_locked(ep);
    if (ep->dp.el.bind_wait) { /* a grant waits for the queue to drain: so does data */
      ep->dp.write_blocked = 1;
      return -EAGAIN;
    }
    uint32_t sqf = rrpc__dp_sq_free(ep);
    uint32_t credits = rrpc__tx_window_data_credits(&ep->dp.tx), segs = credits;
    if (sqf < 3) segs = 0; /* one WR kept for a control message or CDC */
    else if (segs > sqf - 2) segs = sqf - 2;
    uint64_t total = rrpc_iobuf_length(data);
    struct rrpc__ptx_plan plan;
    int prc = segs > 0 ? rrpc__ptx_plan_writes(&ep->dp.el.tx, rrpc__dp_bytes_in_pieces(data, max_sge), segs, &plan)
                       : -EAGAIN;
    if (prc != 0) {
      maybe_want_locked(ep, total);
      ep->dp.write_blocked = 1;
      /* Credits in hand but no send-queue slots: the queue is the limit. */
      rrpc__rdma_count(segs == 0 && credits > 0 ? RRPC_RDMA_CNT_BLOCKED_SQ : RRPC_RDMA_CNT_BLOCKED, 1);
      return -EAGAIN;
    }
    rc = write_pieces(ep, data, &plan, drop);
    /* Asked after every plan, also one that wrote: a large message asks
     * while its first bytes go into the idle piece. */
    if (rc == 0) maybe_want_locked(ep, rrpc_iobuf_length(data));
  }
  return rc;
}

/* ---- receiving ------------------------------------------------------------------- */

struct piece_slice {
  struct rrpc__ep_deferred deferred; /* first: a deferred release finds the slice */
  rrpc__rdma_ep *ep;
  uint16_t id;
  uint32_t len;
};

/* A zero-copy slice of piece id (len bytes long) goes out / comes back:
 * the first one pins the whole piece. Under mu. */
static void zc_take_locked(rrpc__rdma_ep *ep, uint16_t id, uint32_t piece_len, uint32_t n) {
  struct rrpc__ep_el *el = &ep->dp.el;
  ep->dp.zc_outstanding += n;
  if (el->zc_slices[id - 1]++ == 0) {
    el->zc_pin_len[id - 1] = piece_len;
    el->zc_pinned += piece_len;
    el->zc_npinned++;
  }
}

static void zc_give_locked(rrpc__rdma_ep *ep, uint16_t id, uint32_t n) {
  struct rrpc__ep_el *el = &ep->dp.el;
  ep->dp.zc_outstanding -= n;
  if (--el->zc_slices[id - 1] == 0) {
    el->zc_pinned -= el->zc_pin_len[id - 1];
    el->zc_npinned--;
  }
}

/* n bytes of piece id are released. Under mu. */
static void release_locked(rrpc__rdma_ep *ep, uint16_t id, uint32_t n) {
  uint16_t free_id = RRPC_PIECE_ID_NONE;
  if (rrpc__prx_on_release(&ep->dp.el.rx, id, n, &free_id) != 0) {
    RRPC_LOG(ERROR, "rdma: piece %u release of %u bytes refused", id, n);
    return;
  }
  free_piece_locked(ep, free_id);
}

static void piece_slice_release(struct rrpc__ep_deferred *d) {
  struct piece_slice *sl = (struct piece_slice *)d;
  rrpc__rdma_ep *ep = sl->ep;
  rrpc__ep_lock(ep);
  zc_give_locked(ep, sl->id, sl->len);
  release_locked(ep, sl->id, sl->len);
  rrpc__dp_maybe_ack_locked(ep);
  rrpc__ep_unlock(ep);
  free(sl);
  rrpc__ep_unref(ep);
}

/* Deleter of piece slices, any thread: as the ring's (datapath.c), a
 * release under some endpoint's mu is deferred until this thread holds
 * none. */
static void on_piece_slice_released(void *data, void *arg) {
  (void)data;
  struct piece_slice *sl = arg;
  sl->deferred.fn = piece_slice_release;
  if (rrpc__ep_any_locked_here()) rrpc__ep_defer(&sl->deferred);
  else piece_slice_release(&sl->deferred);
}

/* Append n bytes at off of piece id to dst: as a slice of the piece
 * (zero_copy: the caller took the slice's endpoint reference) or copied
 * and released at once. */
static int deliver(rrpc__rdma_ep *ep, struct rrpc__piece *p, uint16_t id, uint32_t off, uint32_t n, int zero_copy,
                   rrpc_iobuf *dst) {
  char *at = p->buf + off;
  if (zero_copy) {
    struct piece_slice *sl = malloc(sizeof *sl);
    rrpc_block *b = NULL;
    int rc = sl ? rrpc__block_new_user(at, n, &p->region, on_piece_slice_released, sl, &b) : -ENOMEM;
    if (rc == 0) {
      *sl = (struct piece_slice){.ep = ep, .id = id, .len = n};
      rc = rrpc__iobuf_append_block(dst, b, 0, n);
      rrpc__block_unref(b); /* on failure this runs the deleter: released */
      return rc;
    }
    free(sl);
    rrpc__ep_lock(ep);
    zc_give_locked(ep, id, n);
    rrpc__ep_unlock(ep);
    rrpc__ep_unref(ep);
  }
  int rc = rrpc__dp_copy_in(ep, dst, at, n);
  rrpc__ep_lock(ep);
  release_locked(ep, id, n);
  rrpc__ep_unlock(ep);
  return rc;
}

/* Zero-copy receive is the default in elastic mode (a held piece is
 * retired, not a stall): a write of at least ZC_MIN bytes, and every write
 * of a message that spans pieces (one that fills its piece, or starts the
 * next one after a fill: the head and tail of a large message may be
 * small). Small messages inside a piece are copied: cheaper than a slice.
 * All within a budget: the pieces the slices pin (whole pieces: a small
 * slice keeps its piece from being returned) stay within half the retired
 * cap and ZC_PIECES_MAX pieces, so every held piece can be retired and
 * replaced, and an application
 * (or a message larger than the cap, waiting whole in the read buffer)
 * that keeps every slice never stops the stream - past it, bytes are
 * copied and released at once. Under mu, after rrpc__prx_on_write. */
static int zero_copy_wanted(const rrpc__rdma_ep *ep, uint16_t id, uint32_t n, uint32_t off, uint32_t piece_len,
                            int after_fill) {
  const struct rrpc__ep_el *el = &ep->dp.el;
  uint32_t min = ep->opts->zerocopy_min_size < ZC_MIN ? (uint32_t)ep->opts->zerocopy_min_size : ZC_MIN;
  int spans = off + n == piece_len || (off == 0 && after_fill);
  int pinned = el->zc_slices[id - 1] > 0; /* already pinned: free */
  uint64_t pin = pinned ? 0 : piece_len;
  return (n >= min || spans) && el->zc_pinned + pin <= el->rx.cfg.retired_max / 2 &&
         (pinned || el->zc_npinned < ZC_PIECES_MAX);
}

int rrpc__edp_on_data(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int *got) {
  uint32_t n = wc->byte_len;
  uint32_t imm = ntohl(wc->imm_data);
  struct rrpc__eimm e = rrpc__eimm_unpack(imm);
  /* Back-pressure (reading paused): bytes wait as slices of their pieces,
   * unreleased; a piece held long enough is retired and replaced, within
   * --rdma_retired_max_size, then the peer runs out of space. */
  int held = n > 0 && (rrpc_iobuf_length(&ep->el_held) > 0 || rrpc__socket_read_paused(ep->s));
  struct rrpc__ep_el *el = &ep->dp.el;
  uint32_t off = 0;
  struct rrpc__piece *p = NULL;
  rrpc__ep_lock(ep);
  int rc = rrpc__rx_window_on_recv(&ep->dp.rx, 0);
  if (rc == 0) rc = rrpc__tx_window_on_ack(&ep->dp.tx, imm & RRPC_IMM_CREDITS_MASK);
  if (rc == 0) rc = rrpc__prx_on_write(&el->rx, e.piece, n, &off);
  if (rc == 0 && n > 0 && (p = el->mem[e.piece - 1]) == NULL) rc = -RRPC_EPARSE;
  if (rc == 0) rc = rrpc__ptx_on_returns(&el->tx, e.returns);
  if (rc == 0 && e.ack_req) ep->dp.peer_asked = 1;
  int zc = rc == 0 && n > 0 && (held || zero_copy_wanted(ep, e.piece, n, off, p->len, el->rx_after_fill));
  if (rc == 0 && n > 0) el->rx_after_fill = off + n == p->len;
  if (zc) {
    atomic_fetch_add(&ep->refs, 1); /* the slice's reference */
    zc_take_locked(ep, e.piece, p->len, n);
  }
  if (n > 0) el->last_rx_us = rrpc__round_now_us();
  rrpc__ep_unlock(ep);
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: the peer broke the elastic ring protocol (write of %u bytes, piece %u)",
             ep->vb.qp->qp_num, n, e.piece);
    return rc;
  }
  ep->got_peer_data = 1;
  rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_RECEIVED, n);
  if (n == 0) return 0;
  if (!held) *got = 1;
  return deliver(ep, p, e.piece, off, n, zc, held ? &ep->el_held : rrpc__socket_rbuf(ep->s));
}

int rrpc__edp_resume_read(rrpc__rdma_ep *ep) {
  if (rrpc_iobuf_length(&ep->el_held) == 0) return 0;
  return rrpc_iobuf_move(rrpc__socket_rbuf(ep->s), &ep->el_held);
}

/* A control message for us: GRANT/RETIRE as the sender, WANT/HANDBACK as
 * the receiver. Under mu. *why names the check a bad one failed (for the
 * one log line of the failed connection). */
static int on_ctl_locked(rrpc__rdma_ep *ep, const struct ibv_wc *wc, const uint8_t *slot, const char **why) {
  struct rrpc__ep_el *el = &ep->dp.el;
  struct rrpc__grant_msg m;
  int rc = rrpc__grant_decode(slot, wc->byte_len, &m);
  *why = "undecodable (length, type or a reserved field)";
  if (rc == 0 && m.token != ep->my_token) {
    rc = -RRPC_EPARSE;
    *why = "wrong token";
  } else if (rc == 0 && (rc = rrpc__ctl_seq_check(&el->seq, m.seq)) != 0) {
    *why = "sequence number not the next";
  }
  if (rc != 0) return rc;
  if (m.type == RRPC_GRANT_T_GRANT || m.type == RRPC_GRANT_T_RETIRE) {
    *why = m.type == RRPC_GRANT_T_GRANT ? "GRANT of a live id, past the cap or past the piece limit"
                                        : "RETIRE of a piece that is not full (unknown or being written)";
    return rrpc__ptx_on_ctl(&el->tx, &m);
  }
  *why = m.type == RRPC_GRANT_T_WANT ? "WANT above the cap" : "HANDBACK of a piece not writable or a wrong byte count";
  uint16_t free_id = RRPC_PIECE_ID_NONE;
  rc = rrpc__prx_on_ctl(&el->rx, &m, &free_id);
  if (rc == 0) free_piece_locked(ep, free_id);
  if (rc == 0 && m.type == RRPC_GRANT_T_HANDBACK) rrpc__rdma_count(RRPC_RDMA_CNT_PIECE_HANDBACKS, 1);
  return rc;
}

int rrpc__edp_on_send(rrpc__rdma_ep *ep, const struct ibv_wc *wc, const uint8_t *slot, int *is_ctl) {
  uint32_t imm = ntohl(wc->imm_data);
  struct rrpc__eimm e = rrpc__eimm_unpack(imm);
  const char *why = "more messages than receive credits";
  *is_ctl = rrpc__grant_is_ctl(slot, wc->byte_len);
  rrpc__ep_lock(ep);
  int rc = rrpc__rx_window_on_recv(&ep->dp.rx, 0);
  if (rc == 0 && (rc = rrpc__tx_window_on_ack(&ep->dp.tx, imm & RRPC_IMM_CREDITS_MASK)) != 0)
    why = "more credits returned than we used";
  if (rc == 0 && e.piece != RRPC_PIECE_ID_NONE) {
    rc = -RRPC_EPARSE; /* SENDs name no piece */
    why = "a SEND naming a piece";
  }
  if (rc == 0 && *is_ctl) rc = on_ctl_locked(ep, wc, slot, &why);
  /* The body first, then the returns of its immediate (section 4). */
  if (rc == 0 && (rc = rrpc__ptx_on_returns(&ep->dp.el.tx, e.returns)) != 0)
    why = "returns of pieces that are not full";
  rrpc__ep_unlock(ep);
  if (rc != 0)
    RRPC_LOG(WARNING, "rdma qpn=%u: bad elastic %s (type 0x%02x): %s: failing the connection", ep->vb.qp->qp_num,
             *is_ctl ? "control message" : "CDC immediate", wc->byte_len > 0 ? slot[0] : 0, why);
  else if (*is_ctl)
    ep->got_peer_data = 1;
  return rc;
}
