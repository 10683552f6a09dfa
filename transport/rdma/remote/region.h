/* remote/region.h - private to the RDMA transport: the verbs side of one
 * remote-memory region (docs/remote-memory.md). The region gets its own MR
 * (LOCAL_WRITE | MW_BIND, no remote rights: the PD is shared by every
 * connection, and an MR's rkey is usable by every QP of its PD) and a
 * type-2 memory window over the whole MR, bound to one connection's QP with
 * the region's rights. The MR's bounds are the region's, so Soft-RoCE's
 * missing window bounds check exposes nothing beyond it
 * (../shared/specs/rxe-memory-windows.md).
 *
 * Revoking deallocates the window - its one and only invalidation: rxe 6.1
 * panics on a second one, so nothing here ever posts LOCAL_INV, and revoke
 * is idempotent (the window pointer is cleared).
 *
 * Not thread-safe: the owning connection serializes calls. Registration
 * and deregistration are system calls of tens of microseconds (more under
 * emulation): callers keep them off loop threads for large regions. */
#ifndef RRPC_TRANSPORT_RDMA_REMOTE_REGION_H
#define RRPC_TRANSPORT_RDMA_REMOTE_REGION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ibv_pd;
struct ibv_qp;
struct ibv_mr;
struct ibv_mw;

struct rrpc__rmt_rdma_region {
  void *buf;
  size_t len;
  uint8_t rights; /* RRPC_REMOTE_READ | RRPC_REMOTE_WRITE */
  struct ibv_mr *mr;
  struct ibv_mw *mw; /* NULL before the bind and after the revoke */
  uint32_t rkey;     /* the window's, after the bind; what the peer uses */
};

/* rrpc__rmt_rdma_region_reg - register [buf, buf + len) (len >= 1) in pd.
 * Returns 0, -EINVAL (rights, len), -RRPC_ERDMAMEM with errno's cause
 * logged (ibv_reg_mr failed: ulimit -l, fds). */
int rrpc__rmt_rdma_region_reg(struct ibv_pd *pd, void *buf, size_t len, uint8_t rights,
                              struct rrpc__rmt_rdma_region *out);

/* rrpc__rmt_rdma_region_bind - allocate the window and post its bind on qp
 * (signaled, wr_id as given; the caller sees the completion on qp's send
 * CQ before announcing the rkey). A region binds once. Returns 0, -EALREADY
 * (bound or revoked before), -RRPC_ERDMAMEM (no window), or -errno of
 * ibv_post_send (window freed again). */
int rrpc__rmt_rdma_region_bind(struct rrpc__rmt_rdma_region *r, struct ibv_qp *qp, uint64_t wr_id);

/* rrpc__rmt_rdma_region_revoke - end remote access: deallocate the window
 * (once; later calls do nothing). Returns 1 if this call revoked it. */
int rrpc__rmt_rdma_region_revoke(struct rrpc__rmt_rdma_region *r);

/* rrpc__rmt_rdma_region_dereg - revoke, then deregister the MR. */
void rrpc__rmt_rdma_region_dereg(struct rrpc__rmt_rdma_region *r);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_REMOTE_REGION_H */
