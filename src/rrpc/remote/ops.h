/* remote/ops.h - private: one connection's queue of one-sided operations
 * (remote WRITE/READ), shared by the carriages. It splits an operation of
 * any size into pieces the carriage can post (at most max_piece bytes: the
 * device's max message size, or a TCP frame's payload), keeps at most
 * max_inflight pieces posted (the send queue's room), and completes every
 * operation exactly once, in submission order, with 0 or the first error
 * one of its pieces reported.
 *
 * Not thread-safe: the connection's lock or loop serializes every call.
 * The completion callback runs from rrpc__rmt_opq_piece_done or
 * rrpc__rmt_opq_abandon (never from submit): the op is already unlinked
 * then, so the callback may free it or submit more.
 *
 * A connection that dies: rrpc__rmt_opq_fail stops posting and marks every
 * pending op failed (those with nothing posted complete at once); pieces
 * already posted still complete (RDMA flushes them) - or, when the carriage
 * knows no completion will come (QP destroyed), rrpc__rmt_opq_abandon
 * completes what is left. Either way: once each. */
#ifndef RRPC_REMOTE_OPS_H
#define RRPC_REMOTE_OPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__rmt_op;
typedef void (*rrpc__rmt_op_cb)(struct rrpc__rmt_op *op, int status);

/* One operation; the caller owns the memory, zeroes it and fills the
 * first block. */
struct rrpc__rmt_op {
  uint64_t length;    /* bytes; 0 is one empty piece (it keeps its place in order) */
  rrpc__rmt_op_cb cb; /* exactly once */
  void *arg;          /* the caller's */
  /* the queue's */
  uint64_t posted;    /* bytes handed out as pieces */
  uint32_t pending;   /* pieces handed out, not completed */
  int status;         /* first error */
  int started;        /* at least one piece handed out (for 0-byte ops) */
  struct rrpc__rmt_op *next;
};

/* A piece to post: bytes [offset, offset + length) of op. last: the op's
 * final piece (where a NOTIFY's immediate goes). */
struct rrpc__rmt_piece {
  struct rrpc__rmt_op *op;
  uint64_t offset;
  uint32_t length;
  int last;
};

struct rrpc__rmt_opq_stats {
  uint64_t ops_ok, ops_failed, pieces;
};

struct rrpc__rmt_opq {
  uint32_t max_piece, max_inflight, inflight;
  int failed; /* the connection's error once rrpc__rmt_opq_fail ran, else 0 */
  struct rrpc__rmt_op *head, *tail; /* submitted, not completed */
  struct rrpc__rmt_op *cursor;      /* first op with bytes left to hand out */
  struct rrpc__rmt_opq_stats stats;
};

/* rrpc__rmt_opq_init - max_piece >= 1, max_inflight >= 1. 0 or -EINVAL. */
int rrpc__rmt_opq_init(struct rrpc__rmt_opq *q, uint32_t max_piece, uint32_t max_inflight);

/* rrpc__rmt_opq_submit - queue op (length, cb set). Returns 0, -EINVAL (no
 * cb, or op already queued) or the connection's error after
 * rrpc__rmt_opq_fail (op not queued, cb not called). */
int rrpc__rmt_opq_submit(struct rrpc__rmt_opq *q, struct rrpc__rmt_op *op);

/* rrpc__rmt_opq_next - the next piece to post, in order. 1 (*out filled,
 * counted in flight), 0 (nothing to post now: queue empty, send queue
 * full, or failed). */
int rrpc__rmt_opq_next(struct rrpc__rmt_opq *q, struct rrpc__rmt_piece *out);

/* rrpc__rmt_opq_has_next - 1 if rrpc__rmt_opq_next would hand out a piece
 * now, else 0; takes nothing (a completion asks it before waking a poster
 * that would find nothing to do). */
int rrpc__rmt_opq_has_next(const struct rrpc__rmt_opq *q);

/* rrpc__rmt_opq_unpost - the carriage could not post the piece next just
 * returned (the last one): take it back with status, as if it completed
 * with that error. */
void rrpc__rmt_opq_unpost(struct rrpc__rmt_opq *q, const struct rrpc__rmt_piece *p, int status);

/* rrpc__rmt_opq_piece_done - a posted piece of op completed with status (0
 * or negative). Completes op when it was its last outstanding piece. */
void rrpc__rmt_opq_piece_done(struct rrpc__rmt_opq *q, struct rrpc__rmt_op *op, int status);

/* rrpc__rmt_opq_fail - the connection failed with status (< 0). */
void rrpc__rmt_opq_fail(struct rrpc__rmt_opq *q, int status);

/* rrpc__rmt_opq_abandon - no completion of a posted piece will come any
 * more: complete every op still queued (with the failure status, or
 * -ECANCELED if rrpc__rmt_opq_fail was not called). */
void rrpc__rmt_opq_abandon(struct rrpc__rmt_opq *q);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_OPS_H */
