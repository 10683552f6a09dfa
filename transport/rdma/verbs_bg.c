/* verbs_bg.c - the background verbs threads (verbs_bg.h): two FIFOs of
 * embedded jobs (setup, teardown), bounded together by --rdma_bg_queue_max,
 * per process --rdma_bg_setup_threads threads for setup and one for
 * teardown, started on first use, drained (bounded) at exit and restarted
 * after a fork (the child has no such threads). A drain waits until each
 * lane has finished as many jobs as were queued before it; with several
 * setup threads that is a count, not those very jobs. */
#include "transport/rdma/verbs_bg.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/internal/log.h"
#include "transport/rdma/device.h"

/* What the exit drain waits at most: a job is a few verbs calls (under
 * TCG up to a second); exit must not hang on a wedged device. */
#define BG_EXIT_DRAIN_MS 10000

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_idle = PTHREAD_COND_INITIALIZER; /* a job finished */
/* Two lanes, one thread each: a new connection's setup waits for other
 * setups only, never behind a teardown (hundreds of ms each under TCG). */
struct lane {
  pthread_cond_t work; /* a job was queued */
  struct rrpc__bg_job *head, *tail;
  int started; /* its thread runs (in this process) */
  uint64_t queued, done; /* under g_mu */
};
static struct lane g_lanes[RRPC_BG_LANES] = {
    {.work = PTHREAD_COND_INITIALIZER}, {.work = PTHREAD_COND_INITIALIZER}};
static int g_start_failed;
static uint64_t g_max_depth; /* under g_mu */
static _Atomic uint64_t g_inline;
static _Thread_local int tls_on_bg;

static size_t queue_max(void) {
  int m = rrpc__rdma_options()->bg_queue_max;
  return m > 0 ? (size_t)m : 1;
}

static void *bg_main(void *arg) {
  struct lane *l = arg;
  tls_on_bg = 1;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (l->head == NULL) pthread_cond_wait(&l->work, &g_mu);
    struct rrpc__bg_job *j = l->head;
    l->head = j->next;
    if (l->head == NULL) l->tail = NULL;
    pthread_mutex_unlock(&g_mu);
    j->fn(j); /* may free j: not touched afterwards */
    pthread_mutex_lock(&g_mu);
    l->done++;
    pthread_cond_broadcast(&g_idle);
  }
  return NULL;
}

static void exit_drain(void) {
  if (rrpc__verbs_bg_drain(BG_EXIT_DRAIN_MS) != 0)
    RRPC_LOG(WARNING, "rdma: background verbs threads still busy at exit after %d ms", BG_EXIT_DRAIN_MS);
}

/* The child of a fork has the parent's queues but not their threads:
 * start afresh (jobs queued at the fork belong to the parent's threads). */
static void after_fork_child(void) {
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_idle, NULL);
  for (int i = 0; i < RRPC_BG_LANES; i++) {
    pthread_cond_init(&g_lanes[i].work, NULL);
    g_lanes[i].head = g_lanes[i].tail = NULL;
    g_lanes[i].started = 0;
    g_lanes[i].queued = g_lanes[i].done = 0;
  }
}

static uint64_t depth_locked(void) {
  uint64_t d = 0;
  for (int i = 0; i < RRPC_BG_LANES; i++) d += g_lanes[i].queued - g_lanes[i].done;
  return d;
}

/* Setup threads: a burst of handshakes is served this many at a time
 * (--rdma_bg_setup_threads; the loops did it this parallel before). */
static int setup_threads(void) {
  int n = rrpc__rdma_options()->bg_setup_threads;
  if (n > 0) return n;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 2 ? 2 : cpus > 8 ? 8 : (int)cpus;
}

/* Under g_mu. 0 or the pthread error (with one thread running, enough). */
static int start_locked(struct lane *l) {
  if (l->started) return 0;
  if (g_start_failed) return -EAGAIN;
  int n = l == &g_lanes[RRPC_BG_SETUP] ? setup_threads() : 1, up = 0, rc = 0;
  for (int i = 0; i < n; i++) {
    pthread_t t;
    rc = pthread_create(&t, NULL, bg_main, l);
    if (rc != 0) break;
    pthread_setname_np(t, l == &g_lanes[RRPC_BG_SETUP] ? "rrpc_verbs_new" : "rrpc_verbs_bg");
    pthread_detach(t);
    up++;
  }
  if (up == 0) {
    g_start_failed = 1;
    RRPC_LOG(WARNING, "rdma: cannot start a background verbs thread (%d): verbs work runs inline", rc);
    return -rc;
  }
  static int hooks;
  if (!hooks) {
    hooks = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    atexit(exit_drain);
  }
  l->started = 1;
  return 0;
}

void rrpc__verbs_bg_submit_lane(int lane, struct rrpc__bg_job *job) {
  struct lane *l = &g_lanes[lane == RRPC_BG_SETUP ? RRPC_BG_SETUP : RRPC_BG_TEARDOWN];
  job->next = NULL;
  pthread_mutex_lock(&g_mu);
  int ok = !tls_on_bg && depth_locked() < queue_max() && start_locked(l) == 0;
  if (ok) {
    if (l->tail != NULL) l->tail->next = job;
    else l->head = job;
    l->tail = job;
    l->queued++;
    uint64_t d = depth_locked();
    if (d > g_max_depth) g_max_depth = d;
    pthread_cond_signal(&l->work);
  }
  pthread_mutex_unlock(&g_mu);
  if (ok) return;
  /* Full (or no thread, or a job submitting another): run it here rather
   * than wait for room. Counted: a loop doing this is the watchdog's. */
  atomic_fetch_add_explicit(&g_inline, 1, memory_order_relaxed);
  job->fn(job);
}

void rrpc__verbs_bg_submit(struct rrpc__bg_job *job) { rrpc__verbs_bg_submit_lane(RRPC_BG_TEARDOWN, job); }

int rrpc__verbs_bg_on_thread(void) { return tls_on_bg; }

static int lanes_done_locked(const uint64_t target[RRPC_BG_LANES]) {
  for (int i = 0; i < RRPC_BG_LANES; i++)
    if (g_lanes[i].started && g_lanes[i].done < target[i]) return 0;
  return 1;
}

int rrpc__verbs_bg_drain(int timeout_ms) {
  if (tls_on_bg) return 0;
  struct timespec dl;
  clock_gettime(CLOCK_REALTIME, &dl);
  dl.tv_sec += timeout_ms / 1000;
  dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (dl.tv_nsec >= 1000000000L) {
    dl.tv_sec++;
    dl.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&g_mu);
  uint64_t target[RRPC_BG_LANES]; /* what was submitted before this call */
  for (int i = 0; i < RRPC_BG_LANES; i++) target[i] = g_lanes[i].queued;
  int rc = 0;
  while (!lanes_done_locked(target) && rc == 0) rc = pthread_cond_timedwait(&g_idle, &g_mu, &dl);
  int done = lanes_done_locked(target);
  pthread_mutex_unlock(&g_mu);
  return done ? 0 : -ETIMEDOUT;
}

void rrpc__verbs_bg_stats(struct rrpc__verbs_bg_stats *out) {
  pthread_mutex_lock(&g_mu);
  out->queued = g_lanes[0].queued + g_lanes[1].queued;
  out->done = g_lanes[0].done + g_lanes[1].done;
  out->depth = depth_locked();
  out->max_depth = g_max_depth;
  pthread_mutex_unlock(&g_mu);
  out->inline_run = atomic_load_explicit(&g_inline, memory_order_relaxed);
}
