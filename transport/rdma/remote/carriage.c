/* remote/carriage.c - the RDMA carriage of remote memory
 * (src/rrpc/remote/carriage.h) on a CLC-dialect endpoint: regions as an
 * MR plus a type-2 window bound to the connection's QP (region.h), pieces
 * as signaled RDMA WRITE/READ on that QP. Its work requests carry wr_ids
 * with the top bit set (the data path numbers its own from 1 up), so the
 * endpoint's completion dispatch hands them here (rrpc__rmt_car_wc). The
 * QP has RRPC_RMT_CAR_SQ_RESERVE send entries beyond the data path's for
 * them, so neither side's count of the send queue's room is disturbed. */
#include <errno.h>
#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/remote.h"
#include "rrpc/remote/carriage.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/remote/car_observe.h"
#include "transport/rdma/remote/post.h"
#include "transport/rdma/remote/region.h"

#define CAR_TAG (1ull << 63)
#define CAR_BIND (1ull << 62)

static void post_hook(rrpc__rdma_ep *ep);
static void td_hook(rrpc__rdma_ep *ep, unsigned in_flight);

struct rrpc__rmt_car_mr {
  struct rrpc__rmt_rdma_region r; /* mr, and mw when remote */
  pthread_mutex_t mu;             /* revoke once, from any thread */
  rrpc__rdma_ep *ep;              /* whose QP its window is bound to (NULL: local only) */
  struct rrpc__rmt_car_mr *prev, *next; /* g_regions, under g_regions_mu */
};

/* Posts (pieces, binds) run outside the endpoint's lock - on rxe a post does
 * the transfer's work, and the data path and the loop take that lock - and
 * outside the remote link's lock too (link.c, pump_locked), so the QP must
 * outlive them another way: each post is counted in its endpoint's
 * rmt_posts while it holds the QP (post_begin, post_end), and the
 * endpoint's teardown (rrpc__rmt_car_teardown), which runs after the QP was
 * marked dead and before it is destroyed, waits until that count is zero.
 * The guard is the endpoint's own: posts on different connections share
 * nothing, and a teardown waits for the posts on its own connection only.
 * A close on the endpoint's loop hands that teardown to the background
 * verbs thread (endpoint.c, verbs_destroy), so that loop does not wait for
 * a post here. The endpoint itself is the socket's transport state: the
 * link's poster holds a reference on the socket across a post.
 *
 * The one lock and condition below are for a teardown that found posts in
 * flight: the post that ends the last of them wakes it. Only such a post
 * and such a teardown take them. */
#define POSTS_WAITED (1u << 31) /* in rmt_posts: the teardown waits */
static pthread_mutex_t g_drain_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_drain_cv = PTHREAD_COND_INITIALIZER;
/* Regions with a window, so a closing connection can deallocate its
 * windows before its QP goes: a window bound to a QP holds it, and rxe's
 * destroy_qp waits ~50 s for that reference. */
static pthread_mutex_t g_regions_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rrpc__rmt_car_mr *g_regions;

/* The endpoint's QP for one post, counted in rmt_posts until post_end;
 * NULL once it may not be posted to. The count is taken under the lock the
 * teardown marks the QP dead under, so a post either is counted before the
 * teardown looks or sees the QP dead. A counted post meets the test's hold
 * (car_observe.h) here, just before it posts. */
static struct ibv_qp *post_begin(rrpc__rdma_ep *ep) {
  rrpc__ep_lock(ep);
  struct ibv_qp *qp = ep->dp.qp_dead ? NULL : ep->vb.qp;
  if (qp != NULL) atomic_fetch_add_explicit(&ep->rmt_posts, 1, memory_order_relaxed);
  rrpc__ep_unlock(ep);
  if (qp != NULL) post_hook(ep);
  return qp;
}

/* The post that post_begin counted is done with the QP. Nothing of ep is
 * read after the decrement: the teardown may go on at once. */
static void post_end(rrpc__rdma_ep *ep) {
  unsigned was = atomic_fetch_sub_explicit(&ep->rmt_posts, 1, memory_order_acq_rel);
  if (was == (POSTS_WAITED | 1u)) {
    pthread_mutex_lock(&g_drain_mu);
    pthread_cond_broadcast(&g_drain_cv);
    pthread_mutex_unlock(&g_drain_mu);
  }
}

/* Waits until none of ep's posts holds its QP (none starts any more: the
 * QP is marked dead, for good). An endpoint may be torn down more than once
 * (each verbs_destroy tears down what verbs resources are left, e.g. ones a
 * handshake step installed after the first); only the first waits: a post
 * in flight holds the QP that one destroys, and a later one may run on the
 * loop. */
