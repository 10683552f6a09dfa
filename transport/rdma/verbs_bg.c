/* verbs_bg.c - the background verbs thread (verbs_bg.h): a FIFO of
 * embedded jobs, bounded by --rdma_bg_queue_max, one thread per process,
 * started on first use, drained (bounded) at exit and restarted after a
 * fork (the child has no such thread). */
#include "transport/rdma/verbs_bg.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "rrpc/internal/log.h"
#include "transport/rdma/device.h"

/* What the exit drain waits at most: a job is a few verbs calls (under
 * TCG up to a second); exit must not hang on a wedged device. */
#define BG_EXIT_DRAIN_MS 10000

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_work = PTHREAD_COND_INITIALIZER; /* a job was queued */
static pthread_cond_t g_idle = PTHREAD_COND_INITIALIZER; /* a job finished */
static struct rrpc__bg_job *g_head, *g_tail;
static int g_started;   /* the thread runs (in this process) */
static int g_start_failed;
static uint64_t g_queued, g_done, g_max_depth; /* under g_mu */
static _Atomic uint64_t g_inline;
static _Thread_local int tls_on_bg;

static size_t queue_max(void) {
  int m = rrpc__rdma_options()->bg_queue_max;
  return m > 0 ? (size_t)m : 1;
}

static void *bg_main(void *arg) {
  (void)arg;
  tls_on_bg = 1;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (g_head == NULL) pthread_cond_wait(&g_work, &g_mu);
    struct rrpc__bg_job *j = g_head;
    g_head = j->next;
    if (g_head == NULL) g_tail = NULL;
    pthread_mutex_unlock(&g_mu);
    j->fn(j); /* may free j: not touched afterwards */
    pthread_mutex_lock(&g_mu);
    g_done++;
    pthread_cond_broadcast(&g_idle);
  }
  return NULL;
}

static void exit_drain(void) {
  if (rrpc__verbs_bg_drain(BG_EXIT_DRAIN_MS) != 0)
    RRPC_LOG(WARNING, "rdma: background verbs thread still busy at exit after %d ms", BG_EXIT_DRAIN_MS);
}

/* The child of a fork has the parent's queue but not its thread: start
 * afresh (jobs queued at the fork belong to the parent's thread). */
static void after_fork_child(void) {
  pthread_mutex_init(&g_mu, NULL);
  pthread_cond_init(&g_work, NULL);
  pthread_cond_init(&g_idle, NULL);
  g_head = g_tail = NULL;
  g_started = 0;
  g_queued = g_done = 0;
}

/* Under g_mu. 0 or the pthread error. */
static int start_locked(void) {
  if (g_started) return 0;
  if (g_start_failed) return -EAGAIN;
  pthread_t t;
  int rc = pthread_create(&t, NULL, bg_main, NULL);
  if (rc != 0) {
    g_start_failed = 1;
    RRPC_LOG(WARNING, "rdma: cannot start the background verbs thread (%d): verbs teardown runs inline", rc);
    return -rc;
  }
  pthread_setname_np(t, "rrpc_verbs_bg");
  pthread_detach(t);
  static int hooks;
  if (!hooks) {
    hooks = 1;
    pthread_atfork(NULL, NULL, after_fork_child);
    atexit(exit_drain);
  }
  g_started = 1;
  return 0;
}

void rrpc__verbs_bg_submit(struct rrpc__bg_job *job) {
  job->next = NULL;
  pthread_mutex_lock(&g_mu);
  int ok = !tls_on_bg && g_queued - g_done < queue_max() && start_locked() == 0;
  if (ok) {
    if (g_tail != NULL) g_tail->next = job;
    else g_head = job;
    g_tail = job;
    g_queued++;
    if (g_queued - g_done > g_max_depth) g_max_depth = g_queued - g_done;
    pthread_cond_signal(&g_work);
  }
  pthread_mutex_unlock(&g_mu);
  if (ok) return;
  /* Full (or no thread, or a job submitting another): run it here rather
   * than wait for room. Counted: a loop doing this is the watchdog's. */
  atomic_fetch_add_explicit(&g_inline, 1, memory_order_relaxed);
  job->fn(job);
}

int rrpc__verbs_bg_on_thread(void) { return tls_on_bg; }

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
  uint64_t target = g_queued; /* what was submitted before this call */
  int rc = 0;
  while (g_started && g_done < target && rc == 0) rc = pthread_cond_timedwait(&g_idle, &g_mu, &dl);
  int left = g_started && g_done < target;
  pthread_mutex_unlock(&g_mu);
  return left ? -ETIMEDOUT : 0;
}

void rrpc__verbs_bg_stats(struct rrpc__verbs_bg_stats *out) {
  pthread_mutex_lock(&g_mu);
  out->queued = g_queued;
  out->done = g_done;
  out->depth = g_queued - g_done;
  out->max_depth = g_max_depth;
  pthread_mutex_unlock(&g_mu);
  out->inline_run = atomic_load_explicit(&g_inline, memory_order_relaxed);
}
