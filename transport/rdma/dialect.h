/* transport/rdma/dialect.h - private to the RDMA transport: the one table
 * through which the shared machinery (endpoint.c, handshake.c) reaches a
 * data-path dialect. Each dialect folder (imm/, brpc/, and cursor/ when it
 * comes) defines its entry; the shared part never includes a dialect's
 * header, and a dialect never includes another's, so a connection's dialect
 * is chosen here once, at setup, and nowhere else.
 *
 * A hook left NULL means "the shared CLC handshake does this": rrpc's imm
 * dialect is set up by handshake.c and endpoint.c themselves. */
#ifndef RRPC_TRANSPORT_RDMA_DIALECT_H
#define RRPC_TRANSPORT_RDMA_DIALECT_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/transport.h"
#include "transport/rdma/device.h"

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
};

/* The entries, one per dialect folder. */
extern const struct rrpc__rdma_dialect rrpc__rdma_dialect_imm;  /* imm/ */
extern const struct rrpc__rdma_dialect rrpc__rdma_dialect_brpc; /* brpc/ */

/* The dialect of RRPC_RDMA_DIALECT_x (AUTO is IMM); NULL for one this build
 * does not have. */
const struct rrpc__rdma_dialect *rrpc__rdma_dialect_of(int dialect);
/* The dialect whose own hello the first bytes (buf, n) open; NULL: none
 * (CLC or plain TCP, for the shared handshake to tell apart). */
const struct rrpc__rdma_dialect *rrpc__rdma_dialect_by_hello(const uint8_t *buf, size_t n);

#endif /* RRPC_TRANSPORT_RDMA_DIALECT_H */
