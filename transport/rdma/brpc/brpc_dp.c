/* brpc_dp.c - the data path of brpc's RDMA dialect (brpc_ep.h): the QP
 * carries the byte stream TCP would. Each data WR is a SEND_WITH_IMM of at
 * most the peer's block size into one of its posted receives; the
 * immediate returns the receives this side re-posted since its last report
 * ("credits"). Windows as brpc keeps them (facts §2):
 *   local_cap  = min(my SQ, peer RQ) - 3: data WRs in flight / credits;
 *   remote_cap = min(my RQ, peer SQ) - 3: what the peer may send me;
 *   3 receives stay for pure ACKs, of which at most 3 are in flight.
 * Every local_cap/4-th data WR is signaled with wr_id = the WRs it covers,
 * which frees that many send slots; pure ACKs have wr_id 0. A pure ACK goes
 * when more than remote_cap/2 credits are owed and no data carries them. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/brpc/brpc_ep.h"
#include "transport/rdma/budget.h"

#define BDP_POLL_BATCH 32

static uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }

static int post_recv(rrpc__brpc_ep *ep, uint32_t i) {
  struct ibv_sge sge = {.addr = (uintptr_t)(ep->recv_mem + (size_t)i * RRPC_BRPC_RECV_BLOCK),
                        .length = RRPC_BRPC_RECV_BLOCK,
                        .lkey = ep->recv_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
  return ibv_post_recv(ep->qp, &wr, &bad) ? -RRPC_ERDMA : 0;
}

int rrpc__bdp_init(rrpc__brpc_ep *ep) {
  ep->local_cap = min_u32(ep->sq_size, ep->peer.rq_size) - RRPC_BRPC_RESERVED_WR;
  ep->remote_cap = min_u32(ep->rq_size, ep->peer.sq_size) - RRPC_BRPC_RESERVED_WR;
  ep->sq_window = ep->credits = ep->local_cap;
  ep->imm_window = RRPC_BRPC_RESERVED_WR;
  ep->slot_size = min_u32(ep->peer.block_size, RRPC_BRPC_SEND_SLOT_MAX);
  ep->nslots = ep->local_cap;
  size_t rbytes = (size_t)ep->rq_size * RRPC_BRPC_RECV_BLOCK, sbytes = (size_t)ep->nslots * ep->slot_size;
  void *r = NULL, *w = NULL;
  /* Under the process-wide registered cap, as the IMM dialect's ring. */
  int brc = rrpc__rdma_budget_take(rbytes + sbytes);
  if (brc != 0) return brc;
  ep->budget = rbytes + sbytes;
  if (posix_memalign(&r, 4096, rbytes) != 0) return -ENOMEM;
  ep->recv_mem = r;
  if (posix_memalign(&w, 4096, sbytes) != 0) return -ENOMEM;
  ep->send_mem = w;
  /* Counted as rings (receive memory) and slots (send memory) in the
   * stats, which account for every registered byte. */
  ep->recv_mr = ibv_reg_mr(ep->dev->pd, ep->recv_mem, rbytes, IBV_ACCESS_LOCAL_WRITE);
  if (ep->recv_mr != NULL) rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, rbytes);
  ep->send_mr = ibv_reg_mr(ep->dev->pd, ep->send_mem, sbytes, IBV_ACCESS_LOCAL_WRITE);
  if (ep->send_mr != NULL) rrpc__rdma_count(RRPC_RDMA_CNT_SLOT_BYTES, sbytes);
  if (ep->recv_mr == NULL || ep->send_mr == NULL) return -RRPC_ERDMAMEM;
  for (uint32_t i = 0; i < ep->rq_size; i++) {
    int rc = post_recv(ep, i);
    if (rc != 0) return rc;
  }
  return 0;
}

/* ---- sending (under mu) ----------------------------------------------------- */

static int post_pure_ack_locked(rrpc__brpc_ep *ep) {
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = 0;
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.imm_data = htonl(ep->owed);
  wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
  if (ibv_post_send(ep->qp, &wr, &bad) != 0) {
    ep->dead = 1;
    return -RRPC_ERDMA;
  }
  ep->owed = 0;
  ep->imm_window--;
  ep->ack_wanted = 0;
  return 0;
}

