/* internal/loop.h - private to rrpc and its transports: epoll event loops,
 * one thread each, with fd watchers, timers and cross-thread tasks.
 *
 * Threading: a loop runs every callback on its own thread. rrpc__loop_post,
 * the timer functions and rrpc__loop_in_thread may be called from any
 * thread; watcher functions too (epoll_ctl is thread-safe), but a watcher's
 * callback may still be running on the loop thread when rrpc__loop_watch_del
 * returns from another thread - owners that free state must hop onto the loop
 * (rrpc__loop_post) before freeing.
 *
 * One round of a loop: run the tasks queued so far, run the due timers,
 * then wait for fd events (without blocking if more tasks arrived) and
 * dispatch them. A task posted after a watcher was deleted therefore runs
 * after any callback that deletion could still race with.
 */
#ifndef RRPC_INTERNAL_LOOP_H
#define RRPC_INTERNAL_LOOP_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc__loop rrpc__loop;

/* Monotonic clock in microseconds. */
uint64_t rrpc__now_us(void);

/* Initial-exec thread-locals: see rrpc__loop_in_thread (the recorder reads
 * the round's clock once a call end, too). */
#define RRPC__TLS_IE __attribute__((tls_model("initial-exec")))

/* rrpc__round_now_us - on a loop thread, the clock as read when the loop's
 * current round woke from its wait (older by at most the round's own work
 * so far; a polling loop's spin reads it at its first use); elsewhere a
 * fresh rrpc__now_us. For stamps that tolerate that
 * age (activity for idle sweeps, a read's arrival time): one clock read a
 * round instead of one per socket and per write. Never for deadlines of
 * new calls or timers. */
#ifdef __cplusplus
extern thread_local uint64_t rrpc__tls_round_us RRPC__TLS_IE; /* 0 off loop threads */
#else
extern _Thread_local uint64_t rrpc__tls_round_us RRPC__TLS_IE; /* 0 off loop threads */
#endif
/* The slow half: a fresh read, kept as the round's clock where the round
 * has not read it yet (a polling loop's spin reads it only when used). */
uint64_t rrpc__round_read_us(void);
static inline uint64_t rrpc__round_now_us(void) {
  uint64_t t = rrpc__tls_round_us;
  return t != 0 ? t : rrpc__round_read_us();
}

/* rrpc__round_lend / rrpc__round_unlend - off a loop thread, let a clock
 * read just taken (`now`) serve rrpc__round_now_us until unlend: a worker
 * that read the clock for a call's latency then writes its response stamps
 * the write with that read instead of taking another. On a loop thread
 * (its round clock set) both do nothing, and so does a pair nested in
 * another. Pairs on one thread. */
static inline uint64_t rrpc__round_lend(uint64_t now) {
  uint64_t had = rrpc__tls_round_us;
  if (had == 0) rrpc__tls_round_us = now;
  return had;
}
static inline void rrpc__round_unlend(uint64_t had) {
  if (had == 0) rrpc__tls_round_us = 0;
}

/* ---- loop lifetime ------------------------------------------------------- */

/* rrpc__loop_start - create a loop and start its thread. `name` (borrowed,
 * copied) names the thread. 0 or a negative errno. */
int rrpc__loop_start(const char *name, rrpc__loop **out);

/* rrpc__loop_stop - ask the loop to exit, join its thread and free it. Tasks
 * already posted run before it exits; a post racing with stop either runs
 * or returns -ESHUTDOWN, never both, never neither. Pending timers are
 * dropped without running (their owners must have cancelled them) and
 * registered watchers are forgotten (fds are not closed). Blocks until the
 * thread has exited; no thread may touch `loop` after it returns. Must not
 * be called on the loop's own thread (it logs an error and does nothing). */
void rrpc__loop_stop(rrpc__loop *loop);

/* rrpc__loop_in_thread - 1 when called on `loop`'s thread. Inline: the
 * write path and a call's bookkeeping ask it several times a call, and the
 * function call cost ~10 instructions each. rrpc__tls_loop is loop.c's:
 * the loop this thread runs, or NULL. Initial-exec: the default model for
 * -fPIC code reads it through a call to __tls_get_addr (the linker turns
 * it into a plain load for a program, but the compiler had already saved
 * the registers a call clobbers - six pushes and pops in a function that
 * only tests it). Its 8 bytes, the round clock's and the recorder's shard
 * index (20 in all) live in the static TLS block: linked or preloaded, the
 * library is there from the start; dlopen()ed later (a plugin), it takes
 * them from the surplus glibc keeps for such libraries
 * (test/tools/dlopen_test.sh). */
#ifdef __cplusplus
extern thread_local rrpc__loop *rrpc__tls_loop RRPC__TLS_IE;
#else
extern _Thread_local rrpc__loop *rrpc__tls_loop RRPC__TLS_IE;
#endif
static inline int rrpc__loop_in_thread(const rrpc__loop *loop) { return loop != 0 && rrpc__tls_loop == loop; }

