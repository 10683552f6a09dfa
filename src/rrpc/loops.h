/* rrpc/loops.h - the process-wide event loops that channels (and servers
 * without loops of their own) share.
 *
 * Each loop is one thread running epoll; a connection lives on one loop
 * (connections are spread round robin), and request handlers run on the
 * servers' worker pools by default, so one busy connection uses its loop's
 * core for I/O and parsing and the pool's cores for handlers.
 */
#ifndef RRPC_LOOPS_H
#define RRPC_LOOPS_H

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc_set_event_dispatcher_num - how many process-wide loops to start
 * (brpc's --event_dispatcher_num); 0 = the default, one per online CPU.
 * Takes effect only before the first channel or shared-loop server
 * starts them. 0, -EINVAL (n < 0) or -EBUSY (already started: the count
 * no longer changes). Any thread. */
int rrpc_set_event_dispatcher_num(int n);

/* rrpc_event_dispatcher_num - the number of process-wide loops: those
 * running, or the number that will start. Any thread. */
int rrpc_event_dispatcher_num(void);

/* rrpc_set_completion_handoff - let the client completions of one busy
 * connection run on more than one core: when one read completes at least
 * `min_batch` (>= 2; 4 is a good start) calls and another process-wide
 * loop is asleep, half of them run there (docs/threads.md, "One
 * connection, many cores"). 0 (the default) or negative: off - every
 * completion runs on its connection's loop. Off by default because on the
 * 2-core machines it was measured on it cost CPU per call and gained
 * nothing (docs/performance.md); it is for machines with idle cores.
 * Any thread, any time; 0 or -EINVAL (1: a hop for a single call).
 * rrpc_completion_handoff - the minimum in force, -1 when off. */
int rrpc_set_completion_handoff(int min_batch);
int rrpc_completion_handoff(void);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_LOOPS_H */
