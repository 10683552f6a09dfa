/* preload/erm_epoll.h - POLLERR for ERM completions through epoll.
 *
 * A relayed socket with ERM state (erm.h) has an eventfd that is readable
 * while completions are queued. Every epoll set a relayed socket is in is
 * followed here (the events and data the program asked for), whether or
 * not the socket has used ERM yet. Once it has an eventfd, the eventfd
 * joins each of those sets with a marker as its data; epoll_wait's results
 * are rewritten so the marker's event reads as EPOLLERR with the program's
 * own data for the socket, as the kernel reports a socket's error queue. */
#ifndef RRPC_PRELOAD_ERM_EPOLL_H
#define RRPC_PRELOAD_ERM_EPOLL_H

#include <stdint.h>
#include <sys/epoll.h>

typedef int (*rrpc_run_epoll_ctl_fn)(int, int, int, struct epoll_event *);
/* The ERM eventfd of the relayed socket fd, or -1 (no ERM state yet). */
typedef int (*rrpc_run_efd_of_fn)(int fd);

/* rrpc_run_erm_epoll_settings_from_env - RRPC_RUN_ERM_EPOLL_MAX
 * (docs/remote-memory.md); a malformed one is said on stderr and its
 * default kept. Once, at load. */
void rrpc_run_erm_epoll_settings_from_env(void);

/* rrpc_run_erm_epoll_ctl - the program's epoll_ctl(epfd, op, fd, ev)
 * succeeded on relayed socket fd: follow it (ADD, MOD, DEL), and when the
 * socket has an eventfd (efd_of) let it follow too. 0, or for an ADD that
 * cannot be followed -ENOSPC (RRPC_RUN_ERM_EPOLL_MAX pairs followed
 * already, counted) or -ENOMEM: the caller undoes the ADD. */
int rrpc_run_erm_epoll_ctl(int epfd, int op, int fd, const struct epoll_event *ev, rrpc_run_efd_of_fn efd_of,
                           rrpc_run_epoll_ctl_fn real_ctl);

/* rrpc_run_erm_epoll_join - some socket may have just got its eventfd:
 * each followed socket that has one (efd_of) and is not joined yet joins
 * every set it is in. Cheap when every followed socket has joined. */
void rrpc_run_erm_epoll_join(rrpc_run_efd_of_fn efd_of, rrpc_run_epoll_ctl_fn real_ctl);

/* rrpc_run_erm_epoll_active - 1 while some eventfd is in an epoll set
 * (epoll_wait's results need a look). */
int rrpc_run_erm_epoll_active(void);
/* rrpc_run_erm_epoll_following - 1 while some (set, socket) pair is
 * followed (close and dup2 onto an fd need a look). */
int rrpc_run_erm_epoll_following(void);

/* rrpc_run_erm_epoll_fix - rewrite n events from epoll_wait: a marker's
 * becomes EPOLLERR on the socket's data (merged into the socket's own
 * event if it is there too). Returns the events left. */
int rrpc_run_erm_epoll_fix(struct epoll_event *evs, int n);

/* rrpc_run_erm_epoll_forget - fd is being closed: if it is a socket
 * followed here, take its eventfd out of every set; if it is an epoll set,
 * forget what was followed in it. */
void rrpc_run_erm_epoll_forget(int fd, rrpc_run_epoll_ctl_fn real_ctl);

/* rrpc_run_erm_epoll_refused - ADDs refused with ENOSPC so far. */
uint64_t rrpc_run_erm_epoll_refused(void);

#endif /* RRPC_PRELOAD_ERM_EPOLL_H */
