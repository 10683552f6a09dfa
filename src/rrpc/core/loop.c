/* loop.c - one epoll event loop per thread (internal/loop.h): fd watchers,
 * cross-thread tasks, timers and the wake-up eventfd. Loop groups live in
 * loop_group.c, the timer heap in timer_heap.c. */
#include "rrpc/internal/loop.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/internal/lock.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/timer_heap.h"

/* A watcher is filled in by its owner, then handed to the kernel with
 * epoll_ctl, and its callback read back on the loop thread once epoll_wait
 * returns it: ordered through the kernel, which ThreadSanitizer does not
 * see. Tell it (TSan builds only; nothing in other builds). */
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define WATCH_PUBLISHED(w) __tsan_release(w)
#define WATCH_RECEIVED(w) __tsan_acquire(w)
#else
#define WATCH_PUBLISHED(w) ((void)(w))
#define WATCH_RECEIVED(w) ((void)(w))
#endif

enum {
  MAX_EVENTS = 256,      /* per epoll_wait; the rest come next round */
  TASKS_MIN_CAP = 64,    /* first allocation of a task vector */
  TASKS_KEEP_CAP = 4096, /* a drained vector larger than this is freed */
  THREAD_NAME_MAX = 16,  /* Linux limit, NUL included */
  SPIN_ROUNDS = 16,      /* a polling loop's idle spins between full rounds */
};

struct poller {
  rrpc__poll_fn fn;
  void *arg;
};

struct task {
  rrpc__task_fn fn;
  void *arg; /* borrowed; handed to fn */
};

/* A growable array of tasks. Posters append to loop->queue under the
 * mutex; the loop swaps it with loop->running and runs that one unlocked,
 * so a post costs one short critical section and no allocation once the
 * vector has grown. */
struct task_vec {
  struct task *items; /* owned */
  size_t len, cap;
};

struct rrpc__loop {
  pthread_t thread;
  int epfd;
  int wakefd; /* eventfd; its epoll data.ptr is &loop->wakefd */
  char name[THREAD_NAME_MAX];

  rrpc__lock mu;
  /* ---- guarded by mu ---- */
  struct task_vec queue;
  rrpc__timer_heap timers;
  int stopping;
  /* An eventfd write has been (or is about to be) made and the loop has
   * not consumed it yet: later posters need not write again. */
  int wake_pending;
  /* While `sleeping`, the deadline the loop will wake up for on its own
   * (UINT64_MAX: none). A new timer before it needs a wake-up. */
  uint64_t wait_deadline;
  /* 1 from the moment the loop decides to block (under mu, after seeing an
   * empty queue) until epoll_wait returns. Set under mu; cleared by the
   * loop without it - a stale 1 only costs a spare wake-up, and a poster
   * seeing 0 knows the loop will look at the queue again before blocking. */
  atomic_int sleeping;
  /* 1 from a post or stop (set under mu) until run_tasks swaps the queue
   * (cleared under mu). Read without mu by the loop: a 0 lets run_tasks
   * skip the lock. A stale 0 is harmless - run_timers_and_plan_wait looks
   * at the queue under mu before blocking and goes round again - and a
   * consumed wake-up always takes the lock. */
  atomic_int has_work;

  /* ---- loop thread only ---- */
  struct task_vec running;
  struct task_vec deferred;   /* rrpc__loop_defer: run before the loop waits again */
  struct epoll_event *events; /* owned; MAX_EVENTS entries */
  int cur_i, cur_n;           /* the batch being dispatched (cur_n 0: none) */
  int woken;                  /* the eventfd was read since the last run_tasks */
  struct poller *pollers;     /* owned; fn NULL = deleted, compacted after a round */
  int npollers, cap_pollers;
  struct task *stop_hooks;   /* owned; fn NULL = deleted (rrpc__loop_stop_hook_add) */
  int nstop_hooks, cap_stop_hooks;
};

_Thread_local rrpc__loop *rrpc__tls_loop RRPC__TLS_IE; /* internal/loop.h */

/* epoll_pwait2 gives microsecond timeouts; kernels before 5.11 (and some
 * sandboxes) lack it, and then epoll_wait with milliseconds rounded up. */
static atomic_int g_no_pwait2;

