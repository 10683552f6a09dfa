/* rrpc/transport.h - the contract between the rrpc core and a transport
 * (TCP, RDMA). Private to rrpc and its transports; applications never see it.
 *
 * A transport is one const table of operations (in the spirit of a
 * libibverbs provider). The core owns the socket: its TCP fd (every
 * connection starts as TCP), its loop, its read buffer and its write queue.
 * The transport owns whatever it hangs on rrpc__socket_set_tstate and moves
 * bytes: it appends what it receives to the read buffer and writes what the
 * core hands it. The socket never knows which transport it holds.
 *
 * Threads: start, on_fd_event and close run on the socket's loop thread.
 * write runs on whichever thread holds the socket's write token (any
 * thread, one at a time). A transport that needs its own events (a
 * completion channel) registers watchers on rrpc__socket_loop(s).
 */
#ifndef RRPC_TRANSPORT_H
#define RRPC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/internal/iobuf.h"
#include "rrpc/internal/loop.h"

typedef struct rrpc__socket rrpc__socket;

/* What a transport tells about one connection, for the builtin pages
 * (/connections, /rdma) and rrpc_stat. Zero = unknown or not applicable. */
typedef struct rrpc__conn_facts {
  char transport[16];   /* ops name, filled by the core */
  int is_rdma;          /* RDMA carries the data now */
  char state[24];       /* handshake/life state */
  char device[64];
  int port;
  int gid_index;        /* -1 = none */
  char gid[48];
  uint32_t qpn, peer_qpn;
  uint32_t ring_size;      /* my receive ring, bytes */
  uint32_t peer_ring_size; /* the peer's ring I write into */
  uint64_t window_free;    /* bytes the peer's ring can take now */
  uint32_t credits;        /* receive WRs of the peer I may still consume */
  uint32_t credits_max;
  uint32_t sq_size, rq_size;
  uint64_t sq_used;        /* WRs posted and not known complete */
  int write_blocked;       /* a writer waits for window or credits */
  uint64_t zc_held;        /* ring bytes held by zero-copy slices */
  char link[8];            /* the device's link: "iWARP", "RoCE", "IB" ("" without RDMA) */
  int cm;                  /* the QP was connected through rdma_cm (not by hand) */
  char dialect[8];         /* RDMA data-path dialect: "imm", "cursor", "brpc"; "" = none */
  /* The cursor dialect (SMC-R cursors, shown as wrap:count like smc-tools):
   * mine into the peer's ring and of my own ring, the peer's as last told,
   * and the CDC flag bytes (producer flags, connection state) as last sent
   * and received. */
  int cursor;
  uint16_t prod_wrap, cons_wrap, peer_prod_wrap, peer_cons_wrap;
  uint32_t prod_count, cons_count, peer_prod_count, peer_cons_count;
  uint8_t tx_prod_flags, tx_conn_flags, rx_prod_flags, rx_conn_flags;
} rrpc__conn_facts;

typedef struct rrpc_transport_ops {
  const char *name;
  /* start - the TCP connection is up (connected or accepted) and watched
   * for readability. Run any handshake, then call rrpc__socket_ready(s, 0)
   * - or rrpc__socket_fail(s, code). Until ready, the core queues writes.
   * Returns 0 or a negative code (the socket then fails). */
  int (*start)(rrpc__socket *s, int is_client);
  /* write - send from the front of `data`, popping what was handed to the
   * wire. Return 0 when all of it went, -EAGAIN when it must wait (the
   * transport then calls rrpc__socket_resume_write(s) later, from any
   * thread), or a negative error (the socket fails). */
  int (*write)(rrpc__socket *s, rrpc_iobuf *data);
  /* on_fd_event - the TCP fd has `events` (EPOLLIN/OUT/HUP/ERR). Append
   * received bytes to rrpc__socket_rbuf(s) and call rrpc__socket_deliver;
   * on EOF or error call rrpc__socket_fail. */
  void (*on_fd_event)(rrpc__socket *s, uint32_t events);
  /* on_fail - optional: the socket just failed with `code` (loop thread,
   * before the owner hears of it). Tell the peer (e.g. a close message) and
   * stop producing events; state is still released in close. */
  void (*on_fail)(rrpc__socket *s, int code);
  /* close - release transport state. Called once, on the loop thread,
   * when the last reference to the socket drops; the fd is still open. */
  void (*close)(rrpc__socket *s);
  /* describe - one line for tools/logs ("tcp", "rdma qpn=.. gid=.."). */
  int (*describe)(const rrpc__socket *s, char *buf, size_t len);
  /* is_rdma - 1 if the socket carries data over RDMA right now. */
  int (*is_rdma)(const rrpc__socket *s);
  /* facts - optional: fill what applies of *out (zeroed, transport name
   * set by the core). Loop thread only; must not block. */
  void (*facts)(const rrpc__socket *s, rrpc__conn_facts *out);
  /* on_read_resumed - optional: reading had paused (the owner's output was
   * congested, see rrpc__socket_read_paused) and goes on now. Append what
   * was held back to the read buffer; the core delivers it right after.
   * Loop thread. */
  void (*on_read_resumed)(rrpc__socket *s);
} rrpc_transport_ops;

