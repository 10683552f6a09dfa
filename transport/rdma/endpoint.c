/* endpoint.c - the RDMA transport's ops table and the life of an endpoint:
 * its verbs resources (CQs, RC QP, receive ring, CDC slots), QP bring-up
 * with the peer's CLC parameters, and falling back to TCP. The handshake
 * itself is in handshake.c, the data path in datapath.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/endpoint.h"
#include "rrpc/remote/carriage.h"
#include "transport/rdma/remote/post.h"
#include "transport/rdma/budget.h"
#include "transport/clc_decline.h"
#include "transport/fallback_codes.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/slots.h"
#include "transport/rdma/tcp_only.h"
#include "transport/rdma/rdma_transport.h"
#include "transport/smc/cdc.h"

#define RDMA_QUEUE_MIN 16
#define RDMA_QUEUE_MAX 4096
/* Elastic mode's receive slots per connection: 16 x 64 B (CDCs and
 * control messages only; data lands in granted pieces). */
#define RDMA_ELASTIC_RQ 16
/* What the process-wide piece cache may keep (pieces_mem.h). */
/* QP retry settings (see qp_connect). */
#define RDMA_ACK_TIMEOUT RRPC_EP_ACK_TIMEOUT
#define RDMA_RETRY_CNT RRPC_EP_RETRY_CNT
#define RDMA_RNR_RETRY RRPC_EP_RNR_RETRY

static const rrpc_transport_ops rdma_ops;

const char *rrpc__ep_state_name(rrpc__ep_state st) {
  switch (st) {
  case EP_NEW: return "NEW";
  case EP_SERVER_WAIT_PROPOSAL: return "SERVER_WAIT_PROPOSAL";
  case EP_CLIENT_WAIT_ACCEPT: return "CLIENT_WAIT_ACCEPT";
  case EP_SERVER_WAIT_CONFIRM: return "SERVER_WAIT_CONFIRM";
  case EP_CLIENT_WAIT_READY: return "CLIENT_WAIT_READY";
  case EP_UP: return "UP";
  case EP_FAILED: return "FAILED";
  }
  return "?";
}

/* Queue depths are powers of two (the CLC carries log2 of the receive depth)
 * within what the window accounting and devices accept. */
static uint32_t queue_size(int want) {
  uint32_t v = want > 0 ? (uint32_t)want : 128;
  if (v < RDMA_QUEUE_MIN) v = RDMA_QUEUE_MIN;
  if (v > RDMA_QUEUE_MAX) v = RDMA_QUEUE_MAX;
  uint32_t p = 1;
  while (p * 2 <= v) p *= 2;
  return p;
}

static uint32_t random_u32(void) {
  uint32_t v = 0;
  if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint32_t)rrpc__now_us() * 2654435761u;
  return v;
}

/* ---- lifetime ---------------------------------------------------------------- */

/* The handshake step's deadline (armed in rrpc__ep_hs_apply). */
static void hs_timer_cancel(rrpc__rdma_ep *ep) {
  if (ep->hs.timer != 0) (void)rrpc__loop_timer_cancel(ep->loop, ep->hs.timer);
  ep->hs.timer = 0;
}

/* Registered bytes outside the pool (rrpc_rdma_stats ring_bytes, slot_bytes). */
static size_t slots_len(const rrpc__rdma_ep *ep) { return (size_t)(ep->vb.rq_size + 1) * RRPC_EP_SLOT_SIZE; }

static void ep_free(rrpc__rdma_ep *ep) {
  if (ep->vb.ring_mr != NULL && ibv_dereg_mr(ep->vb.ring_mr) == 0)
    rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, (uint64_t)0 - ep->vb.ring_size);
  free(ep->vb.ring);
  rrpc__rdma_budget_give(ep->vb.budget);
  ep->dl->dp_free(ep);
  rrpc__iobuf_destroy(&ep->el_held);
  rrpc__rx_reclaim_destroy(&ep->dp.reclaim);
  free(ep);
}

void rrpc__ep_unref(rrpc__rdma_ep *ep) {
  if (atomic_fetch_sub_explicit(&ep->refs, 1, memory_order_acq_rel) == 1) ep_free(ep);
}

static void on_async_event(void *arg, enum ibv_event_type ev) {
  rrpc__rdma_ep *ep = arg;
  if (ev == IBV_EVENT_QP_FATAL || ev == IBV_EVENT_QP_REQ_ERR || ev == IBV_EVENT_QP_ACCESS_ERR ||
      ev == IBV_EVENT_PORT_ERR) {
    RRPC_LOG(WARNING, "rdma qpn=%u: async event %s: failing the connection", ep->vb.qp ? ep->vb.qp->qp_num : 0,
             ibv_event_type_str(ev));
    rrpc__ep_lock(ep);
    ep->dp.qp_dead = 1;
    rrpc__ep_unlock(ep);
    if (ep->s != NULL) rrpc__socket_fail(ep->s, -RRPC_ERDMA);
  }
}

/* The loop's shared CQs call these (cqs.h). */
static void cq_on_wc(void *user, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop) {
  rrpc__rdma_ep *ep = user;
  if (is_send && rrpc__rmt_car_wc(ep, wc)) return; /* remote memory's one-sided pieces and binds */
  ep->dl->dp_on_wc(ep, wc, is_send, drop);
}
static void cq_after(void *user) {
  rrpc__rdma_ep *ep = user;
  ep->dl->dp_after(ep);
}
static void cq_ref(void *user) { atomic_fetch_add(&((rrpc__rdma_ep *)user)->refs, 1); }
static void cq_unref(void *user) { rrpc__ep_unref(user); }
static const struct rrpc__cq_user_ops cq_ops = {
    .on_wc = cq_on_wc, .after = cq_after, .ref = cq_ref, .unref = cq_unref};

/* The background half of verbs_destroy (or inline, see there): what was
 * detached, destroyed in the one order that works. Any thread. */
static void teardown_run(struct rrpc__ep_teardown *t) {
  /* Remote memory's posts end and its windows go first (carriage.c). */
  rrpc__rmt_car_teardown(t->ep);
  /* Remote access to the ring ends with the connection, even while
   * zero-copy slices keep the ring's memory. Deallocated once, never
   * invalidated (a second invalidation crashes rxe 6.1), and before the
   * QP: a window bound to a QP holds it, and rxe's destroy_qp then waits
   * ~50 s for that reference. */
  if (t->mw != NULL) ibv_dealloc_mw(t->mw);
  /* The same for any window the dialect bound besides (elastic pieces). */
  t->ep->dl->dp_unbind(t->ep);
  if (t->qp != NULL) ibv_destroy_qp(t->qp);
  /* After the QP: rdma_cm only connected it (cm/cm.c). */
  rrpc__cm_destroy(t->cm_id, t->cm_ch);
  /* After the QP: its completions may still sit in the shared CQs, whose
   * reservation for them ends with the next drain after this. */
  rrpc__cqs_leave(&t->cqm);
  /* After the QP: no receive can land in them any more. */
  rrpc__slots_put(t->slots, t->slots_len, t->slots_mr);
  /* The QP is gone, so the device no longer reads what was in flight. */
  if (t->inflight != NULL)
    for (uint32_t i = 0; i < t->n_inflight; i++) rrpc__iobuf_destroy(&t->inflight[i].buf);
  free(t->inflight);
  rrpc__ep_unref(t->ep); /* the last one frees the ring here, off the loop */
}