uint64_t rrpc__now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* The loop thread's round clock (rrpc__round_now_us); 0 on other threads,
 * and on a polling loop's spin until something reads it. */
_Thread_local uint64_t rrpc__tls_round_us RRPC__TLS_IE;
static _Thread_local int tls_round_lazy; /* a spin: the first read is kept */

uint64_t rrpc__round_read_us(void) {
  uint64_t t = rrpc__now_us();
  if (tls_round_lazy) rrpc__tls_round_us = t;
  return t;
}

rrpc__loop *rrpc__loop_current(void) { return rrpc__tls_loop; }

int rrpc__loop_awake(const rrpc__loop *loop) {
  return !atomic_load_explicit(&((rrpc__loop *)loop)->sleeping, memory_order_relaxed);
}

/* ---- watchdog -------------------------------------------------------------
 * Off unless rrpc__loop_watchdog_set (tests) or RRPC_LOOP_WATCHDOG_MS turns
 * it on; then every loop callback is timed, and one that ran longer than
 * the threshold while busy or asleep (not merely preempted: its CPU time or
 * voluntary context switches say which) is logged with its kind, symbol
 * (when the dynamic symbol table has it) and address, and counted. Off, it
 * costs one relaxed load per callback. */
static atomic_uint_least64_t g_wd_threshold_us; /* wall time of a callback that slept */
static atomic_uint_least64_t g_wd_busy_us;      /* CPU time of one that did not */
static atomic_uint_least64_t g_wd_hits;
static pthread_once_t g_wd_env_once = PTHREAD_ONCE_INIT;

static void wd_read_env(void) {
  const char *e = getenv("RRPC_LOOP_WATCHDOG_MS");
  if (e != NULL && atoi(e) > 0) rrpc__loop_watchdog_set((uint64_t)atoi(e) * 1000u, (uint64_t)atoi(e) * 1000u);
}

void rrpc__loop_watchdog_set(uint64_t blocked_us, uint64_t busy_us) {
  busy_us = busy_us ? busy_us : blocked_us;
  atomic_store(&g_wd_busy_us, busy_us);
  atomic_store(&g_wd_threshold_us, blocked_us);
  /* A stack from half the lower bound on: any callback reported ran that long. */
  rrpc__loop_stack_sampling(blocked_us == 0 ? 0 : (blocked_us < busy_us ? blocked_us : busy_us) / 2);
}
uint64_t rrpc__loop_watchdog_hits(void) { return atomic_load(&g_wd_hits); }

_Thread_local uint64_t rrpc__loop_work[RRPC__WORK_KINDS];

struct wd_mark {
  uint64_t wall_us, cpu_us;
  struct rusage ru;
  uint64_t work[RRPC__WORK_KINDS];
};

static uint64_t thread_cpu_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void thread_rusage(struct rusage *ru) {
  if (getrusage(RUSAGE_THREAD, ru) != 0) memset(ru, 0, sizeof *ru);
}

