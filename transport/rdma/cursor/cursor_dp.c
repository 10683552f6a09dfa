/* cursor_dp.c - the cursor dialect's data path: SMC-R as the Linux kernel
 * speaks it (shared/specs/smc-r-wire.md section 3). Data goes by plain
 * RDMA WRITE (no immediate) into the peer's RMB ring at the producer
 * cursor, then one 44-byte CDC SEND (no immediate) carries the cursors;
 * the receiver reads the ring up to the producer cursor it was told and
 * answers with consumer-cursor updates by CDC. The rules (what a CDC may
 * claim, when an update is due) are wire/cursor_window.h's; this file
 * turns them into work requests.
 *
 * Everything received is copied out of the ring at once (or held there
 * while the socket's reading is paused, so the peer's window closes):
 * no zero-copy ring slices in this dialect. Sends follow the imm dialect's
 * rules (registered blocks go as they are, others are bounced; a send of
 * another ring's slice is signaled at once).
 *
 * Locking as in endpoint.h: the window and the send queue under dp.mu,
 * receives on the loop thread. */
#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/endpoint.h"
#include "transport/smc/cdc.h"
#include "transport/smc/clc.h"

/* Room kept in the send queue for a write: two WRITEs (a wrapped ring),
 * their CDC and one more CDC (a consumer update or the close). */
enum { CUR_SQ_PER_WRITE = 4 };

/* ---- CDCs (under mu) ------------------------------------------------------------- */

static int send_cdc_locked(rrpc__rdma_ep *ep, uint8_t conn_flags) {
  if (ep->dp.qp_dead || ep->vb.qp == NULL) return -RRPC_ERDMA;
  struct rrpc__cur_window saved = ep->dp.cur;
  struct rrpc__cdc_msg m;
  rrpc__cur_make_cdc(&ep->dp.cur, ep->peer.token, conn_flags, &m);
  uint8_t buf[RRPC_CDC_LEN];
  rrpc__cdc_encode(&m, buf);
  /* A close is signaled: its completion says it left. So is a CDC that
   * leaves less room than a write needs: writers then wait for send-queue
   * room, which only a completion after it gives back (the WRITEs before
   * it are unsignaled). */
  int rc = rrpc__dp_post_send44_plain(ep, buf, conn_flags != 0 || rrpc__dp_sq_free(ep) <= CUR_SQ_PER_WRITE);
  if (rc != 0) {
    ep->dp.cur = saved; /* not sent: the same sequence number next time */
    return rc;
  }
  ep->dp.cur_cdc_due = 0;
  if (ep->dp.cur.tx_flags & RRPC_CDC_PF_WRITE_BLOCKED) ep->dp.cur_blocked_sent = 1;
  rrpc__rdma_count(RRPC_RDMA_CNT_CDC_SENT, 1);
  return 0;
}

/* What is owed to the peer now: the CDC for data written, "write blocked"
 * once per stall, a consumer update by the kernel's rule (cursor_window.h).
 * -EAGAIN (no send-queue room) is retried after the next send completions. */
static void pump_locked(rrpc__rdma_ep *ep) {
  if (ep->state != EP_UP || ep->dp.qp_dead || ep->dp.closed_sent) return;
  int blocked_owed = (ep->dp.cur.tx_flags & RRPC_CDC_PF_WRITE_BLOCKED) && !ep->dp.cur_blocked_sent;
  if (ep->dp.cur_cdc_due || blocked_owed || rrpc__cur_update_due(&ep->dp.cur)) (void)send_cdc_locked(ep, 0);
}

static void send_close_locked(rrpc__rdma_ep *ep) {
  if (ep->dp.close_flags == 0 || ep->dp.close_wr != 0 || ep->dp.qp_dead) return;
  if (send_cdc_locked(ep, ep->dp.close_flags) == 0) ep->dp.close_wr = ep->dp.wr_seq;
}

/* ---- sending ------------------------------------------------------------------- */

