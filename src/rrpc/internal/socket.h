/* internal/socket.h - private to the rrpc core: creating sockets and the
 * owner's view of one (what a channel connection or a server connection
 * needs). Transports see the socket through rrpc/transport.h only. */
#ifndef RRPC_INTERNAL_SOCKET_H
#define RRPC_INTERNAL_SOCKET_H

#include <stddef.h>
#include <sys/socket.h>

#include "rrpc/transport.h"

/* What the owner of a socket hears. Both run on the socket's loop thread. */
typedef struct rrpc__socket_handler {
  /* on_data - the read buffer grew: cut and handle whole messages, leave
   * the rest. Return 0, or a negative code to fail the socket. */
  int (*on_data)(void *owner, rrpc__socket *s, rrpc_iobuf *rbuf);
  /* on_close - the socket failed with `code`; runs exactly once. After it
   * returns, on_data is never called again. */
  void (*on_close)(void *owner, rrpc__socket *s, int code);
} rrpc__socket_handler;

/* rrpc__socket_create - wrap a connected TCP `fd` (ownership moves to the
 * socket, even on error) that will be driven by `loop` with transport `ops`.
 * The socket starts itself on the loop thread (watch the fd, ops->start);
 * writes issued before the transport is ready are queued. *out holds one
 * reference for the caller (the owner); `h` and `owner` are borrowed until
 * on_close has run. 0 or -ENOMEM. Any thread. */
int rrpc__socket_create(rrpc__loop *loop, int fd, int is_client, const rrpc_transport_ops *ops,
                        const rrpc__socket_handler *h, void *owner, rrpc__socket **out);

/* rrpc__socket_connect - a client socket to `sa` (`salen` bytes; AF_INET,
 * AF_INET6 or AF_UNIX) whose stream connect runs on
 * `loop`, non-blocking: each attempt is bounded by `timeout_ms`, up to
 * `attempts` (>= 1) attempts with a short doubling backoff between them.
 * Returns at once; writes queue until the transport is ready. If every
 * attempt fails, the socket fails with the last attempt's code
 * (-ECONNREFUSED, -ETIMEDOUT, ...) and rrpc__socket_connected stays 0.
 * Otherwise as rrpc__socket_create. 0 or -ENOMEM. Any thread. */
int rrpc__socket_connect(rrpc__loop *loop, const struct sockaddr *sa, socklen_t salen, int timeout_ms, int attempts,
                         const rrpc_transport_ops *ops, const rrpc__socket_handler *h, void *owner,
                         rrpc__socket **out);

/* rrpc__socket_connected - 1 once the TCP connection is established (at
 * once for rrpc__socket_create). Any thread. */
int rrpc__socket_connected(const rrpc__socket *s);

/* rrpc__socket_write - MOVE all of `msg` to the socket's write path (msg is
 * left empty). Messages keep their order per socket. The first writer writes
 * on its own thread; concurrent writers queue behind it. 0, or -RRPC_ECLOSE
 * if the socket has failed (msg is then emptied too). Any thread; the caller
 * must hold a reference. */
int rrpc__socket_write(rrpc__socket *s, rrpc_iobuf *msg);

/* rrpc__socket_write_response - rrpc__socket_write for a server's response.
 * On a pool thread that defers writes (rrpc__worker_self) while more of the
 * connection's requests are in handlers, the first such response takes the
 * free write token and the thread keeps it: its run of tasks gathers its
 * responses to this connection (others' queue behind them) and writes them
 * in one go when it finds the pool's queue empty - or sooner, within the
 * pool's flush bound, if a handler holds it up (worker_pool.h). Messages
 * are not reordered against other writes made after them. Elsewhere, and
 * for a lone response, the same as rrpc__socket_write. */
int rrpc__socket_write_response(rrpc__socket *s, rrpc_iobuf *msg);

/* rrpc__socket_pack_fn - append one message to `out`, which may hold bytes
 * already (append only; leave those as they are): 0, or a negative code
 * with `out` as it was. */
typedef int (*rrpc__socket_pack_fn)(void *ctx, rrpc_iobuf *out);
/* rrpc__socket_write_packed - the message `pack` makes, written as
 * rrpc__socket_write_response (response != 0) or rrpc__socket_write would
 * write it, with the same order and limits. When this thread holds the
 * socket's deferred flush (its loop's round, a pool thread's run) the
 * message is packed straight behind the bytes pending there: a small frame
 * then shares their last block instead of a block of its own, and no iobuf
 * is made and moved. Elsewhere it is packed into an iobuf of its own and
 * written. pack's error is returned as is, nothing written; the caller
 * that must tell it from a write's error notes it in ctx. */
int rrpc__socket_write_packed(rrpc__socket *s, int response, rrpc__socket_pack_fn pack, void *ctx);
/* rrpc__socket_pack_held - on the socket's loop thread, where its round
 * holds the socket's deferred flush or takes the free token for it now:
 * the message `pack` makes goes straight into the pending output, counted,
 * and 0 with *mark where it starts. Those bytes leave no sooner than the
 * round's end, so until this thread returns to its loop
 * rrpc__socket_unpack(s, mark) can still take them back (a call that could
 * not be enrolled after all). Off the loop or while another thread holds
 * the token: 1; when pack fails or the limits refuse it: that negative
 * code. Either way nothing is left behind (write the message the usual
 * way, which meets the same error). */
int rrpc__socket_pack_held(rrpc__socket *s, rrpc__socket_pack_fn pack, void *ctx, size_t *mark);
void rrpc__socket_unpack(rrpc__socket *s, size_t mark);

