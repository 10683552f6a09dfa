/* brpc_ep.c - a connection in brpc's RDMA dialect (brpc_ep.h): the hello
 * handshake on the TCP connection, the QP, the transport ops.
 *
 *   client                                server
 *   QP in INIT; hello (v2, 40 bytes) -->  hello read exactly; valid: QP in
 *                                         INIT, every receive posted, RTR,
 *                                    <--  RTS, then its hello (else brpc's
 *   valid: receives, RTR, RTS,            "won't do RDMA" hello)
 *   ACK 1 (else ACK 0: TCP)           -->  ACK 1: up; ACK 0: TCP
 *   first data after the settle time  -->  (settle(): brpc servers' ACK race)
 *
 * The QP is brought up as brpc does (PSN 0 both ways, path MTU at most
 * 1024, GRH, no RNR retry): PSNs and MTU are not exchanged. Every wait has
 * the handshake deadline (--rdma_handshake_timeout_ms); a server handshake
 * holds one of --rdma_max_concurrent_handshakes while it holds a QP. Once
 * up, the TCP connection only tells liveness. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "rrpc/errors.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/log.h"
#include "transport/clc_decline.h"
#include "transport/fallback_codes.h"
#include "transport/rdma/brpc/brpc_ep.h"
#include "transport/rdma/budget.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/endpoint.h"

static const rrpc_transport_ops brpc_ops;

int rrpc__brpc_hello_magic(const uint8_t *buf, size_t n) {
  size_t len;
  return n > 0 && rrpc__brpc_hello_frame(buf, n, &len) != RRPC_BRPC_NOT;
}

/* ---- verbs --------------------------------------------------------------------- */

static void cancel_timer(rrpc__brpc_ep *ep) {
  if (ep->timer != 0) rrpc__loop_timer_cancel(ep->loop, ep->timer);
  ep->timer = 0;
}

static void slot_put(rrpc__brpc_ep *ep) {
  if (ep->holds_slot) rrpc__hs_slot_put();
  ep->holds_slot = 0;
}

/* What verbs_destroy hands to the background verbs thread (verbs_bg.h):
 * the connection's own CQs, channel, QP and registered blocks. */
struct bep_teardown {
  struct rrpc__bg_job job;
  int heap; /* freed by the job */
  struct ibv_qp *qp;
  struct ibv_cq *scq, *rcq;
  struct ibv_comp_channel *cc;
  struct ibv_mr *recv_mr, *send_mr;
  char *recv_mem, *send_mem;
  uint64_t recv_bytes, send_bytes;
  size_t budget;
};

/* In the order the verbs need: the QP before its CQs, those before their
 * channel, the memory once nothing can reach it. Any thread. */
static void bep_teardown_run(struct bep_teardown *t) {
  if (t->qp != NULL) ibv_destroy_qp(t->qp);
  if (t->scq != NULL) ibv_destroy_cq(t->scq);
  if (t->rcq != NULL) ibv_destroy_cq(t->rcq);
  if (t->cc != NULL) ibv_destroy_comp_channel(t->cc);
  if (t->recv_mr != NULL) {
    ibv_dereg_mr(t->recv_mr);
    rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, (uint64_t)0 - t->recv_bytes);
  }
  if (t->send_mr != NULL) {
    ibv_dereg_mr(t->send_mr);
    rrpc__rdma_count(RRPC_RDMA_CNT_SLOT_BYTES, (uint64_t)0 - t->send_bytes);
  }
  free(t->recv_mem);
  free(t->send_mem);
  rrpc__rdma_budget_give(t->budget);
  if (t->heap) free(t);
}

static void bep_teardown_job(struct rrpc__bg_job *j) { bep_teardown_run((struct bep_teardown *)j); }

