/* worker_pool.c - threads that run blocking server handlers off the loops.
 *
 * The hop from a loop to a worker is what the default server mode pays per
 * request, so the pool is built to wake as few threads as it can:
 * - each worker sleeps on a futex word of its own, and idle workers form a
 *   LIFO stack: the one woken is the one that slept last (its cache is the
 *   warmest; the ones under it may sleep on for good under light load);
 * - a batch wakes at most one worker, and only if no worker is between
 *   tasks already (a worker that finishes a handler looks at the queue
 *   before it sleeps, so one "looking" worker will take the batch's first
 *   task); a worker that takes a task and sees more waiting wakes the next
 *   one only under the same rule, so a batch spreads over the idle workers
 *   one wake-up at a time, and a busy pool wakes nobody;
 * - the queue's mutex is the adaptive kind: its critical sections are a
 *   few pointer moves, so a contender spins briefly instead of sleeping in
 *   the kernel. glibc's condition variables cost several futex calls per
 *   signal under contention (measured: 0.4 futex calls per request), which
 *   the per-worker word avoids.
 * A handler may block: a worker running one is neither idle nor looking,
 * so work queued meanwhile wakes another worker as before. */
#include "rrpc/internal/worker_pool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rrpc/errors.h"

struct worker {
  rrpc__worker_pool *pool;
  struct worker *next_idle; /* under mu, while on the idle stack */
  atomic_int woken;         /* the futex word: 0 while asleep on the stack */
  pthread_t thread;
};

struct rrpc__worker_pool {
  pthread_mutex_t mu;
  /* ---- under mu ---- */
  rrpc__work *head, *tail;
  int queued, max_queue;
  struct worker *idle; /* LIFO stack of sleeping workers */
  int looking;         /* workers between tasks, about to look at the queue */
  int stopping;
  /* ---- */
  atomic_uint_least64_t rejected;
  int nthreads;
  struct worker *workers;
};

static void futex_wait(atomic_int *word, int val) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake(atomic_int *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Under mu: take the top sleeper off the stack if a wake-up is needed (an
 * idle worker exists and none is looking); the caller wakes it unlocked. */
static struct worker *pop_idle_locked(rrpc__worker_pool *p) {
  if (p->looking > 0 || p->idle == NULL) return NULL;
  struct worker *w = p->idle;
  p->idle = w->next_idle;
  p->looking++; /* it will look at the queue as soon as it runs */
  return w;
}

static void wake_worker(struct worker *w) {
  if (w == NULL) return;
  atomic_store_explicit(&w->woken, 1, memory_order_release);
  futex_wake(&w->woken);
}

/* Under mu, the queue empty: sleep on the stack until woken (returns with
 * mu held, counted as looking again). */
static void sleep_locked(rrpc__worker_pool *p, struct worker *w) {
  atomic_store_explicit(&w->woken, 0, memory_order_relaxed);
  w->next_idle = p->idle;
  p->idle = w;
  p->looking--;
  pthread_mutex_unlock(&p->mu);
  while (atomic_load_explicit(&w->woken, memory_order_acquire) == 0) futex_wait(&w->woken, 0);
  pthread_mutex_lock(&p->mu);
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  rrpc__worker_pool *p = w->pool;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    rrpc__work *t = p->head;
    if (t == NULL) {
      if (p->stopping) break; /* stopping and drained */
      sleep_locked(p, w);
      continue;
    }
    p->queued--;
    p->head = t->next;
    if (p->head == NULL) p->tail = NULL;
    p->looking--; /* busy now: maybe blocked for long, so not counted */
    /* More waiting: pass a wake-up on, unless someone is looking already. */
    struct worker *next = p->head != NULL ? pop_idle_locked(p) : NULL;
    pthread_mutex_unlock(&p->mu);
    wake_worker(next);
    t->fn(t->arg); /* may free t */
    pthread_mutex_lock(&p->mu);
    p->looking++;
  }
  p->looking--;
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void pool_free(rrpc__worker_pool *p) {
  pthread_mutex_destroy(&p->mu);
  free(p->workers);
  free(p);
}

int rrpc__worker_pool_start(int nthreads, int max_queue, const char *name, rrpc__worker_pool **out) {
  rrpc__worker_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  p->max_queue = max_queue > 0 ? max_queue : 1;
  atomic_init(&p->rejected, 0);
  p->workers = calloc((size_t)nthreads, sizeof *p->workers);
  if (p->workers == NULL) {
    free(p);
    return -ENOMEM;
  }
  pthread_mutexattr_t ma;
  pthread_mutexattr_init(&ma);
  pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&p->mu, &ma);
  pthread_mutexattr_destroy(&ma);
  for (int i = 0; i < nthreads; i++) {
    struct worker *w = &p->workers[i];
    w->pool = p;
    atomic_init(&w->woken, 0);
    pthread_mutex_lock(&p->mu);
    p->looking++; /* a new thread looks at the queue first */
    pthread_mutex_unlock(&p->mu);
    int rc = pthread_create(&w->thread, NULL, worker_main, w);
    if (rc != 0) {
      pthread_mutex_lock(&p->mu);
      p->looking--;
      pthread_mutex_unlock(&p->mu);
      p->nthreads = i;
      rrpc__worker_pool_stop(p);
      return -rc;
    }
    char tname[32];
    snprintf(tname, sizeof tname, "%.10s-%d", name, i);
    tname[15] = '\0'; /* the kernel's limit for thread names */
    pthread_setname_np(w->thread, tname);
  }
  p->nthreads = nthreads;
  *out = p;
  return 0;
}

int rrpc__worker_pool_submit(rrpc__worker_pool *p, rrpc__work *head, int n, rrpc__work **rest, int *why) {
  *rest = head;
  pthread_mutex_lock(&p->mu);
  if (p->stopping) {
    pthread_mutex_unlock(&p->mu);
    *why = -ESHUTDOWN;
    return 0;
  }
  int room = p->max_queue - p->queued;
  int take = n < room ? n : room < 0 ? 0 : room;
  struct worker *w = NULL;
  if (take > 0) {
    rrpc__work *last = head;
    for (int i = 1; i < take; i++) last = last->next;
    *rest = last->next; /* the caller's again */
    last->next = NULL;
    if (p->tail) p->tail->next = head;
    else p->head = head;
    p->tail = last;
    p->queued += take;
    w = pop_idle_locked(p); /* at most one wake-up per batch */
  }
  pthread_mutex_unlock(&p->mu);
  if (take < n) {
    atomic_fetch_add_explicit(&p->rejected, (uint64_t)(n - take), memory_order_relaxed);
    *why = -RRPC_EOVERCROWDED;
  }
  wake_worker(w);
  return take;
}

uint64_t rrpc__worker_pool_rejected(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->rejected, memory_order_relaxed);
}

void rrpc__worker_pool_stop(rrpc__worker_pool *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  struct worker *all = p->idle;
  p->idle = NULL;
  for (struct worker *w = all; w != NULL; w = w->next_idle) p->looking++;
  pthread_mutex_unlock(&p->mu);
  while (all != NULL) { /* each drains what is left, then exits */
    struct worker *next = all->next_idle;
    wake_worker(all);
    all = next;
  }
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->workers[i].thread, NULL);
  pool_free(p);
}
