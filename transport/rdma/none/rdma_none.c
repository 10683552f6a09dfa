/* rdma_none.c - the RDMA API in a build without RDMA: every entry point says
 * so with -RRPC_ENORDMA, whose text tells how to build with RDMA. */
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#include "transport/rdma/rdma_transport.h"
#include "rrpc/remote/carriage.h"

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

/* Remote memory: no one-sided carriage, every link carries frames. */
struct rrpc__rmt_car *rrpc__rmt_car_of(rrpc__socket *s) {
  (void)s;
  return NULL;
}
int rrpc__rmt_car_reg(struct rrpc__rmt_car *c, void *buf, size_t len, uint8_t rights,
                      struct rrpc__rmt_car_mr **out, uint32_t *rkey) {
  (void)c, (void)buf, (void)len, (void)rights, (void)out, (void)rkey;
  return -RRPC_ENORDMA;
}
void rrpc__rmt_car_revoke(struct rrpc__rmt_car_mr *m) { (void)m; }
void rrpc__rmt_car_free(struct rrpc__rmt_car_mr *m) { (void)m; }
uint32_t rrpc__rmt_car_lkey(const struct rrpc__rmt_car_mr *m) {
  (void)m;
  return 0;
}
int rrpc__rmt_car_post(struct rrpc__rmt_car *c, int is_write, void *local, uint32_t lkey, uint32_t len,
                       uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
  (void)c, (void)is_write, (void)local, (void)lkey, (void)len, (void)raddr, (void)rkey, (void)wr_id;
  return -RRPC_ENORDMA;
}
