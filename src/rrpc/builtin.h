/* rrpc/builtin.h - the builtin pages every rrpc server answers on its own
 * port (HTTP/1.x GET): /status, /vars, /connections, /rdma, /flags,
 * /metrics (Prometheus). docs/observability.md describes each page and
 * metric; rrpc_server_options.no_builtin_services turns them off per server.
 */
#ifndef RRPC_BUILTIN_H
#define RRPC_BUILTIN_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Process-wide limits of the pages. Zero means default for every field; new
 * fields only at the end. */
typedef struct rrpc_builtin_options {
  size_t max_request_bytes;      /* builtin_max_request_bytes: request line +
                                    headers; larger requests get 413. 0 = 8192,
                                    at most 65536 */
  size_t max_connections_listed; /* builtin_max_connections_listed: rows of
                                    /connections; 0 = 10000 */
  size_t max_concurrent_listings; /* builtin_max_concurrent_listings: /connections
                                     and /rdma pages being built at once (each
                                     holds a row per connection); more get 503.
                                     0 = 4 */
} rrpc_builtin_options;

/* rrpc_builtin_set_options - copy `o` (NULL = defaults). 0 or -EINVAL.
 * Thread-safe; applies to requests that arrive afterwards. */
int rrpc_builtin_set_options(const rrpc_builtin_options *o);
void rrpc_builtin_get_options(rrpc_builtin_options *out);

/* /flags shows the core's settings and, when a source is set, every flag it
 * reports (the C++ face reports all gflags). visit's strings are borrowed
 * for the call only. */
typedef void (*rrpc_flag_visit_fn)(void *ctx, const char *name, const char *value,
                                   const char *description);
typedef void (*rrpc_flags_source_fn)(void *arg, rrpc_flag_visit_fn visit, void *ctx);
/* rrpc_builtin_set_flags_source - fn (NULL = none) runs on a loop thread
 * while a /flags page is built; it must not block. `arg` is borrowed for the
 * life of the process. Thread-safe. */
void rrpc_builtin_set_flags_source(rrpc_flags_source_fn fn, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_BUILTIN_H */
