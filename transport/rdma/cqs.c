/* cqs.c - the completion queues shared by the rrpc-dialect connections of
 * one loop on one device (cqs.h): the registry of sets, capacity (reserve,
 * resize, new pair), the qp_num table and the shared poll. */
#include "transport/rdma/cqs.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "rrpc/errors.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/internal/lock.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/verbs_bg.h"

enum {
  CQ_FIRST = 256, /* entries of a new pair's CQs at least: grown by doubling */
  WC_BATCH = 32,
  TABLE_MIN = 64, /* buckets; doubled when members outnumber them twice */
};

struct rrpc__cq_pair {
  struct rrpc__cq_pair *next;
  struct ibv_cq *scq, *rcq;
  uint32_t cap_s, cap_r;   /* entries the CQs have */
  uint32_t used_s, used_r; /* reserved by members and by leavers not drained yet */
  uint32_t pend_s, pend_r; /* of those, by leavers: freed after the next drain */
  uint32_t snap_s, snap_r; /* pend_* when the running poll began */
};

struct rrpc__rdma_cqs {
  struct rrpc__rdma_cqs *next; /* the registry */
  rrpc__loop *loop;
  rrpc__rdma_dev *dev;
  int polling;
  int refs; /* members + a poll that dispatches; under g_mu */
  int dying;  /* refs reached 0 once: its destruction is under way; under g_mu */
  int orphan; /* the loop stopped before it could take the set off: the stop hook frees it */
  int hooked; /* set_on_loop_stop is registered */
  struct rrpc__bg_job free_job;
  atomic_uint pending; /* leavers' reservations not freed yet (a fast "none") */
  struct ibv_comp_channel *cc;
  rrpc__watcher watch;
  int watching, poller_added;
  rrpc__lock mu; /* the table and the pairs (one futex word: taken every poll) */
  struct rrpc__cq_pair *pairs;
  struct rrpc__cq_member **table;
  uint32_t nbuckets, nmembers;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct rrpc__rdma_cqs *g_sets;
static _Atomic uint64_t g_sets_n, g_pairs_n, g_members_n, g_misses, g_resizes;

void rrpc__cqs_stats(struct rrpc__cqs_stats *out) {
  out->sets = atomic_load_explicit(&g_sets_n, memory_order_relaxed);
  out->pairs = atomic_load_explicit(&g_pairs_n, memory_order_relaxed);
  out->members = atomic_load_explicit(&g_members_n, memory_order_relaxed);
  out->misses = atomic_load_explicit(&g_misses, memory_order_relaxed);
  out->resizes = atomic_load_explicit(&g_resizes, memory_order_relaxed);
}

static int verbs_err(void) { return errno ? -errno : -RRPC_ERDMA; }

/* ---- pairs and capacity (under mu) ------------------------------------------ */

static int arm(const rrpc__rdma_cqs *c, struct rrpc__cq_pair *p) {
  /* Receives wake us only when solicited (the sender asks when it matters;
   * not on a device that never reports those, device.c); sends on every
   * signaled completion (they free the send queue). */
  int solicited_only = !c->dev->rx_events_all;
  return ibv_req_notify_cq(p->rcq, solicited_only) || ibv_req_notify_cq(p->scq, 0) ? -RRPC_ERDMA : 0;
}

static void pair_free(struct rrpc__cq_pair *p) {
  if (p->scq != NULL) ibv_destroy_cq(p->scq);
  if (p->rcq != NULL) ibv_destroy_cq(p->rcq);
  free(p);
  atomic_fetch_sub_explicit(&g_pairs_n, 1, memory_order_relaxed);
}

static uint32_t max_cqe(const rrpc__rdma_cqs *c) { return c->dev->max_cqe > 0 ? (uint32_t)c->dev->max_cqe : 4096; }

static int pair_new(rrpc__rdma_cqs *c, uint32_t sq, uint32_t rq, struct rrpc__cq_pair **out) {
  struct rrpc__cq_pair *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  atomic_fetch_add_explicit(&g_pairs_n, 1, memory_order_relaxed);
  errno = 0;
  p->scq = ibv_create_cq(c->dev->ctx, (int)(sq > CQ_FIRST ? sq : CQ_FIRST), c, c->cc, 0);
  p->rcq = ibv_create_cq(c->dev->ctx, (int)(rq > CQ_FIRST ? rq : CQ_FIRST), c, c->cc, 0);
  int rc = p->scq == NULL || p->rcq == NULL ? verbs_err() : 0;
  if (rc == 0 && !c->polling) rc = arm(c, p);
  if (rc != 0) {
    pair_free(p);
    return rc;
  }
  /* What the device gave (often more than asked). */
  p->cap_s = (uint32_t)p->scq->cqe;
  p->cap_r = (uint32_t)p->rcq->cqe;
  *out = p;
  return 0;
}

/* Grow cq to hold `need` entries: doubling, at most the device's max.
 * 0 when it holds them now. */
static int grow(rrpc__rdma_cqs *c, struct ibv_cq *cq, uint32_t *cap, uint32_t need) {
  if (need <= *cap) return 0;
  uint32_t want = *cap * 2 > need ? *cap * 2 : need;
  if (want > max_cqe(c)) want = max_cqe(c);
  if (want < need || ibv_resize_cq(cq, (int)want) != 0) return -ENOSPC;
  atomic_fetch_add_explicit(&g_resizes, 1, memory_order_relaxed);
  *cap = (uint32_t)cq->cqe;
  return need <= *cap ? 0 : -ENOSPC;
}

/* A pair with room for sq + rq more completions: an existing one, grown
 * if need be, else a new one. */
static int reserve(rrpc__rdma_cqs *c, uint32_t sq, uint32_t rq, struct rrpc__cq_pair **out) {
  for (struct rrpc__cq_pair *p = c->pairs; p != NULL; p = p->next) {
    if (grow(c, p->scq, &p->cap_s, p->used_s + sq) != 0) continue;
    if (grow(c, p->rcq, &p->cap_r, p->used_r + rq) != 0) continue;
    *out = p;
    break;
  }
  if (*out == NULL) {
    int rc = pair_new(c, sq, rq, out);
    if (rc != 0) return rc;
    (*out)->next = c->pairs;
    c->pairs = *out;
  }
  (*out)->used_s += sq;
  (*out)->used_r += rq;
  return 0;
}

/* After a drain: what leavers reserved before it began is free now (their
 * QPs were gone, so the drain took all their completions). */
static void release_pending(rrpc__rdma_cqs *c) {
  for (struct rrpc__cq_pair *p = c->pairs; p != NULL; p = p->next) {
    p->used_s -= p->snap_s;
    p->pend_s -= p->snap_s;
    p->used_r -= p->snap_r;
    p->pend_r -= p->snap_r;
    atomic_fetch_sub_explicit(&c->pending, p->snap_s + p->snap_r, memory_order_relaxed);
    p->snap_s = p->snap_r = 0;
  }
}

/* ---- the qp_num table (under mu) ------------------------------------------------ */

static uint32_t bucket(const rrpc__rdma_cqs *c, uint32_t qp_num) {
  return (qp_num * 2654435761u) & (c->nbuckets - 1);
}

static struct rrpc__cq_member *find_locked(rrpc__rdma_cqs *c, uint32_t qp_num) {
  for (struct rrpc__cq_member *m = c->table[bucket(c, qp_num)]; m != NULL; m = m->hnext)
    if (m->qp_num == qp_num) return m;
  return NULL;
}

static int table_grow(rrpc__rdma_cqs *c) {
  uint32_t nb = c->nbuckets * 2;
  struct rrpc__cq_member **t = calloc(nb, sizeof *t);
  if (t == NULL) return -ENOMEM;
  struct rrpc__cq_member **old = c->table;
  uint32_t onb = c->nbuckets;
  c->table = t;
  c->nbuckets = nb;
  for (uint32_t i = 0; i < onb; i++) {
    while (old[i] != NULL) {
      struct rrpc__cq_member *m = old[i];
      old[i] = m->hnext;
      uint32_t b = bucket(c, m->qp_num);
      m->hnext = t[b];
      t[b] = m;
    }
  }
  free(old);
  return 0;
}

int rrpc__cqs_add(struct rrpc__cq_member *m, uint32_t qp_num) {
  rrpc__rdma_cqs *c = m->cqs;
  rrpc__lock_acquire(&c->mu);
  int rc = c->nmembers + 1 > 2 * c->nbuckets ? table_grow(c) : 0;
  if (rc == 0) {
    m->qp_num = qp_num;
    uint32_t b = bucket(c, qp_num);
    m->hnext = c->table[b];
    c->table[b] = m;
    c->nmembers++;
    m->in_table = 1;
  }
  rrpc__lock_release(&c->mu);
  return rc;
}

void rrpc__cqs_remove(struct rrpc__cq_member *m) {
  rrpc__rdma_cqs *c = m->cqs;
  if (c == NULL || !m->in_table) return;
  rrpc__lock_acquire(&c->mu);
  for (struct rrpc__cq_member **pp = &c->table[bucket(c, m->qp_num)]; *pp != NULL; pp = &(*pp)->hnext) {
    if (*pp == m) {
      *pp = m->hnext;
      c->nmembers--;
      break;
    }
  }
  m->in_table = 0;
  rrpc__lock_release(&c->mu);
}

/* ---- the shared poll (loop thread) ------------------------------------------------ */

/* Drain one CQ, dispatching each completion to its member; members seen
 * the first time in this poll are referenced and put on *touched. 1 if any. */
static void cqs_ref(rrpc__rdma_cqs *c);

static int drain(rrpc__rdma_cqs *c, struct ibv_cq *cq, int is_send, struct rrpc__cq_member **touched,
                 rrpc_iobuf *drop, int *held) {
  struct ibv_wc wc[WC_BATCH];
  int any = 0;
  for (;;) {
    int n = ibv_poll_cq(cq, WC_BATCH, wc);
    if (n <= 0) return any; /* < 0: nothing to tell a member; the next poll tries again */
    any = 1;
    /* A completion's handling may end the last member (a fallback at the
     * first CDC), an `after` may close it: the set outlives this poll.
     * Idle rounds (busy polling) take no lock for it. */
    if (!*held) {
      cqs_ref(c);
      *held = 1;
    }
    for (int i = 0; i < n; i++) {
      rrpc__lock_acquire(&c->mu);
      struct rrpc__cq_member *m = find_locked(c, wc[i].qp_num);
      int first = m != NULL && !m->touched;
      if (first) {
        m->touched = 1;
        m->tnext = *touched;
        *touched = m;
        m->ops->ref(m->user);
      }
      rrpc__lock_release(&c->mu);
      /* A miss: the QP was destroyed with this completion queued. */
      if (m == NULL) atomic_fetch_add_explicit(&g_misses, 1, memory_order_relaxed);
      else m->ops->on_wc(m->user, &wc[i], is_send, drop);
    }
  }
}

static int drain_all(rrpc__rdma_cqs *c, struct rrpc__cq_member **touched, rrpc_iobuf *drop, int *held) {
  int any = 0;
  /* Pairs are only added on this thread, at the head: a walk is stable. */
  for (struct rrpc__cq_pair *p = c->pairs; p != NULL; p = p->next) {
    any |= drain(c, p->rcq, 0, touched, drop, held);
    any |= drain(c, p->scq, 1, touched, drop, held);
  }
  return any;
}

static void unref_ex(rrpc__rdma_cqs *c, int in_own_callback);

/* Pending reservations as of now (new pairs start with none). 1 if any. */
static int snapshot(rrpc__rdma_cqs *c) {
  if (atomic_load_explicit(&c->pending, memory_order_relaxed) == 0) return 0;
  rrpc__lock_acquire(&c->mu);
  for (struct rrpc__cq_pair *p = c->pairs; p != NULL; p = p->next) {
    p->snap_s = p->pend_s;
    p->snap_r = p->pend_r;
  }
  rrpc__lock_release(&c->mu);
  return 1;
}

/* 1 if it handled any completion. */
static int cqs_poll(rrpc__rdma_cqs *c) {
  int snapped = snapshot(c), held = 0;
  struct rrpc__cq_member *touched = NULL;
  rrpc_iobuf drop;
  rrpc__iobuf_init(&drop);
  for (int rounds = 0;;) {
    if (drain_all(c, &touched, &drop, &held)) continue;
    if (c->polling || rounds++ > 0) break;
    /* Re-arm, then look once more: a completion that landed between the
     * last poll and the arm raises no event. */
    for (struct rrpc__cq_pair *p = c->pairs; p != NULL; p = p->next)
      if (arm(c, p) != 0) RRPC_LOG(ERROR, "rdma: cannot re-arm a shared CQ");
  }
  if (snapped) {
    rrpc__lock_acquire(&c->mu);
    release_pending(c);
    rrpc__lock_release(&c->mu);
  }
  rrpc__iobuf_destroy(&drop); /* may release ring slices: no lock held */
  while (touched != NULL) {
    struct rrpc__cq_member *m = touched;
    touched = m->tnext;
    m->touched = 0;
    void *user = m->user;
    const struct rrpc__cq_user_ops *ops = m->ops;
    ops->after(user);
    ops->unref(user); /* m may be gone after this */
  }
  if (held) unref_ex(c, !c->polling); /* a poller may delete itself at once */
  return held | snapped;
}

static void on_cc_event(rrpc__watcher *w, uint32_t events) {
  (void)events;
  rrpc__rdma_cqs *c = w->arg;
  struct ibv_cq *cq;
  void *ctx;
  /* The channel fd is non-blocking: take every pending event, ack each. */
  while (ibv_get_cq_event(c->cc, &cq, &ctx) == 0) {
    ibv_ack_cq_events(cq, 1);
    rrpc__rdma_count(RRPC_RDMA_CNT_WAKEUPS, 1);
  }
  (void)cqs_poll(c);
}

/* --rdma_use_polling: the loop runs this every round instead of sleeping. */
static int on_poll(void *arg) { return cqs_poll(arg); }

/* ---- sets: create, find, destroy ------------------------------------------------ */

/* The verbs half of destroying a set (its CQs and channel: tens of ms under
 * TCG), once nothing of the loop refers to it. Any thread. */
static void cqs_free(rrpc__rdma_cqs *c) {
  while (c->pairs != NULL) {
    struct rrpc__cq_pair *p = c->pairs;
    c->pairs = p->next;
    pair_free(p);
  }
  if (c->cc != NULL) ibv_destroy_comp_channel(c->cc);
  free(c->table);
  free(c);
  atomic_fetch_sub_explicit(&g_sets_n, 1, memory_order_relaxed);
}

static void free_job(struct rrpc__bg_job *j) {
  cqs_free((rrpc__rdma_cqs *)((char *)j - offsetof(rrpc__rdma_cqs, free_job)));
}

static void set_on_loop_stop(void *arg);

/* Take the set off its loop (loop thread, or the thread that stopped it),
 * then free it: on the background verbs thread from a loop thread. */
static void cqs_destroy(rrpc__rdma_cqs *c) {
  if (c->poller_added) rrpc__loop_poller_del(c->loop, on_poll, c);
  if (c->watching) rrpc__loop_watch_del(c->loop, &c->watch);
  if (c->hooked) rrpc__loop_stop_hook_del(c->loop, set_on_loop_stop, c);
  if (!rrpc__loop_in_thread(c->loop)) {
    cqs_free(c);
    return;
  }
  c->free_job.fn = free_job;
  rrpc__verbs_bg_submit(&c->free_job);
}

/* The loop stops. Teardown jobs of its connections still queued on the
 * background thread refer to this set and may post to the loop: let them
 * finish while the loop still exists. A set they left for good while the
 * loop could no longer take tasks (orphan) is freed here. */
static void set_on_loop_stop(void *arg) {
  rrpc__rdma_cqs *c = arg;
  if (rrpc__verbs_bg_drain(30000) != 0)
    RRPC_LOG(ERROR, "rdma: a stopping loop waited 30 s for the background verbs thread");
  pthread_mutex_lock(&g_mu);
  int orphan = c->orphan;
  pthread_mutex_unlock(&g_mu);
  if (orphan) cqs_free(c);
}

static void cqs_ref(rrpc__rdma_cqs *c) {
  pthread_mutex_lock(&g_mu);
  c->refs++;
  pthread_mutex_unlock(&g_mu);
}

static void destroy_task(void *arg) { cqs_destroy(arg); }

/* Drop a reference; the last one destroys the set (once: a poll that ran
 * meanwhile may take and drop one more). From inside the set's own watcher
 * callback (a poll), the loop still reads the watcher after the callback
 * returns: destroy once this round's fd phase is over. From the background
 * thread (a connection's teardown left last), the loop takes it off itself;
 * a loop already stopping leaves it to the set's stop hook. */
static void unref_ex(rrpc__rdma_cqs *c, int in_own_callback) {
  pthread_mutex_lock(&g_mu);
  int last = --c->refs == 0 && !c->dying;
  if (last) {
    c->dying = 1;
    for (struct rrpc__rdma_cqs **pp = &g_sets; *pp != NULL; pp = &(*pp)->next) {
      if (*pp == c) {
        *pp = c->next;
        break;
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (!last) return;
  if (in_own_callback && rrpc__loop_defer(c->loop, destroy_task, c) == 0) return;
  if (rrpc__verbs_bg_on_thread()) {
    if (rrpc__loop_post(c->loop, destroy_task, c) == 0) return;
    pthread_mutex_lock(&g_mu);
    c->orphan = 1;
    pthread_mutex_unlock(&g_mu);
    return;
  }
  cqs_destroy(c);
}

static void cqs_unref(rrpc__rdma_cqs *c) { unref_ex(c, 0); }

static int cqs_watch(rrpc__rdma_cqs *c) {
  if (c->polling) {
    int rc = rrpc__loop_poller_add(c->loop, on_poll, c);
    c->poller_added = rc == 0;
    return rc;
  }
  errno = 0;
  c->cc = ibv_create_comp_channel(c->dev->ctx);
  if (c->cc == NULL) return verbs_err(); /* EMFILE: out of fds */
  int fl = fcntl(c->cc->fd, F_GETFL);
  if (fl < 0 || fcntl(c->cc->fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
  c->watch = (rrpc__watcher){.fd = c->cc->fd, .events = EPOLLIN, .cb = on_cc_event, .arg = c};
  int rc = rrpc__loop_watch_add(c->loop, &c->watch);
  c->watching = rc == 0;
  return rc;
}

static int cqs_new(rrpc__loop *loop, rrpc__rdma_dev *dev, int polling, rrpc__rdma_cqs **out) {
  rrpc__rdma_cqs *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  atomic_fetch_add_explicit(&g_sets_n, 1, memory_order_relaxed);
  c->loop = loop;
  c->dev = dev;
  c->polling = polling;
  rrpc__lock_init(&c->mu);
  c->nbuckets = TABLE_MIN;
  c->table = calloc(c->nbuckets, sizeof *c->table);
  int rc = c->table == NULL ? -ENOMEM : cqs_watch(c);
  if (rc == 0) {
    rc = rrpc__loop_stop_hook_add(loop, set_on_loop_stop, c);
    c->hooked = rc == 0;
  }
  if (rc != 0) {
    cqs_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* The set of (loop, dev), referenced; created if there is none. */
static int cqs_get(rrpc__loop *loop, rrpc__rdma_dev *dev, int polling, rrpc__rdma_cqs **out) {
  pthread_mutex_lock(&g_mu);
  for (rrpc__rdma_cqs *c = g_sets; c != NULL; c = c->next) {
    if (c->loop == loop && c->dev == dev && c->polling == polling) {
      c->refs++;
      *out = c;
      pthread_mutex_unlock(&g_mu);
      return 0;
    }
  }
  pthread_mutex_unlock(&g_mu);
  /* Created outside g_mu (verbs calls); only this loop's thread creates
   * the set of this loop, so no one else can add the same one meanwhile. */
  rrpc__rdma_cqs *c;
  int rc = cqs_new(loop, dev, polling, &c);
  if (rc != 0) return rc;
  pthread_mutex_lock(&g_mu);
  c->refs = 1;
  c->next = g_sets;
  g_sets = c;
  pthread_mutex_unlock(&g_mu);
  *out = c;
  return 0;
}

int rrpc__cqs_join(rrpc__loop *loop, rrpc__rdma_dev *dev, int polling, uint32_t sq, uint32_t rq, void *user,
                   const struct rrpc__cq_user_ops *ops, struct rrpc__cq_member *m) {
  memset(m, 0, sizeof *m);
  rrpc__rdma_cqs *c;
  int rc = cqs_get(loop, dev, polling, &c);
  if (rc != 0) return rc;
  struct rrpc__cq_pair *p = NULL;
  rrpc__lock_acquire(&c->mu);
  rc = reserve(c, sq, rq, &p);
  rrpc__lock_release(&c->mu);
  if (rc != 0) {
    cqs_unref(c);
    return rc;
  }
  *m = (struct rrpc__cq_member){
      .cqs = c, .pair = p, .scq = p->scq, .rcq = p->rcq, .sq = sq, .rq = rq, .user = user, .ops = ops};
  atomic_fetch_add_explicit(&g_members_n, 1, memory_order_relaxed);
  return 0;
}

void rrpc__cqs_leave(struct rrpc__cq_member *m) {
  rrpc__rdma_cqs *c = m->cqs;
  if (c == NULL) return;
  rrpc__cqs_remove(m);
  rrpc__lock_acquire(&c->mu);
  /* Its destroyed QP's completions may still be queued: the reservation
   * stays until the next poll has drained them. */
  m->pair->pend_s += m->sq;
  m->pair->pend_r += m->rq;
  atomic_fetch_add_explicit(&c->pending, m->sq + m->rq, memory_order_relaxed);
  rrpc__lock_release(&c->mu);
  m->cqs = NULL;
  m->pair = NULL;
  atomic_fetch_sub_explicit(&g_members_n, 1, memory_order_relaxed);
  cqs_unref(c);
}
