/* internal/worker_pool.h - private to the rrpc core: a fixed pool of threads
 * running tasks in FIFO order, for server handlers that may block. */
#ifndef RRPC_INTERNAL_WORKER_POOL_H
#define RRPC_INTERNAL_WORKER_POOL_H

#include <stdint.h>

#include "rrpc/internal/loop.h"

typedef struct rrpc__worker_pool rrpc__worker_pool;

/* A task, embedded in the submitter's object (no allocation per task). The
 * pool borrows it from submit until fn starts; fn may free it. */
typedef struct rrpc__work {
  struct rrpc__work *next;
  rrpc__task_fn fn;
  void *arg;
} rrpc__work;

/* What a pool is started with. */
typedef struct rrpc__worker_pool_config {
  int nthreads;  /* threads */
  int max_queue; /* at most this many (> 0) tasks wait for one */
  /* >= 0: a worker that takes a task and sees more waiting does not wake
   * another; a rescuer thread wakes one if no task was taken for a period
   * of rescue_us (0 counts as 1) while tasks wait - the workers are
   * blocked in handlers. < 0: the worker wakes the next idle one at once
   * (no rescuer). */
  int rescue_us;
  /* != 0: each worker asks for SCHED_BATCH as it starts (no wake-up
   * preemption of busy loops; refused = left as is). */
  int batch_sched;
  /* > 0 (with short_task_us > 0 and a rescuer): a batch submitted while
   * workers are busy in tasks that average at most short_task_us wakes
   * nobody as long as at most busy_queue tasks wait per busy worker; the
   * busy ones take it as they finish (counted: left_to_busy). <= 0: a
   * batch wakes an idle worker whenever none is looking. */
  int busy_queue;
  int short_task_us;
  /* > 0 (with a rescuer): the pool's threads may defer writes
   * (rrpc__worker_defer_locked), and no deferred write waits longer than
   * about this: the rescuer looks every flush_us / 2, asks a thread that
   * holds deferred writes to flush before its next task, and flushes them
   * itself for a thread still inside the same task at its next look
   * (counted: write_rescues). <= 0: rrpc__worker_self is NULL (no
   * deferring). */
  int flush_us;
} rrpc__worker_pool_config;

/* A pool thread, while it runs a task. */
typedef struct rrpc__worker rrpc__worker;

/* A deferred flush, embedded in what is to be flushed (a socket): on at
 * most one thread's list at a time. */
typedef struct rrpc__worker_flush {
  struct rrpc__worker_flush *next;
  /* the thread whose list holds it, or NULL; written under that thread's
   * lock, so a thread that finds itself here under its lock owns the
   * deferred state until it unlocks. Read and written with __atomic
   * builtins (other threads compare it with themselves under their own
   * lock; this header is also read by C++ tests, where _Atomic is not) */
  rrpc__worker *owner;
  rrpc__task_fn fn; /* writes what was deferred; runs with no lock held */
  void *arg;
} rrpc__worker_flush;

/* start - 0, -ENOMEM or -errno from pthread_create (then nothing is left
 * running). */
int rrpc__worker_pool_start(const rrpc__worker_pool_config *cfg, const char *name, rrpc__worker_pool **out);
/* submit - queue the list of `n` tasks at `head` (linked by next) in one
 * go: one lock and at most one wake-up (none while a thread is between
 * tasks and will look at the queue anyway); the rest of the batch goes to
 * that thread, or to one the rescuer wakes if it blocks (see start). Returns how many were queued, a prefix of the
 * list; *rest is what was not (NULL-terminated as given), which did not fit (max_queue; counted as rejected) or the pool
 * is stopping (*why is then -ESHUTDOWN, else -RRPC_EOVERCROWDED). Never
 * runs a task inside the call. Any thread. */
int rrpc__worker_pool_submit(rrpc__worker_pool *p, rrpc__work *head, int n, rrpc__work **rest, int *why);
/* rejected - tasks refused for a full queue so far. Any thread. */
uint64_t rrpc__worker_pool_rejected(const rrpc__worker_pool *p);
/* rescues - idle workers the rescuer woke for tasks held behind blocked
 * handlers. Any thread. */
uint64_t rrpc__worker_pool_rescues(const rrpc__worker_pool *p);
/* wakeups - sleeping workers woken for tasks (rescues included; and the
 * last ones, of stop). Any thread. */
uint64_t rrpc__worker_pool_wakeups(const rrpc__worker_pool *p);
/* left_to_busy - batches that woke nobody because busy workers would take
 * them (busy_queue). Any thread. */
uint64_t rrpc__worker_pool_left_to_busy(const rrpc__worker_pool *p);
/* totals - the four counters above summed over every pool the process
 * has had (servers' pools included after they stopped). Any thread. */
void rrpc__worker_pools_totals(uint64_t *rejected, uint64_t *rescues, uint64_t *wakeups, uint64_t *left_to_busy);
/* worker_self - the calling thread's handle when it is a thread of a pool
 * that defers writes (flush_us > 0), else NULL. */
rrpc__worker *rrpc__worker_self(void);
/* worker_lock / unlock - the lock that orders a thread's list of deferred
 * flushes against the rescuer taking it. Short sections only (no I/O). */
void rrpc__worker_lock(rrpc__worker *w);
void rrpc__worker_unlock(rrpc__worker *w);
/* worker_defer_locked - under w's lock, on w's own thread: f (not on any
 * list) joins w's list; f->fn(f->arg) runs once, with no lock held: on
 * this thread when it finds the pool's queue empty, before its next task
 * once the rescuer asked for it, when the pool stops, or on the rescuer's
 * thread if this thread is still inside the same task at the rescuer's
 * next look. f->owner is w until then. */
void rrpc__worker_defer_locked(rrpc__worker *w, rrpc__worker_flush *f);
/* write_rescues - flushes the rescuer ran for a thread that stayed inside
 * one task with deferred writes. Any thread. */
uint64_t rrpc__worker_pool_write_rescues(const rrpc__worker_pool *p);
/* write_rescues_total - the same summed over every pool the process has
 * had. Any thread. */
uint64_t rrpc__worker_pools_write_rescues_total(void);
/* stop - run what is queued, join the threads, free. Not from a pool thread. */
void rrpc__worker_pool_stop(rrpc__worker_pool *p);

#endif /* RRPC_INTERNAL_WORKER_POOL_H */