/* Detach the connection here (nothing posts any more, no event reaches
 * it), then destroy its verbs objects: on the background verbs thread from
 * a loop thread (under TCG a teardown costs the caller hundreds of ms),
 * at once elsewhere (a stopping loop's thread) or without memory for the
 * job. Safe twice. */
static void verbs_destroy(rrpc__brpc_ep *ep) {
  pthread_mutex_lock(&ep->mu);
  ep->dead = 1;
  pthread_mutex_unlock(&ep->mu);
  if (ep->cc_watching) rrpc__loop_watch_del(ep->loop, &ep->cc_watch);
  ep->cc_watching = 0;
  if (ep->qp_watched) rrpc__rdma_dev_unwatch_qp(ep->dev, ep->qp->qp_num);
  ep->qp_watched = 0;
  struct bep_teardown local, *t = NULL;
  int offload = rrpc__loop_in_thread(ep->loop);
  if (offload) t = calloc(1, sizeof *t);
  if (t != NULL) t->heap = 1;
  else {
    memset(&local, 0, sizeof local);
    t = &local;
  }
  t->qp = ep->qp;
  t->scq = ep->scq;
  t->rcq = ep->rcq;
  t->cc = ep->cc;
  t->recv_mr = ep->recv_mr;
  t->send_mr = ep->send_mr;
  t->recv_mem = ep->recv_mem;
  t->send_mem = ep->send_mem;
  t->recv_bytes = (uint64_t)ep->rq_size * RRPC_BRPC_RECV_BLOCK;
  t->send_bytes = (uint64_t)ep->nslots * ep->slot_size;
  t->budget = ep->budget;
  ep->qp = NULL;
  ep->scq = ep->rcq = NULL;
  ep->cc = NULL;
  ep->recv_mr = ep->send_mr = NULL;
  ep->recv_mem = ep->send_mem = NULL;
  ep->budget = 0;
  if (t->heap) {
    t->job.fn = bep_teardown_job;
    rrpc__verbs_bg_submit(&t->job);
  } else {
    bep_teardown_run(t);
  }
}

static void ep_free(rrpc__brpc_ep *ep) {
  cancel_timer(ep);
  slot_put(ep);
  verbs_destroy(ep);
  pthread_mutex_destroy(&ep->mu);
  free(ep);
}