static uint64_t tv_us(struct timeval tv) { return (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec; }

static int wd_begin(struct wd_mark *m) {
  if (atomic_load_explicit(&g_wd_threshold_us, memory_order_relaxed) == 0) return 0;
  m->wall_us = rrpc__now_us();
  m->cpu_us = thread_cpu_us();
  thread_rusage(&m->ru);
  memcpy(m->work, rrpc__loop_work, sizeof m->work);
  rrpc__loop_stack_begin(m->wall_us);
  return 1;
}

/* The report: besides the time, the split of the CPU into user and kernel
 * time, the page faults taken and the work the callback did - what tells a
 * slow item from many items, and the code's CPU from a runtime's (a
 * sanitizer remapping its shadow memory shows as kernel time and faults). */
static void wd_report(const rrpc__loop *loop, const struct wd_mark *m, const struct rusage *ru, const char *kind,
                      void *fn, uint64_t wall, uint64_t cpu) {
  /* A static function has no dynamic symbol: then file+offset, which
   * `addr2line -f -e FILE OFFSET` turns into its name. */
  Dl_info info;
  int found = dladdr(fn, &info) != 0;
  const char *name = found && info.dli_sname != NULL ? info.dli_sname : "?";
  const char *file = found && info.dli_fname != NULL ? info.dli_fname : "?";
  uintptr_t off = found ? (uintptr_t)fn - (uintptr_t)info.dli_fbase : (uintptr_t)fn;
  RRPC_LOG(ERROR,
           "loop %s: %s %s (%s+0x%lx) ran %llu us (cpu %llu us: user %llu, sys %llu; %ld minor faults; slept %ld "
           "times; did %llu bytes in, %llu completions): loop callbacks must not block",
           loop->name, kind, name, file, (unsigned long)off, (unsigned long long)wall, (unsigned long long)cpu,
           (unsigned long long)(tv_us(ru->ru_utime) - tv_us(m->ru.ru_utime)),
           (unsigned long long)(tv_us(ru->ru_stime) - tv_us(m->ru.ru_stime)), ru->ru_minflt - m->ru.ru_minflt,
           ru->ru_nvcsw - m->ru.ru_nvcsw,
           (unsigned long long)(rrpc__loop_work[RRPC__WORK_BYTES_IN] - m->work[RRPC__WORK_BYTES_IN]),
           (unsigned long long)(rrpc__loop_work[RRPC__WORK_COMPLETIONS] - m->work[RRPC__WORK_COMPLETIONS]));
}

static int wd_check(const rrpc__loop *loop, const struct wd_mark *m, const char *kind, void *fn) {
  uint64_t threshold = atomic_load_explicit(&g_wd_threshold_us, memory_order_relaxed);
  uint64_t busy = atomic_load_explicit(&g_wd_busy_us, memory_order_relaxed);
  uint64_t wall = rrpc__now_us() - m->wall_us;
  /* Off (either 0: rrpc__loop_watchdog_set stores the two one after the
   * other, so a callback ending meanwhile may see one of them switched),
   * or under both bounds - CPU time never exceeds wall time. */
  if (threshold == 0 || busy == 0 || (wall < threshold && wall < busy)) return 0;
  uint64_t cpu = thread_cpu_us() - m->cpu_us;
  struct rusage ru;
  thread_rusage(&ru);
  long slept = ru.ru_nvcsw - m->ru.ru_nvcsw;
  /* Blocked (it went to sleep) for over the wall threshold, or busy (its
   * own CPU time, which preemption does not inflate) for over the busy
   * one, which may be the lower of the two. */
  int blocked = slept > 0 && wall >= threshold;
  if (!blocked && cpu < busy) return 0;
  atomic_fetch_add(&g_wd_hits, 1);
  wd_report(loop, m, &ru, kind, fn, wall, cpu);
  return 1;
}

static void wd_end(const rrpc__loop *loop, const struct wd_mark *m, const char *kind, void *fn) {
  rrpc__loop_stack_end(wd_check(loop, m, kind, fn));
}

/* Run one callback under the watchdog. */
#define WD_RUN(loop, kind, fnptr, call)                            \
  do {                                                             \
    struct wd_mark wd_m_;                                          \
    int wd_on_ = wd_begin(&wd_m_);                                 \
    call;                                                          \
    if (wd_on_) wd_end((loop), &wd_m_, (kind), (void *)(fnptr));   \
  } while (0)

/* ---- wake-up ------------------------------------------------------------- */

/* With mu held: does this change need an eventfd write? Only when the loop
 * is (about to be) blocked and nobody has written yet, so a busy loop costs
 * its posters no syscall at all. */
static int need_wake_locked(rrpc__loop *loop) {
  if (!atomic_load_explicit(&loop->sleeping, memory_order_relaxed) || loop->wake_pending) return 0;
  loop->wake_pending = 1;
  return 1;
}

static void wake(rrpc__loop *loop) {
  uint64_t one = 1;
  ssize_t r;
  do {
    r = write(loop->wakefd, &one, sizeof one);
  } while (r < 0 && errno == EINTR);
  /* EAGAIN means the counter is already huge, i.e. readable: fine. */
  if (r < 0 && errno != EAGAIN) RRPC_LOG(ERROR, "loop %s: eventfd write: %s", loop->name, strerror(errno));
}

/* Called from dispatch when the eventfd is readable. wake_pending is
 * cleared by the next run_tasks, under the lock it takes anyway: every write
 * made while it was 1 has landed by then, or is the one this read took. */
static void consume_wake(rrpc__loop *loop) {
  uint64_t v;
  ssize_t r;
  do {
    r = read(loop->wakefd, &v, sizeof v);
  } while (r < 0 && errno == EINTR);
  loop->woken = 1;
}

/* ---- tasks --------------------------------------------------------------- */

int rrpc__loop_post(rrpc__loop *loop, rrpc__task_fn fn, void *arg) {
  int rc = 0, do_wake = 0;
  rrpc__lock_acquire(&loop->mu);
  if (loop->stopping) {
    rc = -ESHUTDOWN;
    goto out;
  }
  struct task_vec *q = &loop->queue;
  if (q->len == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : TASKS_MIN_CAP;
    struct task *items = realloc(q->items, cap * sizeof *items);
    if (!items) {
      rc = -ENOMEM;
      goto out;
    }
    q->items = items;
    q->cap = cap;
  }
  q->items[q->len].fn = fn;
  q->items[q->len].arg = arg;
  q->len++;
  atomic_store_explicit(&loop->has_work, 1, memory_order_relaxed);
  do_wake = need_wake_locked(loop);
out:
  rrpc__lock_release(&loop->mu);
  if (do_wake) wake(loop);
  return rc;
}

/* The loop thread's own end-of-phase list: no lock, no wake-up, since only
 * this thread adds to it and it runs before the thread can block. */
int rrpc__loop_defer(rrpc__loop *loop, rrpc__task_fn fn, void *arg) {
  struct task_vec *d = &loop->deferred;
  if (d->len == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : TASKS_MIN_CAP;
    struct task *items = realloc(d->items, cap * sizeof *items);
    if (!items) return -ENOMEM;
    d->items = items;
    d->cap = cap;
  }
  d->items[d->len].fn = fn;
  d->items[d->len].arg = arg;
  d->len++;
  return 0;
}

/* Run what callbacks deferred; what those defer in turn runs too. */
static void run_deferred(rrpc__loop *loop) {
  struct task_vec *d = &loop->deferred;
  for (size_t i = 0; i < d->len; i++) {
    struct task t = d->items[i]; /* a callback's defer may move items */
    WD_RUN(loop, "deferred", t.fn, t.fn(t.arg));
  }
  d->len = 0;
}

/* Swap the shared queue out and run it; returns 1 once stop has begun
 * (then every task posted before it has just run). */
static int run_tasks(rrpc__loop *loop) {
  /* Nothing posted, no wake-up to account for: no lock (one lock pair per
   * round saved; most rounds of a busy connection post nothing). */
  if (!loop->woken && !atomic_load_explicit(&loop->has_work, memory_order_relaxed)) return 0;
  rrpc__lock_acquire(&loop->mu);
  atomic_store_explicit(&loop->has_work, 0, memory_order_relaxed);
  if (loop->woken) {
    loop->wake_pending = 0;
    loop->woken = 0;
  }
  struct task_vec tmp = loop->queue;
  loop->queue = loop->running;
  loop->running = tmp;
  int stopping = loop->stopping;
  rrpc__lock_release(&loop->mu);

  struct task_vec *r = &loop->running;
  for (size_t i = 0; i < r->len; i++) WD_RUN(loop, "task", r->items[i].fn, r->items[i].fn(r->items[i].arg));
  r->len = 0;
  if (r->cap > TASKS_KEEP_CAP) { /* give back what a burst grew */
    free(r->items);
    r->items = NULL;
    r->cap = 0;
  }
  return stopping;
}

/* ---- timers -------------------------------------------------------------- */

int rrpc__loop_timer_add(rrpc__loop *loop, uint64_t deadline_us, rrpc__task_fn fn, void *arg,
                         rrpc__timer_id *out) {
  int rc, do_wake = 0;
  rrpc__lock_acquire(&loop->mu);
  if (loop->stopping) {
    rc = -ESHUTDOWN;
  } else {
    rc = rrpc__timer_heap_add(&loop->timers, deadline_us, fn, arg, out);
    if (rc == 0 && deadline_us < loop->wait_deadline) do_wake = need_wake_locked(loop);
  }
  rrpc__lock_release(&loop->mu);
  if (do_wake) wake(loop);
  return rc;
}

int rrpc__loop_timer_cancel(rrpc__loop *loop, rrpc__timer_id id) {
  /* The loop pops a timer under mu before calling it, so "not in the heap"
   * is exactly "ran, is running, was cancelled or never existed". */
  rrpc__lock_acquire(&loop->mu);
  int rc = rrpc__timer_heap_cancel(&loop->timers, id);
  rrpc__lock_release(&loop->mu);
  return rc;
}

/* Run the due timers, then decide under the same lock how long to block:
 * the returned deadline is 0 (do not block: tasks are queued, a timer is
 * due or stop has begun), UINT64_MAX (no timer) or the earliest deadline.
 * A non-zero answer marks the loop as sleeping before the lock drops, so
 * any post or earlier timer after that point writes the eventfd.
 * *read_us gets the clock read the plan used when nothing ran after it (no
 * timer due, nothing deferred), else 0: the wait then times itself from
 * that read instead of reading the clock again (a read is ~25
 * instructions, and a client with a timeout armed waits with a deadline
 * every round). The read is older by the plan's own work (the lock, the
 * heap), so the wait may end that much later, never before the deadline. */
static uint64_t run_timers_and_plan_wait(rrpc__loop *loop, uint64_t *read_us) {
  uint64_t now = rrpc__now_us();
  *read_us = now;
  rrpc__lock_acquire(&loop->mu);
  /* Timers that callbacks add now wait for the next round, even if due. */
  rrpc__timer_id limit = loop->timers.next_id;
  for (;;) {
    rrpc__task_fn fn;
    void *arg;
    if (rrpc__timer_heap_pop_due(&loop->timers, now, limit, &fn, &arg)) break;
    rrpc__lock_release(&loop->mu);
    *read_us = 0;
    WD_RUN(loop, "timer", fn, fn(arg));
    rrpc__lock_acquire(&loop->mu);
  }
  if (loop->deferred.len) {
    *read_us = 0;
    rrpc__lock_release(&loop->mu);
    run_deferred(loop);
    rrpc__lock_acquire(&loop->mu);
  }
  uint64_t deadline = 0;
  if (!loop->queue.len && !loop->stopping && loop->npollers == 0) {
    deadline = rrpc__timer_heap_next_deadline(&loop->timers);
    if (deadline <= now) deadline = 0; /* left behind by `limit` */
    if (deadline) {
      loop->wait_deadline = deadline;
      atomic_store_explicit(&loop->sleeping, 1, memory_order_relaxed);
    }
  }
  rrpc__lock_release(&loop->mu);
  return deadline;
}

/* ---- the loop ------------------------------------------------------------ */

/* The waits as plain system calls: glibc's wrappers are cancellation
 * points, and turning the thread's asynchronous cancellation on and off
 * around the call cost about 30 instructions a round, every round. A loop
 * thread is never cancelled (rrpc owns it and stops it with a task). TSan
 * builds keep glibc's wrappers, whose interceptors order an epoll_ctl
 * before the wait that returns its event for the race detector. */
#if defined(__SANITIZE_THREAD__)
static int sys_epoll_wait(int epfd, struct epoll_event *ev, int max, int ms) {
  return epoll_wait(epfd, ev, max, ms);
}
static int sys_epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts) {
  return epoll_pwait2(epfd, ev, max, ts, NULL);
}
#else
static int sys_epoll_wait(int epfd, struct epoll_event *ev, int max, int ms) {
  return (int)syscall(SYS_epoll_wait, epfd, ev, max, ms);
}
static int sys_epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *ts) {
  return (int)syscall(SYS_epoll_pwait2, epfd, ev, max, ts, NULL, (size_t)0); /* no mask: no mask size */
}
#endif