static void teardown_job(struct rrpc__bg_job *j) { teardown_run((struct rrpc__ep_teardown *)j); }

/* Undo verbs_create. Safe on a partial creation and twice. On the loop
 * thread the connection is only detached here (nothing can post or be
 * dispatched to it any more) and the verbs calls, slow in rxe, run on the
 * background verbs thread; elsewhere (a stopping loop, its stop hooks)
 * they run at once, as the loop will not be there to hear back. */
static void verbs_destroy_ex(rrpc__rdma_ep *ep, int offload) {
  /* Nothing may post once the QP starts going away: a ring slice released
   * on another thread checks qp_dead under mu before it posts a CDC. */
  rrpc__ep_lock(ep);
  ep->dp.qp_dead = 1;
  rrpc__ep_unlock(ep);
  ep->dl->dp_stop(ep);
  /* Its completions still queued in the shared CQs go nowhere now. */
  rrpc__cqs_remove(&ep->vb.cqm);
  if (ep->vb.qp_watched) {
    rrpc__rdma_dev_unwatch_qp(ep->dev, ep->vb.qp->qp_num);
    ep->vb.qp_watched = 0;
  }
  struct rrpc__ep_teardown d;
  memset(&d, 0, sizeof d);
  rrpc__cm_detach(ep, &d.cm_id, &d.cm_ch);
  rrpc__ep_lock(ep);
  d.qp = ep->vb.qp;
  ep->vb.qp = NULL;
  d.inflight = ep->dp.inflight;
  d.n_inflight = ep->vb.sq_size;
  ep->dp.inflight = NULL;
  ep->dp.if_count = 0;
  rrpc__ep_unlock(ep);
  d.mw = ep->vb.ring_mw;
  ep->vb.ring_mw = NULL;
  d.cqm = ep->vb.cqm;
  memset(&ep->vb.cqm, 0, sizeof ep->vb.cqm);
  d.slots_mr = ep->vb.slots_mr;
  d.slots_len = slots_len(ep);
  ep->vb.slots_mr = NULL;
  d.slots = ep->vb.slots;
  ep->vb.slots = NULL;
  if (d.qp == NULL && d.mw == NULL && d.cqm.cqs == NULL && d.slots_mr == NULL && d.slots == NULL &&
      d.inflight == NULL && d.cm_id == NULL && d.cm_ch == NULL)
    return; /* nothing was created, or it is already on its way */
  atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
  d.ep = ep;
  if (!offload || ep->td_used) {
    teardown_run(&d);
    return;
  }
  /* The job lives in the endpoint (no allocation that could fail here),
   * which its reference keeps alive until the job ran. */
  ep->td_used = 1;
  ep->td = d;
  ep->td.job.fn = teardown_job;
  rrpc__verbs_bg_submit(&ep->td.job);
}

static void verbs_destroy(rrpc__rdma_ep *ep) { verbs_destroy_ex(ep, rrpc__loop_in_thread(ep->loop)); }

/* Bind the ring's window to our (connected) QP: from now on only the peer
 * at the other end of this QP can write the ring. Posted before anything
 * that lets the peer write (the server's first CDC, the client's Confirm),
 * so the send queue's order makes it effective first. Signaled, so the
 * send-queue accounting sees it complete. */
int rrpc__ep_ring_bind(rrpc__rdma_ep *ep) {
  if (ep->vb.ring_mw == NULL) return 0;
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = ep->dp.wr_seq + 1;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = ep->vb.ring_mw;
  wr.bind_mw.rkey = ep->vb.ring_rkey;
  wr.bind_mw.bind_info.mr = ep->vb.ring_mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)ep->vb.ring;
  wr.bind_mw.bind_info.length = ep->vb.ring_size;
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int rc = ibv_post_send(ep->vb.qp, &wr, &bad);
  if (rc != 0) return -rc;
  ep->dp.wr_seq++;
  /* Type-2 binds leave storing the new key to the application. */
  ep->vb.ring_mw->rkey = ep->vb.ring_rkey;
  return 0;
}

/* A ring made for a connection that will not use it: a client's late ring
 * whose connection went while it was made (ring_late). Its window, MR and
 * memory go on the background thread, its budget with them. Never bound. */
struct ring_drop_job {
  struct rrpc__bg_job job;
  struct ibv_mw *mw;
  struct ibv_mr *mr;
  char *ring;
  uint32_t size;
  size_t budget;
};

static void ring_release(struct ibv_mw *mw, struct ibv_mr *mr, char *ring, uint32_t size, size_t budget) {
  if (mw != NULL) ibv_dealloc_mw(mw);
  if (mr != NULL && ibv_dereg_mr(mr) == 0) rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, (uint64_t)0 - size);
  free(ring);
  rrpc__rdma_budget_give(budget);
}

static void ring_drop_run(struct rrpc__bg_job *j) {
  struct ring_drop_job *d = (struct ring_drop_job *)j;
  ring_release(d->mw, d->mr, d->ring, d->size, d->budget);
  free(d);
}

/* Hand vb's ring (and the budget it took) to the background thread. */
static void ring_drop(struct rrpc__ep_verbs *vb) {
  if (vb->ring == NULL && vb->budget == 0) return;
  struct ring_drop_job *d = malloc(sizeof *d);
  if (d == NULL) {
    ring_release(vb->ring_mw, vb->ring_mr, vb->ring, vb->ring_size, vb->budget); /* here, then */
  } else {
    *d = (struct ring_drop_job){
        .mw = vb->ring_mw, .mr = vb->ring_mr, .ring = vb->ring, .size = vb->ring_size, .budget = vb->budget};
    d->job.fn = ring_drop_run;
    rrpc__verbs_bg_submit(&d->job);
  }
  vb->budget = 0;
  vb->ring_mw = NULL;
  vb->ring_mr = NULL;
  vb->ring = NULL;
  memset(&vb->ring_region, 0, sizeof vb->ring_region);
}

/* ---- creation, on the background verbs thread ------------------------------------
 * The handshake's CREATE step: the loop joins its shared CQs (cheap, and
 * the set belongs to the loop), then the background thread creates the QP,
 * registers the ring and the slots and posts the receives into a bundle of
 * its own (ep->cj), and the loop installs it and goes on with the handshake
 * (created_task). Nothing of it touches ep->vb before that. */

