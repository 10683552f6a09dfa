/* internal/accept_guard.h - private to the server: what an accept loop does
 * when the process is out of file descriptors. */
#ifndef RRPC_INTERNAL_ACCEPT_GUARD_H
#define RRPC_INTERNAL_ACCEPT_GUARD_H

#include <stdint.h>

/* One per listener. reserve_fd is a descriptor held back for the moment
 * the process runs out (-1 while it is spent). */
typedef struct rrpc__accept_guard {
  int reserve_fd;
  uint64_t last_log_us;
  uint64_t unlogged; /* shed connections since the last log line */
} rrpc__accept_guard;

/* rrpc__accept_guard_init / _destroy - take / give back the reserve fd.
 * init cannot fail: without a reserve the guard only logs and reports. */
void rrpc__accept_guard_init(rrpc__accept_guard *g);
void rrpc__accept_guard_destroy(rrpc__accept_guard *g);

/* rrpc__accept_guard_shed - accept4 on `listen_fd` failed with EMFILE or
 * ENFILE (`err`). The pending connection would keep a level-triggered
 * listener readable for ever, so it is taken with the reserve fd and closed
 * at once (the client sees the connection end instead of hanging), and the
 * reserve is taken again. Logs at most once a second (with how many were
 * shed). Returns 1 if a connection was shed (accepting may go on), 0 if
 * none was pending, or -1 when there is no reserve to shed with: the caller
 * must then stop watching the listener for a while. Listener's loop
 * thread. */
int rrpc__accept_guard_shed(rrpc__accept_guard *g, int listen_fd, int port, int err);

#endif /* RRPC_INTERNAL_ACCEPT_GUARD_H */
