/* dp.c - the data-path machinery the CLC dialects share (dp.h): the send
 * queue's bookkeeping (room, when to signal, what in-flight WRs hold),
 * posting 44-byte messages and drain marks, receive slots, completion
 * errors, and the shape of a completion and of a poll's end, around the
 * hooks where the imm dialect (imm/) and the cursor dialect (cursor/)
 * differ. Nothing here knows a dialect's wire format.
 *
 * Locking as in endpoint.h: the send queue under dp.mu, completions on the
 * loop thread. No iobuf reference is dropped under dp.mu. */
#include "transport/rdma/dp.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/endpoint.h"
#include "transport/smc/cdc.h"

/* Signal a send at least this often (WRs) or after this many bytes, so sent
 * blocks and send-queue slots come back in time. */
#define SIGNAL_BYTES (1u << 20)

/* ---- send queue bookkeeping (under mu) ------------------------------------------ */

static uint32_t sq_free(const rrpc__rdma_ep *ep) {
  return ep->vb.sq_size - (uint32_t)(ep->dp.wr_seq - ep->dp.wr_done);
}

uint32_t rrpc__dp_sq_free(const rrpc__rdma_ep *ep) { return sq_free(ep); }

/* Whether the WR about to be posted asks for a completion: when `force`d,
 * or often enough that sent blocks and send-queue slots come back. */
static int want_signal(rrpc__rdma_ep *ep, uint32_t bytes, int force) {
  ep->dp.unsignaled++;
  ep->dp.unsignaled_bytes += bytes;
  /* While a window bind waits for the queue to drain, the drain must be
   * seen: every WR is signaled then (elastic_dp.c, bind_ready_locked). */
  if (force || ep->dp.unsignaled >= ep->vb.sq_size / 4 || ep->dp.unsignaled_bytes >= SIGNAL_BYTES ||
      sq_free(ep) <= 2 || ep->dp.el.bind_wait) {
    ep->dp.unsignaled = 0;
    ep->dp.unsignaled_bytes = 0;
    return 1;
  }
  return 0;
}

int rrpc__dp_want_signal(rrpc__rdma_ep *ep, uint32_t bytes, int force) { return want_signal(ep, bytes, force); }

/* Keep `buf` (moved) until the WR numbered seq completes. */
static void inflight_push(rrpc__rdma_ep *ep, uint64_t seq, rrpc_iobuf *buf) {
  struct rrpc__ep_inflight *e = &ep->dp.inflight[(ep->dp.if_head + ep->dp.if_count) % ep->vb.sq_size];
  e->seq = seq;
  rrpc_iobuf_move(&e->buf, buf); /* e->buf is empty: moving cannot fail */
  ep->dp.if_count++;
}

/* Move what WRs up to `done` held into `out`, to be dropped after unlocking. */
static void inflight_reap(rrpc__rdma_ep *ep, uint64_t done, rrpc_iobuf *out) {
  while (ep->dp.if_count > 0 && ep->dp.inflight[ep->dp.if_head].seq <= done) {
    struct rrpc__ep_inflight *e = &ep->dp.inflight[ep->dp.if_head];
    /* Out of memory to grow `out`: drop the references here, under mu
     * (safe: see on_slice_released). */
    if (rrpc_iobuf_move(out, &e->buf) != 0) rrpc_iobuf_clear(&e->buf);
    ep->dp.if_head = (ep->dp.if_head + 1) % ep->vb.sq_size;
    ep->dp.if_count--;
  }
}


/* Post wr, whose wr_id the caller took with ++wr_seq. A failed post gives
 * the number back, marks the QP dead and says why (`what`): the connection
 * then fails with a bare "RDMA verbs error". Under mu. */
static int post_or_fail(rrpc__rdma_ep *ep, struct ibv_send_wr *wr, const char *what) {
  struct ibv_send_wr *bad;
  int rc = ibv_post_send(ep->vb.qp, wr, &bad);
  if (rc == 0) return 0;
  ep->dp.wr_seq--;
  ep->dp.qp_dead = 1;
  RRPC_LOG(WARNING, "rdma qpn=%u: ibv_post_send of %s: %s", ep->vb.qp->qp_num, what, rrpc_strerror(-rc));
  return -RRPC_ERDMA;
}