/* rrpc__loop_name - the thread name given at start (borrowed, lives as long
 * as the loop). Any thread. */
const char *rrpc__loop_name(const rrpc__loop *loop);

/* rrpc__loop_current - the loop whose thread is calling, or NULL. */
rrpc__loop *rrpc__loop_current(void);

/* rrpc__loop_awake - 1 while the loop is running a round (not blocked in
 * epoll): work posted to it now costs no wake-up. A hint, racy by nature. */
int rrpc__loop_awake(const rrpc__loop *loop);

/* ---- fd watchers ----------------------------------------------------------
 * A watcher is owned by the caller and embedded in its object; the loop only
 * borrows it while it is registered. Events are EPOLLIN/EPOLLOUT/... bits;
 * watchers are level-triggered unless `events` includes EPOLLET. The
 * callback runs on the loop thread with the bits epoll reported (EPOLLERR
 * and EPOLLHUP arrive even when not asked for).
 * All three return 0 or -errno from epoll_ctl (-EEXIST: already added,
 * -ENOENT: not added, -EBADF, -EPERM: fd does not support epoll). Calls on
 * one watcher must not overlap; the owner serialises them. Delete a watcher
 * before closing its fd. rrpc__loop_watch_mod stores `events` in w->events
 * before the kernel sees it (restored on failure), so a callback that the
 * change triggers may itself call mod again. On the loop thread,
 * rrpc__loop_watch_del also drops the watcher's events still pending in the
 * batch being dispatched: once it returns there, the callback is never
 * called again and the owner may free the watcher at once. */
typedef struct rrpc__watcher rrpc__watcher;
typedef void (*rrpc__watch_cb)(rrpc__watcher *w, uint32_t events);
struct rrpc__watcher {
  int fd;
  uint32_t events;
  rrpc__watch_cb cb;
  void *arg; /* for the owner; the loop never touches it */
};

int rrpc__loop_watch_add(rrpc__loop *loop, rrpc__watcher *w);
int rrpc__loop_watch_mod(rrpc__loop *loop, rrpc__watcher *w, uint32_t events);
int rrpc__loop_watch_del(rrpc__loop *loop, rrpc__watcher *w);

/* ---- tasks ----------------------------------------------------------------
 * rrpc__loop_post - run fn(arg) on the loop thread soon, in posting order.
 * Never runs it inside the call. 0, -ENOMEM, or -ESHUTDOWN once the loop is
 * stopping (then fn does not run). Any thread; does not block beyond a
 * short internal lock, and makes a syscall only to wake a sleeping loop.
 * Tasks posted from the loop thread run in the next round. */
typedef void (*rrpc__task_fn)(void *arg);
int rrpc__loop_post(rrpc__loop *loop, rrpc__task_fn fn, void *arg);

/* rrpc__loop_defer - loop thread only: run fn(arg) once the current phase
 * of this round (the fd callbacks, the tasks or the timers) has run, before
 * the loop can block again. Cheaper than a post (no lock); for work that
 * gathers a round's output, such as one write for all of a round's
 * responses. 0 or -ENOMEM (then fn does not run). */
int rrpc__loop_defer(rrpc__loop *loop, rrpc__task_fn fn, void *arg);

/* ---- timers ---------------------------------------------------------------
 * A timer fires once, on the loop thread, at or after `deadline_us`
 * (rrpc__now_us clock); a deadline in the past fires in the next round.
 * Timers with equal deadlines fire in the order they were added. Ids are
 * per loop, increase with every add, are never reused, and are never 0 (so
 * 0 can mean "no timer"). rrpc__loop_timer_add: 0, -ENOMEM, or -ESHUTDOWN
 * once the loop is stopping. Any thread; O(log n). */
typedef uint64_t rrpc__timer_id;
int rrpc__loop_timer_add(rrpc__loop *loop, uint64_t deadline_us, rrpc__task_fn fn, void *arg,
                         rrpc__timer_id *out);
/* rrpc__loop_timer_cancel - 0 if the timer was removed before it ran (fn will
 * never run), -ENOENT if it already ran or is running (or was cancelled, or
 * never existed). Any thread; O(log n). Cancelling from another thread with
 * -ENOENT does not wait for a running fn to finish. */
int rrpc__loop_timer_cancel(rrpc__loop *loop, rrpc__timer_id id);

/* ---- pollers ---------------------------------------------------------------
 * A poller runs once per loop round, after the fd events; while a loop has
 * any, it never blocks in epoll (busy polling, e.g. RDMA CQs with
 * --rdma_use_polling). It returns nonzero when it found work: after a
 * round where none did, the loop spins on tasks and pollers alone (no
 * clock read, timers or epoll) for up to 16 rounds. Loop thread only, for
 * add and del; a poller may del itself or another from inside a round. */
