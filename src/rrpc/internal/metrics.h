/* internal/metrics.h - private to the rrpc core: the call-figure recorder
 * behind rrpc/metrics.h and the registry that lets the builtin pages find
 * every recorder in the process.
 *
 * Recording: rrpc__call_stats_begin when a call starts, rrpc__call_stats_end
 * when it completes (any thread, one each per call). Each thread adds to its
 * own shard of relaxed atomics, allocated on its first record; readers sum
 * the shards. Latencies go into log-linear histograms (8 buckets per power of
 * two, so a percentile is within 1/16 of the true value) kept per second, so
 * the window slides by dropping old seconds; no thread ever waits on another
 * to record. */
#ifndef RRPC_INTERNAL_METRICS_H
#define RRPC_INTERNAL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/metrics.h"

typedef struct rrpc__call_stats rrpc__call_stats;

/* rrpc__call_stats_new - an empty recorder. 0 or -ENOMEM. */
int rrpc__call_stats_new(rrpc__call_stats **out);
/* rrpc__call_stats_free - no thread may still record into it or read it
 * (unregister it first). NULL is ignored. */
void rrpc__call_stats_free(rrpc__call_stats *s);

/* A call started / completed with `code` (0 or negative) after latency_us.
 * Any thread, never blocks; no-ops while metrics are off or s is NULL. */
void rrpc__call_stats_begin(rrpc__call_stats *s);
void rrpc__call_stats_end(rrpc__call_stats *s, int64_t latency_us, int code);
/* rrpc__call_stats_add_part - `part`'s calls count in `whole`'s figures
 * too (a server's totals: its methods' calls and its own, those that found
 * no method), summed on every read, so a call is recorded once, into its
 * part. Before either is read or recorded into (a server adds its methods
 * while it is configured); `part` is borrowed and must outlive `whole`'s
 * reads. Error codes over all of them keep the first 16 distinct codes, as
 * one recorder does. 0 or -ENOMEM. */
int rrpc__call_stats_add_part(rrpc__call_stats *whole, const rrpc__call_stats *part);

#ifndef __cplusplus
#include <stdatomic.h>
/* rrpc__metrics_on - rrpc_metrics_enabled inline, for the call paths to
 * test before they call a recorder: with metrics off a call then makes no
 * call into metrics.c at all (a begin and an end through the exported
 * check cost ~40 instructions a call). The recorders check it too. The
 * switch is metrics.c's; only rrpc_metrics_set_enabled writes it. */
extern atomic_int rrpc__metrics_switch;
static inline int rrpc__metrics_on(void) {
  return atomic_load_explicit(&rrpc__metrics_switch, memory_order_relaxed);
}
#endif

/* rrpc__call_stats_read - a snapshot (see rrpc_call_stats). Any thread. */
void rrpc__call_stats_read(const rrpc__call_stats *s, rrpc_call_stats *out);
/* Every latency recorded since the recorder was made, in fixed buckets (a
 * Prometheus histogram: unlike the window's percentiles these add up across
 * processes). count[i] holds latencies <= rrpc__latency_bounds_us[i] and
 * above the bound before; count[RRPC__LATENCY_BOUNDS] the rest. Not
 * cumulative; their sum is the histogram's count. */
#define RRPC__LATENCY_BOUNDS 19
extern const uint64_t rrpc__latency_bounds_us[RRPC__LATENCY_BOUNDS];
typedef struct rrpc__latency_hist {
  uint64_t count[RRPC__LATENCY_BOUNDS + 1];
  uint64_t sum_us;
} rrpc__latency_hist;
void rrpc__call_stats_histogram(const rrpc__call_stats *s, rrpc__latency_hist *out);

/* Failed calls by code: fn(ctx, code, count) for each code seen; codes past
 * the table's 16 distinct ones are reported once as code 0 ("other"). */
typedef void (*rrpc__code_count_fn)(void *ctx, int code, uint64_t n);
void rrpc__call_stats_errors(const rrpc__call_stats *s, rrpc__code_count_fn fn, void *ctx);
uint64_t rrpc__call_stats_error_count(const rrpc__call_stats *s, int code);

/* ---- connections that fell back from RDMA, by SMC decline code ---------- */
/* Count one fallback. Any thread. */
void rrpc__metrics_note_fallback(uint32_t decline_code);
/* fn(ctx, code, count) for each code seen (up to 32 distinct; the rest are
 * reported once as code 0). */
void rrpc__metrics_fallbacks(void (*fn)(void *ctx, uint32_t code, uint64_t n), void *ctx);

/* ---- the registry (metrics_registry.c) ---------------------------------- */
typedef enum rrpc__stats_kind {
  RRPC__STATS_SERVER,  /* a server's totals; port set */
  RRPC__STATS_METHOD,  /* one method of a server; port, service, method set */
  RRPC__STATS_CHANNEL, /* a channel's totals; peer set */
} rrpc__stats_kind;

typedef struct rrpc__stats_reg rrpc__stats_reg;

typedef struct rrpc__stats_info {
  rrpc__stats_kind kind;
  int port;
  const char *service, *method, *peer; /* "" when not set */
  const rrpc__call_stats *stats;
} rrpc__stats_info;

/* rrpc__stats_register - make `stats` (borrowed until unregister) visible
 * to the pages under the given labels (copied; NULL = ""). 0 or -ENOMEM. */
int rrpc__stats_register(rrpc__stats_kind kind, int port, const char *service, const char *method,
                         const char *peer, const rrpc__call_stats *stats, rrpc__stats_reg **out);
/* rrpc__stats_unregister - after it returns no reader uses the stats. NULL
 * is ignored. Not from inside a visit. */
void rrpc__stats_unregister(rrpc__stats_reg *r);
/* rrpc__stats_visit - fn for every registered recorder, in registration
 * order, under the registry lock (fn must not register or unregister). */
void rrpc__stats_visit(void (*fn)(void *ctx, const rrpc__stats_info *info), void *ctx);

/* rrpc__late_responses_total - responses dropped because their call had
 * ended (timed out or cancelled), over every channel of the process
 * (channel.c keeps it). Any thread. */
uint64_t rrpc__late_responses_total(void);
/* rrpc__completions_handed_off_total - client completions that ran on a
 * loop other than their connection's (channel.c, completion hand-off). */
uint64_t rrpc__completions_handed_off_total(void);

#endif /* RRPC_INTERNAL_METRICS_H */