static int create_qp(const rrpc__rdma_ep *ep, struct rrpc__ep_verbs *vb) {
  errno = 0; /* verbs calls that fail without setting it report RRPC_ERDMA */
  struct ibv_qp_init_attr qa;
  memset(&qa, 0, sizeof qa);
  qa.send_cq = vb->cqm.scq;
  qa.recv_cq = vb->cqm.rcq;
  qa.qp_type = IBV_QPT_RC;
  qa.cap.max_send_wr = vb->sq_size + RRPC_RMT_CAR_SQ_RESERVE; /* remote memory's own (carriage.h) */
  qa.cap.max_recv_wr = vb->rq_size;
  qa.cap.max_send_sge = rrpc__rdma_send_sge(ep->dev);
  qa.cap.max_recv_sge = 1;
  qa.cap.max_inline_data = ep->dev->max_inline;
  vb->qp = ibv_create_qp(ep->dev->pd, &qa);
  if (vb->qp == NULL) return errno ? -errno : -RRPC_ERDMA;
  vb->max_send_sge = qa.cap.max_send_sge; /* what the device granted */
  /* What was granted (device.c, probe_max_inline: at least what the probe
   * got for this shape): a message up to it is posted inline. */
  vb->max_inline = qa.cap.max_inline_data;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = ep->dev->port;
  /* REMOTE_READ answers only what a key allows: no MR of ours grants it,
   * only the windows of remote-memory regions announced with READ. */
  a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_modify_qp(vb->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  return rc ? -rc : 0;
}

/* Register the ring so that only this connection's QP can write it: the
 * MR itself gets no remote access, a type-2 window over it does, bound to
 * the QP once it is connected (rrpc__ep_ring_bind). Without windows on the device,
 * the old way: the MR is remotely writable through the shared PD. */
static int ring_register(const rrpc__rdma_ep *ep, struct rrpc__ep_verbs *vb) {
  struct ibv_pd *pd = ep->dev->pd;
  int access = IBV_ACCESS_LOCAL_WRITE | (ep->dev->mw_type2 ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE);
  errno = 0;
  vb->ring_mr = ibv_reg_mr(pd, vb->ring, vb->ring_size, access);
  if (vb->ring_mr == NULL) return errno ? -errno : -RRPC_ERDMAMEM; /* ENOMEM: ulimit -l */
  rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, vb->ring_size);
  vb->ring_rkey = vb->ring_mr->rkey;
  if (!ep->dev->mw_type2) return 0;
  vb->ring_mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
  if (vb->ring_mw == NULL) return -RRPC_ERDMAMEM;
  /* The key the bind will give the window; announced before the bind. */
  vb->ring_rkey = ibv_inc_rkey(vb->ring_mw->rkey);
  return 0;
}

static int create_slots(const rrpc__rdma_ep *ep, struct rrpc__ep_create *c);
static int ring_make(const rrpc__rdma_ep *ep, struct rrpc__ep_verbs *vb);

static int create_memory(const rrpc__rdma_ep *ep, struct rrpc__ep_create *c) {
  struct rrpc__ep_verbs *vb = &c->vb;
  /* The ring counts against the process-wide registered cap; over it the
   * handshake falls back to TCP (counted), other connections untouched.
   * Given back when the ring is freed. (The slots' slab counts its chunks
   * as it registers them, slots.c.) */
  /* Elastic mode (server: decided by the Proposal): no ring, pieces come
   * from the cache once the QP is up. */
  /* A client offering them makes none either: the usual answer is yes,
   * and a server that says no gets a ring made then (ring_late_start). */
  if (!ep->elastic && !(ep->is_client && ep->offer_elastic)) {
    int rc = ring_make(ep, vb);
    if (rc != 0) return rc;
  }
  return create_slots(ep, c);
}

/* The receive ring, cleared, registered and counted against the cap (the
 * budget it took is in vb->budget, also when a later step failed). */
static int ring_make(const rrpc__rdma_ep *ep, struct rrpc__ep_verbs *vb) {
  int rc = rrpc__rdma_budget_take(vb->ring_size);
  if (rc != 0) return rc;
  vb->budget += vb->ring_size;
  void *ring = NULL;
  if (posix_memalign(&ring, 4096, vb->ring_size) != 0) return -ENOMEM;
  /* A peer can make us deliver any ring bytes it reports in an immediate,
   * wherever it really wrote: nothing of an earlier owner of this memory
   * may be there. */
  memset(ring, 0, vb->ring_size);
  vb->ring = ring;
  rc = ring_register(ep, vb);
  if (rc != 0) return rc;
  vb->ring_region = (rrpc__rdma_region){.magic = RRPC_RDMA_REGION_MAGIC,
                                        .lkey = vb->ring_mr->lkey,
                                        .mr = vb->ring_mr,
                                        .base = vb->ring,
                                        .len = vb->ring_size};
  return 0;
}

static int create_slots(const rrpc__rdma_ep *ep, struct rrpc__ep_create *c) {
  struct rrpc__ep_verbs *vb = &c->vb;
  /* One slot per posted receive, plus one to send CDCs from when the
   * device cannot inline them. */
  int rc = rrpc__slots_get(ep->dev->pd, slots_len(ep), &vb->slots, &vb->slots_mr);
  if (rc != 0) return rc;
  c->inflight = calloc(vb->sq_size, sizeof *c->inflight);
  if (c->inflight == NULL) return -ENOMEM;
  for (uint32_t i = 0; i < vb->sq_size; i++) rrpc__iobuf_init(&c->inflight[i].buf);
  return 0;
}

static int post_all_receives(struct rrpc__ep_verbs *vb) {
  for (uint32_t i = 0; i < vb->rq_size; i++) {
    struct ibv_sge sge = {.addr = (uintptr_t)(vb->slots + (size_t)i * RRPC_EP_SLOT_SIZE),
                          .length = RRPC_EP_SLOT_SIZE,
                          .lkey = vb->slots_mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
    int rc = ibv_post_recv(vb->qp, &wr, &bad);
    if (rc) return -rc;
  }
  return 0;
}

/* The loop could not take the bundle back (it is stopping): free all of
 * it here. Background thread. */
static void create_abandon(rrpc__rdma_ep *ep, struct rrpc__ep_create *c) {
  struct rrpc__ep_verbs *vb = &c->vb;
  struct rrpc__ep_teardown t = {.ep = ep,
                                .mw = vb->ring_mw,
                                .qp = vb->qp,
                                .cqm = vb->cqm,
                                .slots_mr = vb->slots_mr,
                                .slots = vb->slots,
                                .slots_len = slots_len(ep),
                                .inflight = c->inflight,
                                .n_inflight = vb->sq_size};
  /* The ring is not the endpoint's yet: ep_free would not see it. Its
   * window goes first (teardown_run), so the ring's MR is released after
   * the window over it, as in ep_free; the copies are taken before the
   * job's reference, which may be the last, is dropped. */
  struct ibv_mr *ring_mr = vb->ring_mr;
  char *ring = vb->ring;
  uint32_t ring_size = vb->ring_size;
  size_t budget = vb->budget;
  teardown_run(&t); /* drops the job's reference */
  if (ring_mr != NULL && ibv_dereg_mr(ring_mr) == 0)
    rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, (uint64_t)0 - ring_size);
  free(ring);
  rrpc__rdma_budget_give(budget);
}

static void created_task(void *arg);

static void create_job(struct rrpc__bg_job *j) {
  struct rrpc__ep_create *c = (struct rrpc__ep_create *)j;
  rrpc__rdma_ep *ep = c->ep;
  int rc = create_qp(ep, &c->vb);
  if (rc == 0) rc = create_memory(ep, c);
  if (rc == 0) rc = post_all_receives(&c->vb);
  c->rc = rc;
  if (rrpc__loop_post(ep->loop, created_task, ep) != 0) create_abandon(ep, c);
}

