// remote_util.h - raw-verbs helpers of the remote-memory VM tests: loopback
// RC QP pairs standing for one connection's two sides, local registered
// buffers, bounded completion polling, a cheap fill pattern.
#ifndef RRPC_TEST_RDMA_REMOTE_UTIL_H
#define RRPC_TEST_RDMA_REMOTE_UTIL_H

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

extern "C" {
#include "transport/rdma/device.h"
}

namespace rmt_test {

constexpr uint64_t kMiB = 1 << 20;

struct Qp {
  ibv_cq *cq = nullptr;
  ibv_qp *qp = nullptr;
  explicit Qp(rrpc__rdma_dev *d) {
    cq = ibv_create_cq(d->ctx, 64, nullptr, nullptr, 0);
    ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 16;
    ia.cap.max_recv_wr = 64;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    if (cq) qp = ibv_create_qp(d->pd, &ia);
  }
  ~Qp() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
  }
};

inline int Connect(rrpc__rdma_dev *d, ibv_qp *q, uint32_t peer_qpn, int gid_index, const ibv_gid &gid,
            int retry_cnt = 7) {
  ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = d->port;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc) return rc;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = d->active_mtu;
  a.dest_qp_num = peer_qpn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12;
  a.ah_attr.is_global = 1;
  a.ah_attr.grh.dgid = gid;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index);
  a.ah_attr.grh.hop_limit = 64;
  a.ah_attr.dlid = d->lid;
  a.ah_attr.port_num = d->port;
  rc = ibv_modify_qp(q, &a,
                     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) return rc;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = static_cast<uint8_t>(retry_cnt);
  a.rnr_retry = 7;
  a.max_rd_atomic = 1;
  return ibv_modify_qp(q, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

// One completion from cq within 30 s; its status, or -1 on timeout.
inline int PollOne(ibv_cq *cq, ibv_wc *wc) {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < end) {
    int n = ibv_poll_cq(cq, 1, wc);
    if (n < 0) return -1;
    if (n == 1) return wc->status;
  }
  return -1;
}

// A connection: owner side `own`, accessing side `acc`.
struct Conn {
  std::unique_ptr<Qp> own, acc;
  bool Up(rrpc__rdma_dev *d, int retry_cnt = 7) {
    own.reset(new Qp(d));
    acc.reset(new Qp(d));
    if (!own->qp || !acc->qp) return false;
    int idx;
    ibv_gid gid;
    if (rrpc__rdma_dev_pick_gid(d, nullptr, &idx, &gid) != 0) return false;
    return Connect(d, own->qp, acc->qp->qp_num, idx, gid, retry_cnt) == 0 &&
           Connect(d, acc->qp, own->qp->qp_num, idx, gid, retry_cnt) == 0;
  }
};

// Memory the accessor writes from and reads into (its own, local MR).
struct Local {
  std::vector<uint8_t> buf;
  ibv_mr *mr = nullptr;
  Local(ibv_pd *pd, size_t n) : buf(n) { mr = ibv_reg_mr(pd, buf.data(), n, IBV_ACCESS_LOCAL_WRITE); }
  ~Local() {
    if (mr) ibv_dereg_mr(mr);
  }
};

// A pattern that differs per seed and per 8-byte word (xorshift: cheap
// under the VM's emulation, where a 64 MiB fill from mt19937 takes seconds).
inline void Fill(uint8_t *p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    memcpy(p + i, &x, n - i < 8 ? n - i : 8);
  }
}

// The bytes around [off, off + len) (4 KiB each side, within n) agree.
inline bool Around(const uint8_t *a, const uint8_t *b, size_t n, uint64_t off, uint64_t len) {
  uint64_t lo = off > 4096 ? off - 4096 : 0;
  uint64_t hi = off + len + 4096 < n ? off + len + 4096 : n;
  return memcmp(a + lo, b + lo, hi - lo) == 0;
}

}  // namespace rmt_test

#endif  // RRPC_TEST_RDMA_REMOTE_UTIL_H
