/* budget.h - the process-wide cap on registered bytes (pool + rings +
 * slots); see budget.c. */
#ifndef RRPC_TRANSPORT_RDMA_BUDGET_H
#define RRPC_TRANSPORT_RDMA_BUDGET_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc__rdma_budget_take - reserve `n` bytes before registering them. 0, or
 * -RRPC_EPOOL when the cap would be passed (counted in
 * registered_cap_refused). Thread-safe. */
int rrpc__rdma_budget_take(size_t n);
/* rrpc__rdma_budget_give - return bytes taken once they are deregistered
 * (or were never registered). */
void rrpc__rdma_budget_give(size_t n);
/* rrpc__rdma_budget_taken - bytes reserved now. */
uint64_t rrpc__rdma_budget_taken(void);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_BUDGET_H */
