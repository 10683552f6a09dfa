/* registry.c - picks the transport for a new connection from the options;
 * the one place where the core's "use_rdma" meets a transport plugin. */
#include "rrpc/transport.h"
#include "transport/rdma/rdma_transport.h"

int rrpc__transport_pick(int want_rdma, const rrpc_transport_ops **out) {
  if (want_rdma > 1) return rrpc__rdma_transport_get_dialect(want_rdma - 1, out);
  if (want_rdma) return rrpc__rdma_transport_get(out);
  *out = rrpc__transport_tcp_default();
  return 0;
}
