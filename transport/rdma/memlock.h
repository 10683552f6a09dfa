/* memlock.h - the start-up check of RLIMIT_MEMLOCK; see memlock.c. */
#ifndef RRPC_TRANSPORT_RDMA_MEMLOCK_H
#define RRPC_TRANSPORT_RDMA_MEMLOCK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc__rdma_memlock_check - log one ERROR, once per process, when
 * RLIMIT_MEMLOCK is below `need` bytes and the process lacks CAP_IPC_LOCK. */
void rrpc__rdma_memlock_check(size_t need);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_MEMLOCK_H */