/* Post one 44-byte SEND_WITH_IMM (a CDC or an elastic control message)
 * from buf: inline or from registered memory (lkey), signaled when
 * want_signal says so. A failed post marks the QP dead. Under mu. */
static int post_44(rrpc__rdma_ep *ep, const void *buf, uint32_t lkey, int inl, int with_imm, uint32_t imm,
                   int solicited, int force_signal) {
  struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = RRPC_CDC_LEN, .lkey = lkey};
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = ++ep->dp.wr_seq;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  if (with_imm) wr.imm_data = htonl(imm);
  wr.send_flags = (inl ? IBV_SEND_INLINE : 0) | (solicited ? IBV_SEND_SOLICITED : 0) |
                  (want_signal(ep, 0, force_signal) ? IBV_SEND_SIGNALED : 0);
  int rc = post_or_fail(ep, &wr, "a 44-byte message");
  if (rc != 0) return rc;
  if (solicited) rrpc__rdma_count(RRPC_RDMA_CNT_SOLICITED, 1);
  return 0;
}


int rrpc__dp_post_drain_mark(rrpc__rdma_ep *ep) {
  if (ep->dp.qp_dead || ep->vb.qp == NULL) return -RRPC_ERDMA;
  if (sq_free(ep) < 1) return -EAGAIN;
  struct ibv_send_wr wr;
  memset(&wr, 0, sizeof wr); /* no SGE, remote address and key 0 (IBA C9-88) */
  wr.wr_id = ++ep->dp.wr_seq;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = want_signal(ep, 0, 1) ? IBV_SEND_SIGNALED : 0;
  return post_or_fail(ep, &wr, "a drain mark");
}

int rrpc__dp_post_send44(rrpc__rdma_ep *ep, const uint8_t *msg, uint32_t imm, int solicited, int force_signal) {
  /* Inline only (elastic mode is offered only where 44 bytes inline fit):
   * the bytes are copied at post time, so msg may be on the stack. */
  return post_44(ep, msg, 0, 1, 1, imm, solicited, force_signal);
}

int rrpc__dp_post_send44_plain(rrpc__rdma_ep *ep, const uint8_t msg[RRPC_CDC_LEN], int force_signal) {
  if (ep->dp.qp_dead || ep->vb.qp == NULL) return -RRPC_ERDMA;
  if (sq_free(ep) < 1) return -EAGAIN;
  /* Without inline sends the device reads the one CDC slot after the post:
   * the next waits until the last one from that slot has completed. */
  int inl = ep->dev->max_inline >= RRPC_CDC_LEN;
  if (!inl && ep->dp.cdc_slot_wr > ep->dp.wr_done) return -EAGAIN;
  uint8_t *out = (uint8_t *)ep->vb.slots + (size_t)ep->vb.rq_size * RRPC_EP_SLOT_SIZE;
  memcpy(out, msg, RRPC_CDC_LEN);
  int rc = post_44(ep, out, ep->vb.slots_mr->lkey, inl, 0, 0, 1, !inl || force_signal);
  if (rc == 0 && !inl) ep->dp.cdc_slot_wr = ep->dp.wr_seq;
  return rc;
}


int rrpc__dp_close_done_locked(const rrpc__rdma_ep *ep) {
  if (ep->dp.close_flags == 0 || ep->dp.qp_dead || ep->vb.qp == NULL) return 1;
  return ep->dp.close_wr != 0 && ep->dp.wr_done >= ep->dp.close_wr;
}

/* Repost the receive that completed (its slot is free again). */
int rrpc__dp_repost_slot(rrpc__rdma_ep *ep, uint64_t id) {
  struct ibv_sge sge = {.addr = (uintptr_t)(ep->vb.slots + id * RRPC_EP_SLOT_SIZE),
                        .length = RRPC_EP_SLOT_SIZE,
                        .lkey = ep->vb.slots_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = id, .sg_list = &sge, .num_sge = 1}, *bad;
  int prc = ibv_post_recv(ep->vb.qp, &wr, &bad);
  if (prc != 0) {
    RRPC_LOG(WARNING, "rdma qpn=%u: ibv_post_recv of slot %llu: %s: failing the connection", ep->vb.qp->qp_num,
             (unsigned long long)id, rrpc_strerror(-prc));
    return -RRPC_ERDMA;
  }
  return 0;
}