/* CREATE: join the loop's shared CQs here, create the rest on the
 * background thread. 0 when under way (created_task goes on), or the
 * join's error. Loop thread. */
static int create_start(rrpc__rdma_ep *ep) {
  struct rrpc__ep_create *c = &ep->cj;
  memset(c, 0, sizeof *c);
  if (ep->elastic) { /* server: the Proposal offered it */
    ep->vb.rq_size = RDMA_ELASTIC_RQ;
    ep->vb.sq_size = (uint32_t)ep->opts->elastic_sq_size;
  }
  c->vb.polling = ep->vb.polling;
  c->vb.sq_size = ep->vb.sq_size;
  c->vb.rq_size = ep->vb.rq_size;
  c->vb.ring_size = ep->vb.ring_size;
  /* The loop's shared CQs, with room for this QP's completions. */
  int rc = rrpc__cqs_join(ep->loop, ep->dev, c->vb.polling, c->vb.sq_size + RRPC_RMT_CAR_SQ_RESERVE, c->vb.rq_size, ep, &cq_ops,
                          &c->vb.cqm);
  if (rc != 0) return rc;
  ep->creating = 1;
  ep->cj_used = 1;
  c->ep = ep;
  c->job.fn = create_job;
  atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
  rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &c->job);
  return 0;
}

static void log_create_failure(int rc) {
  /* The cause, with what to do about it: the peer only learns "no memory". */
  RRPC_LOG(WARNING, "rdma: cannot create the connection's verbs resources: %s%s", rrpc_strerror(rc),
           rc == -RRPC_EPOOL                 ? " (--rdma_registered_max_size_mb reached: pool + rings + slots)"
           : rc == -ENOMEM || rc == -EPERM ? " (check ulimit -l)"
           : rc == -EMFILE || rc == -ENFILE ? " (out of file descriptors)"
                                            : "");
}

/* The bundle is ready (or failed): install it into vb (the only place
 * that moves it there, on the loop) and route the QP's completions and
 * events to this endpoint. 0 or the creation's error (vb then holds what
 * was made, for verbs_destroy). */
static int create_install(rrpc__rdma_ep *ep) {
  struct rrpc__ep_create *c = &ep->cj;
  ep->creating = 0;
  ep->vb = c->vb;
  ep->dp.inflight = c->inflight;
  int rc = c->rc;
  if (rc == 0) rc = rrpc__cqs_add(&ep->vb.cqm, ep->vb.qp->qp_num);
  if (rc == 0) {
    rc = rrpc__rdma_dev_watch_qp(ep->dev, ep->vb.qp->qp_num, on_async_event, ep);
    ep->vb.qp_watched = rc == 0;
  }
  return rc;
}

static int qp_connected(rrpc__rdma_ep *ep);

/* Bring the QP to RTR with the peer's Accept/Confirm in ep->peer, then RTS,
 * and bind the ring's window to it. */
static int qp_connect(rrpc__rdma_ep *ep) {
  const struct rrpc__clc_accept *p = &ep->peer;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = ep->dev->active_mtu < (enum ibv_mtu)p->mtu ? ep->dev->active_mtu : (enum ibv_mtu)p->mtu;
  a.dest_qp_num = p->qpn;
  a.rq_psn = p->psn;
  a.max_dest_rd_atomic = 1;
  /* 12 = 0.64 ms. Not 0: that is the 655 ms maximum, not a minimum. */
  a.min_rnr_timer = 12;
  a.ah_attr.port_num = ep->dev->port;
  if (ep->dev->link_layer == IBV_LINK_LAYER_INFINIBAND) {
    /* CLC has no LID field: rrpc peers put it in the peer id's first bytes. */
    a.ah_attr.dlid = (uint16_t)(p->peer_id[0] << 8 | p->peer_id[1]);
  } else {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, p->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)ep->hs.gid_index;
    a.ah_attr.grh.hop_limit = 64;
  }
  int rc = ibv_modify_qp(ep->vb.qp, &a,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                             IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc) return -rc;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.sq_psn = ep->my_psn;
  /* Finite retries (7 means forever for both): a peer that stops acking,
   * or posts fewer receives than it announced, fails this connection in
   * bounded time instead of wedging its send queue (docs/rdma-transport.md,
   * "Failure detection"): transport retries 14 -> 67 ms x (1 + 6) ~ 0.5 s;
   * RNR retries 6 x the peer's RNR timer (<= 655 ms each). The window never
   * lets a correct peer run out of receives, so RNR means a broken peer. */
  a.timeout = RDMA_ACK_TIMEOUT;
  a.retry_cnt = RDMA_RETRY_CNT;
  a.rnr_retry = RDMA_RNR_RETRY;
  a.max_rd_atomic = 1;
  rc = ibv_modify_qp(ep->vb.qp, &a,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc) return -rc;
  return qp_connected(ep);
}

/* The QP is in RTS (by hand or through rdma_cm): the dialect's data path
 * takes it from here (window binds, windows from the peer's Accept/Confirm). */
static int qp_connected(rrpc__rdma_ep *ep) {
  return ep->dl->dp_connect(ep);
}

/* The connection carries RDMA from now on (counts, tells the socket). */
static void ep_up(rrpc__rdma_ep *ep) {
  rrpc__hs_slot_release(ep);
  ep->state = EP_UP;
  rrpc__rdma_count(RRPC_RDMA_CNT_CONN_RDMA, 1);
  ep->dl->dp_up(ep);
  if (ep->opts->trace_verbose) {
    char d[160];
    rrpc__socket_describe(ep->s, d, sizeof d);
    RRPC_LOG(INFO, "rdma up: %s", d);
  }
  rrpc__socket_ready(ep->s, 0);
}

/* rrpc__rdma_note_fallback logs each reason once; this adds the peer. */
static void trace_fallback(const rrpc__rdma_ep *ep, uint32_t code) {
  if (!ep->opts->trace_verbose) return;
  char peer[80];
  rrpc__socket_peer_str(ep->s, peer, sizeof peer);
  RRPC_LOG(INFO, "rdma: connection %s %s falls back to TCP: 0x%08x %s", ep->is_client ? "to" : "from", peer,
           code, rrpc__clc_decline_text(code));
}

/* Give up on RDMA for this connection: send a Decline with `code` over TCP
 * if `send`, then go on as TCP - or fail the socket when fallback is
 * disabled. Frees the endpoint's verbs state. Loop thread. */
