/* transport/rdma/brpc/brpc_ep.h - private to the RDMA transport: one connection
 * in Apache brpc's RDMA dialect (../shared/specs/brpc-rdma-facts.md §1-2),
 * as its own transport ops. brpc_ep.c owns the hello handshake over the TCP
 * connection, the QP bring-up (RC, PSN 0, path MTU <= 1024, GRH, no RNR
 * retry) and the lifetime; brpc_dp.c the data path: SEND_WITH_IMM into the
 * peer's posted receive blocks, immediate = receive credits, brpc's windows.
 *
 * Memory is the connection's own: rq receive blocks and sq send slots in two
 * registered allocations; bytes are copied in and out (no zero-copy).
 *
 * Threads: the handshake, polling and teardown run on the socket's loop
 * thread; the write op on any thread holding the socket's write token.
 * `mu` guards the windows and every post to the send queue. */
#ifndef RRPC_TRANSPORT_RDMA_BRPC_EP_H
#define RRPC_TRANSPORT_RDMA_BRPC_EP_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "rrpc/transport.h"
#include "transport/rdma/device.h"
#include "transport/rdma/wire/brpc_hello.h"

/* brpc's RESERVED_WR_NUM: receives kept for pure ACKs, and its limit on
 * pure ACKs in flight. */
#define RRPC_BRPC_RESERVED_WR 3
#define RRPC_BRPC_RECV_BLOCK 8192 /* my receive payload per WR (announced) */
#define RRPC_BRPC_SEND_SLOT_MAX 8192

typedef enum {
  BEP_CLIENT_WAIT_HELLO, /* client: hello sent */
  BEP_CLIENT_SETTLE,     /* client: ACK sent, no data yet (--rdma_brpc_ack_settle_us) */
  BEP_SERVER_WAIT_HELLO, /* server: reading the client's hello */
  BEP_SERVER_WAIT_ACK,   /* server: hello sent, QP up */
  BEP_UP,
  BEP_FAILED,
} rrpc__bep_state;

typedef struct rrpc__brpc_ep {
  rrpc__socket *s;
  rrpc__loop *loop;
  rrpc__rdma_dev *dev;
  const rrpc_rdma_options *opts;
  int is_client;
  _Atomic rrpc__bep_state state;
  int hello_version; /* the form this connection speaks (2 or 3) */

  /* handshake (loop thread) */
  uint8_t hs_buf[RRPC_BRPC_HELLO_MAX];
  size_t hs_len;
  rrpc__timer_id timer;
  int gid_index;
  union ibv_gid gid;
  int holds_slot; /* server: one of --rdma_max_concurrent_handshakes */
  uint32_t refused; /* server: the refusal was sent for this reason, 0 = none */
  uint32_t tcp_reason; /* client, settling: TCP after it for this reason, 0 = RDMA */
  struct rrpc__brpc_hello peer;

  /* verbs (created and destroyed on the loop thread) */
  struct ibv_comp_channel *cc;
  struct ibv_cq *scq, *rcq;
  struct ibv_qp *qp;
  rrpc__watcher cc_watch;
  int cc_watching, qp_watched;
  uint32_t sq_size, rq_size;
  char *recv_mem, *send_mem;
  size_t budget; /* their bytes, taken from the registered cap (budget.h) */
  struct ibv_mr *recv_mr, *send_mr;
  uint32_t slot_size, nslots; /* send slots: nslots x slot_size */

  /* --- under mu --- */
  pthread_mutex_t mu;
  uint32_t local_cap, remote_cap;
  uint32_t sq_window;   /* data WRs I may still post (SQ slots) */
  uint32_t credits;     /* receives of the peer I may still consume */
  uint32_t imm_window;  /* pure ACKs I may still post */
  uint32_t owed;        /* receives I re-posted and have not reported */
  uint32_t unsignaled;  /* data WRs since the last signaled one */
  uint32_t since_solicit;
  uint64_t slot_head;   /* next send slot to fill (count of data WRs) */
  int ack_wanted;       /* a pure ACK is due but no imm slot was free */
  int write_blocked;
  int dead;             /* nothing more is posted */
} rrpc__brpc_ep;

/* ---- brpc_ep.c ------------------------------------------------------------ */
/* The transport ops of a brpc-dialect connection. */
const rrpc_transport_ops *rrpc__brpc_ops(void);
/* Client: start the brpc handshake on a connected socket (from the RDMA
 * transport's start, with --rdma_dialect=brpc). 0 or a negative code. */
int rrpc__brpc_client_start(rrpc__socket *s, rrpc__rdma_dev *dev);
/* Server: the first bytes on `s` are a brpc hello: take the connection over
 * (switches the socket's transport). Loop thread. */
void rrpc__brpc_server_take(rrpc__socket *s, rrpc__rdma_dev *dev);
/* 1 if `buf` (n bytes) starts like a brpc hello. */
int rrpc__brpc_hello_magic(const uint8_t *buf, size_t n);

/* ---- brpc_dp.c ------------------------------------------------------------ */
/* Windows from both hellos; posts every receive. Before RTR. */
int rrpc__bdp_init(rrpc__brpc_ep *ep);
int rrpc__bdp_write(rrpc__socket *s, rrpc_iobuf *data);
/* Drain both CQs, deliver, re-arm. Loop thread. */
void rrpc__bdp_poll(rrpc__brpc_ep *ep);

#endif /* RRPC_TRANSPORT_RDMA_BRPC_EP_H */