void rrpc__dp_log_wc_error(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send) {
  /* A failed send that was the last window bind says which piece it bound
   * (a bind re-run by a retry fails so: docs/elastic-rings.md, "A bind only
   * at a drained send queue"); other sends, the WRs posted so far. */
  char what[96] = "";
  if (is_send) {
    rrpc__ep_lock(ep);
    if (ep->elastic && ep->dp.el.bind_wr == wc->wr_id)
      snprintf(what, sizeof what, ": the window bind of piece %u (%u bytes)", ep->dp.el.bind_id,
               ep->dp.el.bind_len);
    else
      snprintf(what, sizeof what, " of %llu posted", (unsigned long long)ep->dp.wr_seq);
    rrpc__ep_unlock(ep);
  }
  RRPC_LOG(WARNING, "rdma qpn=%u: completion error: %s (vendor 0x%x, %s wr_id %llu%s)", ep->vb.qp->qp_num,
           ibv_wc_status_str(wc->status), wc->vendor_err, is_send ? "send" : "recv", (unsigned long long)wc->wr_id,
           what);
}

/* The first failed completion of a poll. Flushes follow the first real
 * error; only that one is reported. A flush with nothing before it may
 * precede its cause in the same poll (the receive CQ is drained first, a
 * send's RNR or retry error comes after its QP's flushed receives): it is
 * said at the poll's end, and only if no real error followed it. */
int rrpc__dp_wc_failed(rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send) {
  rrpc__ep_lock(ep);
  int was_dead = ep->dp.qp_dead;
  ep->dp.qp_dead = 1;
  rrpc__ep_unlock(ep);
  if (wc->status != IBV_WC_WR_FLUSH_ERR) rrpc__dp_log_wc_error(ep, wc, is_send);
  else ep->pl.flush_first = !was_dead;
  return -RRPC_ERDMA;
}


/* One send completion: it frees send-queue slots and the blocks they held. */
void rrpc__dp_on_send_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc, rrpc_iobuf *drop) {
  rrpc__ep_lock(ep);
  /* A signaled WR completes every WR posted before it (RC order). */
  if (wc->wr_id > ep->dp.wr_done) ep->dp.wr_done = wc->wr_id;
  inflight_reap(ep, ep->dp.wr_done, drop);
  rrpc__ep_unlock(ep);
}


/* The poll's completion errors and first flush, said once (both dialects). */
void rrpc__dp_log_flush_first(rrpc__rdma_ep *ep) {
  if (ep->pl.flush_first && ep->vb.qp != NULL)
    RRPC_LOG(WARNING, "rdma qpn=%u: work requests were flushed with no error completion before them: the QP is "
             "in the error state (an error its responder side saw, or a NAK it sent)", ep->vb.qp->qp_num);
  ep->pl.flush_first = 0;
}

void rrpc__dp_inflight_push(rrpc__rdma_ep *ep, uint64_t seq, rrpc_iobuf *buf) { inflight_push(ep, seq, buf); }

int rrpc__dp_post_44(rrpc__rdma_ep *ep, const void *buf, uint32_t lkey, int inl, int with_imm, uint32_t imm,
                     int solicited, int force_signal) {
  return post_44(ep, buf, lkey, inl, with_imm, imm, solicited, force_signal);
}

/* ---- sent and received bytes ------------------------------------------------------ */

/* Bytes covered by the first `max_pieces` pieces of buf. */
uint64_t rrpc__dp_bytes_in_pieces(const rrpc_iobuf *buf, uint32_t max_pieces) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < max_pieces; i++) {
    const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(buf, i);
    if (r == NULL) break;
    n += r->len;
  }
  return n;
}

int rrpc__dp_copy_in(const rrpc__rdma_ep *ep, rrpc_iobuf *dst, const char *p, uint32_t n) {
  if (n == 0) return 0;
  int rc;
  if (n <= ep->vb.max_inline) {
    /* One contiguous reserve: the tail of dst's last block if n fits
     * there, else a host block. */
    void *at;
    size_t avail;
    rc = rrpc__iobuf_reserve_from(dst, n, rrpc__block_host_allocator(), &at, &avail);
    if (rc == 0) {
      memcpy(at, p, n);
      rrpc__iobuf_commit(dst, n);
    }
  } else {
    rc = rrpc_iobuf_append(dst, p, n);
  }
  if (rc == 0) rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_RECV, n);
  return rc;
}

