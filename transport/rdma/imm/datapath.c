/* datapath.c - the RDMA data path of an endpoint (see docs/rdma-transport.md):
 *
 * send: bytes of the socket's write iobuf are RDMA-WRITTEN WITH_IMM into the
 *   peer's ring at its producer offset, the iobuf's blocks being the scatter
 *   list (no copy; only blocks outside registered memory are bounced). The
 *   immediate carries the ACK for the other direction. The sent blocks stay
 *   referenced until a signaled completion covers them.
 * receive: each RECV_RDMA_WITH_IMM completion says how many bytes landed at
 *   the ring's producer offset. Large pieces go up as iobuf blocks that
 *   reference the ring (no copy) and release their ring space when the
 *   application drops them; small ones are copied and released at once.
 * acks: credits and consumer advance ride on every message; when nothing
 *   goes the other way and an ACK is due, a 44-byte CDC goes as SEND_WITH_IMM.
 *
 * Locking: see endpoint.h. No iobuf reference is dropped under ep->dp.mu. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/dp.h"
#include "transport/rdma/endpoint.h"
#include "transport/smc/cdc.h"

/* With --rdma_recv_zerocopy, received pieces at least --rdma_zerocopy_min_size
 * large go up zero-copy, while the ring space held by the application stays below this share
 * of the ring: a message larger than the ring (or an application holding
 * slices) must never stop the ring from draining. */
#define ZC_MAX_SHARE_DIV 4

static void on_slice_released(void *data, void *arg);

/* The one test for "a zero-copy slice of a receive ring" - of this
 * endpoint's ring or of any other connection's: such a block holds that
 * ring's consumer cursor (and so its peer's window) for as long as anyone
 * references it. Used wherever that matters: sends that carry one must
 * complete promptly, and the read buffer must not keep one. */
static int is_ring_slice(const rrpc_block *b) { return b->deleter == on_slice_released; }
/* Either kind of receive memory: a ring slice or an elastic piece's. */
static int is_recv_slice(const rrpc_block *b) { return is_ring_slice(b) || rrpc__edp_is_piece_slice(b); }

void rrpc__dp_view(rrpc__rdma_ep *ep, struct rrpc__dp_view *out) {
  rrpc__ep_lock(ep);
  *out = (struct rrpc__dp_view){
      .tx_prod = ep->dp.tx.prod,
      .tx_peer_cons = ep->dp.tx.peer_cons,
      .rx_prod = ep->dp.rx.prod,
      .rx_cons = ep->dp.rx.cons,
      .rx_acked = ep->dp.rx.acked,
      .zc_held = ep->dp.zc_outstanding,
      .sq_used = ep->dp.wr_seq - ep->dp.wr_done,
      .peer_ring_size = ep->dp.tx.ring_size,
      .window_free = ep->dp.tx.ring_size ? rrpc__tx_window_free(&ep->dp.tx) : 0,
      .credits = ep->dp.tx.credits,
      .credits_max = ep->dp.tx.depth,
      .rx_owed = ep->dp.rx.owed,
      .rx_held = ep->dp.rx.held,
      .write_blocked = ep->dp.write_blocked,
      .peer_asked = ep->dp.peer_asked,
  };
  rrpc__ep_unlock(ep);
}

/* ---- CDC ---------------------------------------------------------------------- */

