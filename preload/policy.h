/* preload/policy.h - which connections rrpc-run may try to carry over RDMA.
 *
 * Three environment variables, read once by rrpc_run_policy_parse():
 *
 *   RRPC_RUN_PEERS  the peers known to run rrpc-run too (peers mode), and
 *                   in eBPF mode an optional allow list. Comma-separated
 *                   entries: "10.99.0.1", "10.0.0.0/8", "10.99.0.1:6379",
 *                   "[::1]:80", "[fd00::/8]:80", "::1", "fd00::/8", ":5201",
 *                   a port may be a range "5201-5210". An entry's address is
 *                   the peer's address; its port is the service port (the
 *                   port connected to on a client, the local port of the
 *                   accepted connection on a server), so one value such as
 *                   ":6379" serves both ends.
 *   RRPC_RUN_ONLY   a selection like SMC's eBPF mode: ';'-separated keys,
 *                   each a comma-separated list, all keys given must match:
 *                   "addr=10.0.0.0/8,::1;port=6379,5201-5210;comm=redis-*".
 *                   addr is the peer's address, port the service port, comm
 *                   the process name (15 characters compared, as the kernel
 *                   keeps; a trailing '*' matches a prefix).
 *   RRPC_RUN_DEBUG  "1" prints per-connection decisions (the caller does).
 *   RRPC_RUN_MODE   "auto" (default): eBPF negotiation when
 *                   rrpc_smcopt_enable() succeeds, else peers mode; "ebpf":
 *                   eBPF or nothing (parse fails); "peers": never load eBPF.
 *
 * IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) match IPv4 entries and the
 * other way round: a dual-stack socket sees its IPv4 peers that way.
 *
 * [thread-compatible] a parsed policy is read-only: the query functions may
 * run from any thread at once. */
#ifndef RRPC_PRELOAD_POLICY_H
#define RRPC_PRELOAD_POLICY_H

#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_run_policy rrpc_run_policy;

/* Parse the variables above through `env` (getenv-like; tests pass their
 * own). 0 and *out set, or a negative code with *err set to a static
 * message naming the malformed variable (the preload then stays plain TCP
 * and says so). In "auto" and "ebpf" modes this loads the eBPF program
 * (rrpc_smcopt_enable). */
int rrpc_run_policy_parse(const char *(*env)(const char *name), rrpc_run_policy **out,
                          const char **err);
void rrpc_run_policy_free(rrpc_run_policy *p);

/* 1 if an outgoing connection to `peer` may try RDMA, else 0. In eBPF mode
 * "may try" means: mark the socket before connect(); RDMA is then tried
 * only if rrpc_smcopt_peer_offered() says 1. In peers mode the peer must be
 * listed in RRPC_RUN_PEERS. `comm` is the process name (NULL: unknown, which
 * no comm= selection matches). */
int rrpc_run_policy_client_may(const rrpc_run_policy *p, const struct sockaddr *peer,
                               socklen_t len, const char *comm);
/* 1 if a connection accepted on `local` from `peer` may try RDMA (both of
 * length `len` at most), else 0. */
int rrpc_run_policy_server_may(const rrpc_run_policy *p, const struct sockaddr *local,
                               const struct sockaddr *peer, socklen_t len, const char *comm);
int rrpc_run_policy_debug(const rrpc_run_policy *p); /* RRPC_RUN_DEBUG=1 */
/* "ebpf" or "peers": which negotiation is in force. */
const char *rrpc_run_policy_mode(const rrpc_run_policy *p);
/* One line saying the mode and why (e.g. that eBPF could not be loaded and
 * with what error), for the preload to print once. Static or owned by p. */
const char *rrpc_run_policy_note(const rrpc_run_policy *p);

/* For tests and the fuzzer: parse with `enable` in place of
 * rrpc_smcopt_enable (NULL: as if it returned -ENOSYS). */
int rrpc__run_policy_parse_ex(const char *(*env)(const char *name), int (*enable)(void),
                              rrpc_run_policy **out, const char **err);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_PRELOAD_POLICY_H */
