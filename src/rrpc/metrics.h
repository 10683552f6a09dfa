/* rrpc/metrics.h - what a running rrpc measures: per-method, per-server and
 * per-channel call figures (count, errors, in flight, QPS, latency
 * percentiles over a sliding window), readable from the program and served
 * on the server's own port (docs/observability.md lists every metric).
 *
 * Metrics are on by default. Recording is per-thread (each thread adds to its
 * own shard, shards are summed on read), so it stays cheap enough to leave on.
 */
#ifndef RRPC_METRICS_H
#define RRPC_METRICS_H

#include <stdint.h>

#include "rrpc/channel.h"
#include "rrpc/server.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Length of the sliding window of QPS and latency percentiles. */
#define RRPC_METRICS_WINDOW_S 10

/* A snapshot of one set of call figures. Counts are since the object was
 * created; qps and latencies cover the last RRPC_METRICS_WINDOW_S seconds. */
typedef struct rrpc_call_stats {
  uint64_t calls;        /* completed calls (success or failure) */
  uint64_t errors;       /* completed calls that failed */
  int64_t in_flight;     /* started and not yet completed */
  double qps;            /* completed calls per second in the window */
  uint64_t window_calls; /* completed calls in the window */
  uint64_t latency_avg_us, latency_p50_us, latency_p90_us, latency_p99_us, latency_p999_us,
      latency_max_us;    /* in the window; 0 when it holds no call */
} rrpc_call_stats;

/* rrpc_metrics_set_enabled - turn recording on (1, the default) or off (0)
 * process-wide; calls in flight when it changes may be counted on one side
 * only. Thread-safe. */
void rrpc_metrics_set_enabled(int on);
int rrpc_metrics_enabled(void);

/* rrpc_server_method_stats - figures of service.method on a started server.
 * 0, -ENOENT (no such method) or -RRPC_ENOTREADY (not started). */
int rrpc_server_method_stats(const rrpc_server *s, const char *service, const char *method,
                             rrpc_call_stats *out);
/* rrpc_server_stats - totals of every call the server answered (requests for
 * unknown methods included). 0 or -RRPC_ENOTREADY. */
int rrpc_server_stats(const rrpc_server *s, rrpc_call_stats *out);
/* rrpc_channel_stats - totals of every call made on the channel. 0, or
 * -EINVAL for a cluster channel (its servers each count their own; see
 * rrpc_channel_cluster_stats). */
int rrpc_channel_stats(const rrpc_channel *ch, rrpc_call_stats *out);
/* rrpc_call_stats_error_count - how many calls of a method ended with `code`
 * (negative, e.g. -RRPC_ERPCTIMEDOUT); 0 for codes never seen. */
uint64_t rrpc_server_method_error_count(const rrpc_server *s, const char *service,
                                        const char *method, int code);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_METRICS_H */