int rrpc__dp_send_cdc_locked(rrpc__rdma_ep *ep, uint8_t conn_flags, int solicited) {
  if (ep->dp.qp_dead || ep->vb.qp == NULL) return -RRPC_ERDMA;
  if (rrpc__dp_sq_free(ep) < 1) return -EAGAIN;
  /* Without inline sends the device reads the one CDC slot after the post:
   * the next CDC waits until the last one from that slot has completed. */
  int inl = ep->dev->max_inline >= RRPC_CDC_LEN;
  if (!inl && ep->dp.cdc_slot_wr > ep->dp.wr_done) return -EAGAIN;
  /* Elastic mode: grants and retires polled before the returns this CDC
   * may carry (docs/elastic-rings.md section 4). */
  if (ep->elastic) rrpc__edp_pump_locked(ep);
  if (ep->dp.qp_dead || rrpc__dp_sq_free(ep) < 1) return ep->dp.qp_dead ? -RRPC_ERDMA : -EAGAIN;
  struct rrpc__tx_plan plan;
  int rc = rrpc__tx_window_plan_ack(&ep->dp.tx, rrpc__rx_window_owes_credits(&ep->dp.rx), &plan);
  if (rc != 0) return rc;
  uint32_t imm = ep->elastic ? rrpc__edp_ack_imm_locked(ep) : rrpc__rx_window_take_ack(&ep->dp.rx, 0);
  struct rrpc__cdc_msg m;
  memset(&m, 0, sizeof m);
  m.seq = ++ep->dp.cdc_seq;
  m.token = ep->peer.token;
  m.prod = rrpc__cdc_cursor_from_offset(ep->dp.tx.prod, ep->dp.tx.ring_size);
  m.cons = rrpc__cdc_cursor_from_offset(ep->dp.rx.acked, ep->dp.rx.ring_size);
  m.conn_flags = conn_flags;
  uint8_t *out = (uint8_t *)ep->vb.slots + (size_t)ep->vb.rq_size * RRPC_EP_SLOT_SIZE;
  rrpc__cdc_encode(&m, out);
  /* Inline copies the bytes at post time, so the slot is free at once;
   * otherwise the CDC is signaled, so its completion frees the slot. */
  /* A close is signaled, so its completion says it left (and a flush says
   * it did not). */
  rc = rrpc__dp_post_44(ep, out, ep->vb.slots_mr->lkey, inl, 1, imm, solicited, !inl || conn_flags != 0);
  if (rc != 0) return rc;
  if (!inl) ep->dp.cdc_slot_wr = ep->dp.wr_seq;
  rrpc__tx_window_commit(&ep->dp.tx, &plan);
  ep->dp.peer_asked = 0;
  rrpc__rdma_count(RRPC_RDMA_CNT_CDC_SENT, 1);
  return 0;
}

void rrpc__dp_send_close_locked(rrpc__rdma_ep *ep) {
  if (ep->dp.close_flags == 0 || ep->dp.close_wr != 0 || ep->dp.qp_dead) return;
  /* Signaled (conn_flags != 0): its completion says it left. -EAGAIN (no
   * send-queue room yet) is retried after the next send completions. */
  if (rrpc__dp_send_cdc_locked(ep, ep->dp.close_flags, 1) == 0) ep->dp.close_wr = ep->dp.wr_seq;
}

/* A pure ACK if one is due and nothing else will carry it. Under mu. */
void rrpc__dp_maybe_ack_locked(rrpc__rdma_ep *ep) {
  if (ep->state != EP_UP || ep->dp.qp_dead) return;
  if (ep->elastic) rrpc__edp_pump_locked(ep);
  if (!rrpc__rx_window_ack_due(&ep->dp.rx, ep->dp.peer_asked) && !(ep->elastic && rrpc__edp_ack_due_locked(ep)))
    return;
  /* Always solicited: the peer may be blocked on exactly this ACK, and a
   * receiver in event mode only wakes for solicited completions. */
  (void)rrpc__dp_send_cdc_locked(ep, 0, 1);
}

/* ---- sending data -------------------------------------------------------------- */

/* A bounce copy: pool memory wrapped as a block, whatever allocator is
 * current (an application may install its own after RDMA started). */
struct bounce_area {
  size_t cap;
  void *region;
};

static void bounce_free(void *data, void *arg) {
  struct bounce_area *a = arg;
  rrpc__rdma_pool_free(data, a->cap, a->region);
  free(a);
}

