/* remote/post.h - private to the RDMA transport: posting a connection's
 * one-sided operations (src/rrpc/remote/ops.h) as RDMA WRITE / READ work
 * requests, and taking their completions back. A piece is one WR; a
 * NOTIFY write's last piece is a WRITE_WITH_IMM carrying the op's
 * immediate, so the owner's receive completion comes after every byte of
 * the op landed (RC delivers a QP's writes in order).
 *
 * Not thread-safe: the connection's lock or loop serializes calls (the same
 * one that serializes the ops queue). */
#ifndef RRPC_TRANSPORT_RDMA_REMOTE_POST_H
#define RRPC_TRANSPORT_RDMA_REMOTE_POST_H

#include <stdint.h>

#include "rrpc/remote/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_qp;
struct ibv_wc;

enum { RRPC_RMT_RDMA_WRITE = 1, RRPC_RMT_RDMA_READ = 2 };

/* One operation over RDMA. base first: completions find the op through it.
 * The caller zeroes it, fills base.length/cb/arg and the fields below. */
struct rrpc__rmt_rdma_op {
  struct rrpc__rmt_op base;
  int kind;        /* RRPC_RMT_RDMA_WRITE or _READ */
  uint8_t *local;  /* registered local memory: source of a write, target of a read */
  uint32_t lkey;
  uint64_t raddr;  /* the peer's address of the op's first byte (window-relative VA) */
  uint32_t rkey;   /* the peer's window */
  int notify;      /* WRITE only: the last piece carries imm as immediate data */
  uint32_t imm;
};

/* rrpc__rmt_rdma_pump - post what the queue lets go now (the queue's
 * in-flight bound stands for the send queue's room). Returns how many WRs
 * were posted, or a negative code when ibv_post_send failed (the piece is
 * taken back with that error, and the queue is failed: a QP that refuses a
 * post is not usable any more). */
int rrpc__rmt_rdma_pump(struct rrpc__rmt_opq *q, struct ibv_qp *qp);

/* rrpc__rmt_rdma_on_wc - one send completion of a piece posted by pump.
 * A failed one fails its op and the queue (the QP is in error: the rest
 * arrive as flush errors and complete their ops once each). Codes: -EACCES
 * (remote access error: range, rights, another connection's or a revoked
 * window), -ECONNABORTED (flushed), -ETIMEDOUT (retries exceeded: the peer
 * is gone), -RRPC_ERDMA (any other status). */
void rrpc__rmt_rdma_on_wc(struct rrpc__rmt_opq *q, const struct ibv_wc *wc);

/* rrpc__rmt_rdma_wc_code - the code of a completion status (an enum
 * ibv_wc_status), as rrpc__rmt_rdma_on_wc gives it. */
int rrpc__rmt_rdma_wc_code(int st);

/* carriage.c: a send completion of the endpoint's QP - 1 if it was one of
 * the remote-memory carriage's (handled), 0 if the data path's. Loop
 * thread. */
struct rrpc__rdma_ep;
int rrpc__rmt_car_wc(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc);
/* carriage.c: the endpoint's QP is marked dead and about to be destroyed:
 * wait for its one-sided posts still under way (this endpoint's only:
 * others' go on; the endpoint's first teardown only, see posts_drain), and
 * deallocate the windows of its regions (each once). Any thread but a loop
 * thread may wait here. */
void rrpc__rmt_car_teardown(struct rrpc__rdma_ep *ep);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_REMOTE_POST_H */