/* rrpc__socket_write fails with -RRPC_EOVERCROWDED (msg emptied, nothing
 * queued) when the socket already has bytes queued and this message would
 * take them past socket_max_unwritten_bytes, or the process past
 * max_unwritten_bytes (rrpc/limits.h). */

/* rrpc__socket_pause_if_congested - back-pressure for an owner that reads
 * requests and writes responses: if more than half of
 * socket_max_unwritten_bytes is queued, or socket_max_pending_requests are
 * read and not answered, stop reading and return 1 (the owner should leave
 * the rest of the read buffer for later); reading resumes and on_data runs
 * again once the queue is under a quarter and the pending requests under
 * half. Else 0. Loop thread (from on_data). */
int rrpc__socket_pause_if_congested(rrpc__socket *s);
/* rrpc__socket_request_begin / _end - a request read from the socket was
 * handed on / answered (or dropped). Any thread. begin returns how many
 * were pending before it, end how many are left after it (sequentially
 * consistent: an owner can count its connections with requests pending,
 * one step per 0 -> 1 and 1 -> 0, instead of a step per request). */
int rrpc__socket_request_begin(rrpc__socket *s);
int rrpc__socket_request_end(rrpc__socket *s);

/* rrpc__socket_hold_read - for an owner that forwards what it reads to a
 * consumer of its own (the rrpc-run relay writes it to a local socket):
 * hold 1 stops reading while that consumer is full (an RDMA transport stops
 * consuming its ring, so the peer's window closes); hold 0 goes on, and
 * on_data runs again with what was held back. The hold is the owner's:
 * the write queue draining does not end it (as it ends a congestion pause).
 * 0 or a negative code from epoll_ctl. Loop thread. */
int rrpc__socket_hold_read(rrpc__socket *s, int hold);

/* rrpc__socket_unwritten - bytes queued and not yet handed to the wire.
 * Any thread. */
size_t rrpc__socket_unwritten(const rrpc__socket *s);

/* rrpc__socket_last_active_us - rrpc__now_us() of the last bytes read or
 * written (or of creation). Any thread. */
uint64_t rrpc__socket_last_active_us(const rrpc__socket *s);

/* rrpc__socket_read_us - inside the handler's on_data: the rrpc__now_us()
 * time the read being handed over was delivered (the clock read that also
 * stamps the socket's activity), so an owner needs no clock read of its own
 * to tell when its messages arrived. Loop thread only. */
uint64_t rrpc__socket_read_us(const rrpc__socket *s);

/* rrpc__socket_finish_writes - nothing more will be written or read: once
 * what is queued has gone to the kernel, shut the TCP connection down both
 * ways (the peer gets the data, then FIN; our read side sees EOF, so the
 * socket fails and closes as usual). A write failing the socket instead
 * would drop a response still queued for the loop's flush. TCP
 * connections only. Any thread. */
void rrpc__socket_finish_writes(rrpc__socket *s);

/* rrpc__socket_peer_cstr / rrpc__socket_local_cstr - the strings
 * peer_str / local_str copy: set when the connection came up, never
 * written after, NUL-terminated within their 64 bytes; valid while the
 * caller holds a reference. */
const char *rrpc__socket_peer_cstr(const rrpc__socket *s);
const char *rrpc__socket_local_cstr(const rrpc__socket *s);
int rrpc__socket_is_rdma(const rrpc__socket *s);

/* ---- one attachment: per-connection state of a layer above the owner ------ */
/* The remote-memory link (src/rrpc/remote/link.c) hangs here, so both a
 * channel's and a server's connections carry one without either knowing. */
typedef struct rrpc__socket_ext_ops {
  /* The socket failed (loop thread, before the owner's on_close). */
  void (*on_close)(void *ext, rrpc__socket *s, int code);
  /* The socket's memory goes (last reference). */
  void (*release)(void *ext);
} rrpc__socket_ext_ops;
/* rrpc__socket_ext - the attachment, or NULL. Any thread. */
void *rrpc__socket_ext(const rrpc__socket *s);
/* rrpc__socket_ext_install - attach ext unless one is there: returns the
 * attachment that is there now (ext, or the earlier one: the caller then
 * frees its own). Any thread. */
void *rrpc__socket_ext_install(rrpc__socket *s, void *ext, const rrpc__socket_ext_ops *ops);

/* ---- figures for the builtin pages ----------------------------------------- */
typedef struct rrpc__socket_stats {
  uint64_t bytes_in, bytes_out; /* bytes delivered to the owner / sent (left the write queue) */
  uint64_t created_us;          /* rrpc__now_us clock */
  uint32_t fallback_code;       /* SMC decline code if RDMA fell back, else 0 */
  int is_client;
  int failed;                   /* 0 or the first failure code */
  rrpc__loop *loop;
} rrpc__socket_stats;
/* Any thread; the caller holds a reference. */
void rrpc__socket_get_stats(const rrpc__socket *s, rrpc__socket_stats *out);
/* rrpc__socket_facts_async - fill *out (zeroed here) with the transport's
 * facts on the socket's loop thread, then call done(arg) there. *out must
 * stay valid until done runs. The socket is referenced meanwhile. 0, or
 * -ENOMEM / -ESHUTDOWN (done will not run). Any thread. */
int rrpc__socket_facts_async(rrpc__socket *s, rrpc__conn_facts *out, void (*done)(void *arg), void *arg);

#endif /* RRPC_INTERNAL_SOCKET_H */