/* More than half the peer's window is owed back and nothing carries it. */
static int maybe_ack_locked(rrpc__brpc_ep *ep) {
  if (ep->dead || ep->owed <= ep->remote_cap / 2) return 0;
  if (ep->imm_window == 0) {
    ep->ack_wanted = 1;
    return 0;
  }
  return post_pure_ack_locked(ep);
}

/* One data WR of n bytes from the slot at slot_head (filled already). */
static int post_data_locked(rrpc__brpc_ep *ep, uint32_t n, int last_of_batch) {
  char *slot = ep->send_mem + (size_t)(ep->slot_head % ep->nslots) * ep->slot_size;
  struct ibv_sge sge = {.addr = (uintptr_t)slot, .length = n, .lkey = ep->send_mr->lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.opcode = IBV_WR_SEND_WITH_IMM;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.imm_data = htonl(ep->owed);
  uint32_t quarter = ep->local_cap / 4 > 0 ? ep->local_cap / 4 : 1;
  if (++ep->unsignaled >= quarter) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    wr.wr_id = ep->unsignaled;
    ep->unsignaled = 0;
  }
  /* brpc's receivers wake on solicited completions only: the last WR of a
   * write, the last credit or slot, and every quarter window. */
  if (last_of_batch || ep->credits == 1 || ep->sq_window == 1 || ++ep->since_solicit >= quarter) {
    wr.send_flags |= IBV_SEND_SOLICITED;
    ep->since_solicit = 0;
  }
  if (ibv_post_send(ep->qp, &wr, &bad) != 0) {
    ep->dead = 1;
    return -RRPC_ERDMA;
  }
  ep->owed = 0;
  ep->credits--;
  ep->sq_window--;
  ep->slot_head++;
  return 0;
}

int rrpc__bdp_write(rrpc__socket *s, rrpc_iobuf *data) {
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  uint64_t sent = 0;
  int rc = 0;
  pthread_mutex_lock(&ep->mu);
  while (rc == 0 && rrpc_iobuf_length(data) > 0) {
    if (ep->dead) {
      rc = -RRPC_ERDMA;
      break;
    }
    if (ep->sq_window == 0 || ep->credits == 0) {
      ep->write_blocked = 1;
      rrpc__rdma_count(RRPC_RDMA_CNT_BLOCKED, 1);
      rc = -EAGAIN;
      break;
    }
    size_t len = rrpc_iobuf_length(data);
    uint32_t n = len < ep->slot_size ? (uint32_t)len : ep->slot_size;
    char *slot = ep->send_mem + (size_t)(ep->slot_head % ep->nslots) * ep->slot_size;
    rrpc_iobuf_copy_out(data, 0, slot, n);
    /* Counted before the post: once posted, the peer may see the bytes (and
     * read our stats) before this thread runs again. A failed post takes
     * them back (the connection is dead then). */
    rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_WRITTEN, n);
    rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_SEND, n); /* copied into the slot above */
    rc = post_data_locked(ep, n, n == len);
    if (rc == 0) {
      rrpc_iobuf_pop_front(data, n);
      sent += n;
    } else {
      rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_WRITTEN, -(uint64_t)n);
      rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_SEND, -(uint64_t)n);
    }
  }
  pthread_mutex_unlock(&ep->mu);
  if (sent > 0) rrpc__rdma_count(RRPC_RDMA_CNT_WRITES, 1);
  return rc;
}

/* ---- completions (loop thread) --------------------------------------------------- */

static void fail(rrpc__brpc_ep *ep, const char *what, int status) {
  pthread_mutex_lock(&ep->mu);
  ep->dead = 1;
  pthread_mutex_unlock(&ep->mu);
  RRPC_LOG(WARNING, "rdma (brpc dialect) qpn=%u: %s: %s", ep->qp ? ep->qp->qp_num : 0, what,
           status >= 0 ? ibv_wc_status_str((enum ibv_wc_status)status) : "protocol");
  if (ep->s != NULL) rrpc__socket_fail(ep->s, -RRPC_ERDMA);
}

