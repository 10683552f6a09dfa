/* rrpc/channel.h - calling methods of a remote server over baidu_std.
 *
 * A channel keeps one connection to its server (reconnecting when it breaks)
 * and multiplexes any number of calls on it, from any number of threads.
 * [thread-safe].
 */
#ifndef RRPC_CHANNEL_H
#define RRPC_CHANNEL_H

#include <stdint.h>

#include "rrpc/controller.h"
#include "rrpc/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_channel rrpc_channel;

/* Channel options. Zero means default for every field; new fields are only
 * ever added at the end. */
typedef struct rrpc_channel_options {
  int32_t timeout_ms;         /* per call; 0 = 500 ms; < 0 = no timeout */
  int32_t connect_timeout_ms; /* 0 = 200 ms */
  int max_retry;              /* extra connect attempts per call (a request that
                                 may have reached the server is never resent);
                                 0 = default 3; < 0 = none */
  int use_rdma;               /* 1: RDMA via the SMC-R CLC handshake, falling
                                 back to TCP if it cannot be set up (see
                                 rrpc/rdma.h for rdma_fallback) */
  size_t max_body_size;       /* 0 = 64 MiB */
} rrpc_channel_options;

/* rrpc_channel_new - a channel to "ip:port" (IPv4, or a host name resolved
 * once, here, to IPv4), "[ipv6]:port", or "unix:/path" (a unix stream
 * socket; use_rdma is ignored there: it always speaks plain baidu_std). No
 * connection is made yet. opts may be NULL. 0, -EINVAL (bad address, or a
 * wildcard such as 0.0.0.0 / [::]), -EHOSTUNREACH, -ENOMEM, -RRPC_ENORDMA
 * (use_rdma in a build without RDMA). */
int rrpc_channel_new(const char *addr, const rrpc_channel_options *opts, rrpc_channel **out);

/* rrpc_channel_free - close the connection; calls still in flight complete
 * with -RRPC_ECLOSE (each exactly once, async callbacks included) before
 * this returns. Any thread except a loop thread. */
void rrpc_channel_free(rrpc_channel *ch);

/* Completion of an async call: runs exactly once, on a loop thread (so it
 * must not block: see docs/threads.md), never
 * inside rrpc_channel_call. `cntl` and `response` are the caller's. */
typedef void (*rrpc_call_done)(void *arg, rrpc_controller *cntl);

/* rrpc_channel_call - call service.method with `request` (SHARED, the caller
 * keeps its iobuf and may free it when this returns) and the controller's
 * request attachment. The response message bytes are appended to `response`
 * (caller-owned, may be NULL to drop them), its attachment to the
 * controller's response attachment.
 * - done == NULL: synchronous; blocks, returns 0 or the negative code that
 *   the controller also holds.
 * - done != NULL: asynchronous; returns 0 and done(arg, cntl) runs later
 *   exactly once, also on failure (a refused connection, a timeout, ...).
 *   cntl, response and request attachment must stay alive until then. Only
 *   arguments the call cannot take at all are refused up front: then it
 *   returns -EINVAL or -ENOMEM and done never runs.
 * A sync call from a loop thread (an async completion, or a server handler
 * run with RRPC_RUN_IN_LOOP) would deadlock: it returns -EDEADLK. From a
 * handler on a server's worker pool (the default) it works. */
int rrpc_channel_call(rrpc_channel *ch, const char *service_full_name, const char *method,
                      rrpc_controller *cntl, const rrpc_iobuf *request, rrpc_iobuf *response,
                      rrpc_call_done done, void *arg);

/* rrpc_channel_late_responses - responses that arrived after their call had
 * ended (timed out or cancelled) and were dropped. Any thread. */
uint64_t rrpc_channel_late_responses(const rrpc_channel *ch);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_CHANNEL_H */
