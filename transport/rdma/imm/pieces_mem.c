/* pieces_mem.c - elastic-ring piece memory and its process-wide cache (see
 * pieces_mem.h). The cache keeps, per size class (4 KiB << code), cleared
 * and registered pieces without a window; loops take, allocate and bind a
 * window at the grant, and give back; registering and deregistering run on
 * the background setup thread. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/budget.h"
#include "transport/rdma/imm/pieces_mem.h"
#include "transport/rdma/wire/cache_goal.h"
#include "transport/rdma/wire/grant.h"

enum {
  CLASSES = RRPC_PIECE_CODE_MAX + 1,
  IDLE_LOW = 16, /* 4 KiB pieces: refill below this (the goal: wire/cache_goal.h) */
};

struct waiter {
  rrpc__loop *loop;
  void (*fn)(void *);
  void (*undo)(void *);
  void *arg;
};

static struct {
  pthread_mutex_t mu;
  rrpc__rdma_dev *dev;
  uint64_t cap; /* bytes the cache may keep */
  struct rrpc__piece *free[CLASSES];
  uint32_t count[CLASSES];
  uint8_t wanted[CLASSES]; /* a take missed: refill this class too */
  struct rrpc__cache_goals goals; /* pieces each class aims at now (wire/cache_goal.h) */
  int refilling;           /* a refill job is queued or running */
  int cap_hit;             /* the last refill was refused by the registered cap */
  struct rrpc__bg_job refill_job;
  struct waiter w[RRPC__PIECE_WAITERS];
  uint32_t nw;
  struct rrpc__pieces_stats st;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int class_of(uint32_t len) {
  uint8_t code;
  return rrpc__grant_piece_code(len, &code) == 0 ? code : -1;
}

/* What class c aims at now (wire/cache_goal.h). Under g.mu. */
static uint32_t target_of(int c) { return rrpc__cache_goal(&g.goals, c, g.wanted[c]); }

static uint32_t low_of(int c) { return c == 0 ? IDLE_LOW : (target_of(c) + 1) / 2; }

/* ---- verbs side: background thread only -------------------------------------- */

static void piece_destroy(struct rrpc__piece *p) {
  rrpc__piece_unbind(p);
  int rc = p->mr != NULL ? ibv_dereg_mr(p->mr) : 0;
  if (rc != 0) {
    /* Still registered (a window still bound to it?): the device may
     * still write there, so the memory is kept, and counted, for good. */
    RRPC_LOG(ERROR, "rdma pieces: ibv_dereg_mr of a %u-byte piece: %s; its memory is leaked", p->len,
             rrpc_strerror(-rc));
    free(p);
    return;
  }
  if (p->mr != NULL) {
    rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, (uint64_t)0 - p->len);
    rrpc__rdma_budget_give(p->len);
  }
  free(p->buf);
  free(p);
}

/* A new cleared, registered piece, or NULL (cap, memory, ulimit -l). */
static struct rrpc__piece *piece_create(rrpc__rdma_dev *dev, uint32_t len) {
  if (rrpc__rdma_budget_take(len) != 0) return NULL;
  struct rrpc__piece *p = calloc(1, sizeof *p);
  void *buf = NULL;
  if (p == NULL || posix_memalign(&buf, 4096, len) != 0) {
    free(p);
    rrpc__rdma_budget_give(len);
    return NULL;
  }
  memset(buf, 0, len); /* nothing of an earlier owner may be delivered */
  p->dev = dev;
  p->buf = buf;
  p->len = len;
  int access = IBV_ACCESS_LOCAL_WRITE | (dev->mw_type2 ? IBV_ACCESS_MW_BIND : IBV_ACCESS_REMOTE_WRITE);
  p->mr = ibv_reg_mr(dev->pd, buf, len, access);
  if (p->mr == NULL) {
    rrpc__rdma_budget_give(len);
    piece_destroy(p);
    return NULL;
  }
  rrpc__rdma_count(RRPC_RDMA_CNT_RING_BYTES, len);
  p->region = (rrpc__rdma_region){
      .magic = RRPC_RDMA_REGION_MAGIC, .lkey = p->mr->lkey, .mr = p->mr, .base = p->buf, .len = len};
  p->rkey = p->mr->rkey; /* without windows the MR itself is what the peer writes */
  return p;
}

