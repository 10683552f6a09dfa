/* preload/relay.h - the rrpc-run relay: one intercepted TCP connection
 * carried by an rrpc socket (RDMA, or TCP after a CLC Decline), seen by the
 * application through an AF_UNIX stream socket on its own fd number.
 *
 * The application's fd number is taken over by one end of a socketpair (the
 * "app end"); the TCP socket moves to a hidden fd that the rrpc socket owns;
 * one rrpc loop thread per process relays bytes between the other end (the
 * "relay end") and the rrpc socket, in frames (frame.h), with back-pressure
 * both ways and never blocking. Every readiness and read/write call of the
 * application then works as the kernel does it for a stream socket. */
#ifndef RRPC_PRELOAD_RELAY_H
#define RRPC_PRELOAD_RELAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef struct rrpc_run_conn rrpc_run_conn;

/* Only fds below this are relayed (intercept.c's fd table; those at or
 * above stay plain TCP), so per-fd tables of the preload stop here. */
enum { RRPC_RUN_FD_TABLE = 1 << 16 };

/* The libc functions the preload replaces, as found behind it (dlsym
 * RTLD_NEXT): the relay calls these, never its own wrappers. */
typedef struct rrpc_run_libc {
  int (*close)(int);
  int (*dup3)(int, int, int);
  int (*connect)(int, const struct sockaddr *, socklen_t);
  int (*getsockopt)(int, int, int, void *, socklen_t *);
  int (*setsockopt)(int, int, int, const void *, socklen_t);
  int (*accept4)(int, struct sockaddr *, socklen_t *, int);
} rrpc_run_libc;
extern rrpc_run_libc rrpc_run_real;

/* rrpc_run_relay_adopt - carry TCP socket `fd` through rrpc. `connecting`:
 * a non-blocking connect to `peer` is in progress (the app end then turns
 * writable only once it is decided; getsockopt(SO_ERROR) on `fd` tells its
 * result through rrpc_run_conn_take_error). `app_flags` (O_NONBLOCK,
 * O_CLOEXEC) are kept on `fd`. On success `fd` names the app end and *out
 * holds a reference for the fd table. On failure `fd` is untouched (plain
 * TCP) and a negative code is returned. `reason_out` (may be NULL) gets a
 * static text on failure. Any thread but the relay's. */
int rrpc_run_relay_adopt(int fd, int is_client, int connecting, const struct sockaddr *peer,
                         socklen_t peer_len, int app_flags, rrpc_run_conn **out);

/* RRPC_RUN_RDMA: which selected connections are tried over RDMA at all. */
enum { RRPC_RUN_RDMA_AUTO, RRPC_RUN_RDMA_ON, RRPC_RUN_RDMA_OFF };
void rrpc_run_relay_set_rdma_mode(int mode);
/* rrpc_run_relay_rdma_usable - may this process carry a connection over
 * RDMA: auto, a usable device (opened on the first call; without one it
 * looks again at most once a second); on, always (the handshake's
 * fallback then happens inside the relay); off, never. A connection that
 * cannot go RDMA is not relayed. Any thread but the relay's; may block on
 * the first call (verbs queries). */
int rrpc_run_relay_rdma_usable(void);

/* rrpc_run_relay_loop - the relay's loop, started on first use; NULL if
 * it cannot start (no transport, no thread). Any thread. */
struct rrpc__loop;
struct rrpc__loop *rrpc_run_relay_loop(void);

/* rrpc_run_relay_set_peer_check - for a connect still in progress at
 * adoption: once it succeeds, `check(tcp_fd)` (eBPF mode: did the peer's
 * SYN-ACK offer SMC?) must say 1 for the connection to try RDMA; else the
 * relay carries it as plain TCP, bytes untouched. NULL: no check. */
void rrpc_run_relay_set_peer_check(int (*check)(int tcp_fd));

void rrpc_run_conn_ref(rrpc_run_conn *c);
void rrpc_run_conn_unref(rrpc_run_conn *c);

/* The TCP connection's addresses (the application sees these from
 * getsockname/getpeername). 0, or -ENOTCONN for the peer before a connect
 * succeeded. */
int rrpc_run_conn_addr(rrpc_run_conn *c, int peer, struct sockaddr *out, socklen_t *len);

