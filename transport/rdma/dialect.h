/* transport/rdma/dialect.h - private to the RDMA transport: the one table
 * through which the shared machinery (endpoint.c, handshake.c) reaches a
 * data-path dialect. Each dialect folder (imm/, brpc/, and cursor/ when it
 * comes) defines its entry; the shared part never includes a dialect's
 * header, and a dialect never includes another's, so a connection's dialect
 * is chosen here once, at setup, and nowhere else.
 *
 * Setup: a hook left NULL means "the shared CLC handshake does this": rrpc's
 * imm dialect is set up by handshake.c and endpoint.c themselves.
 *
 * Data path: a dialect that rides on the shared CLC handshake (imm, cursor)
 * fills every `dp_` hook; endpoint.c reaches the connection's data path
 * through them only, via the endpoint's `dl` (chosen by the handshake). A
 * dialect with its own endpoint (brpc) leaves them NULL. Locking as in
 * endpoint.h: "_locked" hooks run under the endpoint's mu. */
#ifndef RRPC_TRANSPORT_RDMA_DIALECT_H
#define RRPC_TRANSPORT_RDMA_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/transport.h"
#include "transport/rdma/device.h"

struct ibv_wc;
struct rrpc__rdma_ep;
struct rrpc__dp_view;
struct rrpc__dialect_mem_stats;

struct rrpc__rdma_dialect {
  const char *name;
  /* Client: start a connection on a connected TCP socket with an open
   * device (switches the socket's transport). 0 or a negative code. */
  int (*client_start)(rrpc__socket *s, rrpc__rdma_dev *dev);
  /* Server: 1 if the first bytes on a connection (buf, n > 0) open this
   * dialect's own hello rather than CLC. */
  int (*hello_is)(const uint8_t *buf, size_t n);
  /* Server: take over a connection whose first bytes were this dialect's
   * hello (switches the socket's transport). Loop thread. */
  void (*server_take)(rrpc__socket *s, rrpc__rdma_dev *dev);

  /* ---- data path (CLC dialects) ---- */
  /* The transport's write op. Any thread. */
  int (*dp_write)(rrpc__socket *s, rrpc_iobuf *data);
  /* The QP just reached RTS with the peer's Accept/Confirm in ep->peer:
   * set up windows, bind what the peer may write. Loop thread. 0 or a
   * negative code (the handshake falls back). */
  int (*dp_connect)(struct rrpc__rdma_ep *ep);
  /* The connection came up (loop thread) / its verbs resources start to go
   * (any thread): timers and the like. */
  void (*dp_up)(struct rrpc__rdma_ep *ep);
  void (*dp_stop)(struct rrpc__rdma_ep *ep);
  /* Remote access the dialect granted beyond the ring's window ends, before
   * the QP is destroyed (background thread at teardown). */
  void (*dp_unbind)(struct rrpc__rdma_ep *ep);
  /* The endpoint's last reference went: free what the dialect kept. */
  void (*dp_free)(struct rrpc__rdma_ep *ep);
  /* The shared CQs' callbacks (cqs.h): one completion of this endpoint's
   * QP, then, once per poll, what it adds up to. Loop thread. */
  void (*dp_on_wc)(struct rrpc__rdma_ep *ep, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop);
  void (*dp_after)(struct rrpc__rdma_ep *ep);
  /* The socket reads again: hand it what was held back. Loop thread. */
  void (*dp_resume_read)(struct rrpc__rdma_ep *ep);
  /* Server: the first message over RDMA that tells the client the QP works
   * both ways. Under mu. */
  int (*dp_first_msg_locked)(struct rrpc__rdma_ep *ep);
  /* The connection closes (conn_flags: RRPC_CDC_CS_CLOSED or _ABNORMAL):
   * post the closing message once, now or when the send queue has room.
   * Under mu; the caller checked the QP is alive and nothing was sent. */
  void (*dp_close_locked)(struct rrpc__rdma_ep *ep, uint8_t conn_flags);
  /* 1 once nothing is left to wait for before the QP may go. Under mu. */
  int (*dp_close_done_locked)(const struct rrpc__rdma_ep *ep);
  /* The window and credit facts as one consistent copy (takes mu). */
  void (*dp_view)(struct rrpc__rdma_ep *ep, struct rrpc__dp_view *out);
  /* A connection that may use this dialect is being set up: warm up what
   * it takes memory from (the imm dialect's piece cache), at most
   * cache_bytes. May be NULL. Any thread; never blocks. */
  void (*dp_prefill)(rrpc__rdma_dev *dev, uint64_t cache_bytes);
  /* Add the process-wide memory it keeps outside connections. May be NULL. */
  void (*mem_stats)(struct rrpc__dialect_mem_stats *acc);
};

/* The entries, one per dialect folder. */
extern const struct rrpc__rdma_dialect rrpc__rdma_dialect_imm;  /* imm/ */
extern const struct rrpc__rdma_dialect rrpc__rdma_dialect_brpc; /* brpc/ */
extern const struct rrpc__rdma_dialect rrpc__rdma_dialect_cursor; /* cursor/ */

/* The dialect of RRPC_RDMA_DIALECT_x (AUTO is IMM); NULL for one this build
 * does not have. */
const struct rrpc__rdma_dialect *rrpc__rdma_dialect_of(int dialect);
/* The dialect whose own hello the first bytes (buf, n) open; NULL: none
 * (CLC or plain TCP, for the shared handshake to tell apart). */
const struct rrpc__rdma_dialect *rrpc__rdma_dialect_by_hello(const uint8_t *buf, size_t n);

/* Process-wide memory a dialect keeps outside connections (the imm
 * dialect's piece cache), for rrpc_rdma_get_stats. */
struct rrpc__dialect_mem_stats {
  uint64_t piece_cached_bytes, piece_used_bytes;
};
void rrpc__rdma_dialect_mem_stats(struct rrpc__dialect_mem_stats *out);

#endif /* RRPC_TRANSPORT_RDMA_DIALECT_H */