/* ---- transport selection (transport/registry.c) -------------------------- */
/* rrpc__transport_pick - ops for a new connection. want_rdma: 0 = TCP,
 * 1 = RDMA (with fallback to TCP inside the RDMA transport) in the
 * process's dialect, 1 + RRPC_RDMA_DIALECT_x = RDMA in that dialect
 * (rrpc__transport_rdma_want). 0, or
 * -RRPC_ENORDMA when RDMA is asked for in a build without it. */
int rrpc__transport_pick(int want_rdma, const rrpc_transport_ops **out);
/* want_rdma for a channel's use_rdma and rdma_dialect options. */
static inline int rrpc__transport_rdma_want(int use_rdma, int dialect) {
  return !use_rdma ? 0 : dialect > 0 ? 1 + dialect : 1;
}
/* rrpc__transport_tcp - the plain TCP ops (for an RDMA transport that
 * falls back after its handshake). */
const rrpc_transport_ops *rrpc__transport_tcp(void);
/* rrpc__transport_tcp_default - TCP for new connections: a server socket
 * first answers an SMC-R CLC Proposal with a Decline. */
const rrpc_transport_ops *rrpc__transport_tcp_default(void);
/* rrpc__transport_tcp_rdma_server - the same for a server that offers RDMA
 * but serves this connection over TCP: a peer's refused RDMA request counts
 * in rrpc_rdma_fallbacks_total (on a plain server it does not). */
const rrpc_transport_ops *rrpc__transport_tcp_rdma_server(void);

/* ---- facts for the builtin pages ----------------------------------------- */
/* rrpc__transport_fallback_text - short text for an SMC decline code
 * ("no SMC device"); never NULL. Any thread. */
const char *rrpc__transport_fallback_text(uint32_t decline_code);

/* rrpc__rdma_note_fallback - one connection whose peer asked for RDMA goes
 * on over TCP: counted in rrpc_rdma_stats (rrpc_rdma_fallbacks_total) and
 * logged once per reason. Only for peers that asked (a CLC message, a brpc
 * hello, an RDMA client's own fallback): HTTP and plain baidu_std clients
 * of a server that offers RDMA did not. Nothing in a build without RDMA.
 * Any thread. */
void rrpc__rdma_note_fallback(uint32_t decline_code);

/* The RDMA runtime as /rdma shows it. */
typedef struct rrpc__rdma_runtime_facts {
  int device_open;       /* 0 until a device was opened (nothing below is set) */
  char device[64];
  int port;
  char link_layer[16];   /* "Ethernet" (RoCE) or "InfiniBand" */
  int active_mtu;        /* bytes */
  uint32_t max_inline;
  uint64_t pool_bytes;     /* registered pool now */
  uint64_t pool_max_bytes; /* its cap */
  int sq_size, rq_size;
  uint64_t ring_size;
  int use_polling, fallback, recv_zerocopy, handshake_timeout_ms;
} rrpc__rdma_runtime_facts;
/* rrpc__rdma_runtime_facts_get - never opens a device or blocks (a device
 * not yet opened reports device_open = 0). 0 or -RRPC_ENORDMA. Any thread. */
int rrpc__rdma_runtime_facts_get(rrpc__rdma_runtime_facts *out);

