/* remote/region.c - one remote-memory region's MR and window (region.h). */
#include "transport/rdma/remote/region.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/remote.h"

/* The window's rights, from the region's. */
static unsigned mw_access(uint8_t rights) {
  unsigned a = 0;
  if (rights & RRPC_REMOTE_READ) a |= IBV_ACCESS_REMOTE_READ;
  if (rights & RRPC_REMOTE_WRITE) a |= IBV_ACCESS_REMOTE_WRITE;
  return a;
}

int rrpc__rmt_rdma_region_reg(struct ibv_pd *pd, void *buf, size_t len, uint8_t rights,
                              struct rrpc__rmt_rdma_region *out) {
  if (!buf || len == 0 || rights == 0 || (rights & ~(RRPC_REMOTE_READ | RRPC_REMOTE_WRITE)))
    return -EINVAL;
  memset(out, 0, sizeof(*out));
  out->mr = ibv_reg_mr(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
  if (!out->mr) {
    RRPC_LOG(ERROR, "remote region: ibv_reg_mr of %zu bytes failed: %s", len, strerror(errno));
    return -RRPC_ERDMAMEM;
  }
  out->buf = buf;
  out->len = len;
  out->rights = rights;
  return 0;
}

int rrpc__rmt_rdma_region_bind(struct rrpc__rmt_rdma_region *r, struct ibv_qp *qp, uint64_t wr_id) {
  struct ibv_send_wr wr, *bad;
  uint32_t rkey;
  int rc;
  if (r->mw || r->rkey) return -EALREADY;
  r->mw = ibv_alloc_mw(qp->pd, IBV_MW_TYPE_2);
  if (!r->mw) return -RRPC_ERDMAMEM;
  rkey = ibv_inc_rkey(r->mw->rkey);
  memset(&wr, 0, sizeof(wr));
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = r->mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = r->mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)r->buf;
  wr.bind_mw.bind_info.length = r->len;
  wr.bind_mw.bind_info.mw_access_flags = mw_access(r->rights);
  rc = ibv_post_send(qp, &wr, &bad);
  if (rc) {
    ibv_dealloc_mw(r->mw);
    r->mw = NULL;
    return -rc;
  }
  /* A type-2 bind leaves storing the new key to the application; a stale
   * one would fail the next bind and put the QP in error. */
  r->mw->rkey = rkey;
  r->rkey = rkey;
  return 0;
}

int rrpc__rmt_rdma_region_revoke(struct rrpc__rmt_rdma_region *r) {
  if (!r->mw) return 0;
  ibv_dealloc_mw(r->mw);
  r->mw = NULL;
  return 1;
}

void rrpc__rmt_rdma_region_dereg(struct rrpc__rmt_rdma_region *r) {
  rrpc__rmt_rdma_region_revoke(r);
  if (r->mr) ibv_dereg_mr(r->mr);
  r->mr = NULL;
}
