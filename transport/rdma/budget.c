/* budget.c - one process-wide cap on registered (pinned) bytes: the pool's
 * regions, connections' receive rings and their CDC slots together
 * (rrpc_rdma_options.registered_max_size_mb, --rdma_registered_max_size_mb).
 * The pool's own cap (pool_max_size_mb) still bounds the pool alone; this
 * one bounds what rings and slots add on top, which grows with the number
 * of connections. Every registration takes its bytes here first, so a race
 * between a growing pool and new connections cannot pass the cap. */
#include <stdatomic.h>
#include <stdint.h>

#include "rrpc/errors.h"
#include "transport/rdma/budget.h"
#include "transport/rdma/device.h"

static _Atomic uint64_t g_taken;

static uint64_t cap_bytes(void) { return (uint64_t)rrpc__rdma_options()->registered_max_size_mb << 20; }

int rrpc__rdma_budget_take(size_t n) {
  uint64_t cap = cap_bytes();
  uint64_t cur = atomic_load_explicit(&g_taken, memory_order_relaxed);
  do {
    if (n > cap || cur > cap - n) {
      rrpc__rdma_count(RRPC_RDMA_CNT_OVER_REGISTERED_CAP, 1);
      return -RRPC_EPOOL;
    }
  } while (!atomic_compare_exchange_weak_explicit(&g_taken, &cur, cur + n, memory_order_relaxed,
                                                  memory_order_relaxed));
  return 0;
}

void rrpc__rdma_budget_give(size_t n) { atomic_fetch_sub_explicit(&g_taken, n, memory_order_relaxed); }

uint64_t rrpc__rdma_budget_taken(void) { return atomic_load_explicit(&g_taken, memory_order_relaxed); }