/* A registered copy of [p, p+len) as a new block. 0, -RRPC_EPOOL, -ENOMEM. */
static int bounce_block(const char *p, uint32_t len, rrpc_block **out) {
  struct bounce_area *a = malloc(sizeof *a);
  if (a == NULL) return -ENOMEM;
  void *data;
  int rc = rrpc__rdma_pool_alloc(len, &data, &a->cap, &a->region);
  if (rc != 0) {
    free(a);
    return rc;
  }
  memcpy(data, p, len);
  rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_SEND, len);
  rc = rrpc__block_new_user(data, len, a->region, bounce_free, a, out);
  if (rc != 0) bounce_free(data, a);
  return rc;
}

/* Replace pieces outside registered memory by registered copies. Only
 * blocks made before RDMA started, or by another allocator, need it. */
static int bounce_unregistered(rrpc_iobuf *seg, rrpc_iobuf *drop) {
  int need = 0;
  for (size_t i = 0;; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(seg, i);
    if (r == NULL) break;
    if (rrpc__rdma_block_region(r->block, r->block->data + r->off, r->len) == NULL) need = 1;
  }
  if (!need) return 0;
  rrpc_iobuf out;
  rrpc__iobuf_init(&out);
  int rc = 0;
  for (size_t i = 0; rc == 0; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(seg, i);
    if (r == NULL) break;
    const char *p = r->block->data + r->off;
    if (rrpc__rdma_block_region(r->block, p, r->len) != NULL) {
      rc = rrpc__iobuf_append_block(&out, r->block, r->off, r->len);
      continue;
    }
    rrpc_block *b;
    rc = bounce_block(p, r->len, &b);
    if (rc != 0) break;
    rc = rrpc__iobuf_append_block(&out, b, 0, r->len);
    rrpc__block_unref(b);
  }
  if (rc == 0) {
    /* The originals are dropped later, outside mu, like every reference. */
    rc = rrpc_iobuf_move(drop, seg);
    if (rc == 0) rc = rrpc_iobuf_move(seg, &out); /* seg is empty now: cannot fail */
  }
  /* Whatever could not be moved out is dropped here, under mu: safe, see
   * on_slice_released. */
  if (rc != 0) (void)rrpc_iobuf_move(drop, &out);
  rrpc__iobuf_destroy(&out);
  return rc;
}

/* Post one RDMA WRITE (with_imm: WRITE_WITH_IMM carrying imm) of all of
 * `seg` at the peer's (raddr, rkey). */
static int post_write(rrpc__rdma_ep *ep, rrpc_iobuf *seg, uint64_t raddr, uint32_t rkey, int with_imm, uint32_t imm,
                      int solicited, rrpc_iobuf *drop) {
  uint32_t len = (uint32_t)rrpc_iobuf_length(seg);
  int inl = len <= ep->vb.max_inline;
  if (!inl) {
    int rc = bounce_unregistered(seg, drop);
    if (rc != 0) return rc;
  }
  struct ibv_sge sge[RRPC_RDMA_SEND_SGE];
  int n = 0, pins_ring = 0;
  for (size_t i = 0; i < RRPC_RDMA_SEND_SGE; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(seg, i);
    if (r == NULL) break;
    const char *p = r->block->data + r->off;
    /* Inline data is copied at the post: no key, and nothing is pinned. */
    const rrpc__rdma_region *reg = inl ? NULL : rrpc__rdma_block_region(r->block, p, r->len);
    sge[n++] = (struct ibv_sge){.addr = (uintptr_t)p, .length = r->len, .lkey = reg ? reg->lkey : 0};
    if (!inl) pins_ring |= is_recv_slice(r->block);
  }
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = ep->dp.wr_seq + 1;
  wr.sg_list = sge;
  wr.num_sge = n;
  wr.opcode = with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
  if (with_imm) wr.imm_data = htonl(imm);
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  /* A ring slice - of our own ring (an echoed attachment) or of another
   * connection's (a proxy forwarding what it received) - holds that ring's
   * consumer cursor until it is dropped, and with it that peer's window:
   * its completion must come back now, not a batch later. */
  int sig = rrpc__dp_want_signal(ep, len, !inl && pins_ring);
  wr.send_flags = (inl ? IBV_SEND_INLINE : 0) | (solicited ? IBV_SEND_SOLICITED : 0) |
                  (sig ? IBV_SEND_SIGNALED : 0);
  /* Counted before the post: once posted, the peer may see the bytes (and
   * read our stats) before this thread runs again. A failed post takes them
   * back (the connection is dead then). */
  rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_WRITTEN, len);
  if (inl) rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_SEND, len); /* the provider copies inline data */
  int rc = ibv_post_send(ep->vb.qp, &wr, &bad);
  if (rc != 0) {
    rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_WRITTEN, -(uint64_t)len);
    if (inl) rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_SEND, -(uint64_t)len);
    ep->dp.qp_dead = 1;
    RRPC_LOG(WARNING, "rdma qpn=%u: ibv_post_send: %s", ep->vb.qp->qp_num, rrpc_strerror(-rc));
    return -RRPC_ERDMA;
  }
  ep->dp.wr_seq++;
  if (inl) (void)rrpc_iobuf_move(drop, seg); /* copied at post time; on failure the caller drops seg */
  else rrpc__dp_inflight_push(ep, ep->dp.wr_seq, seg);
  rrpc__rdma_count(RRPC_RDMA_CNT_WRITES, 1);
  if (solicited) rrpc__rdma_count(RRPC_RDMA_CNT_SOLICITED, 1);
  return 0;
}