/* Block in epoll until an fd is ready or `deadline` (UINT64_MAX: none; 0:
 * do not block). Never returns before the deadline for timeout reasons:
 * the millisecond fallback rounds up. `read_us`: a clock read taken before
 * this call (run_timers_and_plan_wait's), or 0 to read it here. */
static int wait_events(rrpc__loop *loop, uint64_t deadline, uint64_t read_us) {
  int n;
  if (deadline == 0 || deadline == UINT64_MAX) {
    n = sys_epoll_wait(loop->epfd, loop->events, MAX_EVENTS, deadline ? -1 : 0);
  } else {
    uint64_t now = read_us != 0 ? read_us : rrpc__now_us();
    uint64_t left = deadline > now ? deadline - now : 0;
    n = -1;
    errno = ENOSYS;
    if (!atomic_load_explicit(&g_no_pwait2, memory_order_relaxed)) {
      struct timespec ts = {.tv_sec = (time_t)(left / 1000000u),
                            .tv_nsec = (long)(left % 1000000u) * 1000};
      n = sys_epoll_pwait2(loop->epfd, loop->events, MAX_EVENTS, &ts);
      if (n < 0 && errno == ENOSYS) atomic_store_explicit(&g_no_pwait2, 1, memory_order_relaxed);
    }
    if (n < 0 && errno == ENOSYS) {
      uint64_t ms = (left + 999) / 1000;
      n = sys_epoll_wait(loop->epfd, loop->events, MAX_EVENTS, ms > INT_MAX ? INT_MAX : (int)ms);
    }
  }
  if (n < 0) {
    if (errno != EINTR) RRPC_LOG(ERROR, "loop %s: epoll_wait: %s", loop->name, strerror(errno));
    return 0;
  }
  return n;
}

