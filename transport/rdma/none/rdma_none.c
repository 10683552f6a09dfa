/* rdma_none.c - the RDMA API in a build without RDMA: every entry point says
 * so with -RRPC_ENORDMA, whose text tells how to build with RDMA. */
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#include "transport/rdma/rdma_transport.h"

int rrpc__rdma_transport_get(const rrpc_transport_ops **out) {
  *out = NULL;
  return -RRPC_ENORDMA;
}

int rrpc__rdma_transport_get_dialect(int dialect, const rrpc_transport_ops **out) {
  (void)dialect;
  return rrpc__rdma_transport_get(out);
}

void rrpc_rdma_options_init(rrpc_rdma_options *o) { memset(o, 0, sizeof *o); }
int rrpc_rdma_global_init(const rrpc_rdma_options *o) {
  (void)o;
  return -RRPC_ENORDMA;
}
int rrpc_rdma_available(void) { return 0; }
int rrpc_rdma_register_memory(void *addr, size_t len, void **region) {
  (void)addr;
  (void)len;
  *region = NULL;
  return -RRPC_ENORDMA;
}
int rrpc_rdma_deregister_memory(void *region) {
  (void)region;
  return -RRPC_ENORDMA;
}
int rrpc_rdma_get_stats(rrpc_rdma_stats *out) {
  memset(out, 0, sizeof *out);
  return -RRPC_ENORDMA;
}

void rrpc__rdma_note_fallback(uint32_t decline_code) { (void)decline_code; }

int rrpc__rdma_runtime_facts_get(rrpc__rdma_runtime_facts *out) {
  memset(out, 0, sizeof *out);
  return -RRPC_ENORDMA;
}
