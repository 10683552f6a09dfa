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
 *   task); a busy pool wakes nobody;
 * - a worker that takes a task and sees more waiting does not wake another
 *   at once: the tasks behind it are usually short handlers it (or the
 *   next batch's worker) takes within microseconds, and a wake-up per task
 *   was half of the pool's futex calls at saturation. Instead a rescuer
 *   thread looks every `rescue_us` while such a pass-on is held back, and
 *   wakes an idle worker if no task was taken since its last look (the
 *   worker blocked in its handler): a blocking handler delays the rest of
 *   its batch by at most about two rescue periods. The rescuer sleeps
 *   untimed while nothing is held back (an idle pool costs nothing), so
 *   at saturation it wakes once per period, not once per batch.
 *   rescue_us < 0 restores the immediate pass-on;
 * - the queue's mutex is the adaptive kind: its critical sections are a
 *   few pointer moves, so a contender spins briefly instead of sleeping in
 *   the kernel. glibc's condition variables cost several futex calls per
 *   signal under contention (measured: 0.4 futex calls per request), which
 *   the per-worker word avoids.
 * - the workers may run under SCHED_BATCH (a server's opt-in): a worker
 *   woken while every core runs a loop does not preempt one (the kernel
 *   skips wake-up preemption for batch threads) but runs when a loop
 *   sleeps or its slice ends. On a host with more busy threads than cores
 *   the loop then finishes its round - reading, cutting and queueing more
 *   requests - instead of being switched out and back per hand-off; where
 *   a core is idle the woken worker runs there at once, as before.
 *   Measured (docs/performance.md, "Saturation"): a third fewer context
 *   switches and 17 % less CPU per call at saturation on 2 cores. Not the
 *   default: a loop that never sleeps (busy polling) leaves a woken worker
 *   waiting out whole time slices (4.6 ms a call measured), and with one
 *   call in flight it cost a few microseconds in some runs. Same priority
 *   and share as the loops: only the preemption on wake-up goes.
 * - a batch that arrives while workers are busy in short handlers wakes
 *   nobody: they look at the queue as their handlers end, within
 *   microseconds, and take it. A wake-up is a futex call for the loop, a
 *   context switch for the woken worker, and often the preemption of the
 *   loop that woke it; where idle workers outnumber the busy CPUs (16
 *   workers on 8 cores) nearly every batch found one asleep and paid all of
 *   that, so the cost of a hand-off grew with the idle workers. "Short" is
 *   the pool's running average of sampled handler times (every 8th task a
 *   worker runs, two clock reads) against short_task_us; the batch is left
 *   to the busy workers only while the queue holds at most busy_queue tasks
 *   per busy worker, so a load that outgrows them still wakes one more per
 *   batch. A busy worker that blocks after all is caught by the rescuer
 *   (held, as for a pass-on), so such a batch waits at most about two
 *   rescue periods - the bound the pass-on already has.
 * - a worker may defer writes (flush_us > 0; the server's responses to a
 *   connection with more requests in handlers): it keeps a list of flushes
 *   and runs them when its run of tasks ends (the queue is empty), so a run
 *   writes once per connection. The rescuer bounds the wait: while any
 *   list is non-empty it looks every flush_us / 2, asks a worker holding
 *   one to flush before its next task, and runs the list itself for a
 *   worker that held one at the previous look and started no task since
 *   (blocked in a handler). It parks again after a look that found no
 *   list and no list begun since the one before.
 * A handler may block: a worker running one is neither idle nor looking,
 * so work queued meanwhile wakes another worker as before (or, while
 * handlers are short, the rescuer does). */
#include "rrpc/internal/worker_pool.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/lock.h"
#include "rrpc/internal/log.h"

struct rrpc__worker {
  rrpc__worker_pool *pool;
  struct rrpc__worker *next_idle; /* under mu, while on the idle stack */
  atomic_int woken;         /* the futex word: 0 while asleep on the stack */
  unsigned ran;             /* tasks run: every 8th is timed */
  pthread_t thread;
  /* Deferred writes (flush_us > 0). The thread pushes under dmu; it and the
   * rescuer take the whole list under dmu. dhead is also peeked without it. */
  rrpc__lock dmu;
  _Atomic(rrpc__worker_flush *) dhead;
  int rouse_on_unlock;  /* under dmu: the list went from empty to not */
  atomic_uint tasks;    /* tasks started: the rescuer's sign of progress */
  atomic_int flush_due; /* the rescuer asks: flush before the next task */
  unsigned seen_tasks;  /* rescuer only: tasks at its last look ... */
  int seen_deferred;    /* ... which found deferred writes */
};

static _Thread_local struct rrpc__worker *tls_self;

/* Every pool's counters summed, for /vars: the pools come and go with
 * their servers, the totals stay (a counter must not go down). */
static struct {
  atomic_uint_least64_t rejected, rescues, wakeups, left_to_busy, write_rescues;
} g_totals;

struct rrpc__worker_pool {
  pthread_mutex_t mu;
  /* ---- under mu ---- */
  rrpc__work *head, *tail;
  int queued, max_queue;
  struct rrpc__worker *idle; /* LIFO stack of sleeping workers */
  int looking;         /* workers between tasks, about to look at the queue */
  int stopping;
  int rescuer_quit; /* the workers are joined: the rescuer exits */
  uint64_t taken;    /* tasks taken so far: the rescuer's sign of progress */
  int held;          /* a pass-on was held back: the rescuer watches */
  int busy;           /* workers inside a task */
  int64_t task_ns;    /* running average of sampled task times */
  /* ---- */
  atomic_int rescuer_word; /* the rescuer's futex word: 1 = wake up */
  /* the rescuer sleeps untimed: whoever exchanges it to 0 wakes it. Set
   * under mu; cleared under mu, or by a thread whose deferred list just
   * went from empty to not (defer_pushes) */
  atomic_int rescuer_parked;
  atomic_uint defer_pushes; /* lists that went from empty to not */
  int flush_us;             /* > 0: threads defer writes; the bound */
  int nalloc;               /* workers allocated (the rescuer's scan) */
  atomic_uint_least64_t rejected, rescues, wakeups, left_to_busy, write_rescues;
  int busy_queue;      /* > 0: tasks per busy worker a batch may be left to */
  int64_t short_task_ns; /* tasks on average this short count as short */
  int rescue_us; /* < 0: pass on at once, no rescuer */
  int batch_sched; /* workers ask for SCHED_BATCH as they start */
  atomic_int batch_refused; /* a worker's request for it failed: said once */
  int nthreads;
  struct rrpc__worker *workers;
  pthread_t rescuer;
  int has_rescuer;
};

static void futex_wait_for(atomic_int *word, int val, const struct timespec *rel) {
  syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
}

static void futex_wait(atomic_int *word, int val) { futex_wait_for(word, val, NULL); }

static void futex_wake(atomic_int *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* Under mu: take the top sleeper off the stack if a wake-up is needed (an
 * idle worker exists and none is looking); the caller wakes it unlocked. */
static struct rrpc__worker *pop_idle_locked(rrpc__worker_pool *p) {
  if (p->looking > 0 || p->idle == NULL) return NULL;
  struct rrpc__worker *w = p->idle;
  p->idle = w->next_idle;
  p->looking++; /* it will look at the queue as soon as it runs */
  return w;
}

static void wake_worker(struct rrpc__worker *w) {
  if (w == NULL) return;
  atomic_fetch_add_explicit(&w->pool->wakeups, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_totals.wakeups, 1, memory_order_relaxed);
  atomic_store_explicit(&w->woken, 1, memory_order_release);
  futex_wake(&w->woken);
}

/* Under mu, the queue empty: sleep on the stack until woken (returns with
 * mu held, counted as looking again). */
static void sleep_locked(rrpc__worker_pool *p, struct rrpc__worker *w) {
  atomic_store_explicit(&w->woken, 0, memory_order_relaxed);
  w->next_idle = p->idle;
  p->idle = w;
  p->looking--;
  pthread_mutex_unlock(&p->mu);
  while (atomic_load_explicit(&w->woken, memory_order_acquire) == 0) futex_wait(&w->woken, 0);
  pthread_mutex_lock(&p->mu);
}

/* Under mu, tasks just queued and nobody looking: may they wait for the
 * busy workers (short handlers, at most busy_queue tasks each) instead of
 * waking an idle one? */
static int leave_to_busy_locked(const rrpc__worker_pool *p) {
  return p->busy_queue > 0 && p->looking == 0 && p->idle != NULL && p->busy > 0 &&
         p->queued <= p->busy * p->busy_queue && p->task_ns <= p->short_task_ns;
}

/* Under mu, a task taken and more waiting: who takes them? A looking
 * worker will; else hold the pass-on back for the rescuer (or, without
 * one, wake the next idle worker at once). */
static struct rrpc__worker *pass_on_locked(rrpc__worker_pool *p) {
  if (!p->has_rescuer) return pop_idle_locked(p);
  if (p->looking == 0 && p->idle != NULL) p->held = 1;
  return NULL;
}

static void wake_rescuer(rrpc__worker_pool *p) {
  atomic_store_explicit(&p->rescuer_word, 1, memory_order_release);
  futex_wake(&p->rescuer_word);
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Take w's whole list of deferred flushes. Each node's owner is cleared
 * under dmu, so the thread that deferred it sees at once that the deferred
 * state is not its own any more. */
static rrpc__worker_flush *take_list(struct rrpc__worker *w) {
  rrpc__lock_acquire(&w->dmu);
  rrpc__worker_flush *f = atomic_load_explicit(&w->dhead, memory_order_relaxed);
  atomic_store_explicit(&w->dhead, NULL, memory_order_relaxed);
  for (rrpc__worker_flush *x = f; x != NULL; x = x->next) __atomic_store_n(&x->owner, NULL, __ATOMIC_RELAXED);
  rrpc__lock_release(&w->dmu);
  return f;
}

/* Run a taken list, no lock held; a node's next link is read before its
 * flush, which may free it. */
static void run_list(rrpc__worker_flush *f) {
  while (f != NULL) {
    rrpc__worker_flush *next = f->next;
    f->fn(f->arg);
    f = next;
  }
}

static void flush_list(struct rrpc__worker *w) { run_list(take_list(w)); }

/* The rescuer's look at the deferred writes (no lock held), every
 * flush_us / 2: a thread holding some is asked to flush before its next
 * task; one that held some at the last look too and started no task since
 * (inside one long task, or preempted) has them flushed here. So a
 * deferred write waits at most about two looks, flush_us. */
static void look_deferred(rrpc__worker_pool *p) {
  for (int i = 0; i < p->nalloc; i++) {
    struct rrpc__worker *w = &p->workers[i];
    if (atomic_load_explicit(&w->dhead, memory_order_acquire) == NULL) {
      w->seen_deferred = 0;
      continue;
    }
    unsigned tasks = atomic_load_explicit(&w->tasks, memory_order_relaxed);
    if (w->seen_deferred && tasks == w->seen_tasks) {
      w->seen_deferred = 0;
      rrpc__worker_flush *f = take_list(w);
      if (f != NULL) {
        atomic_fetch_add_explicit(&p->write_rescues, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&g_totals.write_rescues, 1, memory_order_relaxed);
      }
      run_list(f);
      continue;
    }
    atomic_store_explicit(&w->flush_due, 1, memory_order_relaxed);
    w->seen_deferred = 1;
    w->seen_tasks = tasks;
  }
}

/* Under mu: is there anything for the rescuer to watch - a held pass-on,
 * a deferred write, or a list that went from empty to not since `pushes`
 * was read (a thread that defers writes now will likely again)? */
static int rescuer_has_work_locked(rrpc__worker_pool *p, unsigned pushes) {
  if (p->held) return 1;
  if (p->flush_us <= 0) return 0;
  if (atomic_load(&p->defer_pushes) != pushes) return 1;
  for (int i = 0; i < p->nalloc; i++)
    if (atomic_load(&p->workers[i].dhead) != NULL) return 1;
  return 0;
}

/* Under mu: sleep until woken, unless there is work after all (the flag
 * is set before that last check, and a thread whose list went from empty
 * to not counts its push before it reads the flag: one of the two sees
 * the other). Returns with mu held. */
static void rescuer_park_locked(rrpc__worker_pool *p, unsigned pushes) {
  atomic_store_explicit(&p->rescuer_word, 0, memory_order_relaxed);
  atomic_store(&p->rescuer_parked, 1);
  if (rescuer_has_work_locked(p, pushes) && atomic_exchange(&p->rescuer_parked, 0)) return;
  pthread_mutex_unlock(&p->mu);
  futex_wait(&p->rescuer_word, 0);
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->rescuer_parked, 0);
}

/* Under mu: sleep for `us` (or until stop wakes it); returns with mu held. */
static void rescuer_nap_locked(rrpc__worker_pool *p, int us) {
  atomic_store_explicit(&p->rescuer_word, 0, memory_order_relaxed);
  pthread_mutex_unlock(&p->mu);
  struct timespec rel = {.tv_sec = us / 1000000, .tv_nsec = (long)(us % 1000000) * 1000};
  futex_wait_for(&p->rescuer_word, 0, &rel);
  pthread_mutex_lock(&p->mu);
}

/* Under mu, once per rescue period: if tasks wait behind a held pass-on,
 * nobody is looking and none was taken since the last look, the workers
 * holding them are blocked in handlers - wake an idle one. */
static void look_held_locked(rrpc__worker_pool *p, uint64_t *last) {
  if (!p->held) {
    *last = p->taken;
    return;
  }
  if (p->head == NULL) {
    p->held = 0; /* all taken: nothing to watch */
    *last = p->taken;
    return;
  }
  struct rrpc__worker *w = p->looking == 0 && p->taken == *last ? pop_idle_locked(p) : NULL;
  *last = p->taken;
  if (w == NULL) return;
  atomic_fetch_add_explicit(&p->rescues, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_totals.rescues, 1, memory_order_relaxed);
  pthread_mutex_unlock(&p->mu);
  wake_worker(w);
  pthread_mutex_lock(&p->mu);
}

/* The rescuer: while a pass-on is held back, look once per rescue period
 * (look_held_locked); while threads defer writes, every flush_us / 2
 * (look_deferred). With neither it sleeps untimed: an idle pool costs
 * nothing, and at saturation it wakes once per period, not per task. */
static void *rescuer_main(void *arg) {
  rrpc__worker_pool *p = arg;
  int64_t flush_ns = p->flush_us > 0 ? (int64_t)p->flush_us * 500 : 0; /* flush_us / 2 */
  int64_t held_ns = (int64_t)p->rescue_us * 1000;
  pthread_mutex_lock(&p->mu);
  uint64_t last = p->taken;
  unsigned pushes = atomic_load(&p->defer_pushes);
  int64_t next_held = 0, next_flush = 0;
  /* It outlives the workers' last tasks (stop drains the queue), so the
   * deferred writes of those are bounded too. */
  while (!p->rescuer_quit) {
    if (!rescuer_has_work_locked(p, pushes)) {
      rescuer_park_locked(p, pushes);
      last = p->taken;
      pushes = atomic_load(&p->defer_pushes);
      int64_t now = now_ns();
      next_held = now + held_ns;
      next_flush = now + flush_ns;
      continue;
    }
    pushes = atomic_load(&p->defer_pushes);
    int64_t now = now_ns();
    /* Without a held pass-on, only the deferred writes' looks wake it. */
    int64_t next = flush_ns > 0 ? next_flush : next_held;
    if (p->held && next_held < next) next = next_held;
    if (next > now) {
      int64_t us = (next - now + 999) / 1000;
      rescuer_nap_locked(p, us > INT_MAX ? INT_MAX : (int)us);
      if (p->rescuer_quit) break;
      now = now_ns();
    }
    if (flush_ns > 0 && now >= next_flush) {
      next_flush = now + flush_ns;
      pthread_mutex_unlock(&p->mu);
      look_deferred(p);
      pthread_mutex_lock(&p->mu);
    }
    if (now >= next_held) {
      next_held = now + held_ns;
      look_held_locked(p, &last);
    }
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

/* The calling worker under SCHED_BATCH (same nice value, no wake-up
 * preemption; see the top). A host that refuses it (a seccomp filter, a
 * kernel without it) leaves the worker as it was: said once per pool, and
 * the pool works the same. Threads a handler starts inherit the policy. */
static void ask_batch_sched(rrpc__worker_pool *p) {
  struct sched_param sp = {.sched_priority = 0};
  int rc = pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
  if (rc != 0 && atomic_exchange(&p->batch_refused, 1) == 0)
    RRPC_LOG(INFO, "pool threads stay SCHED_OTHER: SCHED_BATCH refused (%s)", strerror(rc));
}

/* Run t; every 8th task of a worker (while batches may be left to busy
 * workers) is timed for the pool's average: returns its time, else -1. */
static int64_t run_task(rrpc__worker_pool *p, struct rrpc__worker *w, rrpc__work *t) {
  if (p->busy_queue <= 0 || (++w->ran & 7) != 0) {
    t->fn(t->arg); /* may free t */
    return -1;
  }
  int64_t t0 = now_ns();
  t->fn(t->arg);
  return now_ns() - t0;
}

static void *worker_main(void *arg) {
  struct rrpc__worker *w = arg;
  rrpc__worker_pool *p = w->pool;
  if (p->batch_sched) ask_batch_sched(p);
  if (p->flush_us > 0) tls_self = w;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    rrpc__work *t = p->head;
    if (t == NULL) {
      if (atomic_load_explicit(&w->dhead, memory_order_relaxed) != NULL) {
        /* The run of tasks is over: its deferred writes go out now, one
         * per connection, before this thread sleeps (still counted as
         * looking, so a batch queued meanwhile wakes nobody). */
        pthread_mutex_unlock(&p->mu);
        flush_list(w);
        pthread_mutex_lock(&p->mu);
        continue;
      }
      if (p->stopping) break; /* stopping and drained */
      sleep_locked(p, w);
      continue;
    }
    p->queued--;
    p->head = t->next;
    if (p->head == NULL) p->tail = NULL;
    p->looking--; /* busy now: maybe blocked for long, so not counted */
    p->busy++;
    p->taken++;
    struct rrpc__worker *next = p->head != NULL ? pass_on_locked(p) : NULL;
    int rouse = p->held && atomic_exchange(&p->rescuer_parked, 0);
    pthread_mutex_unlock(&p->mu);
    wake_worker(next);
    if (rouse) wake_rescuer(p);
    if (atomic_load_explicit(&w->flush_due, memory_order_relaxed)) {
      atomic_store_explicit(&w->flush_due, 0, memory_order_relaxed);
      flush_list(w); /* the rescuer saw them wait: before this task, which may block */
    }
    atomic_store_explicit(&w->tasks, atomic_load_explicit(&w->tasks, memory_order_relaxed) + 1, memory_order_relaxed);
    int64_t took = run_task(p, w, t);
    pthread_mutex_lock(&p->mu);
    if (took >= 0) p->task_ns += (took - p->task_ns) / 8;
    p->busy--;
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

/* The rescuer, when there is to be one (started first: workers may hold
 * back a pass-on from their first task). */
static int rescuer_start(rrpc__worker_pool *p, const char *name) {
  if (p->rescue_us < 0) return 0;
  int rc = pthread_create(&p->rescuer, NULL, rescuer_main, p);
  if (rc != 0) return -rc;
  p->has_rescuer = 1;
  char tname[32];
  snprintf(tname, sizeof tname, "%.10s-r", name);
  tname[15] = '\0';
  pthread_setname_np(p->rescuer, tname);
  return 0;
}

int rrpc__worker_pool_start(const rrpc__worker_pool_config *cfg, const char *name, rrpc__worker_pool **out) {
  rrpc__worker_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  int nthreads = cfg->nthreads;
  p->max_queue = cfg->max_queue > 0 ? cfg->max_queue : 1;
  p->rescue_us = cfg->rescue_us < 0 ? -1 : cfg->rescue_us > 0 ? cfg->rescue_us : 1;
  p->batch_sched = cfg->batch_sched != 0;
  /* Leaving batches to busy workers needs the rescuer to catch one that
   * blocks. */
  p->busy_queue = p->rescue_us >= 0 && cfg->busy_queue > 0 && cfg->short_task_us > 0 ? cfg->busy_queue : 0;
  p->short_task_ns = (int64_t)cfg->short_task_us * 1000;
  /* Deferring writes needs the rescuer to bound their wait. */
  p->flush_us = p->rescue_us >= 0 && cfg->flush_us > 0 ? cfg->flush_us : 0;
  p->nalloc = nthreads;
  atomic_init(&p->write_rescues, 0);
  atomic_init(&p->rescuer_parked, 0);
  atomic_init(&p->defer_pushes, 0);
  atomic_init(&p->left_to_busy, 0);
  atomic_init(&p->batch_refused, 0);
  atomic_init(&p->rejected, 0);
  atomic_init(&p->rescues, 0);
  atomic_init(&p->wakeups, 0);
  atomic_init(&p->rescuer_word, 0);
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
  for (int i = 0; i < nthreads; i++) rrpc__lock_init(&p->workers[i].dmu); /* before the rescuer looks */
  int rrc = rescuer_start(p, name);
  if (rrc != 0) {
    pool_free(p);
    return rrc;
  }
  for (int i = 0; i < nthreads; i++) {
    struct rrpc__worker *w = &p->workers[i];
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
  struct rrpc__worker *w = NULL;
  int rouse = 0, left = 0;
  if (take > 0) {
    rrpc__work *last = head;
    for (int i = 1; i < take; i++) last = last->next;
    *rest = last->next; /* the caller's again */
    last->next = NULL;
    if (p->tail) p->tail->next = head;
    else p->head = head;
    p->tail = last;
    p->queued += take;
    if (leave_to_busy_locked(p)) {
      p->held = 1; /* the rescuer watches, in case a busy one blocks */
      left = 1;
      rouse = atomic_exchange(&p->rescuer_parked, 0);
    } else {
      w = pop_idle_locked(p); /* at most one wake-up per batch */
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (left) {
    atomic_fetch_add_explicit(&p->left_to_busy, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&g_totals.left_to_busy, 1, memory_order_relaxed);
  }
  if (rouse) wake_rescuer(p);
  if (take < n) {
    atomic_fetch_add_explicit(&p->rejected, (uint64_t)(n - take), memory_order_relaxed);
    atomic_fetch_add_explicit(&g_totals.rejected, (uint64_t)(n - take), memory_order_relaxed);
    *why = -RRPC_EOVERCROWDED;
  }
  wake_worker(w);
  return take;
}

rrpc__worker *rrpc__worker_self(void) { return tls_self; }

void rrpc__worker_lock(rrpc__worker *w) { rrpc__lock_acquire(&w->dmu); }

/* A list that went from empty to not wakes a parked rescuer: deferred
 * writes need its looks. The count is made before the flag is read (see
 * rescuer_park_locked). */
static void note_deferring(rrpc__worker_pool *p) {
  atomic_fetch_add(&p->defer_pushes, 1);
  if (atomic_load(&p->rescuer_parked) && atomic_exchange(&p->rescuer_parked, 0)) wake_rescuer(p);
}

void rrpc__worker_unlock(rrpc__worker *w) {
  int rouse = w->rouse_on_unlock;
  w->rouse_on_unlock = 0;
  rrpc__lock_release(&w->dmu);
  if (rouse) note_deferring(w->pool);
}

void rrpc__worker_defer_locked(rrpc__worker *w, rrpc__worker_flush *f) {
  f->next = atomic_load_explicit(&w->dhead, memory_order_relaxed);
  __atomic_store_n(&f->owner, w, __ATOMIC_RELAXED);
  if (f->next == NULL) w->rouse_on_unlock = 1;
  atomic_store_explicit(&w->dhead, f, memory_order_release); /* the rescuer peeks */
}

uint64_t rrpc__worker_pool_write_rescues(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->write_rescues, memory_order_relaxed);
}

uint64_t rrpc__worker_pools_write_rescues_total(void) {
  return atomic_load_explicit(&g_totals.write_rescues, memory_order_relaxed);
}

void rrpc__worker_pools_totals(uint64_t *rejected, uint64_t *rescues, uint64_t *wakeups, uint64_t *left_to_busy) {
  *left_to_busy = atomic_load_explicit(&g_totals.left_to_busy, memory_order_relaxed);
  *rejected = atomic_load_explicit(&g_totals.rejected, memory_order_relaxed);
  *rescues = atomic_load_explicit(&g_totals.rescues, memory_order_relaxed);
  *wakeups = atomic_load_explicit(&g_totals.wakeups, memory_order_relaxed);
}

uint64_t rrpc__worker_pool_rejected(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->rejected, memory_order_relaxed);
}

uint64_t rrpc__worker_pool_rescues(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->rescues, memory_order_relaxed);
}

uint64_t rrpc__worker_pool_left_to_busy(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->left_to_busy, memory_order_relaxed);
}

uint64_t rrpc__worker_pool_wakeups(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->wakeups, memory_order_relaxed);
}

void rrpc__worker_pool_stop(rrpc__worker_pool *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  struct rrpc__worker *all = p->idle;
  p->idle = NULL;
  for (struct rrpc__worker *w = all; w != NULL; w = w->next_idle) p->looking++;
  pthread_mutex_unlock(&p->mu);
  while (all != NULL) { /* each drains what is left, then exits */
    struct rrpc__worker *next = all->next_idle;
    wake_worker(all);
    all = next;
  }
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->workers[i].thread, NULL);
  if (p->has_rescuer) {
    pthread_mutex_lock(&p->mu);
    p->rescuer_quit = 1;
    pthread_mutex_unlock(&p->mu);
    wake_rescuer(p); /* it sees rescuer_quit under mu and exits */
    pthread_join(p->rescuer, NULL);
  }
  pool_free(p);
}