static void ep_fallback(rrpc__rdma_ep *ep, uint32_t code, int send) {
  rrpc__socket *s = ep->s;
  if (send) (void)rrpc__clc_send_decline(rrpc__socket_fd(s), code);
  rrpc__rdma_note_fallback(code);
  rrpc__socket_note_fallback(s, code);
  trace_fallback(ep, code);
  hs_timer_cancel(ep);
  rrpc__hs_slot_release(ep);
  if (ep->opts->no_fallback) {
    ep->state = EP_FAILED;
    rrpc__socket_fail(s, -RRPC_EDECLINED);
    return;
  }
  int was_up = ep->state == EP_UP;
  verbs_destroy(ep);
  ep->s = NULL;
  rrpc__ep_unref(ep);
  const rrpc_transport_ops *tcp = rrpc__transport_tcp();
  rrpc__socket_switch_transport(s, tcp);
  /* Before the handshake ended the start-up still holds the write token:
   * TCP's start hands it over. After it, writes already flow. */
  if (!was_up) tcp->start(s, rrpc__socket_is_client(s));
}

/* The server closed the connection during the handshake without a word:
 * it predates CLC (brpc, or anything that closes on bytes it does not
 * know). Remember it as TCP-only and call it again over plain TCP, once:
 * the queued calls go there. Loop thread. */
void rrpc__rdma_note_closed_on_handshake(rrpc__socket *s, int ttl_s) {
  struct sockaddr_storage peer;
  rrpc__socket_peer_addr(s, &peer);
  rrpc__tcp_only_note(&peer, ttl_s, rrpc__now_us());
  rrpc__rdma_note_fallback(RRPC_FB_PEER_CLOSED_HANDSHAKE);
  rrpc__socket_note_fallback(s, RRPC_FB_PEER_CLOSED_HANDSHAKE);
}

static void hs_retry_over_tcp(rrpc__rdma_ep *ep) {
  rrpc__socket *s = ep->s;
  rrpc__rdma_note_closed_on_handshake(s, ep->opts->tcp_only_ttl_s);
  trace_fallback(ep, RRPC_FB_PEER_CLOSED_HANDSHAKE);
  hs_timer_cancel(ep);
  rrpc__hs_slot_release(ep);
  if (ep->opts->no_fallback) {
    ep->state = EP_FAILED;
    rrpc__socket_fail(s, -RRPC_EDECLINED);
    return;
  }
  verbs_destroy(ep);
  ep->s = NULL;
  rrpc__ep_unref(ep);
  int rc = rrpc__socket_reconnect(s, rrpc__transport_tcp());
  if (rc != 0) rrpc__socket_fail(s, rc);
}

/* A client reaching a server remembered as TCP-only: plain TCP from the
 * first byte (no Proposal, no Decline: such a server closes on either). */
static int start_tcp_only(rrpc__socket *s) {
  rrpc__rdma_note_fallback(RRPC_FB_PEER_TCP_ONLY);
  rrpc__socket_note_fallback(s, RRPC_FB_PEER_TCP_ONLY);
  rrpc__socket_switch_transport(s, rrpc__transport_tcp());
  return rrpc__transport_tcp()->start(s, 1);
}

static int remembered_tcp_only(rrpc__socket *s) {
  struct sockaddr_storage peer;
  rrpc__socket_peer_addr(s, &peer);
  return rrpc__tcp_only_check(&peer, rrpc__now_us());
}

/* ---- applying the handshake's outcomes -------------------------------------------- */

static void on_hs_deadline(void *arg) {
  rrpc__rdma_ep *ep = arg;
  ep->hs.timer = 0;
  rrpc__ep_hs_apply(ep, rrpc__hs_on_deadline(ep));
}

/* (Re)start the handshake step's deadline, `mult` steps long. */
static void hs_timer_arm(rrpc__rdma_ep *ep, int mult) {
  hs_timer_cancel(ep);
  uint64_t ms = ep->opts->handshake_timeout_ms > 0 ? (uint64_t)ep->opts->handshake_timeout_ms : 2000;
  ms *= (uint64_t)mult;
  if (rrpc__loop_timer_add(ep->loop, rrpc__now_us() + ms * 1000, on_hs_deadline, ep, &ep->hs.timer) != 0)
    ep->hs.timer = 0;
}

static void hs_local(const rrpc__rdma_ep *ep, struct rrpc__hs_local *l) {
  *l = (struct rrpc__hs_local){.qpn = ep->vb.qp != NULL ? ep->vb.qp->qp_num : 0,
                               .ring_rkey = ep->vb.ring_rkey,
                               .ring_size = ep->vb.ring_size,
                               .rq_size = ep->vb.rq_size,
                               .ring_addr = (uint64_t)(uintptr_t)ep->vb.ring};
}

/* A CLC message the handshake encoded. */
static int hs_send(rrpc__rdma_ep *ep) {
  int rc = rrpc__clc_send_all(rrpc__socket_fd(ep->s), ep->hs.out, ep->hs.out_len);
  return rc == -RRPC_ECLOSE ? -RRPC_EHANDSHAKE : rc; /* a short write: say where */
}

/* The server's side of ESTABLISH: its first CDC tells the client the QP
 * works both ways. */
static int hs_first_cdc(rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  ep->state = EP_UP;
  int rc = ep->dl->dp_first_msg_locked(ep);
  rrpc__ep_unlock(ep);
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma handshake: cannot bring the QP up: %s", rrpc_strerror(rc));
    ep->state = EP_SERVER_WAIT_CONFIRM;
  }
  return rc;
}

/* A client that does not speak CLC: serve it as plain TCP - through the
 * server-side sniff, which refuses a brpc RDMA hello it cannot serve
 * (transport/tcp/brpc_sniff.c). */
static void hs_plain_tcp(rrpc__rdma_ep *ep) {
  rrpc__socket *s = ep->s;
  hs_timer_cancel(ep);
  ep->s = NULL;
  rrpc__ep_unref(ep);
  const rrpc_transport_ops *tcp = rrpc__transport_tcp_rdma_server();
  rrpc__socket_switch_transport(s, tcp);
  tcp->start(s, 0);
  tcp->on_fd_event(s, EPOLLIN);
}

/* A client that opened with another dialect's hello (brpc's, with RDMA on):
 * that dialect takes the connection over. */
static void hs_handover(rrpc__rdma_ep *ep, const struct rrpc__rdma_dialect *d) {
  rrpc__socket *s = ep->s;
  rrpc__rdma_dev *dev = ep->dev;
  hs_timer_cancel(ep);
  ep->s = NULL;
  rrpc__ep_unref(ep);
  d->server_take(s, dev);
}

static void hs_fail(rrpc__rdma_ep *ep, int err) {
  ep->state = EP_FAILED;
  rrpc__socket_fail(ep->s, err);
}

static int ring_late_start(rrpc__rdma_ep *ep);

/* The client's rdma_cm connect finished (cm/cm.c, on this loop). A
 * handshake that ended meanwhile (its deadline, a close) has nothing to
 * continue. */
static void cm_connected(rrpc__rdma_ep *ep, int rc) {
  if (ep->s == NULL || ep->state != EP_CLIENT_WAIT_ACCEPT || ep->vb.qp == NULL) return;
  if (rc == 0) rc = qp_connected(ep);
  struct rrpc__hs_local l;
  hs_local(ep, &l);
  rrpc__ep_hs_apply(ep, rrpc__hs_connected(ep, rc, &l));
}

/* CONNECT: by hand, or through rdma_cm when both agreed on it. 0 when
 * connected, 1 when under way (cm_connected goes on), or a negative code. */