static void dispatch(rrpc__loop *loop, int n) {
  loop->cur_n = n;
  for (int i = 0; i < n; i++) {
    loop->cur_i = i;
    void *p = loop->events[i].data.ptr;
    if (!p) continue; /* its watcher was deleted earlier in this batch */
    if (p == &loop->wakefd) {
      consume_wake(loop);
      continue;
    }
    rrpc__watcher *w = p;
    WATCH_RECEIVED(w);
    WD_RUN(loop, "fd watcher", w->cb, w->cb(w, loop->events[i].events));
  }
  loop->cur_n = 0;
}

int rrpc__loop_poller_add(rrpc__loop *loop, rrpc__poll_fn fn, void *arg) {
  if (loop->npollers == loop->cap_pollers) {
    int ncap = loop->cap_pollers ? loop->cap_pollers * 2 : 8;
    struct poller *np = realloc(loop->pollers, (size_t)ncap * sizeof *np);
    if (np == NULL) return -ENOMEM;
    loop->pollers = np;
    loop->cap_pollers = ncap;
  }
  loop->pollers[loop->npollers++] = (struct poller){fn, arg};
  return 0;
}

void rrpc__loop_poller_del(rrpc__loop *loop, rrpc__poll_fn fn, void *arg) {
  for (int i = 0; i < loop->npollers; i++)
    if (loop->pollers[i].fn == fn && loop->pollers[i].arg == arg) loop->pollers[i].fn = NULL;
}