int rrpc__dp_post_write(rrpc__rdma_ep *ep, rrpc_iobuf *seg, uint64_t raddr, uint32_t rkey, uint32_t imm,
                        int solicited, rrpc_iobuf *drop) {
  return post_write(ep, seg, raddr, rkey, 1, imm, solicited, drop);
}

int rrpc__dp_post_write_plain(rrpc__rdma_ep *ep, rrpc_iobuf *seg, uint64_t raddr, uint32_t rkey,
                              rrpc_iobuf *drop) {
  return post_write(ep, seg, raddr, rkey, 0, 0, 0, drop);
}

/* Write one plan's worth from the front of data. Under mu. */
static int write_plan(rrpc__rdma_ep *ep, rrpc_iobuf *data, const struct rrpc__tx_plan *plan,
                      rrpc_iobuf *drop) {
  int end_of_batch = plan->len == rrpc_iobuf_length(data);
  int ack_req = rrpc__tx_window_ack_request(&ep->dp.tx, plan);
  int solicited = rrpc__tx_window_want_solicited(&ep->dp.tx, plan, end_of_batch, ep->dp.peer_asked);
  for (uint32_t i = 0; i < plan->nseg; i++) {
    int last = i + 1 == plan->nseg;
    rrpc_iobuf seg;
    rrpc__iobuf_init(&seg);
    long cut = rrpc_iobuf_cut(data, plan->seg[i].len, &seg);
    int rc = cut == (long)plan->seg[i].len ? 0 : -ENOMEM;
    /* Only the last segment carries the ACK: the first of a wrapped write
     * carries an empty immediate. */
    uint32_t imm = last ? rrpc__rx_window_take_ack(&ep->dp.rx, ack_req) : 0;
    if (rc == 0)
      rc = rrpc__dp_post_write(ep, &seg, ep->peer.ring_addr + plan->seg[i].off, ep->peer.rkey, imm, last && solicited,
                               drop);
    if (rc != 0) (void)rrpc_iobuf_move(drop, &seg);
    rrpc__iobuf_destroy(&seg); /* what could not move: dropped under mu, safe (on_slice_released) */
    if (rc != 0) return rc;
  }
  rrpc__tx_window_commit(&ep->dp.tx, plan);
  ep->dp.peer_asked = 0; /* the last segment carried the ACK it asked for */
  return 0;
}