/* The peer's RMB element: its ring at the address and key its Accept or
 * Confirm announced, element index 1-based. */
static uint64_t rmbe_base(const rrpc__rdma_ep *ep) {
  return ep->peer.ring_addr + (uint64_t)(ep->peer.rmbe_idx - 1) * ep->dp.cur.tx_ring;
}

/* WRITE n planned bytes from the front of data, one WR per segment. */
static int write_segs(rrpc__rdma_ep *ep, rrpc_iobuf *data, const struct rrpc__cur_seg *seg, int nseg,
                      rrpc_iobuf *drop) {
  for (int i = 0; i < nseg; i++) {
    rrpc_iobuf part;
    rrpc__iobuf_init(&part);
    long cut = rrpc_iobuf_cut(data, seg[i].len, &part);
    int rc = cut == (long)seg[i].len ? 0 : -ENOMEM;
    if (rc == 0) rc = rrpc__dp_post_write_plain(ep, &part, rmbe_base(ep) + seg[i].off, ep->peer.rkey, drop);
    if (rc != 0) (void)rrpc_iobuf_move(drop, &part);
    rrpc__iobuf_destroy(&part);
    if (rc != 0) return rc;
  }
  return 0;
}

static int cursor_write(rrpc__socket *s, rrpc_iobuf *data) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  rrpc_iobuf drop;
  rrpc__iobuf_init(&drop);
  int rc = 0;
  uint32_t max_sge = ep->vb.max_send_sge;
  if (max_sge > 16) max_sge = 16;
  rrpc__ep_lock(ep);
  while (rc == 0 && rrpc_iobuf_length(data) > 0) {
    if (ep->dp.qp_dead) {
      rc = -RRPC_ERDMA;
      break;
    }
    if (ep->dp.closed_sent) { /* the close CDC is the last thing the peer may get */
      rc = -RRPC_ECLOSE;
      break;
    }
    if (rrpc__dp_sq_free(ep) < CUR_SQ_PER_WRITE) {
      ep->dp.write_blocked = 1;
      rrpc__rdma_count(RRPC_RDMA_CNT_BLOCKED_SQ, 1);
      rc = -EAGAIN;
      break;
    }
    struct rrpc__cur_seg seg[2];
    int nseg = 0;
    uint32_t n = rrpc__cur_tx_plan(&ep->dp.cur, rrpc__dp_bytes_in_pieces(data, max_sge), seg, &nseg);
    if (n == 0) {
      ep->dp.write_blocked = 1;
      ep->dp.cur.tx_flags |= RRPC_CDC_PF_WRITE_BLOCKED;
      if (ep->dp.cur_blocked_us == 0) ep->dp.cur_blocked_us = rrpc__now_us();
      rrpc__rdma_count(RRPC_RDMA_CNT_BLOCKED, 1);
      rc = -EAGAIN;
      break;
    }
    rc = write_segs(ep, data, seg, nseg, &drop);
    if (rc == 0) {
      rrpc__cur_tx_commit(&ep->dp.cur, n);
      ep->dp.cur_cdc_due = 1;
    }
  }
  if (rc == 0) ep->dp.cur.tx_flags &= (uint8_t)~RRPC_CDC_PF_WRITE_BLOCKED;
  /* One CDC after the writes (RC order: the peer sees the bytes first). */
  if (rc == 0 || rc == -EAGAIN) pump_locked(ep);
  rrpc__ep_unlock(ep);
  rrpc__iobuf_destroy(&drop);
  return rc;
}

/* ---- receiving (loop thread) ---------------------------------------------------------- */

/* Copy n ring bytes at stream offset start into the read buffer (two
 * pieces where they wrap), then free their room. */