/* Under g.mu. */
static void push_locked(struct rrpc__piece *p, int c) {
  p->next = g.free[c];
  g.free[c] = p;
  g.count[c]++;
  g.st.cached_bytes += p->len;
}

/* Post every waiter's wake-up. Called without g.mu. */
static void wake_all(void) {
  struct waiter w[64];
  for (;;) {
    pthread_mutex_lock(&g.mu);
    uint32_t n = g.nw < 64 ? g.nw : 64;
    g.nw -= n;
    memcpy(w, &g.w[g.nw], n * sizeof w[0]);
    pthread_mutex_unlock(&g.mu);
    if (n == 0) return;
    for (uint32_t i = 0; i < n; i++)
      if (rrpc__loop_post(w[i].loop, w[i].fn, w[i].arg) != 0) w[i].undo(w[i].arg);
  }
}

/* Make pieces of class c up to its target, within the cache's cap. Each
 * piece a waiter asked for (a take missed that class) wakes the waiters at
 * once: a grant waits for its own piece, not for the whole prefill (some
 * MiB of clearing and registering). 1 if the cap or memory refused one. */
static int refill_class(int c, int *made) {
  for (;;) {
    pthread_mutex_lock(&g.mu);
    uint32_t len = rrpc__grant_piece_len((uint8_t)c);
    int more = g.count[c] < target_of(c) && (g.st.cached_bytes + len <= g.cap || g.wanted[c]);
    if (!more) g.wanted[c] = 0;
    rrpc__rdma_dev *dev = g.dev;
    pthread_mutex_unlock(&g.mu);
    if (!more) return 0;
    struct rrpc__piece *p = piece_create(dev, len);
    if (p == NULL) return 1;
    pthread_mutex_lock(&g.mu);
    push_locked(p, c);
    int wake = g.wanted[c] && g.nw > 0;
    g.wanted[c] = 0;
    g.st.refills++;
    pthread_mutex_unlock(&g.mu);
    (*made)++;
    if (wake) wake_all();
  }
}

/* Fill every class below its low-water mark (or asked for) up to its
 * target: the classes a take missed first, then the rest; then wake the
 * waiters. */
static void refill_job(struct rrpc__bg_job *j) {
  (void)j;
  int made = 0, refused = 0;
  for (int pass = 0; pass < 2 && !refused; pass++) {
    for (int c = 0; c < CLASSES && !refused; c++) {
      pthread_mutex_lock(&g.mu);
      int skip = pass == 0 && !g.wanted[c];
      pthread_mutex_unlock(&g.mu);
      if (!skip) refused = refill_class(c, &made);
    }
  }
  pthread_mutex_lock(&g.mu);
  g.refilling = 0;
  g.cap_hit = refused && made == 0;
  int cap_hit = g.cap_hit;
  pthread_mutex_unlock(&g.mu);
  if (refused) RRPC_LOG(WARNING, "rdma pieces: cannot register more pieces (--rdma_registered_max_size_mb or ulimit -l)");
  /* Waiters woken by a refill that made nothing would only ask again: they
   * wait for a piece to come back (rrpc__piece_put) instead. */
  if (!cap_hit) wake_all();
}

/* Start a refill unless one is under way. Under g.mu; returns 1 if the
 * caller must submit g.refill_job after unlocking. */
static int refill_needed_locked(void) {
  if (g.refilling || g.dev == NULL) return 0;
  g.refilling = 1;
  g.refill_job.fn = refill_job;
  return 1;
}

static void recycle_job(struct rrpc__bg_job *j) {
  struct rrpc__piece *p = (struct rrpc__piece *)j;
  rrpc__piece_unbind(p);
  int c = class_of(p->len);
  pthread_mutex_lock(&g.mu);
  g.st.used_bytes -= p->len;
  int keep = c >= 0 && g.count[c] < target_of(c) && g.st.cached_bytes + p->len <= g.cap;
  pthread_mutex_unlock(&g.mu);
  if (keep) memset(p->buf, 0, p->len);
  if (!keep) {
    piece_destroy(p);
  } else {
    pthread_mutex_lock(&g.mu);
    push_locked(p, c);
    pthread_mutex_unlock(&g.mu);
  }
  pthread_mutex_lock(&g.mu);
  g.cap_hit = 0; /* bytes came back: a refill may succeed again */
  pthread_mutex_unlock(&g.mu);
  wake_all();
}

