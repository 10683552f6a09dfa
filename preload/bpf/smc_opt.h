/* preload/bpf/smc_opt.h - SMC-R's TCP option (kind 254, length 6, the
 * eyecatcher e2 d4 c3 d9) in the SYN and SYN-ACK of rrpc-run's sockets,
 * written and read by an eBPF sock_ops program (docs/rrpc-run-negotiation.md).
 *
 * The program runs for every TCP socket of the process's cgroup v2 but acts
 * only on sockets marked here: a marked client's SYN carries the option; a
 * marked listener answers with it in its SYN-ACK only when the client's SYN
 * had it (the kernel's own SMC rule); both ends record what the peer sent. */
#ifndef RRPC_PRELOAD_BPF_SMC_OPT_H
#define RRPC_PRELOAD_BPF_SMC_OPT_H

#ifdef __cplusplus
extern "C" {
#endif

/* Load and attach the sock_ops program once per process (later calls
 * return the first call's result). 0, or a negative code: -EPERM without
 * CAP_BPF/CAP_NET_ADMIN, -ENOSYS when built without libbpf or the kernel
 * lacks BTF or cgroup v2, another -errno from the kernel. [thread-safe] */
int rrpc_smcopt_enable(void);
/* Mark socket `fd` (a TCP socket before connect(), or before listen()) as
 * one whose SYN / SYN-ACK carries the option. 0 or a negative code
 * (-ENOSYS/-EPERM... when not enabled, -EBADF, -EISCONN when too late). */
int rrpc_smcopt_mark(int fd);
/* After connect() completed or accept() returned: 1 if the peer's SYN
 * (server side) or SYN-ACK (client side) carried the SMC option, 0 if not,
 * negative if unknown (not enabled, or `fd` was not marked). */
int rrpc_smcopt_peer_offered(int fd);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_PRELOAD_BPF_SMC_OPT_H */
