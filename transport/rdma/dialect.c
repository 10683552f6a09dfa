/* dialect.c - the dialect table (dialect.h): indexed by the public
 * RRPC_RDMA_DIALECT_x numbers, so adding a dialect is one entry here and
 * its folder. */
#include "transport/rdma/dialect.h"

#include "rrpc/rdma.h"

static const struct rrpc__rdma_dialect *const g_dialects[] = {
    [RRPC_RDMA_DIALECT_IMM] = &rrpc__rdma_dialect_imm,
    [RRPC_RDMA_DIALECT_CURSOR] = &rrpc__rdma_dialect_cursor,
    [RRPC_RDMA_DIALECT_BRPC] = &rrpc__rdma_dialect_brpc,
};
enum { NDIALECTS = (int)(sizeof g_dialects / sizeof g_dialects[0]) };

const struct rrpc__rdma_dialect *rrpc__rdma_dialect_of(int dialect) {
  if (dialect == RRPC_RDMA_DIALECT_AUTO) dialect = RRPC_RDMA_DIALECT_IMM;
  if (dialect < 0 || dialect >= NDIALECTS) return NULL;
  return g_dialects[dialect];
}

const struct rrpc__rdma_dialect *rrpc__rdma_dialect_by_hello(const uint8_t *buf, size_t n) {
  for (int i = 0; i < NDIALECTS; i++) {
    const struct rrpc__rdma_dialect *d = g_dialects[i];
    if (d != NULL && d->hello_is != NULL && d->hello_is(buf, n)) return d;
  }
  return NULL;
}

void rrpc__rdma_dialect_mem_stats(struct rrpc__dialect_mem_stats *out) {
  *out = (struct rrpc__dialect_mem_stats){0};
  for (int i = 0; i < NDIALECTS; i++)
    if (g_dialects[i] != NULL && g_dialects[i]->mem_stats != NULL) g_dialects[i]->mem_stats(out);
}