/* ---- any thread ------------------------------------------------------------------ */

void rrpc__pieces_prefill(rrpc__rdma_dev *dev, uint64_t cache_bytes) {
  pthread_mutex_lock(&g.mu);
  if (g.dev == NULL) {
    g.dev = dev;
    g.cap = cache_bytes;
  }
  int submit = refill_needed_locked();
  pthread_mutex_unlock(&g.mu);
  if (submit) rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &g.refill_job);
}

int rrpc__piece_take(rrpc__rdma_dev *dev, uint32_t len, struct rrpc__piece **out) {
  int c = class_of(len);
  if (c < 0) return -EINVAL;
  pthread_mutex_lock(&g.mu);
  if (g.dev == NULL) g.dev = dev;
  struct rrpc__piece *p = g.free[c];
  if (p != NULL) {
    g.free[c] = p->next;
    g.count[c]--;
    g.st.cached_bytes -= p->len;
    g.st.used_bytes += p->len;
  } else {
    g.wanted[c] = 1;
    g.st.misses++;
    rrpc__cache_goal_missed(&g.goals, c, 1);
  }
  int submit = !g.cap_hit && (p == NULL || g.count[c] < low_of(c)) && refill_needed_locked();
  pthread_mutex_unlock(&g.mu);
  if (submit) rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &g.refill_job);
  if (p == NULL) return -EAGAIN;
  p->next = NULL;
  *out = p;
  return 0;
}

int rrpc__piece_wait(rrpc__loop *loop, void (*fn)(void *), void (*undo)(void *), void *arg) {
  pthread_mutex_lock(&g.mu);
  int rc = -EBUSY;
  if (g.nw < RRPC__PIECE_WAITERS) {
    g.w[g.nw++] = (struct waiter){.loop = loop, .fn = fn, .undo = undo, .arg = arg};
    rc = 0;
  }
  /* Nothing under way that would wake it: start a refill. */
  int submit = rc == 0 && !g.cap_hit && refill_needed_locked();
  pthread_mutex_unlock(&g.mu);
  if (submit) rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &g.refill_job);
  return rc;
}

/* The window is allocated here, after the QP it is bound to, never ahead
 * in the cache: at process exit without a teardown (a crash, _exit) the
 * kernel destroys a process's verbs objects newest first, and rxe's
 * destroy_qp waits ~50 s (then warns) for every QP a still-bound type-2
 * window holds - bench/idle_conns took minutes to exit with 20 elastic
 * connections. A window newer than its QP is destroyed before it, as the
 * ring's is (endpoint.c, ring_register). ibv_alloc_mw registers no memory:
 * one short system call on the loop. */
int rrpc__piece_bind(struct rrpc__piece *p, struct ibv_qp *qp, uint64_t wr_id) {
  if (!p->dev->mw_type2) return 1;
  rrpc__piece_unbind(p); /* a window is bound once, to one QP */
  p->mw = ibv_alloc_mw(p->dev->pd, IBV_MW_TYPE_2);
  if (p->mw == NULL) return -RRPC_ERDMAMEM;
  uint32_t rkey = ibv_inc_rkey(p->mw->rkey);
  struct ibv_send_wr wr, *bad;
  memset(&wr, 0, sizeof wr);
  wr.wr_id = wr_id;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = p->mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = p->mr;
  wr.bind_mw.bind_info.addr = (uintptr_t)p->buf;
  wr.bind_mw.bind_info.length = p->len;
  wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
  int rc = ibv_post_send(qp, &wr, &bad);
  if (rc != 0) {
    rrpc__piece_unbind(p);
    return -rc;
  }
  /* Type-2 binds leave storing the new key to the application. */
  p->mw->rkey = rkey;
  p->rkey = rkey;
  return 0;
}

void rrpc__piece_unbind(struct rrpc__piece *p) {
  if (p->mw != NULL) ibv_dealloc_mw(p->mw);
  p->mw = NULL;
}

void rrpc__piece_put(struct rrpc__piece *p) {
  p->job.fn = recycle_job;
  rrpc__verbs_bg_submit_lane(RRPC_BG_SETUP, &p->job);
}

void rrpc__pieces_stats(struct rrpc__pieces_stats *out) {
  pthread_mutex_lock(&g.mu);
  *out = g.st;
  pthread_mutex_unlock(&g.mu);
}
