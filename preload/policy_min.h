/* preload/policy_min.h - the selection policy's interface as the contract
 * with preload/policy.h fixes it (/work/notes: names and meanings), for a
 * tree where preload/policy.{h,c} (eBPF negotiation, RRPC_RUN_ONLY) are not
 * merged yet. policy_min.c implements the peers mode only: RRPC_RUN_PEERS
 * and RRPC_RUN_DEBUG. The build uses it only while preload/policy.c is
 * absent. */
#ifndef RRPC_PRELOAD_POLICY_MIN_H
#define RRPC_PRELOAD_POLICY_MIN_H

#include <sys/socket.h>

typedef struct rrpc_run_policy rrpc_run_policy;
int rrpc_run_policy_parse(const char *(*env)(const char *name), rrpc_run_policy **out, const char **err);
void rrpc_run_policy_free(rrpc_run_policy *p);
int rrpc_run_policy_client_may(const rrpc_run_policy *p, const struct sockaddr *peer, socklen_t len,
                               const char *comm);
int rrpc_run_policy_server_may(const rrpc_run_policy *p, const struct sockaddr *local,
                               const struct sockaddr *peer, socklen_t len, const char *comm);
int rrpc_run_policy_debug(const rrpc_run_policy *p);
const char *rrpc_run_policy_mode(const rrpc_run_policy *p);

#endif /* RRPC_PRELOAD_POLICY_MIN_H */