static void posts_drain(rrpc__rdma_ep *ep) {
  unsigned was = atomic_fetch_or_explicit(&ep->rmt_posts, POSTS_WAITED, memory_order_acq_rel);
  if (was & POSTS_WAITED) return;
  if (was != 0) {
    td_hook(ep, was);
    /* The check is under g_drain_mu, and the last post takes it to wake
     * this: its wake-up cannot fall between the check and the wait. */
    pthread_mutex_lock(&g_drain_mu);
    while ((atomic_load_explicit(&ep->rmt_posts, memory_order_acquire) & ~POSTS_WAITED) != 0)
      pthread_cond_wait(&g_drain_cv, &g_drain_mu);
    pthread_mutex_unlock(&g_drain_mu);
  }
  td_hook(ep, 0);
}

/* One window bind waited for: the registering thread and the completion
 * each hold a reference (a completion may come after the wait gave up).
 * One lock and condition for every bind (binds are rare): the wait is
 * published to the completion through the device (its wr_id), which no
 * thread checker sees, so both sides take g_bind_mu before touching it. */
struct bind_wait {
  atomic_int refs;
  int done, status; /* under g_bind_mu */
};
static pthread_mutex_t g_bind_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_bind_cv;
static pthread_once_t g_bind_once = PTHREAD_ONCE_INIT;

static void bind_cv_init(void) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g_bind_cv, &ca);
  pthread_condattr_destroy(&ca);
}

static void bind_wait_unref(struct bind_wait *w) {
  if (atomic_fetch_sub(&w->refs, 1) == 1) free(w);
}

struct rrpc__rmt_car *rrpc__rmt_car_of(rrpc__socket *s) {
  return (struct rrpc__rmt_car *)rrpc__rdma_ep_of(s);
}

uint32_t rrpc__rmt_car_lkey(const struct rrpc__rmt_car_mr *m) { return m->r.mr->lkey; }

