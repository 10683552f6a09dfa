/* preload/erm_epoll.h - POLLERR for ERM completions through epoll.
 *
 * A relayed socket with ERM state (erm.h) has an eventfd that is readable
 * while completions are queued. When the program adds such a socket to an
 * epoll set (after its first REG_MR), the eventfd is added beside it with a
 * marker as its data; epoll_wait's results are rewritten so the marker's
 * event reads as EPOLLERR with the program's own data for the socket, as
 * the kernel reports a socket's error queue. A socket added before its
 * ERM state existed is not covered (docs/remote-memory.md). */
#ifndef RRPC_PRELOAD_ERM_EPOLL_H
#define RRPC_PRELOAD_ERM_EPOLL_H

#include <sys/epoll.h>

typedef int (*rrpc_run_epoll_ctl_fn)(int, int, int, struct epoll_event *);

/* rrpc_run_erm_epoll_ctl - the program's epoll_ctl(epfd, op, fd, ev)
 * succeeded on a socket whose ERM eventfd is efd: follow it with the
 * eventfd (ADD, MOD, DEL). */
void rrpc_run_erm_epoll_ctl(int epfd, int op, int fd, int efd, const struct epoll_event *ev,
                            rrpc_run_epoll_ctl_fn real_ctl);

/* rrpc_run_erm_epoll_active - 1 while some eventfd is in an epoll set. */
int rrpc_run_erm_epoll_active(void);

/* rrpc_run_erm_epoll_fix - rewrite n events from epoll_wait: a marker's
 * becomes EPOLLERR on the socket's data (merged into the socket's own
 * event if it is there too). Returns the events left. */
int rrpc_run_erm_epoll_fix(struct epoll_event *evs, int n);

/* rrpc_run_erm_epoll_forget - fd is being closed: if it is a socket
 * followed here, take its eventfd out of every set; if it is an epoll set,
 * forget what was followed in it. */
void rrpc_run_erm_epoll_forget(int fd, rrpc_run_epoll_ctl_fn real_ctl);

#endif /* RRPC_PRELOAD_ERM_EPOLL_H */