static int connect_step(rrpc__rdma_ep *ep) {
  if (!ep->cm.used) return qp_connect(ep);
  if (!ep->is_client) /* the client's Confirm comes after our rdma_accept */
    return ep->cm.accepted ? qp_connected(ep) : -ENOTCONN;
  /* A fresh step deadline: rdma_cm's resolve and connect are more round
   * trips than the Accept's wait had left. */
  hs_timer_arm(ep, 1);
  int rc = rrpc__cm_client_connect(ep, cm_connected);
  return rc == 0 ? 1 : rc;
}

void rrpc__ep_hs_apply(rrpc__rdma_ep *ep, struct rrpc__hs_out o) {
  struct rrpc__hs_local l;
  int rc;
  for (;;) {
    if (o.arm > 0) hs_timer_arm(ep, o.arm);
    switch (o.what) {
    case RRPC_HS_CONTINUE: return;
    case RRPC_HS_CREATE:
      if (ep->cj_used) {
        /* A second Proposal while the first one's resources are made. */
        o = (struct rrpc__hs_out){.what = RRPC_HS_FALLBACK, .code = RRPC_CLC_DECL_SYNCERR, .send_decline = 1};
        continue;
      }
      rc = create_start(ep);
      if (rc == 0) return; /* created_task goes on */
      log_create_failure(rc);
      hs_local(ep, &l);
      o = rrpc__hs_created(ep, rc, &l);
      continue;
    case RRPC_HS_CONNECT:
      if (ep->is_client && !ep->elastic && ep->vb.ring == NULL) {
        rc = ring_late_start(ep);
        if (rc == 0) return; /* ring_late_task goes on */
      } else {
        rc = connect_step(ep);
        if (rc == 1) return; /* cm_connected goes on */
      }
      hs_local(ep, &l);
      o = rrpc__hs_connected(ep, rc, &l);
      continue;
    case RRPC_HS_SEND:
      rc = hs_send(ep);
      if (rc == 0) ep->state = o.next;
      else if (o.code != 0) ep_fallback(ep, o.code, 1);
      else hs_fail(ep, rc);
      return;
    case RRPC_HS_ESTABLISH:
      if (o.first_cdc && hs_first_cdc(ep) != 0) {
        ep_fallback(ep, RRPC_CLC_DECL_INTERR, 1);
        return;
      }
      hs_timer_cancel(ep);
      ep_up(ep);
      return;
    case RRPC_HS_FALLBACK: ep_fallback(ep, o.code, o.send_decline); return;
    case RRPC_HS_FAIL: hs_fail(ep, o.err); return;
    case RRPC_HS_PLAIN_TCP: hs_plain_tcp(ep); return;
    case RRPC_HS_HANDOVER: hs_handover(ep, o.dialect); return;
    case RRPC_HS_RETRY_TCP: hs_retry_over_tcp(ep); return;
    }
    return;
  }
}

/* The background thread made (or failed to make) the CREATE step's
 * resources: install them and go on with the handshake, or tear them down
 * if the connection went (closed, fell back, failed) meanwhile. */
static void created_task(void *arg) {
  rrpc__rdma_ep *ep = arg;
  int rc = create_install(ep);
  if (ep->s == NULL || ep->state == EP_FAILED) {
    verbs_destroy(ep);
  } else {
    if (rc != 0) {
      log_create_failure(rc);
      verbs_destroy(ep);
    }
    struct rrpc__hs_local l;
    hs_local(ep, &l);
    rrpc__ep_hs_apply(ep, rrpc__hs_created(ep, rc, &l));
  }
  rrpc__ep_unref(ep); /* the job's */
}

/* ---- a late ring ----------------------------------------------------------------
 * A client offering elastic rings makes no ring before its Proposal: a
 * server that takes the offer up never writes one, and making it anyway
 * cost each such connection a megabyte cleared, registered and dropped
 * again - most of the setup thread's time. A server that answers ring
 * mode gets its ring between the Accept and our CONNECT: made on the setup
 * thread, installed on the loop. */
struct ring_late_job {
  struct rrpc__bg_job job;
  rrpc__rdma_ep *ep;
  struct rrpc__ep_verbs vb; /* ring_size in; the ring's fields and budget out */
  int rc;
};

static void ring_late_task(void *arg) {
  struct ring_late_job *j = arg;
  rrpc__rdma_ep *ep = j->ep;
  if (ep->s == NULL || ep->state == EP_FAILED || ep->vb.qp == NULL) {
    ring_drop(&j->vb); /* the connection went meanwhile */
  } else {
    ep->vb.ring = j->vb.ring;
    ep->vb.ring_mr = j->vb.ring_mr;
    ep->vb.ring_mw = j->vb.ring_mw;
    ep->vb.ring_rkey = j->vb.ring_rkey;
    ep->vb.ring_region = j->vb.ring_region;
    ep->vb.budget += j->vb.budget;
    int rc = j->rc;
    if (rc != 0) log_create_failure(rc);
    else rc = connect_step(ep);
    if (rc == 1) { /* cm_connected goes on */
      free(j);
      rrpc__ep_unref(ep);
      return;
    }
    struct rrpc__hs_local l;
    hs_local(ep, &l);
    rrpc__ep_hs_apply(ep, rrpc__hs_connected(ep, rc, &l));
  }
  free(j);
  rrpc__ep_unref(ep); /* the job's */
}

static void ring_late_job_run(struct rrpc__bg_job *bj) {
  struct ring_late_job *j = (struct ring_late_job *)bj;
  rrpc__rdma_ep *ep = j->ep;
  j->rc = ring_make(ep, &j->vb);
  if (j->rc != 0) ring_drop(&j->vb); /* what was made of it: nothing half-made is installed */
  if (rrpc__loop_post(ep->loop, ring_late_task, j) != 0) { /* the loop is stopping */
    ring_drop(&j->vb);
    free(j);
    rrpc__ep_unref(ep);
  }
}

/* 0 when under way (ring_late_task goes on with the CONNECT), or an error.
 * Once per connection: a second CONNECT is the peer's protocol error. */
static int ring_late_start(rrpc__rdma_ep *ep) {
  if (ep->ring_late) return -RRPC_EHANDSHAKE;
  struct ring_late_job *j = calloc(1, sizeof *j);
  if (j == NULL) return -ENOMEM;
  ep->ring_late = 1;
  j->ep = ep;
  j->vb.ring_size = ep->vb.ring_size;
  j->job.fn = ring_late_job_run;
  atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
  rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &j->job);
  return 0;
}

/* ---- the ops table ------------------------------------------------------------ */

