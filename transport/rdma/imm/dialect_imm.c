/* dialect_imm.c - rrpc's own dialect in the dialect table (dialect.h). It
 * speaks CLC, so the shared handshake and endpoint set it up: no hook of
 * its own at setup. Its data path is datapath.c (one ring, WRITE_WITH_IMM
 * with the ACK in the immediate) and elastic_dp.c (granted pieces); the
 * hooks here pick between the two where they differ. */
#include "transport/rdma/dialect.h"

#include "transport/rdma/endpoint.h"
#include "transport/rdma/imm/pieces_mem.h"
#include "transport/smc/cdc.h"

/* Largest receive depth planned on (endpoint.c's RDMA_QUEUE_MAX). */
enum { IMM_PEER_DEPTH_MAX = 4096 };

static int imm_connect(rrpc__rdma_ep *ep) {
  if (ep->elastic) return rrpc__edp_init(ep);
  int rc = rrpc__ep_ring_bind(ep);
  if (rc) return rc;
  /* The announced depth is only a promise: never plan on more receives
   * than we would post ourselves (a peer that posts fewer is caught by the
   * finite RNR retry). */
  uint32_t depth = 1u << ep->peer.rq_depth_log2;
  if (depth > IMM_PEER_DEPTH_MAX) depth = IMM_PEER_DEPTH_MAX;
  rc = rrpc__tx_window_init(&ep->dp.tx, (uint32_t)rrpc__clc_ring_size(ep->peer.ring_code), depth, 0);
  if (rc == 0) rc = rrpc__rx_window_init(&ep->dp.rx, ep->vb.ring_size, ep->vb.rq_size);
  return rc;
}

static void imm_up(rrpc__rdma_ep *ep) {
  if (!ep->elastic) return;
  rrpc__rdma_count(RRPC_RDMA_CNT_CONN_ELASTIC, 1);
  rrpc__edp_idle_start(ep);
}

static void imm_stop(rrpc__rdma_ep *ep) {
  if (ep->elastic) rrpc__edp_idle_stop(ep);
}

static void imm_unbind(rrpc__rdma_ep *ep) {
  if (ep->elastic) rrpc__edp_unbind_all(ep);
}

static int imm_first_msg_locked(rrpc__rdma_ep *ep) { return rrpc__dp_send_cdc_locked(ep, 0, 1); }

static void imm_close_locked(rrpc__rdma_ep *ep, uint8_t conn_flags) {
  ep->dp.close_flags = conn_flags;
  rrpc__dp_send_close_locked(ep);
}

static void imm_mem_stats(struct rrpc__dialect_mem_stats *acc) {
  struct rrpc__pieces_stats ps;
  rrpc__pieces_stats(&ps);
  acc->piece_cached_bytes += ps.cached_bytes;
  acc->piece_used_bytes += ps.used_bytes;
}

const struct rrpc__rdma_dialect rrpc__rdma_dialect_imm = {
    .name = "imm",
    .dp_write = rrpc__dp_write,
    .dp_connect = imm_connect,
    .dp_up = imm_up,
    .dp_stop = imm_stop,
    .dp_unbind = imm_unbind,
    .dp_free = rrpc__edp_free_all,
    .dp_on_wc = rrpc__dp_on_wc,
    .dp_after = rrpc__dp_after,
    .dp_resume_read = rrpc__dp_resume_read,
    .dp_first_msg_locked = imm_first_msg_locked,
    .dp_close_locked = imm_close_locked,
    .dp_close_done_locked = rrpc__dp_close_done_locked,
    .dp_view = rrpc__dp_view,
    .dp_prefill = rrpc__pieces_prefill,
    .mem_stats = imm_mem_stats,
};