int rrpc__dp_write(rrpc__socket *s, rrpc_iobuf *data) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  rrpc_iobuf drop;
  rrpc__iobuf_init(&drop);
  int rc = 0;
  uint32_t max_sge = ep->vb.max_send_sge;
  if (max_sge > 16) max_sge = 16;
  rrpc__ep_lock(ep);
  if (ep->elastic) {
    rc = rrpc__edp_write_locked(ep, data, max_sge, &drop);
    rrpc__ep_unlock(ep);
    rrpc__iobuf_destroy(&drop);
    return rc;
  }
  while (rc == 0 && rrpc_iobuf_length(data) > 0) {
    if (ep->dp.qp_dead) {
      rc = -RRPC_ERDMA;
      break;
    }
    /* The close CDC is the last thing the peer may receive from us. */
    if (ep->dp.closed_sent) {
      rc = -RRPC_ECLOSE;
      break;
    }
    /* Two WRs (a wrapped write) plus one kept for a CDC. */
    if (rrpc__dp_sq_free(ep) < 3) {
      ep->dp.write_blocked = 1;
      int has_credits = rrpc__tx_window_data_credits(&ep->dp.tx) > 0;
      rrpc__rdma_count(has_credits ? RRPC_RDMA_CNT_BLOCKED_SQ : RRPC_RDMA_CNT_BLOCKED, 1);
      rc = -EAGAIN;
      break;
    }
    struct rrpc__tx_plan plan;
    if (rrpc__tx_window_plan(&ep->dp.tx, rrpc__dp_bytes_in_pieces(data, max_sge), &plan) != 0) {
      ep->dp.write_blocked = 1;
      rrpc__rdma_count(RRPC_RDMA_CNT_BLOCKED, 1);
      rc = -EAGAIN;
      break;
    }
    rc = write_plan(ep, data, &plan, &drop);
  }
  rrpc__ep_unlock(ep);
  rrpc__iobuf_destroy(&drop); /* may release ring slices: outside mu */
  return rc;
}

/* ---- receiving ---------------------------------------------------------------- */

struct ring_slice {
  struct rrpc__ep_deferred deferred; /* first: a deferred release finds the slice */
  rrpc__rdma_ep *ep;
  uint64_t start;
  uint32_t len;
};

/* Ring space [start, start+len) is free again. Under mu. */
static void release_locked(rrpc__rdma_ep *ep, uint64_t start, uint32_t len) {
  uint64_t adv = 0;
  if (rrpc__rx_reclaim_release(&ep->dp.reclaim, start, start + len, &adv) != 0) {
    RRPC_LOG(ERROR, "rdma: ring release [%llu, +%u) refused", (unsigned long long)start, len);
    return;
  }
  if (adv > 0) rrpc__rx_window_on_release(&ep->dp.rx, adv);
}

static void slice_release(struct rrpc__ep_deferred *d) {
  struct ring_slice *sl = (struct ring_slice *)d;
  rrpc__rdma_ep *ep = sl->ep;
  rrpc__ep_lock(ep);
  ep->dp.zc_outstanding -= sl->len;
  release_locked(ep, sl->start, sl->len);
  rrpc__dp_maybe_ack_locked(ep);
  rrpc__ep_unlock(ep);
  free(sl);
  rrpc__ep_unref(ep);
}

/* Deleter of zero-copy ring slices; any thread. Dropped under some
 * endpoint's mu (an iobuf that could not be moved out of a locked section
 * for lack of memory) - this ring's or another's - it is released once this
 * thread let go of every mu: taking ours here could self-deadlock, or
 * deadlock in lock order with a thread doing the same the other way. */
static void on_slice_released(void *data, void *arg) {
  (void)data;
  struct ring_slice *sl = arg;
  sl->deferred.fn = slice_release;
  if (rrpc__ep_any_locked_here()) rrpc__ep_defer(&sl->deferred);
  else slice_release(&sl->deferred);
}