/* rrpc_run_conn_take_error - the error of a failed non-blocking connect
 * (positive errno), reported once as getsockopt(SO_ERROR) does; 0 if none. */
int rrpc_run_conn_take_error(rrpc_run_conn *c);
/* rrpc_run_conn_connect_state - 0 connecting, 1 connected, -errno failed. */
int rrpc_run_conn_connect_state(rrpc_run_conn *c);

/* rrpc_run_conn_tcp_opt - getsockopt (set 0) or setsockopt (set 1) on the
 * hidden TCP socket, for options that belong to the TCP connection. -1 with
 * errno set like the call itself; ENOTCONN once the TCP socket is gone. */
int rrpc_run_conn_tcp_opt(rrpc_run_conn *c, int set, int level, int name, void *val, socklen_t *len);

/* ---- ERM's socket API (erm.h, preload/erm.c) ------------------------------- */
struct rrpc_run_erm;
typedef struct rrpc_remote_link rrpc_remote_link;
/* rrpc_run_conn_erm - the connection's ERM state, NULL until installed. */
struct rrpc_run_erm *rrpc_run_conn_erm(rrpc_run_conn *c);
/* rrpc_run_conn_erm_install - install e unless one is there; returns the
 * one installed now (e, or the earlier one: the caller then frees e). The
 * connection releases it (rrpc_run_erm_release) when it goes. */
struct rrpc_run_erm *rrpc_run_conn_erm_install(rrpc_run_conn *c, struct rrpc_run_erm *e);
void rrpc_run_erm_release(struct rrpc_run_erm *e);
/* rrpc_run_conn_remote_link - a handle to the remote-memory link of the
 * connection's rrpc socket, once the relay knows its peer frames (a server
 * waits for the client's hello; a client, for its handshake to end), at
 * most wait_ms. 0 (*out), -ENOPROTOOPT (the peer is not under rrpc-run or
 * the connection is plain TCP: ERM cannot be carried), -ENOTCONN (the
 * relay is over), -ETIMEDOUT. An application thread, never the relay's. */
int rrpc_run_conn_remote_link(rrpc_run_conn *c, long wait_ms, rrpc_remote_link **out);

/* ---- counters (rrpc_stat, RRPC_RUN_DEBUG) --------------------------------- */
typedef struct rrpc_run_counters {
  uint64_t relayed;      /* connections handed to the relay */
  uint64_t rdma;         /* ... that RDMA carried */
  uint64_t fallback;     /* ... that went on over TCP after the handshake */
  uint64_t plain;        /* connections left plain TCP by the policy */
  uint64_t adopt_failed; /* could not be relayed (left plain) */
  uint64_t bytes_up, bytes_down; /* application bytes sent / received */
  uint64_t live;         /* relays alive now */
  uint64_t handed_back;  /* selected by the policy, but the client's first bytes showed
                          * it plain before accept returned: never relayed */
} rrpc_run_counters;
void rrpc_run_counters_get(rrpc_run_counters *out);
void rrpc_run_count_plain(void);
/* A selected connection whose client showed itself plain before accept
 * returned: never relayed. */
void rrpc_run_count_handed_back(void);

/* rrpc_run_conns_format - one line per live relay into buf (for the stat
 * page): "fd local peer transport up down fallback". Returns the length it
 * wanted (like snprintf). */
size_t rrpc_run_conns_format(char *buf, size_t len);

/* rrpc_run_relay_set_debug - RRPC_RUN_DEBUG=1: one stderr line per decision. */
void rrpc_run_relay_set_debug(int on);
int rrpc_run_relay_debug(void);

/* rrpc_run_relay_after_fork - in a child: the relay thread did not survive
 * the fork; the parent's relay keeps serving the inherited sockets, the
 * child makes no new relays. */
void rrpc_run_relay_after_fork(void);

/* rrpc_run_relay_drain_at_exit - the process is exiting: wait until every
 * relay has handed what the program wrote to the transport (with
 * `want_eof`, also the "done writing" the caller caused by shutting the
 * program's sockets down), at most `linger_ms`. 0, or -ETIMEDOUT when some
 * bytes were still held at the bound. The exiting thread, not the relay's. */
int rrpc_run_relay_drain_at_exit(long linger_ms, int want_eof);
int rrpc_run_relay_forked(void);

#endif /* RRPC_PRELOAD_RELAY_H */