/* ---- stop hooks ------------------------------------------------------------ */

int rrpc__loop_stop_hook_add(rrpc__loop *loop, rrpc__task_fn fn, void *arg) {
  if (loop->nstop_hooks == loop->cap_stop_hooks) {
    int ncap = loop->cap_stop_hooks ? loop->cap_stop_hooks * 2 : 8;
    struct task *np = realloc(loop->stop_hooks, (size_t)ncap * sizeof *np);
    if (np == NULL) return -ENOMEM;
    loop->stop_hooks = np;
    loop->cap_stop_hooks = ncap;
  }
  loop->stop_hooks[loop->nstop_hooks++] = (struct task){fn, arg};
  return 0;
}

void rrpc__loop_stop_hook_del(rrpc__loop *loop, rrpc__task_fn fn, void *arg) {
  int k = 0;
  for (int i = 0; i < loop->nstop_hooks; i++) {
    struct task *h = &loop->stop_hooks[i];
    if (h->fn == fn && h->arg == arg) h->fn = NULL;
    if (h->fn != NULL) loop->stop_hooks[k++] = *h;
  }
  loop->nstop_hooks = k;
}

/* The loop's last act: every hook once, in the order added. A hook may
 * delete itself or others (del compacts, so index by what is left). */
static void run_stop_hooks(rrpc__loop *loop) {
  while (loop->nstop_hooks > 0) {
    struct task h = loop->stop_hooks[0];
    rrpc__loop_stop_hook_del(loop, h.fn, h.arg);
    h.fn(h.arg);
  }
}