/* Put n ring bytes at stream offset start into the read buffer. */
static int deliver_bytes(rrpc__rdma_ep *ep, uint64_t start, uint32_t n, int zero_copy) {
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(ep->s);
  char *p = ep->vb.ring + (size_t)(start % ep->vb.ring_size);
  if (zero_copy) {
    struct ring_slice *sl = malloc(sizeof *sl);
    rrpc_block *b = NULL;
    int rc = sl ? rrpc__block_new_user(p, n, &ep->vb.ring_region, on_slice_released, sl, &b) : -ENOMEM;
    if (rc == 0) {
      *sl = (struct ring_slice){.ep = ep, .start = start, .len = n};
      rc = rrpc__iobuf_append_block(rbuf, b, 0, n);
      rrpc__block_unref(b); /* on failure this runs the deleter: space released */
      return rc;
    }
    free(sl);
    rrpc__ep_lock(ep);
    ep->dp.zc_outstanding -= n;
    rrpc__ep_unlock(ep);
    rrpc__ep_unref(ep);
  }
  int rc = rrpc__dp_copy_in(ep, rbuf, p, n);
  rrpc__ep_lock(ep);
  release_locked(ep, start, n);
  rrpc__ep_unlock(ep);
  return rc;
}

/* Ring slices still in the read buffer belong to a message the protocol
 * could not cut yet. Two kinds must not stay there:
 * - a slice shared with a message already delivered (the block holds the
 *   tail of that message and the head of the next): it now lives as long
 *   as the application keeps that message, and would tie the next one to it;
 * - any slice once the ring is half full: the incomplete message may be
 *   larger than the ring's free space and could never complete.
 * Only the read buffer's own references change (loop thread): its bytes
 * are copied and its reference dropped; whoever else holds the block keeps
 * it. Cheap when the read buffer holds no slices (the usual case). */
static int must_unpin(const rrpc_iobuf_ref *r, int pressed) {
  return is_ring_slice(r->block) && (pressed || atomic_load(&r->block->refs) > 1);
}

static int unpin_rbuf(rrpc__rdma_ep *ep) {
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(ep->s);
  rrpc__ep_lock(ep);
  int pressed = ep->dp.rx.prod - ep->dp.rx.cons >= ep->vb.ring_size / 2;
  rrpc__ep_unlock(ep);
  int any = 0;
  for (size_t i = 0;; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(rbuf, i);
    if (r == NULL) break;
    if (must_unpin(r, pressed)) any = 1;
  }
  if (!any) return 0;
  rrpc_iobuf copy;
  rrpc__iobuf_init(&copy);
  int rc = 0;
  for (size_t i = 0; rc == 0; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(rbuf, i);
    if (r == NULL) break;
    int unpin = must_unpin(r, pressed);
    rc = unpin ? rrpc__dp_copy_in(ep, &copy, r->block->data + r->off, r->len)
               : rrpc__iobuf_append_block(&copy, r->block, r->off, r->len);
  }
  if (rc == 0) {
    rrpc_iobuf_clear(rbuf); /* drops the read buffer's references: space may come back */
    rrpc_iobuf_move(rbuf, &copy);
  }
  rrpc__iobuf_destroy(&copy);
  return rc;
}

/* Back-pressure: while the socket's reading is paused (its output is over
 * its limit), received bytes stay in the ring unreleased - the peer's
 * window closes and it stops sending - and go up once reading resumes.
 * Bytes after held ones are held too, to keep the order. */
static int must_hold(const rrpc__rdma_ep *ep) { return ep->held_len > 0 || rrpc__socket_read_paused(ep->s); }

static void hold(rrpc__rdma_ep *ep, uint64_t start, uint32_t n) {
  if (ep->held_len == 0) ep->held_start = start;
  ep->held_len += n; /* the ring is filled in stream order: contiguous */
}

