/* preload/erm.h - ERM's socket API (rrpc/erm.h) on the connections rrpc-run
 * relays: what intercept.c's getsockopt/setsockopt, sendmsg, recvmsg and
 * poll wrappers hand over for a relayed fd.
 *
 * Per connection (made on the first SMC_ERM_CMD): the rrpc socket's
 * remote-memory link (rrpc/remote.h), the program's registrations by
 * memid, and a queue of completions the program reads with
 * recvmsg(MSG_ERRQUEUE). An eventfd is readable while that queue is not
 * empty: the poll wrappers turn it into POLLERR on the program's fd, as
 * the kernel reports a socket's error queue. */
#ifndef RRPC_PRELOAD_ERM_H
#define RRPC_PRELOAD_ERM_H

#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "preload/relay.h"
#include "rrpc/erm.h"

/* rrpc_run_erm_settings_from_env - RRPC_RUN_ERM_* (docs/remote-memory.md);
 * a malformed one is said on stderr and its default kept. Once, at load. */
void rrpc_run_erm_settings_from_env(void);

/* rrpc_run_erm_sockopt - getsockopt (set 0) or setsockopt (set 1) of
 * SOL_SMC/SMC_ERM_CMD on relayed connection c. 0, or a negative errno:
 * -EFAULT/-EINVAL (a malformed value), -ENOPROTOOPT (the connection cannot
 * carry ERM: its peer is not under rrpc-run), -ENOSPC (RRPC_RUN_ERM_MAX_MRS),
 * -ENOENT (DEREG_MR of a memid this connection does not hold), -EBUSY
 * (DEREG_MR of the source of a COPY still in flight), or the connection's
 * error. An application thread (REG_MR may wait for the relay). */
int rrpc_run_erm_sockopt(rrpc_run_conn *c, int set, void *val, socklen_t *len);

/* rrpc_run_erm_sendmsg - a sendmsg on relayed connection c. If its control
 * messages hold no SMC_ERM_CMD_COPY, returns 0 and leaves the call to the
 * caller. Else returns 1 with *ret what sendmsg returns (bytes of the iov
 * sent through `real`, 0 for none, or -1 with errno: EINVAL for malformed
 * control messages, ENOENT for an unknown memid, ERANGE for a span outside
 * a region, ENOBUFS past RRPC_RUN_ERM_MAX_COMPL, or what the peer's table
 * refused; COPYs before the refused one were started). */
int rrpc_run_erm_sendmsg(rrpc_run_conn *c, int fd, const struct msghdr *m, int flags,
                         ssize_t (*real)(int, const struct msghdr *, int), ssize_t *ret);

/* rrpc_run_erm_recv_errqueue - recvmsg(MSG_ERRQUEUE) on c: completions
 * into m's control buffer as SMC_ERM_CMD_COMPL messages. 0, or -EAGAIN
 * when none is queued. */
ssize_t rrpc_run_erm_recv_errqueue(rrpc_run_conn *c, struct msghdr *m, int flags);

/* rrpc_run_erm_any - 1 once some connection of this process used ERM (the
 * poll wrappers look no further otherwise). */
int rrpc_run_erm_any(void);
/* rrpc_run_erm_event_fd - c's eventfd (readable while completions are
 * queued), or -1 if c never used ERM. */
int rrpc_run_erm_event_fd(rrpc_run_conn *c);

/* rrpc_run_erm_close - the program closed its last fd of c: regions no
 * COPY uses are deregistered now (their peer sees them revoked). */
void rrpc_run_erm_close(rrpc_run_conn *c);

typedef struct rrpc_run_erm_counters {
  uint64_t regs, deregs;          /* REG_MR / DEREG_MR that succeeded */
  uint64_t copies, copy_bytes;    /* COPYs started */
  uint64_t copies_failed;         /* ... that completed with an error */
  uint64_t remote_compl;          /* REMOTE completions queued for the owner */
  uint64_t compl_dropped;         /* REMOTE completions dropped: the queue was full */
  uint64_t refused;               /* calls refused with an errno (malformed, unknown memid, ...) */
} rrpc_run_erm_counters;
void rrpc_run_erm_counters_get(rrpc_run_erm_counters *out);

#endif /* RRPC_PRELOAD_ERM_H */
