/* transport/rdma/dp.h - private to the RDMA transport: the data-path
 * machinery the CLC dialects (imm/, cursor/) share, in dp.c: the send
 * queue's bookkeeping, 44-byte messages and drain marks, receive slots,
 * completion errors, bytes in and out. Nothing here knows a dialect's wire
 * format. Under the endpoint's mu unless said. */
#ifndef RRPC_TRANSPORT_RDMA_DP_H
#define RRPC_TRANSPORT_RDMA_DP_H

#include <stdint.h>

#include "rrpc/iobuf.h"

struct ibv_wc;
struct rrpc__rdma_ep;

/* ---- the send queue ---- */
/* Send-queue entries free now. */
uint32_t rrpc__dp_sq_free(const struct rrpc__rdma_ep *ep);
/* Whether the WR about to be posted (`bytes` long) asks for a completion:
 * when `force`d, or often enough that sent blocks and slots come back. */
int rrpc__dp_want_signal(struct rrpc__rdma_ep *ep, uint32_t bytes, int force);
/* Keep `buf` (moved) until the WR numbered seq completes. */
void rrpc__dp_inflight_push(struct rrpc__rdma_ep *ep, uint64_t seq, rrpc_iobuf *buf);
/* Post one 44-byte SEND from buf (inline, or from registered memory with
 * lkey), with_imm: SEND_WITH_IMM carrying imm; signaled when due or
 * force_signal. A failed post marks the QP dead. 0 or -RRPC_ERDMA. */
int rrpc__dp_post_44(struct rrpc__rdma_ep *ep, const void *buf, uint32_t lkey, int inl, int with_imm, uint32_t imm,
                     int solicited, int force_signal);
/* One 44-byte SEND without immediate (a kernel-style CDC), solicited;
 * signaled when due or force_signal. 0, -EAGAIN (no room) or -RRPC_ERDMA. */
int rrpc__dp_post_send44_plain(struct rrpc__rdma_ep *ep, const uint8_t msg[44], int force_signal);
/* One inline SEND_WITH_IMM of a 44-byte message (CDC or elastic control). */
int rrpc__dp_post_send44(struct rrpc__rdma_ep *ep, const uint8_t *msg, uint32_t imm, int solicited,
                         int force_signal);
/* A signaled zero-length RDMA WRITE: nothing reaches the peer (no bytes,
 * no key checked, no receive used); its completion says every WR posted
 * before it completed. 0, -EAGAIN (send queue full) or -RRPC_ERDMA. */
int rrpc__dp_post_drain_mark(struct rrpc__rdma_ep *ep);

/* 1 once nothing is left to wait for before the QP may go: no close
 * message due, or it completed, or the QP is dead. Under mu. */
int rrpc__dp_close_done_locked(const struct rrpc__rdma_ep *ep);

/* ---- completions (loop thread, mu not held) ---- */
/* Repost receive slot id (its message was handled). */
int rrpc__dp_repost_slot(struct rrpc__rdma_ep *ep, uint64_t id);
/* A send completion: frees send-queue room and what the WRs held. */
void rrpc__dp_on_send_wc(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc, rrpc_iobuf *drop);
/* The first failed completion of a poll (marks the QP dead, logs it unless
 * a flush); -RRPC_ERDMA. And the error of a completion, logged. */
int rrpc__dp_wc_failed(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send);
void rrpc__dp_log_wc_error(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send);
/* Said at a poll's end: flushes with no error before them. */
void rrpc__dp_log_flush_first(struct rrpc__rdma_ep *ep);

/* ---- bytes ---- */
/* Bytes covered by the first `max_pieces` pieces of buf. */
uint64_t rrpc__dp_bytes_in_pieces(const rrpc_iobuf *buf, uint32_t max_pieces);
/* rrpc__dp_copy_in - append a copy of [p, p+n) received bytes to dst and
 * count it as copied: up to the QP's inline size in host memory (malloc's
 * per-thread blocks: cheaper than a pool block, and bytes that go back out
 * inline need no registration), larger copies in the current allocator's
 * (the registered pool while RDMA is on: an echo or a proxy sends them on
 * without another copy). 0 or -ENOMEM. No lock needed. */
int rrpc__dp_copy_in(const struct rrpc__rdma_ep *ep, rrpc_iobuf *dst, const char *p, uint32_t n);

/* ---- a completion and a poll's end, around what a dialect adds ---- */
/* What differs between the CLC dialects in a completion and at a poll's
 * end; the rest (errors and flushes, send completions, delivery, the
 * close, resuming a blocked writer) is dp.c's, the same for both. */
struct rrpc__dp_hooks {
  /* One receive completion that succeeded while the socket is there:
   * handle its message and repost its slot. 0 or the error that fails the
   * connection. Loop thread. */
  int (*on_recv)(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc);
  /* Post the close message if one is due and not posted yet. Under mu. */
  void (*send_close_locked)(struct rrpc__rdma_ep *ep);
  /* After what the poll got was delivered, before an error fails the
   * socket: one more step that may fail (the error so far in, the error
   * out). NULL: none. Loop thread. */
  int (*delivered)(struct rrpc__rdma_ep *ep, int rc);
  /* The poll's end on the sending side: the close and whatever the peer
   * is owed (got: bytes came in this poll). Under mu. */
  void (*send_owed_locked)(struct rrpc__rdma_ep *ep, int got);
  /* 1 when a writer that found no room may go on. NULL: always. Under mu. */
  int (*writable_locked)(struct rrpc__rdma_ep *ep);
};
/* The shared CQs' callbacks (cqs.h) of a CLC dialect, with its hooks: one
 * completion of the endpoint's QP, then, once per poll, what it adds up to.
 * Loop thread. */
void rrpc__dp_on_wc_with(const struct rrpc__dp_hooks *h, struct rrpc__rdma_ep *ep, const struct ibv_wc *wc,
                         int is_send, rrpc_iobuf *drop);
void rrpc__dp_after_with(const struct rrpc__dp_hooks *h, struct rrpc__rdma_ep *ep);
/* A dialect's resume_read calls this once its held bytes went to the read
 * buffer: a peer close heard while they were held takes effect now, after
 * the core delivered them (loop thread). */
void rrpc__dp_held_released(struct rrpc__rdma_ep *ep);

#endif /* RRPC_TRANSPORT_RDMA_DP_H */