/* Receives: payload to the read buffer, credits from the immediate. */
static int poll_recv(rrpc__brpc_ep *ep, int *delivered, int *resume) {
  struct ibv_wc wc[BDP_POLL_BATCH];
  int n = ibv_poll_cq(ep->rcq, BDP_POLL_BATCH, wc);
  if (n <= 0) return n;
  uint32_t got_credits = 0, reposted = 0;
  uint64_t bytes = 0;
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(ep->s);
  for (int i = 0; i < n; i++) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      fail(ep, "receive completion", wc[i].status);
      return -1;
    }
    if (wc[i].wc_flags & IBV_WC_WITH_IMM) got_credits += ntohl(wc[i].imm_data);
    uint32_t idx = (uint32_t)wc[i].wr_id;
    if (wc[i].byte_len > 0) {
      if (rrpc_iobuf_append(rbuf, ep->recv_mem + (size_t)idx * RRPC_BRPC_RECV_BLOCK, wc[i].byte_len) != 0) {
        fail(ep, "out of memory for received bytes", -1);
        return -1;
      }
      bytes += wc[i].byte_len;
      rrpc__rdma_count(RRPC_RDMA_CNT_COPIED_RECV, wc[i].byte_len);
      reposted++;
      *delivered = 1;
    }
    if (post_recv(ep, idx) != 0) {
      fail(ep, "re-posting a receive", -1);
      return -1;
    }
  }
  rrpc__rdma_count(RRPC_RDMA_CNT_BYTES_RECEIVED, bytes);
  pthread_mutex_lock(&ep->mu);
  ep->credits += got_credits;
  ep->owed += reposted;
  int bad = ep->credits > ep->local_cap;
  if (got_credits > 0 && ep->write_blocked && ep->credits > 0 && ep->sq_window > 0) {
    ep->write_blocked = 0;
    *resume = 1;
  }
  int rc = bad ? 0 : maybe_ack_locked(ep);
  pthread_mutex_unlock(&ep->mu);
  if (bad) {
    rrpc__rdma_count(RRPC_RDMA_CNT_PROTO_VIOLATION, 1);
    fail(ep, "the peer returned more credits than its window", -1);
    return -1;
  }
  if (rc != 0) {
    fail(ep, "posting a pure ACK", -1);
    return -1;
  }
  return n;
}

/* Sends: signaled data WRs free the slots they cover, pure ACKs an imm slot. */
static int poll_send(rrpc__brpc_ep *ep, int *resume) {
  struct ibv_wc wc[BDP_POLL_BATCH];
  int n = ibv_poll_cq(ep->scq, BDP_POLL_BATCH, wc);
  if (n <= 0) return n;
  rrpc__rdma_count(RRPC_RDMA_CNT_COMPLETIONS, (uint64_t)n);
  int rc = 0, err = -1;
  pthread_mutex_lock(&ep->mu);
  for (int i = 0; i < n && rc == 0; i++) {
    if (wc[i].status != IBV_WC_SUCCESS) {
      err = (int)wc[i].status;
      rc = -1;
      break;
    }
    if (wc[i].wr_id == 0) ep->imm_window++;
    else ep->sq_window += (uint32_t)wc[i].wr_id;
  }
  if (rc == 0 && ep->ack_wanted && ep->imm_window > 0) rc = post_pure_ack_locked(ep);
  if (rc == 0 && ep->write_blocked && ep->credits > 0 && ep->sq_window > 0) {
    ep->write_blocked = 0;
    *resume = 1;
  }
  pthread_mutex_unlock(&ep->mu);
  if (rc != 0) {
    fail(ep, "send completion", err);
    return -1;
  }
  return n;
}

void rrpc__bdp_poll(rrpc__brpc_ep *ep) {
  int delivered = 0, resume = 0;
  /* While the owner pauses reading, receives stay in the CQ unposted: the
   * peer runs out of credits, which is the back-pressure (on_read_resumed
   * polls again). */
  int paused = rrpc__socket_read_paused(ep->s);
  for (int armed = 0; armed < 2; armed++) {
    int r, w;
    do {
      r = paused ? 0 : poll_recv(ep, &delivered, &resume);
      w = r < 0 ? -1 : poll_send(ep, &resume);
    } while (r > 0 || w > 0);
    if (r < 0 || w < 0) return;
    /* Arm, then look once more: a completion that came in between would
     * raise no event. */
    if (armed == 0 && (ibv_req_notify_cq(ep->rcq, 0) != 0 || ibv_req_notify_cq(ep->scq, 0) != 0)) {
      fail(ep, "arming the completion queues", -1);
      return;
    }
  }
  if (resume) rrpc__socket_resume_write(ep->s);
  if (delivered) rrpc__socket_deliver(ep->s);
}
