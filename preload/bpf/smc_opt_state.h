/* preload/bpf/smc_opt_state.h - the per-socket state the sock_ops program
 * (smc_opt.bpf.c) and its loader (smc_opt.c) share through the
 * rrpc_smcopt_sk socket-storage map, keyed by the socket's fd in user space. */
#ifndef RRPC_PRELOAD_BPF_SMC_OPT_STATE_H
#define RRPC_PRELOAD_BPF_SMC_OPT_STATE_H

#define RRPC_SMCOPT_LEN 6 /* kind 254, length, e2 d4 c3 d9 */

struct rrpc_smcopt_state {
  unsigned char marked;  /* user space: this socket's SYN / SYN-ACK carries the option */
  unsigned char seen;    /* the program: the handshake completed and was looked at */
  unsigned char offered; /* the program: the peer's SYN or SYN-ACK carried it */
  unsigned char pad;
};

#endif /* RRPC_PRELOAD_BPF_SMC_OPT_STATE_H */
