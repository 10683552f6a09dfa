/* transport/rdma/rdma_transport.h - what the rest of rrpc may ask of the RDMA
 * transport plugin, whether or not it is compiled in (transport/rdma/none/
 * answers -RRPC_ENORDMA). No verbs types here. */
#ifndef RRPC_TRANSPORT_RDMA_RDMA_TRANSPORT_H
#define RRPC_TRANSPORT_RDMA_RDMA_TRANSPORT_H

#include "rrpc/transport.h"

/* rrpc__rdma_transport_get - the RDMA ops (they fall back to TCP by
 * themselves). 0 or -RRPC_ENORDMA. */
int rrpc__rdma_transport_get(const rrpc_transport_ops **out);
/* The same, for clients of a channel that names its dialect
 * (RRPC_RDMA_DIALECT_*; AUTO = the process's --rdma_dialect). */
int rrpc__rdma_transport_get_dialect(int dialect, const rrpc_transport_ops **out);

#endif /* RRPC_TRANSPORT_RDMA_RDMA_TRANSPORT_H */