/* ---- a completion and a poll's end ----------------------------------------------- */

void rrpc__dp_on_wc_with(const struct rrpc__dp_hooks *h, rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send,
                         rrpc_iobuf *drop) {
  rrpc__rdma_count(RRPC_RDMA_CNT_COMPLETIONS, 1);
  if (ep->vb.qp == NULL) return;
  /* After an error this poll, the rest (flushes) change nothing. */
  if (ep->pl.rc != 0) {
    if (ep->pl.flush_first && wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR) {
      ep->pl.flush_first = 0; /* the cause, after the flush it caused */
      rrpc__dp_log_wc_error(ep, wc, is_send);
    }
    return;
  }
  if (wc->status != IBV_WC_SUCCESS) {
    ep->pl.rc = rrpc__dp_wc_failed(ep, wc, is_send);
    return;
  }
  if (is_send) rrpc__dp_on_send_wc(ep, wc, drop);
  /* The socket let go: received messages are dropped unread. */
  else if (ep->s != NULL) ep->pl.rc = h->on_recv(ep, wc);
}

/* The socket let go and the connection waits for its close message to
 * leave: post the close if it was still due, and finish once it completed. */
static void close_after(const struct rrpc__dp_hooks *h, rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  if (ep->pl.rc != 0) ep->dp.qp_dead = 1;
  ep->pl.rc = 0;
  h->send_close_locked(ep);
  int done = rrpc__dp_close_done_locked(ep);
  rrpc__ep_unlock(ep);
  if (done) rrpc__ep_close_finish(ep); /* may drop the socket's reference */
}

static int rx_held(const rrpc__rdma_ep *ep) {
  return ep->held_len > 0 || (ep->elastic && rrpc_iobuf_length(&ep->el_held) > 0);
}

static void close_heard_task(void *arg) {
  rrpc__socket *s = arg;
  rrpc__socket_fail(s, -RRPC_ECLOSE);
  rrpc__socket_unref(s);
}

void rrpc__dp_held_released(rrpc__rdma_ep *ep) {
  if (!ep->dp.close_heard || rx_held(ep) || ep->s == NULL) return;
  ep->dp.close_heard = 0;
  /* A task: the core delivers what resume_read moved up right after it
   * returns, and a failed socket delivers nothing. */
  rrpc__socket_ref(ep->s);
  if (rrpc__loop_post(ep->loop, close_heard_task, ep->s) != 0) close_heard_task(ep->s);
}

void rrpc__dp_after_with(const struct rrpc__dp_hooks *h, rrpc__rdma_ep *ep) {
  int got = ep->pl.got, peer_closed = ep->pl.peer_closed, rc = ep->pl.rc;
  ep->pl.got = ep->pl.peer_closed = 0;
  rrpc__dp_log_flush_first(ep);
  if (ep->vb.qp == NULL) {
    ep->pl.rc = 0;
    return;
  }
  if (ep->s == NULL) {
    close_after(h, ep);
    return;
  }
  ep->pl.rc = 0;
  if (got) rrpc__socket_deliver(ep->s);
  if (h->delivered != NULL) rc = h->delivered(ep, rc);
  if (rc != 0) {
    rrpc__socket_fail(ep->s, rc);
    return;
  }
  if (peer_closed && rx_held(ep)) {
    /* Bytes the owner was not ready for are still in the ring: the close is
     * the end of the stream, after them, as TCP's FIN is. */
    ep->dp.close_heard = 1;
    rrpc__rdma_count(RRPC_RDMA_CNT_CLOSES_AFTER_HELD, 1);
  } else if (peer_closed) {
    rrpc__socket_fail(ep->s, -RRPC_ECLOSE);
    return;
  }
  int resume = 0;
  rrpc__ep_lock(ep);
  h->send_owed_locked(ep, got);
  if (ep->dp.write_blocked && ep->state == EP_UP && (h->writable_locked == NULL || h->writable_locked(ep))) {
    ep->dp.write_blocked = 0;
    resume = 1;
  }
  rrpc__ep_unlock(ep);
  if (resume) rrpc__socket_resume_write(ep->s);
}
