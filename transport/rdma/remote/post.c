/* remote/post.c - one-sided operations as RDMA work requests (post.h). */
#include "transport/rdma/remote/post.h"

#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>

#include "rrpc/errors.h"

static void piece_wr(const struct rrpc__rmt_piece *p, struct ibv_send_wr *wr, struct ibv_sge *sge) {
  const struct rrpc__rmt_rdma_op *op = (const struct rrpc__rmt_rdma_op *)p->op;
  memset(wr, 0, sizeof(*wr));
  sge->addr = (uintptr_t)(op->local + p->offset);
  sge->length = p->length;
  sge->lkey = op->lkey;
  wr->wr_id = (uintptr_t)p->op;
  wr->sg_list = sge;
  wr->num_sge = p->length ? 1 : 0;
  wr->send_flags = IBV_SEND_SIGNALED;
  wr->wr.rdma.remote_addr = op->raddr + p->offset;
  wr->wr.rdma.rkey = op->rkey;
  if (op->kind == RRPC_RMT_RDMA_READ) {
    wr->opcode = IBV_WR_RDMA_READ;
  } else if (op->notify && p->last) {
    wr->opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr->imm_data = htonl(op->imm);
  } else {
    wr->opcode = IBV_WR_RDMA_WRITE;
  }
}

int rrpc__rmt_rdma_pump(struct rrpc__rmt_opq *q, struct ibv_qp *qp) {
  struct rrpc__rmt_piece p;
  int n = 0;
  while (rrpc__rmt_opq_next(q, &p) == 1) {
    struct ibv_send_wr wr, *bad;
    struct ibv_sge sge;
    int rc;
    piece_wr(&p, &wr, &sge);
    rc = ibv_post_send(qp, &wr, &bad);
    if (rc) {
      rrpc__rmt_opq_fail(q, -rc);
      rrpc__rmt_opq_unpost(q, &p, -rc);
      return -rc;
    }
    n++;
  }
  return n;
}

int rrpc__rmt_rdma_wc_code(int st) {
  switch (st) {
  case IBV_WC_SUCCESS: return 0;
  case IBV_WC_REM_ACCESS_ERR: return -EACCES;
  case IBV_WC_WR_FLUSH_ERR: return -ECONNABORTED;
  case IBV_WC_RETRY_EXC_ERR: return -ETIMEDOUT;
  default: return -RRPC_ERDMA;
  }
}

void rrpc__rmt_rdma_on_wc(struct rrpc__rmt_opq *q, const struct ibv_wc *wc) {
  struct rrpc__rmt_op *op = (struct rrpc__rmt_op *)(uintptr_t)wc->wr_id;
  int code = rrpc__rmt_rdma_wc_code(wc->status);
  /* Fail the queue before completing the op, so a callback that submits
   * more on a dead QP is refused at once rather than flushed later. */
  if (code) rrpc__rmt_opq_fail(q, code);
  rrpc__rmt_opq_piece_done(q, op, code);
}