static int deliver(rrpc__rdma_ep *ep, uint64_t start, uint32_t n) {
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(ep->s);
  uint32_t ring = ep->vb.ring_size, off = (uint32_t)(start % ring);
  uint32_t first = ring - off < n ? ring - off : n;
  int rc = rrpc__dp_copy_in(ep, rbuf, ep->vb.ring + off, first);
  if (rc == 0 && first < n) rc = rrpc__dp_copy_in(ep, rbuf, ep->vb.ring, n - first);
  rrpc__ep_lock(ep);
  rrpc__cur_rx_consume(&ep->dp.cur, n);
  rrpc__ep_unlock(ep);
  return rc;
}

static int must_hold(const rrpc__rdma_ep *ep) { return ep->held_len > 0 || rrpc__socket_read_paused(ep->s); }

static int on_cdc(rrpc__rdma_ep *ep, const struct ibv_wc *wc) {
  /* Kernel-style CDCs are plain SENDs: an immediate or an invalidation
   * (aimed at our ring's window) is a peer breaking the protocol. */
  if (wc->opcode != IBV_WC_RECV || (wc->wc_flags & (IBV_WC_WITH_IMM | IBV_WC_WITH_INV))) {
    RRPC_LOG(WARNING, "rdma qpn=%u: cursor dialect: not a plain SEND (opcode %d, flags 0x%x): failing the connection",
             ep->vb.qp->qp_num, (int)wc->opcode, (unsigned)wc->wc_flags);
    return -RRPC_EPARSE;
  }
  const uint8_t *slot = (const uint8_t *)ep->vb.slots + wc->wr_id * RRPC_EP_SLOT_SIZE;
  struct rrpc__cdc_msg m;
  if (rrpc__cdc_decode(slot, wc->byte_len, &m) != 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: cursor dialect: a malformed CDC (%u bytes): failing the connection",
             ep->vb.qp->qp_num, wc->byte_len);
    return -RRPC_EPARSE;
  }
  struct rrpc__cur_event ev;
  enum rrpc__cur_violation why;
  rrpc__ep_lock(ep);
  int rc = rrpc__cur_on_cdc(&ep->dp.cur, &m, &ev, &why);
  if (rc == 0 && ev.freed > 0) {
    ep->dp.cur_blocked_sent = 0;
    ep->dp.cur_blocked_us = 0;
  }
  uint64_t start = ep->dp.cur.rx_prod - ev.new_bytes;
  rrpc__ep_unlock(ep);
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: cursor dialect: %s (CDC seq %u, prod %u:%u, cons %u:%u): failing the connection",
             ep->vb.qp->qp_num, rrpc__cur_violation_text(why), m.seq, m.prod.wrap, m.prod.count, m.cons.wrap,
             m.cons.count);
    return rc;
  }
  ep->got_peer_data = 1;
  if (ev.new_bytes > 0) {
    rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_RECEIVED, ev.new_bytes);
    if (must_hold(ep)) {
      if (ep->held_len == 0) ep->held_start = start;
      ep->held_len += ev.new_bytes; /* the ring fills in stream order: contiguous */
    } else {
      rc = deliver(ep, start, ev.new_bytes);
      ep->pl.got = 1;
    }
  }
  if (ev.conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL | RRPC_CDC_CS_DONE_WRITING)) ep->pl.peer_closed = 1;
  if (ev.conn_flags & RRPC_CDC_CS_ABNORMAL)
    RRPC_LOG(WARNING, "rdma qpn=%u: the peer closed the connection abnormally (an error on its side)",
             ep->vb.qp->qp_num);
  if (rc == 0 && ep->state == EP_CLIENT_WAIT_READY) rrpc__ep_hs_apply(ep, rrpc__hs_on_first_cdc(ep));
  return rc;
}

/* One CDC received in a slot. */
static int cursor_on_recv(rrpc__rdma_ep *ep, const struct ibv_wc *wc) {
  int rc = on_cdc(ep, wc);
  if (rc == -RRPC_EPARSE) rrpc__rdma_count(RRPC_RDMA_CNT_PROTO_VIOLATION, 1);
  /* The first CDC may have ended the handshake in a fallback: no QP then. */
  if (rc == 0 && ep->vb.qp != NULL) rc = rrpc__dp_repost_slot(ep, wc->wr_id);
  return rc;
}