void rrpc__dp_resume_read(rrpc__rdma_ep *ep) {
  int rc = ep->elastic ? rrpc__edp_resume_read(ep) : 0;
  while (rc == 0 && ep->held_len > 0) {
    uint32_t off = (uint32_t)(ep->held_start % ep->vb.ring_size);
    uint32_t n = ep->vb.ring_size - off < ep->held_len ? ep->vb.ring_size - off : (uint32_t)ep->held_len;
    rc = deliver_bytes(ep, ep->held_start, n, 0);
    ep->held_start += n;
    ep->held_len -= n;
  }
  if (rc != 0) {
    rrpc__socket_fail(ep->s, rc);
    return;
  }
  rrpc__dp_held_released(ep);
  /* The ring space came back: tell the peer, who may be waiting for it. */
  rrpc__ep_lock(ep);
  rrpc__dp_maybe_ack_locked(ep);
  rrpc__ep_unlock(ep);
}

static int on_data_recv(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int *got) {
  uint32_t n = wc->byte_len;
  uint32_t imm = ntohl(wc->imm_data);
  int held = n > 0 && must_hold(ep);
  rrpc__ep_lock(ep);
  uint64_t start = ep->dp.rx.prod;
  int rc = (start % ep->vb.ring_size) + n <= ep->vb.ring_size ? 0 : -RRPC_EPARSE;
  if (rc == 0) rc = rrpc__rx_window_on_recv(&ep->dp.rx, n);
  if (rc == 0) rc = rrpc__tx_window_on_ack(&ep->dp.tx, imm);
  if (rc == 0 && (imm & 0x80000000u)) ep->dp.peer_asked = 1;
  int zc = rc == 0 && !held && ep->opts->recv_zerocopy && n >= ep->opts->zerocopy_min_size && ep->dp.zc_outstanding + n <= ep->vb.ring_size / ZC_MAX_SHARE_DIV;
  if (zc) {
    ep->dp.zc_outstanding += n;
    atomic_fetch_add(&ep->refs, 1); /* the slice's reference */
  }
  rrpc__ep_unlock(ep);
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: the peer broke the window protocol (write of %u bytes)", ep->vb.qp->qp_num, n);
    return rc;
  }
  ep->got_peer_data = 1;
  rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_RECEIVED, n);
  if (n == 0) return 0;
  if (held) {
    hold(ep, start, n);
    return 0;
  }
  *got = 1;
  return deliver_bytes(ep, start, n, zc);
}

static int on_cdc_recv(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int *peer_closed) {
  /* rrpc peers send CDCs as SEND_WITH_IMM only. Anything else - a plain
   * SEND, or a SEND_WITH_INV aimed at our ring's window (whose completion
   * carries the invalidated key where the immediate would be) - is a peer
   * breaking the protocol. */
  if (!(wc->wc_flags & IBV_WC_WITH_IMM)) {
    RRPC_LOG(WARNING, "rdma qpn=%u: a SEND without an immediate (flags 0x%x): failing the connection",
             ep->vb.qp->qp_num, (unsigned)wc->wc_flags);
    return -RRPC_EPARSE;
  }
  const uint8_t *slot = (const uint8_t *)ep->vb.slots + wc->wr_id * RRPC_EP_SLOT_SIZE;
  int rc = 0;
  if (ep->elastic) {
    int is_ctl = 0;
    rc = rrpc__edp_on_send(ep, wc, slot, &is_ctl);
    if (rc != 0 || is_ctl) return rc;
  } else {
    rrpc__ep_lock(ep);
    rc = rrpc__rx_window_on_recv(&ep->dp.rx, 0);
    if (rc == 0) rc = rrpc__tx_window_on_ack(&ep->dp.tx, ntohl(wc->imm_data));
    rrpc__ep_unlock(ep);
    if (rc != 0) return rc;
  }
  struct rrpc__cdc_msg m;
  rc = rrpc__cdc_decode(slot, wc->byte_len, &m);
  if (rc != 0 || m.token != ep->my_token) {
    RRPC_LOG(WARNING, "rdma qpn=%u: bad CDC (%s)", ep->vb.qp->qp_num, rc ? "malformed" : "wrong token");
    return -RRPC_EPARSE;
  }
  ep->got_peer_data = 1;
  if (m.conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL | RRPC_CDC_CS_DONE_WRITING)) *peer_closed = 1;
  /* The peer failed its side (its own log says why): said here too, as
   * our callers only see "connection closed". */
  if (m.conn_flags & RRPC_CDC_CS_ABNORMAL)
    RRPC_LOG(WARNING, "rdma qpn=%u: the peer closed the connection abnormally (an error on its side)",
             ep->vb.qp->qp_num);
  if (ep->state == EP_CLIENT_WAIT_READY) rrpc__ep_hs_apply(ep, rrpc__hs_on_first_cdc(ep));
  return 0;
}