static int rdma_start_dialect(rrpc__socket *s, int is_client, int dialect) {
  const rrpc_rdma_options *opts = rrpc__rdma_options();
  if (is_client && !opts->no_fallback && remembered_tcp_only(s)) return start_tcp_only(s);
  rrpc__rdma_dev *dev = NULL;
  int rc = rrpc__rdma_dev_get(&dev);
  const struct rrpc__rdma_dialect *d = rrpc__rdma_dialect_of(dialect);
  if (is_client && d != NULL && d->client_start != NULL) {
    /* A client of a dialect with its own hello (brpc's) sends none
     * without a device: plain TCP. */
    if (rc == 0) return d->client_start(s, dev);
    if (opts->no_fallback) return -RRPC_ENODEV;
    rrpc__rdma_note_fallback(RRPC_CLC_DECL_NOSMCDEV);
    rrpc__socket_note_fallback(s, RRPC_CLC_DECL_NOSMCDEV);
    rrpc__socket_switch_transport(s, rrpc__transport_tcp());
    return rrpc__transport_tcp()->start(s, is_client);
  }
  if (rc == 0) rc = rrpc__rdma_pool_start(dev);
  if (rc != 0) {
    if (opts->no_fallback) return -RRPC_ENODEV;
    if (is_client) {
      rrpc__rdma_note_fallback(RRPC_CLC_DECL_NOSMCDEV);
      rrpc__socket_note_fallback(s, RRPC_CLC_DECL_NOSMCDEV);
      /* Plain TCP from the first byte, as brpc's client without a device
       * does. A Linux SMC client says so with a Decline, but only after the
       * TCP handshake's SMC option told it the server speaks CLC; we cannot
       * know that, and a server that does not (brpc) closes on a Decline. */
      rrpc__socket_switch_transport(s, rrpc__transport_tcp());
      return rrpc__transport_tcp()->start(s, is_client);
    }
    /* A server without a device still declines clients' proposals; the
     * sniffer counts a fallback only for a peer that asks for RDMA (HTTP
     * scrapes and plain baidu_std clients never did). */
    rrpc__socket_switch_transport(s, rrpc__transport_tcp_rdma_server());
    return rrpc__transport_tcp_rdma_server()->start(s, is_client);
  }
  rrpc__rdma_ep *ep = calloc(1, sizeof *ep);
  if (ep == NULL) return -ENOMEM;
  atomic_init(&ep->refs, 1);
  ep->s = s;
  ep->loop = rrpc__socket_loop(s);
  ep->dev = dev;
  ep->opts = opts;
  ep->is_client = is_client;
  ep->vb.polling = opts->use_polling;
  ep->vb.sq_size = queue_size(opts->sq_size);
  ep->vb.rq_size = queue_size(opts->rq_size);
  ep->vb.ring_size = (uint32_t)opts->ring_size;
  /* Inline control messages only (datapath.c rrpc__dp_post_send44). A
   * client offering elastic rings keeps 16 receives whatever the server
   * answers; a server decides at the Proposal (create_start). */
  /* The dialect the handshake starts from (a forced cursor client offers
   * only that; the server may still pick cursor for an imm offer). */
  ep->dl = rrpc__rdma_dialect_of(dialect == RRPC_RDMA_DIALECT_CURSOR ? dialect : RRPC_RDMA_DIALECT_IMM);
  ep->offer_elastic = opts->elastic && dev->max_inline >= RRPC_GRANT_MSG_LEN &&
                      ep->dl == rrpc__rdma_dialect_of(RRPC_RDMA_DIALECT_IMM);
  if (ep->offer_elastic && ep->dl->dp_prefill != NULL)
    ep->dl->dp_prefill(dev, (uint64_t)opts->piece_cache_size_mb << 20);
  /* Its queues are sized at the offer: the QP exists before the answer.
   * The send queue need not be a power of two (only the receive depth
   * travels, as log2); the options checked it. */
  if (ep->offer_elastic && is_client) {
    ep->vb.rq_size = RDMA_ELASTIC_RQ;
    ep->vb.sq_size = (uint32_t)opts->elastic_sq_size;
  }
  rrpc__iobuf_init(&ep->el_held);
  ep->my_psn = random_u32() & 0xffffff;
  do ep->my_token = random_u32();
  while (ep->my_token == 0);
  rrpc__lock_init(&ep->dp.mu);
  rrpc__rx_reclaim_init(&ep->dp.reclaim, 0, 0);
  rrpc__socket_set_tstate(s, ep);
  rrpc__ep_hs_apply(ep, rrpc__hs_start(ep));
  return 0;
}

static void rdma_on_fd_event(rrpc__socket *s, uint32_t events) {
  (void)events;
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  if (ep->state == EP_UP || ep->state == EP_FAILED) rrpc__ep_hs_apply(ep, rrpc__hs_on_tcp_after_up(ep));
  else rrpc__ep_hs_apply(ep, rrpc__hs_on_readable(ep));
}

static void rdma_on_fail(rrpc__socket *s, int code) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return;
  hs_timer_cancel(ep);
  /* A connection that fails for a reason other than a close or an idle
   * timeout is said once, with the code its calls see, on either side. */
  if (ep->state == EP_UP && code != -RRPC_ECLOSE && code != -RRPC_ELOGOFF && code != -ETIMEDOUT)
    RRPC_LOG(WARNING, "rdma qpn=%u: connection failed: %s", ep->vb.qp ? ep->vb.qp->qp_num : 0, rrpc_strerror(code));
  rrpc__ep_lock(ep);
  if (ep->state == EP_UP && !ep->dp.qp_dead && !ep->dp.closed_sent) {
    ep->dp.closed_sent = 1;
    ep->dl->dp_close_locked(ep,
                            code == -RRPC_ECLOSE || code == -RRPC_ELOGOFF ? RRPC_CDC_CS_CLOSED : RRPC_CDC_CS_ABNORMAL);
  }
  /* Under mu: a writer that checks the state (or closed_sent) under mu
   * posts nothing after the close CDC. */
  ep->state = EP_FAILED;
  rrpc__ep_unlock(ep);
}

static void on_loop_stop(void *arg);

static void close_finish_ex(rrpc__rdma_ep *ep, int offload) {
  if (ep->close_timer != 0) (void)rrpc__loop_timer_cancel(ep->loop, ep->close_timer);
  ep->close_timer = 0;
  rrpc__loop_stop_hook_del(ep->loop, on_loop_stop, ep);
  verbs_destroy_ex(ep, offload);
  rrpc__ep_unref(ep); /* the socket's */
}

void rrpc__ep_close_finish(rrpc__rdma_ep *ep) { close_finish_ex(ep, rrpc__loop_in_thread(ep->loop)); }

static void on_close_timeout(void *arg) {
  rrpc__rdma_ep *ep = arg;
  ep->close_timer = 0;
  RRPC_LOG(WARNING, "rdma qpn=%u: the close CDC did not complete within %d ms: destroying the QP",
           ep->vb.qp ? ep->vb.qp->qp_num : 0, ep->opts->close_wait_ms);
  rrpc__rdma_count(RRPC_RDMA_CNT_CLOSE_UNCONFIRMED, 1);
  rrpc__ep_close_finish(ep);
}

/* The loop stops while the close CDC is still awaited: its timer would
 * never fire nor its completion be seen, so release everything now. */
static void on_loop_stop(void *arg) {
  rrpc__rdma_ep *ep = arg;
  rrpc__rdma_count(RRPC_RDMA_CNT_CLOSE_UNCONFIRMED, 1);
  close_finish_ex(ep, 0); /* the stopping loop cannot hear back: at once */
}

