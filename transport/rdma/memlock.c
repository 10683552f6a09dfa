/* memlock.c - the start-up check of RLIMIT_MEMLOCK (`ulimit -l`). Every
 * registration pins memory and counts against it unless the process holds
 * CAP_IPC_LOCK; a limit below what the pool's first region and one ring
 * need makes every registration fail with ENOMEM, which without this shows
 * only as connections quietly falling back to TCP. Said once, loudly. */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

#include "rrpc/internal/log.h"
#include "transport/rdma/memlock.h"

enum { CAP_IPC_LOCK_BIT = 14 };

/* CAP_IPC_LOCK in the effective set (/proc/self/status CapEff): the kernel
 * then does not apply RLIMIT_MEMLOCK to registrations. */
static int has_ipc_lock(void) {
  FILE *f = fopen("/proc/self/status", "re");
  if (f == NULL) return 0;
  char line[256];
  uint64_t eff = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "CapEff: %" SCNx64, &eff) == 1) break;
  fclose(f);
  return (eff >> CAP_IPC_LOCK_BIT) & 1;
}

void rrpc__rdma_memlock_check(size_t need) {
  static atomic_int said;
  struct rlimit rl;
  if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  if ((uint64_t)rl.rlim_cur >= need || has_ipc_lock()) return;
  if (atomic_exchange(&said, 1)) return;
  RRPC_LOG(ERROR,
           "rdma: RLIMIT_MEMLOCK (ulimit -l) is %" PRIu64 " KiB, below the %zu KiB that the pool's first "
           "region and one connection's ring pin: registrations will fail with ENOMEM and connections fall "
           "back to TCP. Raise it (ulimit -l unlimited, memlock in limits.conf, LimitMEMLOCK= in systemd) "
           "or lower --rdma_memory_pool_initial_size_mb / --rdma_ring_size",
           (uint64_t)rl.rlim_cur >> 10, need >> 10);
}