static int bind_and_wait(rrpc__rdma_ep *ep, struct rrpc__rmt_car_mr *m) {
  pthread_once(&g_bind_once, bind_cv_init);
  struct bind_wait *w = calloc(1, sizeof *w);
  if (w == NULL) return -ENOMEM;
  atomic_init(&w->refs, 2);
  /* Written under g_bind_mu, which the completion takes too: see struct
   * bind_wait. Not held over the post, which on rxe is the bind's work. */
  pthread_mutex_lock(&g_bind_mu);
  w->done = 0;
  w->status = 0;
  pthread_mutex_unlock(&g_bind_mu);
  struct ibv_qp *qp = post_begin(ep);
  int rc = -RRPC_ERDMA;
  if (qp != NULL) {
    rc = rrpc__rmt_rdma_region_bind(&m->r, qp, CAR_TAG | CAR_BIND | (uintptr_t)w);
    post_end(ep);
  }
  if (rc != 0) {
    atomic_fetch_sub(&w->refs, 1); /* no completion will come */
    bind_wait_unref(w);
    return rc < 0 ? rc : -RRPC_ERDMA;
  }
  pthread_mutex_lock(&g_bind_mu);
  rrpc_remote_limits lim;
  rrpc_remote_limits_get(&lim);
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += lim.bind_wait_ms / 1000;
  until.tv_nsec += (long)(lim.bind_wait_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  while (!w->done && pthread_cond_timedwait(&g_bind_cv, &g_bind_mu, &until) != ETIMEDOUT) {
  }
  rc = w->done ? w->status : -ETIMEDOUT;
  pthread_mutex_unlock(&g_bind_mu);
  bind_wait_unref(w);
  return rc;
}

int rrpc__rmt_car_reg(struct rrpc__rmt_car *c, void *buf, size_t len, uint8_t rights,
                      struct rrpc__rmt_car_mr **out, uint32_t *rkey) {
  rrpc__rdma_ep *ep = (rrpc__rdma_ep *)c;
  struct rrpc__rmt_car_mr *m = calloc(1, sizeof *m);
  if (m == NULL) return -ENOMEM;
  pthread_mutex_init(&m->mu, NULL);
  int rc = 0;
  if (rights == 0) {
    m->r.mr = ibv_reg_mr(ep->dev->pd, buf, len, IBV_ACCESS_LOCAL_WRITE);
    if (m->r.mr == NULL) rc = -RRPC_ERDMAMEM;
    m->r.buf = buf;
    m->r.len = len;
  } else {
    rc = rrpc__rmt_rdma_region_reg(ep->dev->pd, buf, len, rights, &m->r);
    if (rc == 0) {
      m->ep = ep;
      pthread_mutex_lock(&g_regions_mu);
      m->next = g_regions;
      if (g_regions) g_regions->prev = m;
      g_regions = m;
      pthread_mutex_unlock(&g_regions_mu);
      rc = bind_and_wait(ep, m);
    }
  }
  if (rc != 0) {
    /* A bind that timed out may still complete: the window is deallocated
     * here once, which ends whatever it granted either way. */
    rrpc__rmt_car_free(m);
    return rc;
  }
  *rkey = rights ? m->r.rkey : 0;
  *out = m;
  return 0;
}

void rrpc__rmt_car_revoke(struct rrpc__rmt_car_mr *m) {
  pthread_mutex_lock(&m->mu);
  rrpc__rmt_rdma_region_revoke(&m->r);
  pthread_mutex_unlock(&m->mu);
}

void rrpc__rmt_car_free(struct rrpc__rmt_car_mr *m) {
  if (m == NULL) return;
  rrpc__rmt_car_revoke(m);
  if (m->ep != NULL) {
    pthread_mutex_lock(&g_regions_mu);
    if (m->prev) m->prev->next = m->next;
    else g_regions = m->next;
    if (m->next) m->next->prev = m->prev;
    pthread_mutex_unlock(&g_regions_mu);
  }
  if (m->r.mr != NULL) ibv_dereg_mr(m->r.mr);
  pthread_mutex_destroy(&m->mu);
  free(m);
}

int rrpc__rmt_car_post(struct rrpc__rmt_car *c, int is_write, void *local, uint32_t lkey, uint32_t len,
                       uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
  rrpc__rdma_ep *ep = (rrpc__rdma_ep *)c;
  struct ibv_sge sge = {.addr = (uintptr_t)local, .length = len, .lkey = lkey};
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = CAR_TAG | wr_id;
  wr.sg_list = &sge;
  wr.num_sge = len ? 1 : 0;
  wr.opcode = is_write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = raddr;
  wr.wr.rdma.rkey = rkey;
  struct ibv_qp *qp = post_begin(ep);
  if (qp == NULL) return -RRPC_ERDMA;
  int rc = ibv_post_send(qp, &wr, &bad);
  post_end(ep);
  if (rc > 0) {
    RRPC_LOG(WARNING, "remote memory: ibv_post_send of a one-sided piece: %s", strerror(rc));
    rc = -RRPC_ERDMA;
  }
  return rc;
}

/* car_observe.h: a test's view of the pieces' completions, and its holds. */
static _Atomic(rrpc__rmt_car_wc_observer) g_wc_observer;
static _Atomic(rrpc__rmt_car_post_hook) g_post_hook;
static _Atomic(rrpc__rmt_car_teardown_hook) g_td_hook;

void rrpc__rmt_car_hook_post(rrpc__rmt_car_post_hook fn) {
  atomic_store_explicit(&g_post_hook, fn, memory_order_release);
}

void rrpc__rmt_car_hook_teardown(rrpc__rmt_car_teardown_hook fn) {
  atomic_store_explicit(&g_td_hook, fn, memory_order_release);
}

static void post_hook(rrpc__rdma_ep *ep) {
  rrpc__rmt_car_post_hook fn = atomic_load_explicit(&g_post_hook, memory_order_acquire);
  if (fn != NULL) fn((struct rrpc__rmt_car *)ep);
}

static void td_hook(rrpc__rdma_ep *ep, unsigned in_flight) {
  rrpc__rmt_car_teardown_hook fn = atomic_load_explicit(&g_td_hook, memory_order_acquire);
  if (fn != NULL) fn((struct rrpc__rmt_car *)ep, in_flight);
}

void rrpc__rmt_car_observe(rrpc__rmt_car_wc_observer fn) {
  atomic_store_explicit(&g_wc_observer, fn, memory_order_release);
}

int rrpc__rmt_car_wc(rrpc__rdma_ep *ep, const struct ibv_wc *wc) {
  if (!(wc->wr_id & CAR_TAG)) return 0;
  int status = rrpc__rmt_rdma_wc_code(wc->status);
  if (wc->wr_id & CAR_BIND) {
    struct bind_wait *w = (struct bind_wait *)(uintptr_t)(wc->wr_id & ~(CAR_TAG | CAR_BIND));
    pthread_mutex_lock(&g_bind_mu);
    w->done = 1;
    w->status = status;
    pthread_cond_broadcast(&g_bind_cv);
    pthread_mutex_unlock(&g_bind_mu);
    bind_wait_unref(w);
    return 1;
  }
  rrpc__rmt_car_wc_observer obs = atomic_load_explicit(&g_wc_observer, memory_order_acquire);
  if (obs != NULL) obs(wc->wr_id & ~CAR_TAG, (int)wc->status);
  /* The socket let go: its link is gone with it, and so are the pieces. */
  if (ep->s != NULL) rrpc__rmt_link_on_wc(ep->s, wc->wr_id & ~CAR_TAG, status);
  return 1;
}

void rrpc__rmt_car_teardown(rrpc__rdma_ep *ep) {
  /* The QP is marked dead: wait for the posts that took it before. */
  posts_drain(ep);
  pthread_mutex_lock(&g_regions_mu);
  for (struct rrpc__rmt_car_mr *m = g_regions; m != NULL; m = m->next)
    if (m->ep == ep) rrpc__rmt_car_revoke(m);
  pthread_mutex_unlock(&g_regions_mu);
}