static void cursor_send_owed_locked(rrpc__rdma_ep *ep, int got) {
  (void)got;
  send_close_locked(ep);
  pump_locked(ep);
}

/* A blocked writer goes on once the peer's ring has room and a write's
 * worth of send queue is free. */
static int cursor_writable_locked(rrpc__rdma_ep *ep) {
  return rrpc__cur_tx_free(&ep->dp.cur) > 0 && rrpc__dp_sq_free(ep) >= CUR_SQ_PER_WRITE;
}

static const struct rrpc__dp_hooks cursor_hooks = {
    .on_recv = cursor_on_recv,
    .send_close_locked = send_close_locked,
    .send_owed_locked = cursor_send_owed_locked,
    .writable_locked = cursor_writable_locked,
};

static void cursor_on_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop) {
  rrpc__dp_on_wc_with(&cursor_hooks, ep, wc, is_send, drop);
}

static void cursor_after(rrpc__rdma_ep *ep) { rrpc__dp_after_with(&cursor_hooks, ep); }

static void cursor_resume_read(rrpc__rdma_ep *ep) {
  int rc = 0;
  while (rc == 0 && ep->held_len > 0) {
    uint32_t n = ep->held_len > ep->vb.ring_size ? ep->vb.ring_size : (uint32_t)ep->held_len;
    rc = deliver(ep, ep->held_start, n);
    ep->held_start += n;
    ep->held_len -= n;
  }
  if (rc != 0) {
    rrpc__socket_fail(ep->s, rc);
    return;
  }
  rrpc__dp_held_released(ep);
  /* The room came back: tell the peer if the rule says so. */
  rrpc__ep_lock(ep);
  pump_locked(ep);
  rrpc__ep_unlock(ep);
}

/* ---- the stall check ------------------------------------------------------------------------
 * A peer that never sends a consumer-cursor update leaves a writer blocked
 * for good: nothing else would end that connection. Checked on the loop
 * every half --rdma_cursor_stall_ms while the connection is up; the writer
 * stamps when it found the ring full, a CDC that frees room clears it. */

static void stall_tick(void *arg);

static uint64_t stall_period_us(const rrpc__rdma_ep *ep) {
  uint64_t us = (uint64_t)ep->opts->cursor_stall_ms * 500;
  return us < 10000 ? 10000 : us;
}

/* Under mu. 0 when armed (the endpoint's reference goes with the timer). */
static int stall_arm_locked(rrpc__rdma_ep *ep) {
  return rrpc__loop_timer_add(ep->loop, rrpc__now_us() + stall_period_us(ep), stall_tick, ep, &ep->dp.cur_timer);
}

static void stall_tick(void *arg) {
  rrpc__rdma_ep *ep = arg;
  uint64_t now = rrpc__now_us(), limit_us = (uint64_t)ep->opts->cursor_stall_ms * 1000;
  int rearmed = 0, stalled = 0;
  uint64_t since = 0;
  rrpc__ep_lock(ep);
  ep->dp.cur_timer = 0;
  if (ep->state == EP_UP && !ep->dp.qp_dead && ep->vb.qp != NULL) {
    since = ep->dp.cur_blocked_us;
    stalled = since != 0 && now - since >= limit_us;
    if (!stalled) rearmed = stall_arm_locked(ep) == 0;
  }
  rrpc__ep_unlock(ep);
  if (stalled && ep->s != NULL) {
    rrpc__rdma_count(RRPC_RDMA_CNT_CURSOR_STALLS, 1);
    RRPC_LOG(WARNING,
             "rdma qpn=%u: cursor dialect: the peer's ring has been full for %llu ms and no consumer-cursor update "
             "came (--rdma_cursor_stall_ms=%d): failing the connection",
             ep->vb.qp->qp_num, (unsigned long long)((now - since) / 1000), ep->opts->cursor_stall_ms);
    rrpc__socket_fail(ep->s, -ETIMEDOUT);
  }
  if (!rearmed) rrpc__ep_unref(ep);
}