typedef int (*rrpc__poll_fn)(void *arg); /* nonzero: it found work */
int rrpc__loop_poller_add(rrpc__loop *loop, rrpc__poll_fn fn, void *arg);
void rrpc__loop_poller_del(rrpc__loop *loop, rrpc__poll_fn fn, void *arg);

/* ---- stop hooks -------------------------------------------------------------
 * A stop hook runs once, on the loop thread, when the loop stops (after its
 * last tasks, before rrpc__loop_stop returns), unless deleted before: for
 * an owner that waits on the loop (a timer, a watcher) for something that
 * must be released even if the loop goes first, such as a closed RDMA
 * connection waiting for its close CDC. Loop thread only, for add and del;
 * a hook may del itself or another. add: 0 or -ENOMEM. */
int rrpc__loop_stop_hook_add(rrpc__loop *loop, rrpc__task_fn fn, void *arg);
void rrpc__loop_stop_hook_del(rrpc__loop *loop, rrpc__task_fn fn, void *arg);

/* ---- watchdog ----------------------------------------------------------------
 * rrpc__loop_watchdog_set - log (ERROR) and count every loop callback (task,
 * timer, fd watcher, poller) that ran longer than `blocked_us` (wall time)
 * and went to sleep meanwhile, or used more than `busy_us` of CPU (0: the
 * same as blocked_us); preemption alone is not counted. blocked_us 0 turns
 * it off (the default; the environment variable RRPC_LOOP_WATCHDOG_MS=N
 * turns it on for a process with N ms for both). For tests and debugging: on, it costs a few clock reads and a
 * getrusage per callback. rrpc__loop_watchdog_hits - callbacks reported so
 * far. Any thread. */
void rrpc__loop_watchdog_set(uint64_t blocked_us, uint64_t busy_us);
uint64_t rrpc__loop_watchdog_hits(void);

/* The watchdog's stack sampler (loop_stack.c). rrpc__loop_stack_sampling -
 * take the stack of any loop callback running longer than after_us (0:
 * stop sampling); started by rrpc__loop_watchdog_set. The rest is for
 * loop.c: a loop thread registers itself (on 1 / 0), and brackets each
 * timed callback; _end(1) prints the stack taken during it, if any. */
void rrpc__loop_stack_sampling(uint64_t after_us);
void rrpc__loop_stack_thread(int on);
void rrpc__loop_stack_begin(uint64_t start_us);
void rrpc__loop_stack_end(int report);
/* rrpc__loop_stacks_taken - stacks the sampler recorded so far (tests). */
uint64_t rrpc__loop_stacks_taken(void);

/* rrpc__loop_note - count work done by the running callback (bytes handed to
 * a protocol, responses completed), so a watchdog report says how much the
 * offending callback did: one slow item, or many cheap ones in one call.
 * A thread-local add; loop threads (elsewhere it is simply not reported). */
enum rrpc__loop_work { RRPC__WORK_BYTES_IN, RRPC__WORK_COMPLETIONS, RRPC__WORK_KINDS };
#ifdef __cplusplus
extern thread_local uint64_t rrpc__loop_work[RRPC__WORK_KINDS];
#else
extern _Thread_local uint64_t rrpc__loop_work[RRPC__WORK_KINDS];
#endif
static inline void rrpc__loop_note(enum rrpc__loop_work kind, uint64_t n) { rrpc__loop_work[kind] += n; }

/* ---- loop groups ----------------------------------------------------------
 * rrpc__loop_group_global - the process-wide group that channels and
 * servers share. Started on first use with `n` loops (0 = default:
 * rrpc_set_event_dispatcher_num's count, else one per online CPU), threads named "rrpc-loop-<i>". Later calls
 * return the same group whatever n they pass. It lives until the process
 * exits (rrpc__loop_group_stop on it is refused). 0, -EINVAL (n < 0) or a
 * start error, after which a later call tries again. Any thread.
 * rrpc__loop_group_start - `n` (> 0, else -EINVAL) loops whose threads are
 * named "<name>-<i>" (name borrowed, cut to fit Linux's 15 characters).
 * rrpc__loop_group_stop - stop every loop as rrpc__loop_stop does, free g. */
typedef struct rrpc__loop_group rrpc__loop_group;
int rrpc__loop_group_global(int n, rrpc__loop_group **out);
int rrpc__loop_group_start(int n, const char *name, rrpc__loop_group **out);
void rrpc__loop_group_stop(rrpc__loop_group *g);
int rrpc__loop_group_size(const rrpc__loop_group *g);
/* rrpc__loop_group_next - pick a loop, round robin. Any thread. */
rrpc__loop *rrpc__loop_group_next(rrpc__loop_group *g);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_LOOP_H */