/* ---- what the core offers transports ------------------------------------- */
struct sockaddr_storage;
int rrpc__socket_fd(const rrpc__socket *s);
rrpc__loop *rrpc__socket_loop(const rrpc__socket *s);
/* The read buffer: append received bytes here (loop thread only). */
rrpc_iobuf *rrpc__socket_rbuf(rrpc__socket *s);
/* Transport-private state: owned by the transport, freed in its close. */
void rrpc__socket_set_tstate(rrpc__socket *s, void *state);
void *rrpc__socket_tstate(const rrpc__socket *s);
/* The socket's transport ops now (a fallback switches them). */
const rrpc_transport_ops *rrpc__socket_ops(const rrpc__socket *s);
/* rrpc__socket_switch_transport - replace the ops (RDMA -> TCP fallback).
 * Loop thread, before ready. The old transport's close is NOT called: it
 * must release its state itself before switching. */
void rrpc__socket_switch_transport(rrpc__socket *s, const rrpc_transport_ops *ops);
/* rrpc__socket_reconnect - a client socket whose transport has not called
 * ready yet drops its TCP connection and connects again to the same peer
 * (one attempt, the socket's connect timeout), then starts with `ops`;
 * queued writes wait for that transport's ready as before. For a server
 * that closed the connection during an RDMA handshake it does not know.
 * Loop thread. 0 (a failure later fails the socket), or a negative code. */
int rrpc__socket_reconnect(rrpc__socket *s, const rrpc_transport_ops *ops);
/* The peer's address (for a client, the one it connected to). */
void rrpc__socket_peer_addr(const rrpc__socket *s, struct sockaddr_storage *out);
/* Watch the TCP fd for EPOLLOUT as well (TCP transport's partial writes).
 * Any thread. */
int rrpc__socket_want_writable(rrpc__socket *s, int on);
/* rrpc__socket_ready - the transport can carry messages (code 0): queued
 * writes start. A negative code fails the socket. Loop thread. */
void rrpc__socket_ready(rrpc__socket *s, int code);
/* rrpc__socket_deliver - bytes were appended to the read buffer: let the
 * protocol cut messages. Loop thread. */
void rrpc__socket_deliver(rrpc__socket *s);
/* rrpc__socket_resume_write - a write that returned -EAGAIN may go on.
 * Any thread. */
void rrpc__socket_resume_write(rrpc__socket *s);
/* rrpc__socket_fail - the connection is broken: every pending call on it
 * fails once with `code`. Any thread; idempotent (the first code wins). */
void rrpc__socket_fail(rrpc__socket *s, int code);
/* rrpc__socket_read_paused - 1 while the owner does not want more input
 * (its output is congested): a transport that receives without the fd
 * (RDMA) stops consuming until on_read_resumed. Any thread. */
int rrpc__socket_read_paused(const rrpc__socket *s);
/* rrpc__socket_failed - nonzero once the socket failed (the first code). */
int rrpc__socket_failed(const rrpc__socket *s);
/* rrpc__socket_peer_str - "ip:port" of the peer (for logs). Any thread. */
void rrpc__socket_peer_str(const rrpc__socket *s, char *buf, size_t len);
/* rrpc__socket_local_str - "ip:port" of our end ("" before a client socket
 * is connected). Its loop thread, or any thread once connected. */
void rrpc__socket_local_str(const rrpc__socket *s, char buf[64]);
/* rrpc__socket_describe - the transport's one-line description. */
int rrpc__socket_describe(const rrpc__socket *s, char *buf, size_t len);
/* rrpc__socket_note_fallback - RDMA could not be used on this connection
 * and it goes on (or fails) over TCP; `decline_code` is the SMC decline
 * code, shown on /connections and counted by code. Any thread. */
void rrpc__socket_note_fallback(rrpc__socket *s, uint32_t decline_code);
/* rrpc__socket_is_client / local and peer addresses (for GID choice). */
int rrpc__socket_is_client(const rrpc__socket *s);
struct sockaddr_storage;
int rrpc__socket_local_addr(const rrpc__socket *s, struct sockaddr_storage *out);

/* A refcount so a transport can keep a socket alive across async work (a
 * completion, a timer). Any thread. */
void rrpc__socket_ref(rrpc__socket *s);
void rrpc__socket_unref(rrpc__socket *s);

#endif /* RRPC_TRANSPORT_H */