/* Run every poller once; drop the ones deleted meanwhile. 1 if any found
 * work. */
static int run_pollers(rrpc__loop *loop) {
  int work = 0;
  for (int i = 0; i < loop->npollers; i++)
    if (loop->pollers[i].fn != NULL)
      WD_RUN(loop, "poller", loop->pollers[i].fn, work |= loop->pollers[i].fn(loop->pollers[i].arg));
  int k = 0;
  for (int i = 0; i < loop->npollers; i++)
    if (loop->pollers[i].fn != NULL) loop->pollers[k++] = loop->pollers[i];
  loop->npollers = k;
  return work;
}

static void *loop_main(void *p) {
  rrpc__loop *loop = p;
  rrpc__tls_loop = loop;
  rrpc__tls_round_us = rrpc__now_us(); /* the first round's tasks run before any wait */
  tls_round_lazy = 1;
  rrpc__loop_stack_thread(1);
  int spins = 0, worked = 1;
  /* One round: tasks, due timers, then block for fds. Tasks posted while
   * a round runs make the next wait non-blocking, so neither I/O nor tasks
   * can starve the other. */
  for (;;) {
    int stop = run_tasks(loop);
    if (loop->deferred.len) run_deferred(loop);
    if (stop) break;
    if (!worked && spins < SPIN_ROUNDS && loop->npollers) {
      /* A polling loop that found nothing last time spins on its pollers
       * alone: no clock read, timers or epoll - system calls, the clock
       * too where it is not in the vDSO (a VM guest's HPET: ~0.7 us a
       * read). Tasks are still seen every spin; fds and timers
       * at most SPIN_ROUNDS idle spins late, and after every spin that
       * found work. The round's clock is read when first used. */
      rrpc__tls_round_us = 0;
      worked = run_pollers(loop);
      if (loop->deferred.len) run_deferred(loop);
      spins++;
      continue;
    }
    spins = 0;
    uint64_t read_us;
    uint64_t deadline = run_timers_and_plan_wait(loop, &read_us);
    int n = wait_events(loop, deadline, read_us);
    atomic_store_explicit(&loop->sleeping, 0, memory_order_relaxed);
    /* The round's clock (rrpc__round_now_us): what the fds' handlers, the
     * pollers, the deferred work and the next round's tasks stamp with.
     * A wait that did not block (pollers, tasks) leaves the plan's read
     * fresh: a polling loop's round reads the clock once, as before. */
    rrpc__tls_round_us = deadline == 0 && read_us != 0 ? read_us : rrpc__now_us();
    dispatch(loop, n);
    worked = n > 0;
    if (loop->npollers) worked |= run_pollers(loop);
    if (loop->deferred.len) run_deferred(loop);
  }
  run_stop_hooks(loop);
  if (loop->deferred.len) run_deferred(loop);
  rrpc__loop_stack_thread(0);
  rrpc__tls_loop = NULL;
  rrpc__tls_round_us = 0;
  tls_round_lazy = 0;
  return NULL;
}

/* ---- lifetime ------------------------------------------------------------ */

const char *rrpc__loop_name(const rrpc__loop *loop) { return loop->name; }

