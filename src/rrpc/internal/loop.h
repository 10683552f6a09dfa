/* internal/loop.h - private to rrpc and its transports: epoll event loops,
 * one thread each, with fd watchers, timers and cross-thread tasks.
 *
 * Threading: a loop runs every callback on its own thread. rrpc__loop_post,
 * the timer functions and rrpc__loop_in_thread may be called from any
 * thread; watcher functions too (epoll_ctl is thread-safe), but a watcher's
 * callback may still be running on the loop thread when rrpc__loop_watch_del
 * returns from another thread - owners that free state must hop onto the loop
 * (rrpc__loop_post) before freeing.
 */
#ifndef RRPC_INTERNAL_LOOP_H
#define RRPC_INTERNAL_LOOP_H

#include <stdint.h>

typedef struct rrpc__loop rrpc__loop;

/* Monotonic clock in microseconds. */
uint64_t rrpc__now_us(void);

/* ---- loop lifetime ------------------------------------------------------- */

/* rrpc__loop_start - create a loop and start its thread. `name` (borrowed,
 * copied) names the thread. 0 or a negative errno. */
int rrpc__loop_start(const char *name, rrpc__loop **out);

/* rrpc__loop_stop - ask the loop to exit, join its thread and free it. Tasks
 * already posted run before it exits; pending timers are dropped without
 * running (their owners must have cancelled them). Must not be called on
 * the loop's own thread. */
void rrpc__loop_stop(rrpc__loop *loop);

/* rrpc__loop_in_thread - 1 when called on `loop`'s thread. */
int rrpc__loop_in_thread(const rrpc__loop *loop);

/* rrpc__loop_current - the loop whose thread is calling, or NULL. */
rrpc__loop *rrpc__loop_current(void);

/* ---- fd watchers ----------------------------------------------------------
 * A watcher is owned by the caller and embedded in its object; the loop only
 * borrows it while it is registered. Events are EPOLLIN/EPOLLOUT/... bits;
 * watchers are level-triggered unless `events` includes EPOLLET. */
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
 * stopping (then fn does not run). Any thread. */
typedef void (*rrpc__task_fn)(void *arg);
int rrpc__loop_post(rrpc__loop *loop, rrpc__task_fn fn, void *arg);

/* ---- timers ---------------------------------------------------------------
 * A timer fires once, on the loop thread, at or after `deadline_us`
 * (rrpc__now_us clock). Ids are never reused. */
typedef uint64_t rrpc__timer_id;
int rrpc__loop_timer_add(rrpc__loop *loop, uint64_t deadline_us, rrpc__task_fn fn, void *arg,
                         rrpc__timer_id *out);
/* rrpc__loop_timer_cancel - 0 if the timer was removed before it ran (fn will
 * never run), -ENOENT if it already ran or is running. Any thread. */
int rrpc__loop_timer_cancel(rrpc__loop *loop, rrpc__timer_id id);

/* ---- loop groups ----------------------------------------------------------
 * The process-wide group that channels and servers share. Started on first
 * use with `n` loops (0 = default: number of CPUs, at most 4). Later calls
 * return the same group whatever n they pass. */
typedef struct rrpc__loop_group rrpc__loop_group;
int rrpc__loop_group_global(int n, rrpc__loop_group **out);
int rrpc__loop_group_start(int n, const char *name, rrpc__loop_group **out);
void rrpc__loop_group_stop(rrpc__loop_group *g);
int rrpc__loop_group_size(const rrpc__loop_group *g);
/* rrpc__loop_group_next - pick a loop, round robin. Any thread. */
rrpc__loop *rrpc__loop_group_next(rrpc__loop_group *g);

#endif /* RRPC_INTERNAL_LOOP_H */
