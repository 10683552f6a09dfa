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

#ifdef __cplusplus
}
#endif
#endif /* RRPC_LOOPS_H */