int rrpc__loop_start(const char *name, rrpc__loop **out) {
  int rc;
  pthread_once(&g_wd_env_once, wd_read_env);
  rrpc__loop *loop = calloc(1, sizeof *loop);
  if (!loop) return -ENOMEM;
  snprintf(loop->name, sizeof loop->name, "%s", name ? name : "rrpc-loop");
  loop->wait_deadline = UINT64_MAX;
  rrpc__timer_heap_init(&loop->timers);
  rrpc__lock_init(&loop->mu);

  loop->events = malloc(MAX_EVENTS * sizeof *loop->events);
  if (!loop->events) {
    rc = -ENOMEM;
    goto fail_free;
  }
  loop->epfd = epoll_create1(EPOLL_CLOEXEC);
  if (loop->epfd < 0) {
    rc = -errno;
    goto fail_events;
  }
  loop->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (loop->wakefd < 0) {
    rc = -errno;
    goto fail_epfd;
  }
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &loop->wakefd};
  if (epoll_ctl(loop->epfd, EPOLL_CTL_ADD, loop->wakefd, &ev)) {
    rc = -errno;
    goto fail_wakefd;
  }

  /* The loop thread takes no asynchronous signals: they belong to the
   * application's threads. Faults still reach it (ASan needs SIGSEGV). */
  sigset_t all, old;
  sigfillset(&all);
  sigdelset(&all, SIGSEGV);
  sigdelset(&all, SIGBUS);
  sigdelset(&all, SIGFPE);
  sigdelset(&all, SIGILL);
  sigdelset(&all, SIGTRAP);
  sigdelset(&all, SIGABRT);
  sigdelset(&all, SIGSYS);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  rc = -pthread_create(&loop->thread, NULL, loop_main, loop);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc) goto fail_wakefd;
  /* Named here, not by the thread itself: once start returns, the name is
   * there for tools (and tests) to see. */
  pthread_setname_np(loop->thread, loop->name);
  *out = loop;
  return 0;

fail_wakefd:
  close(loop->wakefd);
fail_epfd:
  close(loop->epfd);
fail_events:
  free(loop->events);
  free(loop->pollers);
  free(loop->stop_hooks);
fail_free:
  free(loop);
  return rc;
}

void rrpc__loop_stop(rrpc__loop *loop) {
  if (!loop) return;
  if (rrpc__loop_in_thread(loop)) {
    /* Joining ourselves would deadlock; leaking is the lesser harm. */
    RRPC_LOG(ERROR, "loop %s: rrpc__loop_stop called on the loop's own thread; ignored", loop->name);
    return;
  }
  rrpc__lock_acquire(&loop->mu);
  loop->stopping = 1;
  atomic_store_explicit(&loop->has_work, 1, memory_order_relaxed);
  int do_wake = need_wake_locked(loop);
  rrpc__lock_release(&loop->mu);
  if (do_wake) wake(loop);
  pthread_join(loop->thread, NULL);

  /* Posts fail once stopping is set, and the loop's last swap took every
   * task posted before that, so nothing is left in either vector. */
  free(loop->queue.items);
  free(loop->running.items);
  free(loop->deferred.items);
  rrpc__timer_heap_destroy(&loop->timers);
  close(loop->wakefd);
  close(loop->epfd);
  free(loop->events);
  free(loop->pollers);
  free(loop->stop_hooks);
  free(loop);
}

/* ---- watchers ------------------------------------------------------------ */

int rrpc__loop_watch_add(rrpc__loop *loop, rrpc__watcher *w) {
  struct epoll_event ev = {.events = w->events, .data.ptr = w};
  WATCH_PUBLISHED(w);
  return epoll_ctl(loop->epfd, EPOLL_CTL_ADD, w->fd, &ev) ? -errno : 0;
}

int rrpc__loop_watch_mod(rrpc__loop *loop, rrpc__watcher *w, uint32_t events) {
  /* Store first: the change may fire at once on the loop thread, and a
   * callback that reacts to it (e.g. by switching EPOLLOUT off again) must
   * not have its own update overwritten by this one afterwards. */
  uint32_t old = w->events;
  w->events = events;
  struct epoll_event ev = {.events = events, .data.ptr = w};
  WATCH_PUBLISHED(w);
  if (epoll_ctl(loop->epfd, EPOLL_CTL_MOD, w->fd, &ev)) {
    int rc = -errno;
    w->events = old; /* not registered (or a bad fd): nothing can fire */
    return rc;
  }
  return 0;
}

int rrpc__loop_watch_del(rrpc__loop *loop, rrpc__watcher *w) {
  struct epoll_event ev = {0}; /* ignored, but pre-2.6.9 kernels wanted one */
  int rc = epoll_ctl(loop->epfd, EPOLL_CTL_DEL, w->fd, &ev) ? -errno : 0;
  /* On the loop thread the rest of the current batch may still name w;
   * forget those events so the owner can free w as soon as we return. */
  if (rrpc__loop_in_thread(loop)) {
    for (int i = loop->cur_i + 1; i < loop->cur_n; i++)
      if (loop->events[i].data.ptr == w) loop->events[i].data.ptr = NULL;
  }
  return rc;
}