static void on_cc_event(rrpc__watcher *w, uint32_t events) {
  (void)events;
  rrpc__brpc_ep *ep = w->arg;
  struct ibv_cq *cq;
  void *ctx;
  while (ibv_get_cq_event(ep->cc, &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    rrpc__rdma_count(RRPC_RDMA_CNT_WAKEUPS, 1);
  }
  /* Before the connection is up nothing is read: going up polls once. */
  if (ep->state == BEP_UP) rrpc__bdp_poll(ep);
}

static void on_async_event(void *arg, enum ibv_event_type ev) {
  rrpc__brpc_ep *ep = arg;
  if (ev != IBV_EVENT_QP_FATAL && ev != IBV_EVENT_QP_REQ_ERR && ev != IBV_EVENT_QP_ACCESS_ERR) return;
  RRPC_LOG(WARNING, "rdma (brpc dialect): async event %s: failing the connection", ibv_event_type_str(ev));
  pthread_mutex_lock(&ep->mu);
  ep->dead = 1;
  pthread_mutex_unlock(&ep->mu);
  if (ep->s != NULL) rrpc__socket_fail(ep->s, -RRPC_ERDMA);
}

/* Channel, CQs, and the QP in INIT. */
static int create_qp(rrpc__brpc_ep *ep) {
  struct ibv_context *ctx = ep->dev->ctx;
  ep->cc = ibv_create_comp_channel(ctx);
  if (ep->cc == NULL) return -RRPC_ERDMA;
  int fl = fcntl(ep->cc->fd, F_GETFL);
  if (fl < 0 || fcntl(ep->cc->fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
  ep->scq = ibv_create_cq(ctx, (int)ep->sq_size, ep, ep->cc, 0);
  ep->rcq = ibv_create_cq(ctx, (int)ep->rq_size, ep, ep->cc, 0);
  if (ep->scq == NULL || ep->rcq == NULL) return -RRPC_ERDMA;
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = ep->scq;
  qa.recv_cq = ep->rcq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = ep->sq_size;
  qa.cap.max_recv_wr = ep->rq_size;
  qa.cap.max_send_sge = 1;
  qa.cap.max_recv_sge = 1;
  ep->qp = ibv_create_qp(ep->dev->pd, &qa);
  if (ep->qp == NULL) return -RRPC_ERDMA;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = ep->dev->port;
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE;
  if (ibv_modify_qp(ep->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) != 0)
    return -RRPC_ERDMA;
  ep->cc_watch = (rrpc__watcher){.fd = ep->cc->fd, .events = EPOLLIN, .cb = on_cc_event, .arg = ep};
  int rc = rrpc__loop_watch_add(ep->loop, &ep->cc_watch);
  ep->cc_watching = rc == 0;
  if (rc == 0) {
    rc = rrpc__rdma_dev_watch_qp(ep->dev, ep->qp->qp_num, on_async_event, ep);
    ep->qp_watched = rc == 0;
  }
  return rc;
}

/* RTR and RTS as brpc brings its QPs up: nothing but QPN, GID and LID is
 * exchanged, so PSN 0 and an MTU every brpc peer uses. */
static int qp_connect(rrpc__brpc_ep *ep) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ep->dev->active_mtu < IBV_MTU_1024 ? ep->dev->active_mtu : IBV_MTU_1024;
  a.dest_qp_num = ep->peer.qp_num;
  a.rq_psn = 0;
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = ep->dev->port;
  a.ah_attr.dlid = (uint16_t)ep->peer.lid;
  a.ah_attr.is_global = 1;
  memcpy(a.ah_attr.grh.dgid.raw, ep->peer.gid, 16);
  a.ah_attr.grh.sgid_index = (uint8_t)ep->gid_index;
  a.ah_attr.grh.hop_limit = 16;
  if (ibv_modify_qp(ep->qp, &a,
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER) != 0)
    return -RRPC_ERDMA;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = 0;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 0; /* the windows never let a correct peer run out of receives */
  return ibv_modify_qp(ep->qp, &a,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                           IBV_QP_MAX_QP_RD_ATOMIC) != 0
             ? -RRPC_ERDMA
             : 0;
}

/* After the peer's hello: receives posted (INIT), then RTR, RTS. */
static int bring_up(rrpc__brpc_ep *ep) {
  int rc = rrpc__bdp_init(ep);
  return rc != 0 ? rc : qp_connect(ep);
}

/* ---- hello and ACK over TCP ----------------------------------------------------- */

static int send_bytes(rrpc__brpc_ep *ep, const uint8_t *b, size_t n) {
  int rc = rrpc__clc_send_all(rrpc__socket_fd(ep->s), b, n);
  return rc == -RRPC_ECLOSE ? -RRPC_EHANDSHAKE : rc;
}

static int send_hello(rrpc__brpc_ep *ep, int refuse) {
  struct rrpc__brpc_hello h;
  if (refuse) {
    rrpc__brpc_hello_refusal(ep->hello_version, 0, &h);
  } else {
    memset(&h, 0, sizeof h);
    h.version = ep->hello_version;
    h.hello_ver = 2;
    h.impl_ver = 1;
    h.block_size = RRPC_BRPC_RECV_BLOCK;
    h.sq_size = ep->sq_size;
    h.rq_size = ep->rq_size;
    h.lid = ep->dev->lid;
    memcpy(h.gid, ep->gid.raw, 16);
    h.gid_len = 16;
    h.qp_num = ep->qp->qp_num;
  }
  uint8_t buf[RRPC_BRPC_HELLO_MAX];
  size_t n = 0;
  int rc = rrpc__brpc_hello_encode(&h, buf, sizeof buf, &n);
  return rc != 0 ? rc : send_bytes(ep, buf, n);
}

static int send_ack(rrpc__brpc_ep *ep, uint32_t flags) {
  uint8_t a[RRPC_BRPC_ACK_LEN];
  rrpc__brpc_ack_encode(flags, a);
  return send_bytes(ep, a, sizeof a);
}

/* Read exactly up to `want` bytes into hs_buf. 1 = have them, 0 = wait,
 * or a negative code (EOF: -RRPC_ECLOSE). */
static int read_upto(rrpc__brpc_ep *ep, size_t want) {
  while (ep->hs_len < want) {
    ssize_t r = recv(rrpc__socket_fd(ep->s), ep->hs_buf + ep->hs_len, want - ep->hs_len, MSG_DONTWAIT);
    if (r == 0) return -RRPC_ECLOSE;
    if (r < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    ep->hs_len += (size_t)r;
  }
  return 1;
}

/* A whole hello, read exactly (the bytes after it are the peer's next). */
static int read_hello(rrpc__brpc_ep *ep) {
  for (;;) {
    size_t len = 0;
    int c = rrpc__brpc_hello_frame(ep->hs_buf, ep->hs_len, &len);
    if (c == RRPC_BRPC_NOT || c < 0) return -RRPC_EPARSE;
    if (c == RRPC_BRPC_WHOLE) break;
    /* Enough for the length field first, then the whole message. */
    size_t want = ep->hs_len < RRPC_BRPC_V3_HDR_LEN ? RRPC_BRPC_V3_HDR_LEN : ep->hs_len;
    if (ep->hs_len >= 6 && ep->hs_buf[3] == 'A') want = (size_t)(ep->hs_buf[4] << 8 | ep->hs_buf[5]);
    else if (ep->hs_len >= RRPC_BRPC_V3_HDR_LEN) want = RRPC_BRPC_V3_HDR_LEN + ((size_t)ep->hs_buf[6] << 8 | ep->hs_buf[7]);
    if (want > sizeof ep->hs_buf) return -RRPC_EPARSE;
    int rc = read_upto(ep, want);
    if (rc <= 0) return rc;
  }
  int rc = rrpc__brpc_hello_decode(ep->hs_buf, ep->hs_len, &ep->peer);
  ep->hs_len = 0;
  return rc == 0 ? 1 : -RRPC_EPARSE;
}

/* ---- outcomes ------------------------------------------------------------------- */

static void hard_fail(rrpc__brpc_ep *ep, int code, const char *what) {
  char peer[64];
  rrpc__socket_peer_str(ep->s, peer, sizeof peer);
  RRPC_LOG(WARNING, "rdma (brpc dialect) with %s: %s: %s", peer, what, rrpc_strerror(code));
  if (code == -RRPC_EPARSE) rrpc__limit_count(RRPC__LC_BRPC_HELLO_ERRORS);
  ep->state = BEP_FAILED;
  cancel_timer(ep);
  slot_put(ep);
  rrpc__socket_fail(ep->s, code == -RRPC_EPARSE ? -RRPC_EHANDSHAKE : code);
}

/* Go on over TCP on this connection; what the peer sent after the
 * handshake is read by TCP from the fd. */
static void to_tcp(rrpc__brpc_ep *ep, uint32_t reason) {
  rrpc__socket *s = ep->s;
  rrpc__rdma_note_fallback(reason);
  rrpc__socket_note_fallback(s, reason);
  if (ep->opts->no_fallback) {
    hard_fail(ep, -RRPC_EDECLINED, "no RDMA");
    return;
  }
  ep->s = NULL;
  ep_free(ep);
  const rrpc_transport_ops *tcp = rrpc__transport_tcp();
  rrpc__socket_switch_transport(s, tcp);
  tcp->start(s, rrpc__socket_is_client(s));
  if (!rrpc__socket_is_client(s)) tcp->on_fd_event(s, EPOLLIN);
}

/* The server closed the connection on our hello without a byte of answer:
 * it speaks neither dialect (brpc <= 1.17 in TCP mode, anything that
 * closes on bytes it does not know). As after a CLC Proposal: remember it
 * as TCP-only and call it again over plain TCP, once; the queued calls go
 * there. Loop thread. */
static void retry_over_tcp(rrpc__brpc_ep *ep) {
  rrpc__socket *s = ep->s;
  rrpc__rdma_note_closed_on_handshake(s, ep->opts->tcp_only_ttl_s);
  if (ep->opts->no_fallback) {
    hard_fail(ep, -RRPC_EDECLINED, "the server closed on the hello");
    return;
  }
  ep->s = NULL;
  ep_free(ep);
  int rc = rrpc__socket_reconnect(s, rrpc__transport_tcp());
  if (rc != 0) rrpc__socket_fail(s, rc);
}

static void up(rrpc__brpc_ep *ep) {
  cancel_timer(ep);
  slot_put(ep);
  ep->state = BEP_UP;
  rrpc__rdma_count(RRPC_RDMA_CNT_CONN_RDMA, 1);
  if (ep->opts->trace_verbose) RRPC_LOG(INFO, "rdma up (brpc dialect): qpn=%u peer_qpn=%u", ep->qp->qp_num, ep->peer.qp_num);
  rrpc__socket_ready(ep->s, 0);
  rrpc__bdp_poll(ep);
}

/* The ACK has had its head start: the first data may go, over RDMA or,
 * after ACK 0, over TCP. */
static void settled(rrpc__brpc_ep *ep) {
  if (ep->tcp_reason != 0) to_tcp(ep, ep->tcp_reason);
  else up(ep);
}

static void on_settled(void *arg) {
  rrpc__brpc_ep *ep = arg;
  ep->timer = 0;
  settled(ep);
}

/* After the ACK, hold the first data for --rdma_brpc_ack_settle_us. A brpc
 * server before apache/brpc#3505 parses the ACK from the bytes it read off
 * TCP, and from the moment its QP is up appends what arrives over RDMA to
 * the same buffer, on another thread: bytes there before the ACK was parsed
 * make it close the connection ("Too many bytes in handshake ACK", or
 * "unknown message" when they land on the other side of the ACK). After
 * ACK 0 the same holds for TCP bytes read together with the ACK. Nothing
 * in the protocol says when the server has parsed the ACK, so the client
 * leaves it that long; queued calls wait, on a timer. brpc's TCP-mode
 * refusal comes from a parser that takes exactly the 4 bytes: no wait.
 * tcp_reason: 0 = RDMA, else go on over TCP for this reason. */
static void settle(rrpc__brpc_ep *ep, uint32_t tcp_reason) {
  int us = ep->opts->brpc_ack_settle_us;
  cancel_timer(ep);
  ep->tcp_reason = tcp_reason;
  int tcp_mode_refusal = tcp_reason != 0 && ep->peer.version == 2 && ep->peer.hello_ver == RRPC_BRPC_V2_TCP_MODE_VER;
  if (us <= 0 || tcp_mode_refusal) {
    settled(ep);
    return;
  }
  ep->state = BEP_CLIENT_SETTLE;
  if (rrpc__loop_timer_add(ep->loop, rrpc__now_us() + (uint64_t)us, on_settled, ep, &ep->timer) != 0) {
    ep->timer = 0;
    settled(ep);
  }
}

static void on_deadline(void *arg) {
  rrpc__brpc_ep *ep = arg;
  ep->timer = 0;
  if (!ep->is_client) rrpc__limit_count(RRPC__LC_CLC_SNIFF_TIMEOUTS);
  hard_fail(ep, -ETIMEDOUT, "the peer did not finish the hello handshake");
}

static void arm_deadline(rrpc__brpc_ep *ep) {
  int ms = ep->opts->handshake_timeout_ms > 0 ? ep->opts->handshake_timeout_ms : 2000;
  if (rrpc__loop_timer_add(ep->loop, rrpc__now_us() + (uint64_t)ms * 1000u, on_deadline, ep, &ep->timer) != 0)
    ep->timer = 0;
}

/* ---- client -------------------------------------------------------------------- */

static void client_on_hello(rrpc__brpc_ep *ep) {
  if (!rrpc__brpc_hello_valid(&ep->peer)) {
    /* The server will not do RDMA: say so and go on over TCP. */
    int rc = send_ack(ep, 0);
    if (rc != 0) hard_fail(ep, rc, "sending the ACK");
    else settle(ep, RRPC_FB_BRPC_NOT_SERVED);
    return;
  }
  int rc = bring_up(ep);
  if (rc != 0) {
    /* Our side failed: ACK 0 keeps the connection, over TCP. */
    RRPC_LOG(WARNING, "rdma (brpc dialect): cannot bring the QP up: %s", rrpc_strerror(rc));
    rc = send_ack(ep, 0);
    if (rc != 0) hard_fail(ep, rc, "sending the ACK");
    else settle(ep, RRPC_CLC_DECL_INTERR);
    return;
  }
  rc = send_ack(ep, RRPC_BRPC_ACK_RDMA);
  if (rc != 0) {
    hard_fail(ep, rc, "sending the ACK");
    return;
  }
  settle(ep, 0);
}

/* ---- server -------------------------------------------------------------------- */

static void server_refuse(rrpc__brpc_ep *ep, uint32_t reason) {
  verbs_destroy(ep);
  slot_put(ep);
  ep->refused = reason;
  int rc = send_hello(ep, 1);
  if (rc != 0) hard_fail(ep, rc, "sending the refusal");
  else ep->state = BEP_SERVER_WAIT_ACK;
}

static void server_on_hello(rrpc__brpc_ep *ep) {
  ep->hello_version = ep->peer.version;
  if (!rrpc__brpc_hello_valid(&ep->peer)) {
    server_refuse(ep, RRPC_FB_BRPC_INVALID_HELLO);
    return;
  }
  if (rrpc__hs_slot_try(ep->opts->max_handshakes) != 0) {
    server_refuse(ep, RRPC_CLC_DECL_MEM);
    return;
  }
  ep->holds_slot = 1;
  int rc = create_qp(ep);
  if (rc == 0) rc = bring_up(ep);
  if (rc == 0) rc = send_hello(ep, 0);
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma (brpc dialect): cannot bring a QP up for a brpc client: %s", rrpc_strerror(rc));
    server_refuse(ep, RRPC_CLC_DECL_INTERR);
    return;
  }
  ep->state = BEP_SERVER_WAIT_ACK;
}

static void server_on_ack(rrpc__brpc_ep *ep) {
  uint32_t flags = rrpc__brpc_ack_decode(ep->hs_buf);
  ep->hs_len = 0;
  if (ep->refused != 0) {
    if (flags & RRPC_BRPC_ACK_RDMA) hard_fail(ep, -RRPC_EPARSE, "ACK asks for RDMA after a refusal");
    else to_tcp(ep, ep->refused);
    return;
  }
  if (flags & RRPC_BRPC_ACK_RDMA) up(ep);
  else to_tcp(ep, RRPC_CLC_DECL_PEERDECL);
}

/* ---- the ops ---------------------------------------------------------------------- */

/* Once up, the TCP connection only tells liveness. */
static void after_up(rrpc__brpc_ep *ep) {
  uint8_t b[64];
  ssize_t r = recv(rrpc__socket_fd(ep->s), b, sizeof b, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  ep->state = BEP_FAILED;
  rrpc__socket_fail(ep->s, r == 0 ? -RRPC_ECLOSE : (r < 0 ? -errno : -RRPC_EPARSE));
}

static void brpc_on_fd_event(rrpc__socket *s, uint32_t events) {
  (void)events;
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  int rc;
  switch (ep->state) {
  case BEP_CLIENT_WAIT_HELLO:
  case BEP_SERVER_WAIT_HELLO:
    rc = read_hello(ep);
    if ((rc == -RRPC_ECLOSE || rc == -ECONNRESET) && ep->state == BEP_CLIENT_WAIT_HELLO && ep->hs_len == 0)
      retry_over_tcp(ep);
    else if (rc < 0) hard_fail(ep, rc, "reading the hello");
    else if (rc > 0 && ep->state == BEP_CLIENT_WAIT_HELLO) client_on_hello(ep);
    else if (rc > 0) server_on_hello(ep);
    return;
  case BEP_SERVER_WAIT_ACK:
    rc = read_upto(ep, RRPC_BRPC_ACK_LEN);
    if (rc < 0) hard_fail(ep, rc, "reading the ACK");
    else if (rc > 0) server_on_ack(ep);
    return;
  default:
    after_up(ep);
  }
}

static void brpc_on_fail(rrpc__socket *s, int code) {
  (void)code;
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return;
  cancel_timer(ep);
  pthread_mutex_lock(&ep->mu);
  ep->dead = 1;
  pthread_mutex_unlock(&ep->mu);
  ep->state = BEP_FAILED;
}

static void brpc_close(rrpc__socket *s) {
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return;
  rrpc__socket_set_tstate(s, NULL);
  ep->s = NULL;
  ep_free(ep);
}

/* Reading goes on after back-pressure: take what the peer sent meanwhile. */
static void brpc_on_read_resumed(rrpc__socket *s) {
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  if (ep != NULL && ep->state == BEP_UP) rrpc__bdp_poll(ep);
}

static int brpc_is_rdma(const rrpc__socket *s) {
  const rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  return ep != NULL && ep->state == BEP_UP;
}

static const char *state_name(rrpc__bep_state st) {
  switch (st) {
  case BEP_CLIENT_WAIT_HELLO: return "BRPC_CLIENT_WAIT_HELLO";
  case BEP_CLIENT_SETTLE: return "BRPC_CLIENT_SETTLE";
  case BEP_SERVER_WAIT_HELLO: return "BRPC_SERVER_WAIT_HELLO";
  case BEP_SERVER_WAIT_ACK: return "BRPC_SERVER_WAIT_ACK";
  case BEP_UP: return "UP";
  default: return "FAILED";
  }
}

static int brpc_describe(const rrpc__socket *s, char *buf, size_t len) {
  const rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return snprintf(buf, len, "rdma-brpc (closed)") < 0 ? -EINVAL : 0;
  snprintf(buf, len, "rdma-brpc %s qpn=%u peer_qpn=%u peer_block=%u", state_name(ep->state),
           ep->qp ? ep->qp->qp_num : 0, ep->peer.qp_num, ep->peer.block_size);
  return 0;
}

static void brpc_facts(const rrpc__socket *s, rrpc__conn_facts *out) {
  snprintf(out->dialect, sizeof out->dialect, "brpc");
  rrpc__brpc_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return;
  out->is_rdma = ep->state == BEP_UP;
  snprintf(out->state, sizeof out->state, "%s", state_name(ep->state));
  snprintf(out->device, sizeof out->device, "%s", ep->dev->name);
  out->port = ep->dev->port;
  out->gid_index = ep->gid_index;
  out->qpn = ep->qp ? ep->qp->qp_num : 0;
  out->peer_qpn = ep->peer.qp_num;
  out->sq_size = ep->sq_size;
  out->rq_size = ep->rq_size;
  pthread_mutex_lock(&ep->mu);
  out->credits = ep->credits;
  out->credits_max = ep->local_cap;
  out->sq_used = ep->local_cap - ep->sq_window;
  out->write_blocked = ep->write_blocked;
  pthread_mutex_unlock(&ep->mu);
}

static int brpc_start(rrpc__socket *s, int is_client) {
  (void)s;
  (void)is_client;
  return -EINVAL; /* never a connection's first transport: see the two below */
}

static const rrpc_transport_ops brpc_ops = {
    .name = "rdma-brpc",
    .start = brpc_start,
    .write = rrpc__bdp_write,
    .on_fd_event = brpc_on_fd_event,
    .on_fail = brpc_on_fail,
    .close = brpc_close,
    .describe = brpc_describe,
    .is_rdma = brpc_is_rdma,
    .facts = brpc_facts,
    .on_read_resumed = brpc_on_read_resumed,
};

const rrpc_transport_ops *rrpc__brpc_ops(void) { return &brpc_ops; }

static uint32_t queue_depth(int want) {
  uint32_t v = want > 0 ? (uint32_t)want : 128;
  return v < 16 ? 16 : v > 4096 ? 4096 : v;
}

static rrpc__brpc_ep *ep_new(rrpc__socket *s, rrpc__rdma_dev *dev, int is_client) {
  rrpc__brpc_ep *ep = calloc(1, sizeof *ep);
  if (ep == NULL) return NULL;
  ep->s = s;
  ep->loop = rrpc__socket_loop(s);
  ep->dev = dev;
  ep->opts = rrpc__rdma_options();
  ep->is_client = is_client;
  ep->hello_version = 2;
  ep->sq_size = queue_depth(ep->opts->sq_size);
  ep->rq_size = queue_depth(ep->opts->rq_size);
  pthread_mutex_init(&ep->mu, NULL);
  struct sockaddr_storage local;
  rrpc__socket_local_addr(s, &local);
  if (rrpc__rdma_dev_pick_gid(dev, &local, &ep->gid_index, &ep->gid) != 0) {
    pthread_mutex_destroy(&ep->mu);
    free(ep);
    return NULL;
  }
  rrpc__socket_switch_transport(s, &brpc_ops);
  rrpc__socket_set_tstate(s, ep);
  return ep;
}

int rrpc__brpc_client_start(rrpc__socket *s, rrpc__rdma_dev *dev) {
  rrpc__brpc_ep *ep = ep_new(s, dev, 1);
  if (ep == NULL) return -ENOMEM;
  ep->state = BEP_CLIENT_WAIT_HELLO;
  int rc = create_qp(ep);
  if (rc == 0) rc = send_hello(ep, 0);
  if (rc != 0) {
    hard_fail(ep, rc, "starting the hello handshake");
    return 0;
  }
  arm_deadline(ep);
  return 0;
}

void rrpc__brpc_server_take(rrpc__socket *s, rrpc__rdma_dev *dev) {
  rrpc__brpc_ep *ep = ep_new(s, dev, 0);
  if (ep == NULL) {
    /* No GID for this address (or no memory): the TCP sniff refuses the
     * hello, and the client goes on over TCP. */
    const rrpc_transport_ops *tcp = rrpc__transport_tcp_rdma_server();
    rrpc__socket_switch_transport(s, tcp);
    tcp->start(s, 0);
    tcp->on_fd_event(s, EPOLLIN);
    return;
  }
  ep->state = BEP_SERVER_WAIT_HELLO;
  arm_deadline(ep);
  brpc_on_fd_event(s, EPOLLIN);
}

/* brpc's entry in the dialect table (transport/rdma/dialect.h). */
const struct rrpc__rdma_dialect rrpc__rdma_dialect_brpc = {
    .name = "brpc",
    .client_start = rrpc__brpc_client_start,
    .hello_is = rrpc__brpc_hello_magic,
    .server_take = rrpc__brpc_server_take,
};