static void cursor_up(rrpc__rdma_ep *ep) {
  if (ep->opts->cursor_stall_ms <= 0) return;
  atomic_fetch_add(&ep->refs, 1);
  rrpc__ep_lock(ep);
  int rc = stall_arm_locked(ep);
  rrpc__ep_unlock(ep);
  if (rc != 0) rrpc__ep_unref(ep);
}

static void cursor_stop(rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  rrpc__timer_id id = ep->dp.cur_timer;
  ep->dp.cur_timer = 0;
  rrpc__ep_unlock(ep);
  /* A tick running now sees qp_dead (set before this) and lets go itself. */
  if (id != 0 && rrpc__loop_timer_cancel(ep->loop, id) == 0) rrpc__ep_unref(ep);
}

/* ---- the connection's life -------------------------------------------------------------- */

static int cursor_connect(rrpc__rdma_ep *ep) {
  int rc = rrpc__ep_ring_bind(ep);
  if (rc) return rc;
  /* The RMB sizes the Accept and the Confirm announced. */
  uint64_t peer_ring = rrpc__clc_ring_size(ep->peer.ring_code);
  if (peer_ring == 0 || peer_ring > (1u << 31) || ep->peer.rmbe_idx == 0) return -RRPC_EHANDSHAKE;
  return rrpc__cur_init(&ep->dp.cur, (uint32_t)peer_ring, ep->vb.ring_size, ep->my_token);
}

static int cursor_first_msg_locked(rrpc__rdma_ep *ep) { return send_cdc_locked(ep, 0); }

static void cursor_close_locked(rrpc__rdma_ep *ep, uint8_t conn_flags) {
  ep->dp.close_flags = conn_flags;
  send_close_locked(ep);
}

static void cursor_view(rrpc__rdma_ep *ep, struct rrpc__dp_view *out) {
  rrpc__ep_lock(ep);
  const struct rrpc__cur_window *w = &ep->dp.cur;
  *out = (struct rrpc__dp_view){
      .tx_prod = w->tx_prod,
      .tx_peer_cons = w->tx_peer_cons,
      .rx_prod = w->rx_prod,
      .rx_cons = w->rx_cons,
      .rx_acked = w->rx_cons_sent,
      .sq_used = ep->dp.wr_seq - ep->dp.wr_done,
      .peer_ring_size = w->tx_ring,
      .window_free = w->tx_ring ? rrpc__cur_tx_free(w) : 0,
      .rx_held = (uint32_t)ep->held_len,
      .write_blocked = ep->dp.write_blocked,
      .cursor = 1,
      .tx_prod_flags = w->tx_flags,
      .tx_conn_flags = ep->dp.close_wr != 0 ? ep->dp.close_flags : 0,
      .rx_prod_flags = w->rx_prod_flags,
      .rx_conn_flags = w->rx_conn_flags,
      .my_ring_size = w->rx_ring,
  };
  rrpc__ep_unlock(ep);
}

static void nothing(rrpc__rdma_ep *ep) { (void)ep; }

const struct rrpc__rdma_dialect rrpc__rdma_dialect_cursor = {
    .name = "cursor",
    .dp_write = cursor_write,
    .dp_connect = cursor_connect,
    .dp_up = cursor_up,
    .dp_stop = cursor_stop,
    .dp_unbind = nothing,
    .dp_free = nothing,
    .dp_on_wc = cursor_on_wc,
    .dp_after = cursor_after,
    .dp_resume_read = cursor_resume_read,
    .dp_first_msg_locked = cursor_first_msg_locked,
    .dp_close_locked = cursor_close_locked,
    .dp_close_done_locked = rrpc__dp_close_done_locked,
    .dp_view = cursor_view,
};
