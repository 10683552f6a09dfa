/* smc_opt.c - user-space side of the SMC option sock_ops program. This
 * build has no eBPF part yet: every call reports -ENOSYS, so the policy
 * falls back to peers mode. */
#include "preload/bpf/smc_opt.h"

#include <errno.h>

int rrpc_smcopt_enable(void) { return -ENOSYS; }

int rrpc_smcopt_mark(int fd) {
  (void)fd;
  return -ENOSYS;
}

int rrpc_smcopt_peer_offered(int fd) {
  (void)fd;
  return -ENOSYS;
}
