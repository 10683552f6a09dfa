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

/* brpc's connection types. */
typedef enum rrpc_connection_type {
  RRPC_CONNECTION_SINGLE = 0, /* one connection, every call multiplexed on it */
  RRPC_CONNECTION_POOLED = 1, /* a connection per call in flight, kept for reuse */
  RRPC_CONNECTION_SHORT = 2,  /* a new connection per call, closed after it */
} rrpc_connection_type;

/* A retry policy (brpc's RetryPolicy): called on the thread that completed
 * a failed attempt of a cluster call (a loop thread: must not block), only
 * while retries are left and the call's deadline has not passed. `code` is
 * the attempt's negative error code; `responded` is 1 if the server
 * answered (its error), 0 if the connection failed first. Return 1 to send
 * the call again on another server. The default retries connection
 * failures only (!responded: refused, reset, closed, unreachable, ELOGOFF). */
typedef int (*rrpc_retry_policy_fn)(void *arg, int code, int responded);

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
  /* ---- cluster channels (rrpc_channel_new_lb); ignored by rrpc_channel_new.
   * There max_retry is brpc's: further attempts of a call, on other servers,
   * after a connection failure (default 3; < 0 none). */
  int32_t backup_request_ms;  /* brpc's backup_request_ms: if the call has not
                                 ended after this long, send a copy to another
                                 server; the first response wins. <= 0 = off */
  int32_t health_check_interval_ms; /* brpc's health_check_interval (there in s):
                                 a server whose connection failed is isolated
                                 (no calls) and probed with a TCP connect this
                                 long after, then with doubling delays up to 8x;
                                 it rejoins when a probe connects. 0 = 3000 */
  int32_t ns_access_interval_ms; /* brpc's ns_access_interval: how often periodic
                                 naming services (file://, dns://) are fetched
                                 again. 0 = 5000 */
  rrpc_retry_policy_fn retry_policy; /* NULL = the default (see above) */
  void *retry_policy_arg;     /* borrowed, passed to retry_policy */
  int max_servers;            /* servers one naming fetch may return; 0 = 1024 */
  int connection_type;        /* rrpc_connection_type; 0 = single. A cluster
                                 channel's servers each use it */
  int max_connection_pool_size; /* pooled: idle connections kept (brpc's flag);
                                 one more is closed and counted. 0 = 100 */
  int rdma_dialect;           /* with use_rdma: RRPC_RDMA_DIALECT_IMM, _CURSOR or _BRPC
                                 (rrpc/rdma.h) for this channel's connections;
                                 0 = the process's (--rdma_dialect) */
} rrpc_channel_options;

/* rrpc_channel_new - a channel to "ip:port" (IPv4, or a host name resolved
 * once, here, to IPv4), "[ipv6]:port", or "unix:/path" (a unix stream
 * socket; use_rdma is ignored there: it always speaks plain baidu_std). No
 * connection is made yet. opts may be NULL. 0, -EINVAL (bad address, or a
 * wildcard such as 0.0.0.0 / [::]), -EHOSTUNREACH, -ENOMEM, -RRPC_ENORDMA
 * (use_rdma in a build without RDMA). */
int rrpc_channel_new(const char *addr, const rrpc_channel_options *opts, rrpc_channel **out);

/* rrpc_channel_new_lb - a cluster channel (brpc's Init(naming_url, lb)):
 * servers from `naming_url` ("list://a:1,b:2", "file://path", "dns://host:port"
 * or a registered scheme, see rrpc/naming.h), each call sent to one picked by
 * `lb`: "rr" (round robin), "random", "wrr" (weights from the naming
 * entries), "la" (locality-aware: fewer calls in flight and lower latency
 * win), "c_murmurhash" (consistent hashing of the controller's request_code);
 * NULL or "" = "rr". Each server gets a channel of its own (options as for
 * rrpc_channel_new), connected on first use. Calls go through
 * rrpc_channel_call as usual, with retries on other servers and backup
 * requests (see the options). The first fetch runs here and may block
 * (a file read, a name lookup): not from a loop thread. 0, -EINVAL (bad URL,
 * unknown scheme or balancer), -ENOENT (no servers), a fetch's code,
 * -ENOMEM, -RRPC_ENORDMA. */
int rrpc_channel_new_lb(const char *naming_url, const char *lb, const rrpc_channel_options *opts,
                        rrpc_channel **out);

/* Counters of a cluster channel, since it was made. */
typedef struct rrpc_cluster_stats {
  uint64_t servers;         /* in the current list */
  uint64_t isolated;        /* of those, isolated now */
  uint64_t naming_updates;  /* fetches that changed the list */
  uint64_t naming_failures; /* fetches that failed (list kept) */
  uint64_t retries;         /* attempts sent after a failed one */
  uint64_t backup_requests; /* backup attempts sent */
  uint64_t isolations;      /* servers isolated after a connection failure */
  uint64_t revivals;        /* isolated servers that came back */
  uint64_t no_server;       /* calls failed with EHOSTDOWN (nothing to pick) */
} rrpc_cluster_stats;

/* rrpc_channel_cluster_stats - 0, or -EINVAL for a single-server channel.
 * Any thread. */
int rrpc_channel_cluster_stats(const rrpc_channel *ch, rrpc_cluster_stats *out);

/* Connections of a single-server channel. */
typedef struct rrpc_channel_conn_stats {
  uint64_t live;             /* open or opening now */
  uint64_t idle;             /* pooled, waiting for a call */
  uint64_t opened;           /* since the channel was made */
  uint64_t pool_full_closes; /* pooled connections closed: the pool was full */
} rrpc_channel_conn_stats;

/* rrpc_channel_connection_stats - 0, or -EINVAL (a cluster channel). Any thread. */
int rrpc_channel_connection_stats(const rrpc_channel *ch, rrpc_channel_conn_stats *out);

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

/* A method to call, prepared once: its names are checked, copied and
 * encoded for the wire when it is made, so calls through it skip measuring
 * and encoding them (rrpc_channel_call_method; the C++ Channel keeps one per
 * protobuf method it calls). Immutable: any number of threads and channels
 * may use one at once. The wire bytes are the same as rrpc_channel_call's. */
typedef struct rrpc_method rrpc_method;

/* Longest service or method name rrpc_method_new takes (bytes). */
#define RRPC_METHOD_NAME_MAX 4096

/* rrpc_method_new - prepare service_full_name.method (both copied). 0,
 * -EINVAL (a NULL or empty name, or one longer than RRPC_METHOD_NAME_MAX)
 * or -ENOMEM. */
int rrpc_method_new(const char *service_full_name, const char *method, rrpc_method **out);

/* rrpc_method_free - once no rrpc_channel_call_method through it is still
 * running (a call returned from it holds nothing of it, async ones too).
 * NULL is ignored. */
void rrpc_method_free(rrpc_method *m);

/* The names it was made with (borrowed: they live as long as `m`). */
const char *rrpc_method_service(const rrpc_method *m);
const char *rrpc_method_name(const rrpc_method *m);

/* rrpc_channel_call_method - rrpc_channel_call of m's service and method:
 * the same contract, -EINVAL for a NULL `m`. */
int rrpc_channel_call_method(rrpc_channel *ch, const rrpc_method *m, rrpc_controller *cntl,
                             const rrpc_iobuf *request, rrpc_iobuf *response, rrpc_call_done done,
                             void *arg);

/* rrpc_channel_late_responses - responses that arrived after their call had
 * ended (timed out or cancelled) and were dropped. Any thread. */
uint64_t rrpc_channel_late_responses(const rrpc_channel *ch);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_CHANNEL_H */