static int repost(rrpc__rdma_ep *ep, uint64_t id) {
  int rc = rrpc__dp_repost_slot(ep, id);
  if (rc != 0) return rc;
  rrpc__ep_lock(ep);
  rc = rrpc__rx_window_on_repost(&ep->dp.rx, 1);
  rrpc__ep_unlock(ep);
  return rc;
}

/* One receive completion: data in the ring, or a CDC in a slot. */
static int on_recv_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc) {
  int rc;
  if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM)
    rc = ep->elastic ? rrpc__edp_on_data(ep, wc, &ep->pl.got) : on_data_recv(ep, wc, &ep->pl.got);
  else if (wc->opcode == IBV_WC_RECV) rc = on_cdc_recv(ep, wc, &ep->pl.peer_closed);
  else rc = -RRPC_EPARSE;
  if (rc == -RRPC_EPARSE) rrpc__rdma_count(RRPC_RDMA_CNT_PROTO_VIOLATION, 1);
  /* The first CDC may have ended the handshake in a fallback: no QP then. */
  if (rc == 0 && ep->vb.qp != NULL) rc = repost(ep, wc->wr_id);
  return rc;
}

/* Ring mode: the ring is full while zero-copy slices are out. The read
 * buffer's own were just copied (unpin_rbuf), so the application holds
 * them (or a send forwarding one, which completes promptly): the consumer
 * cursor waits at the oldest, and the peer with it, until they are
 * dropped. Counted per fill, and said once per process, since it is a
 * silent wait otherwise. Under mu. */
static void note_full_while_held_locked(rrpc__rdma_ep *ep) {
  static atomic_int warned;
  if (ep->elastic || ep->dp.zc_outstanding == 0 || ep->dp.rx.prod - ep->dp.rx.cons < ep->vb.ring_size) return;
  rrpc__rdma_count(RRPC_RDMA_CNT_RING_FULL_HELD, 1);
  if (atomic_exchange(&warned, 1) == 0)
    RRPC_LOG(WARNING,
             "rdma qpn=%u: the receive ring is full while the application holds %llu bytes of zero-copy slices "
             "of it; the peer waits until they are dropped (ring mode with --rdma_recv_zerocopy needs received "
             "iobufs dropped promptly; elastic rings do not; counter ring_full_held)",
             ep->vb.qp->qp_num, (unsigned long long)ep->dp.zc_outstanding);
}

/* Zero-copy receive: the read buffer keeps no ring slice (unpin_rbuf). */
static int imm_delivered(rrpc__rdma_ep *ep, int rc) {
  if (rc == 0 && ep->opts->recv_zerocopy && !rrpc__socket_failed(ep->s)) rc = unpin_rbuf(ep);
  return rc;
}

static void imm_send_owed_locked(rrpc__rdma_ep *ep, int got) {
  if (got) note_full_while_held_locked(ep);
  rrpc__dp_send_close_locked(ep);
  rrpc__dp_maybe_ack_locked(ep);
}

static const struct rrpc__dp_hooks imm_hooks = {
    .on_recv = on_recv_wc,
    .send_close_locked = rrpc__dp_send_close_locked,
    .delivered = imm_delivered,
    .send_owed_locked = imm_send_owed_locked,
};

void rrpc__dp_on_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop) {
  rrpc__dp_on_wc_with(&imm_hooks, ep, wc, is_send, drop);
}

void rrpc__dp_after(rrpc__rdma_ep *ep) { rrpc__dp_after_with(&imm_hooks, ep); }