/* Keep the QP until the close CDC has left (its completion, seen by the
 * completion watcher or poller, ends the wait: close_poll), bounded by
 * --rdma_close_wait_ms. 0 when the endpoint now waits, else the caller
 * destroys it at once (nothing to wait for, or not on the loop thread: a
 * loop that is shutting down frees its sockets on the stopping thread). */
static int close_wait(rrpc__rdma_ep *ep) {
  if (ep->vb.qp == NULL || !rrpc__loop_in_thread(ep->loop)) return -1;
  rrpc__ep_lock(ep);
  int done = ep->dl->dp_close_done_locked(ep);
  rrpc__ep_unlock(ep);
  if (done) return -1;
  uint64_t deadline = rrpc__now_us() + (uint64_t)ep->opts->close_wait_ms * 1000;
  if (rrpc__loop_timer_add(ep->loop, deadline, on_close_timeout, ep, &ep->close_timer) != 0) {
    ep->close_timer = 0;
    return -1;
  }
  /* A loop stopped meanwhile drops its timers: the hook then finishes. */
  if (rrpc__loop_stop_hook_add(ep->loop, on_loop_stop, ep) != 0) {
    (void)rrpc__loop_timer_cancel(ep->loop, ep->close_timer);
    ep->close_timer = 0;
    return -1;
  }
  return 0;
}

static void rdma_close(rrpc__socket *s) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return;
  hs_timer_cancel(ep);
  rrpc__hs_slot_release(ep);
  rrpc__ep_lock(ep);
  ep->s = NULL; /* from now on the completion watcher only waits for the close */
  rrpc__ep_unlock(ep);
  rrpc__socket_set_tstate(s, NULL);
  /* Held piece slices hold the endpoint: let them go with the socket. */
  rrpc_iobuf_clear(&ep->el_held);
  if (close_wait(ep) == 0) return;
  verbs_destroy(ep);
  rrpc__ep_unref(ep);
}

static int rdma_describe(const rrpc__socket *s, char *buf, size_t len) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  if (ep == NULL) return snprintf(buf, len, "rdma (closed)") < 0 ? -EINVAL : 0;
  struct rrpc__dp_view v;
  ep->dl->dp_view(ep, &v);
  snprintf(buf, len,
           "rdma %s %s dev=%s qpn=%u peer_qpn=%u gid_index=%d %s | tx: prod=%llu peer_cons=%llu ring=%u "
           "credits=%u blocked=%d sq_used=%llu | rx: prod=%llu cons=%llu acked=%llu owed=%u held=%u zc=%llu "
           "peer_asked=%d",
           rrpc__ep_state_name(ep->state), ep->dl->name, ep->dev->name, ep->vb.qp ? ep->vb.qp->qp_num : 0, ep->peer.qpn,
           ep->hs.gid_index, ep->vb.polling ? "polling" : "events", (unsigned long long)v.tx_prod,
           (unsigned long long)v.tx_peer_cons, v.peer_ring_size, v.credits, v.write_blocked,
           (unsigned long long)v.sq_used, (unsigned long long)v.rx_prod, (unsigned long long)v.rx_cons,
           (unsigned long long)v.rx_acked, v.rx_owed, v.rx_held, (unsigned long long)v.zc_held, v.peer_asked);
  return 0;
}

static int rdma_is_rdma(const rrpc__socket *s) {
  const rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  return ep != NULL && ep->state == EP_UP;
}

rrpc__rdma_ep *rrpc__rdma_ep_of(rrpc__socket *s) {
  /* Only this file's endpoints (a dialect with its own endpoint hangs
   * another state on its sockets), up, with a shared-machinery data path. */
  if (rrpc__socket_ops(s)->is_rdma != rdma_is_rdma || !rdma_is_rdma(s)) return NULL;
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  return ep->dl->dp_on_wc != NULL ? ep : NULL;
}

static void rdma_on_read_resumed(rrpc__socket *s) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  if (ep != NULL && ep->state == EP_UP) ep->dl->dp_resume_read(ep);
}

/* The dialect's write: the handshake chose it before writes flow (the
 * start-up holds the write token until the connection is up or fell back). */
static int rdma_write(rrpc__socket *s, rrpc_iobuf *data) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  return ep->dl->dp_write(s, data);
}

static int rdma_start(rrpc__socket *s, int is_client) {
  return rdma_start_dialect(s, is_client, rrpc__rdma_options()->dialect);
}

/* A channel whose own options ask for the cursor dialect. */
static int rdma_start_cursor(rrpc__socket *s, int is_client) {
  return rdma_start_dialect(s, is_client, RRPC_RDMA_DIALECT_CURSOR);
}

/* A channel whose own options ask for brpc's dialect. */
static int rdma_start_brpc(rrpc__socket *s, int is_client) {
  return rdma_start_dialect(s, is_client, RRPC_RDMA_DIALECT_BRPC);
}

static const rrpc_transport_ops rdma_ops = {
    .name = "rdma",
    .start = rdma_start,
    .write = rdma_write,
    .on_fd_event = rdma_on_fd_event,
    .on_fail = rdma_on_fail,
    .close = rdma_close,
    .describe = rdma_describe,
    .is_rdma = rdma_is_rdma,
    .facts = rrpc__rdma_conn_facts,
    .on_read_resumed = rdma_on_read_resumed,
};
static const rrpc_transport_ops rdma_brpc_client_ops = {
    .name = "rdma",
    .start = rdma_start_brpc,
    .write = rdma_write,
    .on_fd_event = rdma_on_fd_event,
    .on_fail = rdma_on_fail,
    .close = rdma_close,
    .describe = rdma_describe,
    .is_rdma = rdma_is_rdma,
    .facts = rrpc__rdma_conn_facts,
    .on_read_resumed = rdma_on_read_resumed,
};

static const rrpc_transport_ops rdma_cursor_client_ops = {
    .name = "rdma",
    .start = rdma_start_cursor,
    .write = rdma_write,
    .on_fd_event = rdma_on_fd_event,
    .on_fail = rdma_on_fail,
    .close = rdma_close,
    .describe = rdma_describe,
    .is_rdma = rdma_is_rdma,
    .facts = rrpc__rdma_conn_facts,
    .on_read_resumed = rdma_on_read_resumed,
};

int rrpc__rdma_transport_get(const rrpc_transport_ops **out) {
  /* Called when a channel or server is set up: open the device and
   * register the pool now, on the caller's thread, so the first RPC does
   * not pay for pinning memory (seconds under emulation). Failures are
   * not errors here: each connection decides and falls back on its own. */
  rrpc__rdma_dev *dev;
  if (rrpc__rdma_dev_get(&dev) == 0) (void)rrpc__rdma_pool_start(dev);
  *out = &rdma_ops;
  return 0;
}

int rrpc__rdma_transport_get_dialect(int dialect, const rrpc_transport_ops **out) {
  int rc = rrpc__rdma_transport_get(out);
  if (rc == 0 && dialect == RRPC_RDMA_DIALECT_BRPC) *out = &rdma_brpc_client_ops;
  if (rc == 0 && dialect == RRPC_RDMA_DIALECT_CURSOR) *out = &rdma_cursor_client_ops;
  return rc;
}
