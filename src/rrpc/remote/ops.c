/* remote/ops.c - a connection's queue of one-sided operations (ops.h). */
#include "rrpc/remote/ops.h"

#include <errno.h>
#include <string.h>

int rrpc__rmt_opq_init(struct rrpc__rmt_opq *q, uint32_t max_piece, uint32_t max_inflight) {
  if (max_piece == 0 || max_inflight == 0) return -EINVAL;
  memset(q, 0, sizeof(*q));
  q->max_piece = max_piece;
  q->max_inflight = max_inflight;
  return 0;
}

int rrpc__rmt_opq_submit(struct rrpc__rmt_opq *q, struct rrpc__rmt_op *op) {
  if (!op->cb || op->next || op == q->tail) return -EINVAL;
  if (q->failed) return q->failed;
  op->posted = 0;
  op->pending = 0;
  op->status = 0;
  op->started = 0;
  op->next = NULL;
  if (q->tail) q->tail->next = op;
  else q->head = op;
  q->tail = op;
  if (!q->cursor) q->cursor = op;
  return 0;
}

static int fully_posted(const struct rrpc__rmt_op *op) {
  return op->started && op->posted == op->length;
}

/* Ops complete in submission order: only the head may complete, and an op
 * done ahead of an earlier one waits for it. */
static void complete_ready(struct rrpc__rmt_opq *q) {
  while (q->head && fully_posted(q->head) && q->head->pending == 0) {
    struct rrpc__rmt_op *op = q->head;
    q->head = op->next;
    if (!q->head) q->tail = NULL;
    if (q->cursor == op) q->cursor = q->head;
    op->next = NULL;
    if (op->status) q->stats.ops_failed++;
    else q->stats.ops_ok++;
    op->cb(op, op->status);
  }
}

int rrpc__rmt_opq_next(struct rrpc__rmt_opq *q, struct rrpc__rmt_piece *out) {
  struct rrpc__rmt_op *op;
  uint64_t left;
  while (q->cursor && fully_posted(q->cursor)) q->cursor = q->cursor->next;
  op = q->cursor;
  if (!op || q->failed || q->inflight >= q->max_inflight) return 0;
  left = op->length - op->posted;
  out->op = op;
  out->offset = op->posted;
  out->length = left > q->max_piece ? q->max_piece : (uint32_t)left;
  op->posted += out->length;
  op->started = 1;
  out->last = op->posted == op->length;
  op->pending++;
  q->inflight++;
  q->stats.pieces++;
  return 1;
}

int rrpc__rmt_opq_has_next(const struct rrpc__rmt_opq *q) {
  const struct rrpc__rmt_op *op = q->cursor;
  while (op && fully_posted(op)) op = op->next;
  return op && !q->failed && q->inflight < q->max_inflight;
}

/* An op that failed posts nothing more: its unposted bytes count as done. */
static void stop_op(struct rrpc__rmt_op *op, int status) {
  if (!op->status) op->status = status;
  op->posted = op->length;
  op->started = 1;
}

void rrpc__rmt_opq_piece_done(struct rrpc__rmt_opq *q, struct rrpc__rmt_op *op, int status) {
  q->inflight--;
  op->pending--;
  if (status) stop_op(op, status);
  complete_ready(q);
}

void rrpc__rmt_opq_unpost(struct rrpc__rmt_opq *q, const struct rrpc__rmt_piece *p, int status) {
  rrpc__rmt_opq_piece_done(q, p->op, status);
}

void rrpc__rmt_opq_fail(struct rrpc__rmt_opq *q, int status) {
  if (!q->failed) q->failed = status;
  for (struct rrpc__rmt_op *op = q->head; op; op = op->next) stop_op(op, q->failed);
  q->cursor = NULL;
  complete_ready(q);
}

void rrpc__rmt_opq_abandon(struct rrpc__rmt_opq *q) {
  if (!q->failed) q->failed = -ECANCELED;
  for (struct rrpc__rmt_op *op = q->head; op; op = op->next) {
    stop_op(op, q->failed);
    q->inflight -= op->pending;
    op->pending = 0;
  }
  q->cursor = NULL;
  complete_ready(q);
}
