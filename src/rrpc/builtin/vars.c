/* vars.c - every metric of the process in one list, and its renderings
 * (vars.h). The tables below are the one place metric names are spelled;
 * docs/observability.md lists the same names. */
#include "rrpc/builtin/vars.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/builtin/builtin.h"
#include "rrpc/errors.h"
#include "rrpc/iobuf.h"
#include "rrpc/internal/metrics.h"
#include "rrpc/internal/worker_pool.h"
#include "rrpc/rdma.h"
#include "rrpc/transport.h"

/* ---- the tables ------------------------------------------------------------ */

/* Call figures; each recorder kind puts its prefix before the suffix. */
static const struct {
  const char *suffix, *help;
  int counter;
  size_t off;    /* of the field in rrpc_call_stats */
  int is_double; /* qps */
  int is_signed; /* in_flight */
  int us_to_s;   /* recorded in us, exposed in seconds (Prometheus base unit) */
} k_call_metrics[] = {
    {"calls_total", "Completed calls (success or failure)", 1, offsetof(rrpc_call_stats, calls), 0, 0, 0},
    {"errors_total", "Completed calls that failed", 1, offsetof(rrpc_call_stats, errors), 0, 0, 0},
    {"in_flight", "Calls started and not yet completed", 0, offsetof(rrpc_call_stats, in_flight), 0, 1, 0},
    {"qps", "Completed calls per second over the last 10 s", 0, offsetof(rrpc_call_stats, qps), 1, 0, 0},
    {"latency_avg_seconds", "Average latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_avg_us), 0, 0, 1},
    {"latency_p50_seconds", "Median latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_p50_us), 0, 0, 1},
    {"latency_p90_seconds", "90th percentile latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_p90_us), 0, 0, 1},
    {"latency_p99_seconds", "99th percentile latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_p99_us), 0, 0, 1},
    {"latency_p999_seconds", "99.9th percentile latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_p999_us), 0, 0, 1},
    {"latency_max_seconds", "Largest latency over the last 10 s (s)", 0,
     offsetof(rrpc_call_stats, latency_max_us), 0, 0, 1},
};

/* The process-wide RDMA counters of rrpc_rdma_get_stats. The next round's
 * registered-memory accounting adds its rows here. */
static const struct {
  const char *name, *help;
  int counter;
  size_t off;
} k_rdma_metrics[] = {
    {"rrpc_rdma_connections_total", "Connections whose handshake ended on RDMA", 1,
     offsetof(rrpc_rdma_stats, connections_rdma)},
    {"rrpc_rdma_fallbacks_total", "Connections whose peer asked for RDMA that went on over TCP", 1,
     offsetof(rrpc_rdma_stats, connections_fallback)},
    {"rrpc_rdma_fallback_last_reason", "SMC decline code of the last fallback", 0,
     offsetof(rrpc_rdma_stats, fallback_last_reason)},
    {"rrpc_rdma_bytes_written_total", "Payload bytes RDMA-written", 1,
     offsetof(rrpc_rdma_stats, bytes_written)},
    {"rrpc_rdma_bytes_received_total", "Payload bytes received over RDMA", 1,
     offsetof(rrpc_rdma_stats, bytes_received)},
    {"rrpc_rdma_writes_total", "RDMA WRITE work requests posted", 1, offsetof(rrpc_rdma_stats, writes)},
    {"rrpc_rdma_cdc_sent_total", "CDC messages (pure ACKs, close) sent", 1,
     offsetof(rrpc_rdma_stats, cdc_sent)},
    {"rrpc_rdma_completions_total", "Completion queue entries polled", 1,
     offsetof(rrpc_rdma_stats, completions)},
    {"rrpc_rdma_wakeups_total", "Completion-channel events (loop wake-ups)", 1,
     offsetof(rrpc_rdma_stats, wakeups)},
    {"rrpc_rdma_solicited_total", "Messages sent with the SOLICITED flag", 1,
     offsetof(rrpc_rdma_stats, solicited)},
    {"rrpc_rdma_blocked_on_window_total", "Times a sender waited for ring space or credits", 1,
     offsetof(rrpc_rdma_stats, blocked_on_window)},
    {"rrpc_rdma_pool_bytes", "Registered memory pool size (bytes)", 0, offsetof(rrpc_rdma_stats, pool_bytes)},
    {"rrpc_rdma_ring_bytes", "Registered receive rings of connections (bytes)", 0,
     offsetof(rrpc_rdma_stats, ring_bytes)},
    {"rrpc_rdma_slot_bytes", "Registered CDC receive slots of connections (bytes)", 0,
     offsetof(rrpc_rdma_stats, slot_bytes)},
    {"rrpc_rdma_registered_cap_refused_total",
     "Registrations refused by --rdma_registered_max_size_mb (fallbacks, pool regions)", 1,
     offsetof(rrpc_rdma_stats, registered_cap_refused)},
    {"rrpc_rdma_bytes_copied_send_total",
     "Payload bytes copied to send them (bounces into registered memory, inline sends)", 1,
     offsetof(rrpc_rdma_stats, bytes_copied_send)},
    {"rrpc_rdma_bytes_copied_recv_total", "Payload bytes copied out of receive rings and blocks", 1,
     offsetof(rrpc_rdma_stats, bytes_copied_recv)},
    {"rrpc_rdma_bg_jobs_queued_total",
     "Verbs jobs (a new connection's setup, a closed one's teardown) handed to the background verbs threads", 1,
     offsetof(rrpc_rdma_stats, bg_jobs_queued)},
    {"rrpc_rdma_bg_jobs_done_total", "Of those, finished (queued - done = their queues now)", 1,
     offsetof(rrpc_rdma_stats, bg_jobs_done)},
    {"rrpc_rdma_bg_jobs_inline_total", "Verbs setup/teardown jobs run on the caller (queue full, no thread)", 1,
     offsetof(rrpc_rdma_stats, bg_jobs_inline)},
    {"rrpc_rdma_bg_queue_max_depth", "Deepest the background verbs queues have been together", 0,
     offsetof(rrpc_rdma_stats, bg_queue_max_depth)},
    {"rrpc_rdma_connections_elastic_total", "Connections that came up with elastic rings (granted pieces)", 1,
     offsetof(rrpc_rdma_stats, connections_elastic)},
    {"rrpc_rdma_pieces_grants_total", "Elastic-ring pieces granted to peers", 1, offsetof(rrpc_rdma_stats, piece_grants)},
    {"rrpc_rdma_pieces_retires_held_total", "Pieces retired while the application held them", 1,
     offsetof(rrpc_rdma_stats, piece_retires_held)},
    {"rrpc_rdma_pieces_retires_shrink_total", "Released pieces retired to shrink idle connections", 1,
     offsetof(rrpc_rdma_stats, piece_retires_shrink)},
    {"rrpc_rdma_pieces_handbacks_total", "Pieces handed back by idle peers", 1,
     offsetof(rrpc_rdma_stats, piece_handbacks)},
    {"rrpc_rdma_pieces_wants_total", "WANT messages sent (short of the peer's space)", 1,
     offsetof(rrpc_rdma_stats, piece_wants)},
    {"rrpc_rdma_pieces_retire_refused_total", "Retires refused by --rdma_retired_max_size", 1,
     offsetof(rrpc_rdma_stats, piece_retire_refused)},
    {"rrpc_rdma_pieces_grant_refused_total", "Grants that waited for the piece cache", 1,
     offsetof(rrpc_rdma_stats, piece_grant_refused)},
    {"rrpc_rdma_pieces_table_full_total", "Grants that waited for a slot in the piece table (held retired pieces fill it)", 1,
     offsetof(rrpc_rdma_stats, piece_table_full)},
    {"rrpc_rdma_pieces_cached_bytes", "Cleared, registered pieces in the cache (bytes)", 0,
     offsetof(rrpc_rdma_stats, piece_cached_bytes)},
    {"rrpc_rdma_pieces_used_bytes", "Pieces taken by connections (bytes)", 0,
     offsetof(rrpc_rdma_stats, piece_used_bytes)},
    {"rrpc_rdma_pool_grows_ahead_total", "Registered-pool regions added ahead of need on a background thread", 1,
     offsetof(rrpc_rdma_stats, pool_grows_ahead)},
    {"rrpc_rdma_pool_grows_inline_total", "Registered-pool regions added on the allocating thread", 1,
     offsetof(rrpc_rdma_stats, pool_grows_inline)},
    {"rrpc_rdma_pool_grow_waits_total", "Allocations that waited for a registered-pool growth under way", 1,
     offsetof(rrpc_rdma_stats, pool_grow_waits)},
    {"rrpc_rdma_blocked_on_send_queue_total", "Times a sender with credits waited for its own send queue", 1,
     offsetof(rrpc_rdma_stats, blocked_on_send_queue)},
    {"rrpc_rdma_ring_full_held_total", "Receive rings that filled up while the application held zero-copy slices", 1,
     offsetof(rrpc_rdma_stats, ring_full_held)},
    {"rrpc_rdma_pieces_bind_waits_total", "Grants that waited for their send queue to drain before binding a window", 1,
     offsetof(rrpc_rdma_stats, piece_bind_waits)},
    {"rrpc_rdma_cm_connects_total", "Client QPs connected through rdma_cm", 1, offsetof(rrpc_rdma_stats, cm_connects)},
    {"rrpc_rdma_cm_accepts_total", "Server QPs accepted through rdma_cm", 1, offsetof(rrpc_rdma_stats, cm_accepts)},
    {"rrpc_rdma_cm_failures_total", "rdma_cm setups that failed (refused, unreachable, timed out, rejected)", 1,
     offsetof(rrpc_rdma_stats, cm_failures)},
    {"rrpc_rdma_cm_port_retries_total", "rdma_cm connects retried with a fresh id: TCP could not use the local port", 1,
     offsetof(rrpc_rdma_stats, cm_port_retries)},
    {"rrpc_rdma_closes_after_held_total", "Peer closes heard while received bytes were held back: delivered first", 1,
     offsetof(rrpc_rdma_stats, closes_after_held)},
};

/* ---- the list ------------------------------------------------------------------ */

void rrpc__vars_free(rrpc__varlist *l) {
  free(l->v);
  memset(l, 0, sizeof *l);
}

/* The registry bounds the count: a few dozen vars per server, method and
 * channel the program created. */
void rrpc__vars_add(rrpc__varlist *l, const char *name, const char *help, int is_counter, double value, ...) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 64;
    rrpc__var *v = realloc(l->v, cap * sizeof *v);
    if (v == NULL) {
      l->truncated = 1;
      return;
    }
    l->v = v;
    l->cap = cap;
  }
  rrpc__var *v = &l->v[l->n++];
  memset(v, 0, sizeof *v);
  snprintf(v->name, sizeof v->name, "%s", name);
  v->help = help;
  v->is_counter = is_counter;
  v->suffix = "";
  v->value = value;
  va_list ap;
  va_start(ap, value);
  const char *k;
  while ((k = va_arg(ap, const char *)) != NULL && v->nlabels < RRPC_VAR_LABELS) {
    const char *val = va_arg(ap, const char *);
    v->lk[v->nlabels] = k;
    snprintf(v->lv[v->nlabels], RRPC_VAR_LABEL_MAX, "%s", val ? val : "");
    v->nlabels++;
  }
  va_end(ap);
}

static double call_field(const rrpc_call_stats *st, size_t i) {
  const char *base = (const char *)st + k_call_metrics[i].off;
  if (k_call_metrics[i].is_double) return *(const double *)base;
  if (k_call_metrics[i].is_signed) return (double)*(const int64_t *)base;
  double v = (double)*(const uint64_t *)base;
  return k_call_metrics[i].us_to_s ? v / 1e6 : v;
}

struct err_ctx {
  rrpc__varlist *l;
  const char *name;
  const rrpc__stats_info *info;
};

static void add_labeled(rrpc__varlist *l, const char *name, const char *help, int counter, double v,
                        const rrpc__stats_info *info, const char *k4, const char *v4) {
  char port[16];
  snprintf(port, sizeof port, "%d", info->port);
  switch (info->kind) {
  case RRPC__STATS_SERVER:
    rrpc__vars_add(l, name, help, counter, v, "port", port, k4, v4, NULL);
    break;
  case RRPC__STATS_METHOD:
    rrpc__vars_add(l, name, help, counter, v, "port", port, "service", info->service, "method", info->method,
                   k4, v4, NULL);
    break;
  case RRPC__STATS_CHANNEL:
    rrpc__vars_add(l, name, help, counter, v, "peer", info->peer, k4, v4, NULL);
    break;
  }
}

static void add_error_code(void *ctx, int code, uint64_t n) {
  struct err_ctx *e = ctx;
  add_labeled(e->l, e->name, "Failed calls by error code", 1, (double)n, e->info, "code",
              code ? rrpc_err_name(code) : "OTHER");
}

static const char *kind_prefix(rrpc__stats_kind k) {
  switch (k) {
  case RRPC__STATS_SERVER: return "rrpc_server_";
  case RRPC__STATS_METHOD: return "rrpc_method_";
  case RRPC__STATS_CHANNEL: return "rrpc_channel_";
  }
  return "rrpc_";
}

/* The last var added is a part of a histogram (when it was added). */
static void mark_part(rrpc__varlist *l, size_t before, const char *suffix) {
  if (l->n > before) l->v[l->n - 1].suffix = suffix;
}

/* <prefix>latency_seconds as a Prometheus histogram: cumulative buckets
 * (le in seconds), then _sum and _count, each since the recorder was made. */
static void add_histogram(rrpc__varlist *l, const rrpc__stats_info *info) {
  static const char *help = "Latency of completed calls since start (s)";
  rrpc__latency_hist h;
  rrpc__call_stats_histogram(info->stats, &h);
  char name[RRPC_VAR_NAME_MAX], le[24];
  snprintf(name, sizeof name, "%slatency_seconds", kind_prefix(info->kind));
  uint64_t cum = 0;
  for (int b = 0; b <= RRPC__LATENCY_BOUNDS; b++) {
    cum += h.count[b];
    if (b < RRPC__LATENCY_BOUNDS) snprintf(le, sizeof le, "%g", (double)rrpc__latency_bounds_us[b] / 1e6);
    else snprintf(le, sizeof le, "+Inf");
    size_t before = l->n;
    add_labeled(l, name, help, RRPC_VAR_HISTOGRAM, (double)cum, info, "le", le);
    mark_part(l, before, "_bucket");
  }
  size_t before = l->n;
  add_labeled(l, name, help, RRPC_VAR_HISTOGRAM, (double)h.sum_us / 1e6, info, NULL, NULL);
  mark_part(l, before, "_sum");
  before = l->n;
  add_labeled(l, name, help, RRPC_VAR_HISTOGRAM, (double)cum, info, NULL, NULL);
  mark_part(l, before, "_count");
}

static void add_recorder(void *ctx, const rrpc__stats_info *info) {
  rrpc__varlist *l = ctx;
  rrpc_call_stats st;
  rrpc__call_stats_read(info->stats, &st);
  char name[RRPC_VAR_NAME_MAX];
  for (size_t i = 0; i < sizeof k_call_metrics / sizeof k_call_metrics[0]; i++) {
    snprintf(name, sizeof name, "%s%s", kind_prefix(info->kind), k_call_metrics[i].suffix);
    add_labeled(l, name, k_call_metrics[i].help, k_call_metrics[i].counter, call_field(&st, i), info, NULL, NULL);
  }
  snprintf(name, sizeof name, "%serrors_by_code_total", kind_prefix(info->kind));
  struct err_ctx e = {l, name, info};
  rrpc__call_stats_errors(info->stats, add_error_code, &e);
  add_histogram(l, info);
}

static void add_fallback(void *ctx, uint32_t code, uint64_t n) {
  char hex[16];
  snprintf(hex, sizeof hex, "0x%08x", code);
  rrpc__vars_add(ctx, "rrpc_fallbacks_by_reason_total",
                 "Connections that did not use RDMA, by SMC decline code", 1, (double)n, "code", hex,
                 "reason", rrpc__transport_fallback_text(code), NULL);
}

static void add_process(rrpc__varlist *l) {
  rrpc__process_facts p;
  rrpc__process_facts_get(&p);
  rrpc__vars_add(l, "rrpc_process_cpu_seconds_total", "User and system CPU time of the process (s)", 1,
                 p.cpu_seconds, NULL);
  rrpc__vars_add(l, "rrpc_process_resident_memory_bytes", "Resident memory (bytes)", 0, (double)p.rss_bytes,
                 NULL);
  rrpc__vars_add(l, "rrpc_process_virtual_memory_bytes", "Virtual memory (bytes)", 0, (double)p.vsize_bytes,
                 NULL);
  rrpc__vars_add(l, "rrpc_process_open_fds", "Open file descriptors", 0, (double)p.open_fds, NULL);
  rrpc__vars_add(l, "rrpc_process_threads", "Threads of the process", 0, (double)p.threads, NULL);
  rrpc__vars_add(l, "rrpc_process_uptime_seconds", "Seconds since the process started", 0, p.uptime_seconds,
                 NULL);
}

static void add_rdma(rrpc__varlist *l) {
  rrpc_rdma_stats st;
  if (rrpc_rdma_get_stats(&st) != 0) return; /* a build without RDMA */
  rrpc__rdma_runtime_facts rt;
  rrpc__rdma_runtime_facts_get(&rt);
  /* Labelled with the device once one is open (the counters are the
   * process's, and rrpc opens one device). */
  const char *key = rt.device_open ? "device" : NULL;
  for (size_t i = 0; i < sizeof k_rdma_metrics / sizeof k_rdma_metrics[0]; i++) {
    uint64_t v = *(const uint64_t *)((const char *)&st + k_rdma_metrics[i].off);
    rrpc__vars_add(l, k_rdma_metrics[i].name, k_rdma_metrics[i].help, k_rdma_metrics[i].counter, (double)v,
                   key, rt.device, NULL);
  }
  rrpc__vars_add(l, "rrpc_rdma_pool_max_bytes", "Cap of the registered memory pool (bytes)", 0,
                 (double)rt.pool_max_bytes, key, rt.device, NULL);
}

static void add_builtin(rrpc__varlist *l) {
  rrpc__builtin_counters c;
  rrpc__builtin_counters_get(&c);
  rrpc__vars_add(l, "rrpc_builtin_requests_total", "HTTP requests to the builtin pages", 1,
                 (double)c.requests, NULL);
  static const char *const k_status[] = {"400", "404", "405", "413", "503"};
  const uint64_t vals[] = {c.r400, c.r404, c.r405, c.r413, c.r503};
  for (int i = 0; i < 5; i++)
    rrpc__vars_add(l, "rrpc_builtin_refused_total", "HTTP requests refused, by status", 1, (double)vals[i],
                   "status", k_status[i], NULL);
  rrpc__vars_add(l, "rrpc_builtin_connections_truncated_total",
                 "/connections pages cut at builtin_max_connections_listed", 1, (double)c.truncated, NULL);
  rrpc__vars_add(l, "rrpc_metrics_enabled", "1 while call figures are recorded", 0,
                 (double)rrpc_metrics_enabled(), NULL);
  uint64_t rejected, rescues, wakeups, left_to_busy;
  rrpc__worker_pools_totals(&rejected, &rescues, &wakeups, &left_to_busy);
  rrpc__vars_add(l, "rrpc_workers_rejected_total",
                 "Requests failed with EOVERCROWDED for a full worker queue (all servers)", 1, (double)rejected,
                 NULL);
  rrpc__vars_add(l, "rrpc_workers_rescues_total",
                 "Idle workers woken for requests held behind a blocked handler (pool_rescue_us; all servers)", 1,
                 (double)rescues, NULL);
  rrpc__vars_add(l, "rrpc_workers_wakeups_total", "Sleeping workers woken for requests (all servers)", 1,
                 (double)wakeups, NULL);
  rrpc__vars_add(l, "rrpc_workers_left_to_busy_total",
                 "Request batches that woke no worker: busy ones in short handlers took them (pool_busy_queue; "
                 "all servers)",
                 1, (double)left_to_busy, NULL);
  rrpc__vars_add(l, "rrpc_workers_write_rescues_total",
                 "Workers' gathered responses the rescuer wrote because the worker stayed in one handler "
                 "(pool_write_flush_us; all servers)",
                 1, (double)rrpc__worker_pools_write_rescues_total(), NULL);
  rrpc__vars_add(l, "rrpc_client_late_responses_total",
                 "Responses dropped because their call had timed out or been cancelled", 1,
                 (double)rrpc__late_responses_total(), NULL);
}

static void add_block_cache(rrpc__varlist *l) {
  rrpc_iobuf_block_cache_stats st;
  rrpc_iobuf_block_cache_stats_get(&st);
  rrpc__vars_add(l, "rrpc_iobuf_block_cache_hits_total", "Default-size iobuf blocks reused from a block cache",
                 1, (double)st.hits, NULL);
  rrpc__vars_add(l, "rrpc_iobuf_block_cache_misses_total",
                 "Default-size iobuf blocks malloc'ed (no cached block at hand)", 1, (double)st.misses, NULL);
  rrpc__vars_add(l, "rrpc_iobuf_block_cache_overflows_total",
                 "Default-size iobuf blocks freed to malloc because the block caches were full", 1,
                 (double)st.overflows, NULL);
  rrpc__vars_add(l, "rrpc_iobuf_block_cache_blocks", "Default-size iobuf blocks kept in the block caches now",
                 0, (double)st.cached, NULL);
}

/* Sorted by name through an index so that equal names keep their
 * collection order (qsort is not stable) and the big entries move once. */
static int by_name_then_index(const void *a, const void *b, void *ctx) {
  const rrpc__var *v = ctx;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  int c = strcmp(v[i].name, v[j].name);
  return c ? c : (i < j ? -1 : i > j);
}

static void sort_stable(rrpc__varlist *l) {
  if (l->n < 2) return;
  size_t *idx = malloc(l->n * sizeof *idx);
  rrpc__var *sorted = malloc(l->n * sizeof *sorted);
  if (idx == NULL || sorted == NULL) { /* unsorted still renders; Prometheus may complain */
    free(idx);
    free(sorted);
    return;
  }
  for (size_t i = 0; i < l->n; i++) idx[i] = i;
  qsort_r(idx, l->n, sizeof *idx, by_name_then_index, l->v);
  for (size_t i = 0; i < l->n; i++) sorted[i] = l->v[idx[i]];
  free(idx);
  free(l->v);
  l->v = sorted;
  l->cap = l->n;
}

void rrpc__vars_collect(rrpc__varlist *out) {
  memset(out, 0, sizeof *out);
  add_process(out);
  rrpc__stats_visit(add_recorder, out);
  rrpc__metrics_fallbacks(add_fallback, out);
  add_rdma(out);
  add_builtin(out);
  add_block_cache(out);
  sort_stable(out);
}

/* ---- rendering ---------------------------------------------------------------- */

static void render_value(rrpc__sb *b, double v) {
  if (v == floor(v) && fabs(v) < 9e15) rrpc__sb_printf(b, "%lld", (long long)v);
  else rrpc__sb_printf(b, "%.9g", v);
}

/* Prometheus label values escape backslash, quote and newline. */
static void prom_label_value(rrpc__sb *b, const char *s) {
  for (; *s; s++) {
    if (*s == '\\') rrpc__sb_puts(b, "\\\\");
    else if (*s == '"') rrpc__sb_puts(b, "\\\"");
    else if (*s == '\n') rrpc__sb_puts(b, "\\n");
    else rrpc__sb_add(b, s, 1);
  }
}

static void render_labels(rrpc__sb *b, const rrpc__var *v) {
  if (v->nlabels == 0) return;
  rrpc__sb_puts(b, "{");
  for (int i = 0; i < v->nlabels; i++) {
    rrpc__sb_printf(b, "%s%s=\"", i ? "," : "", v->lk[i]);
    prom_label_value(b, v->lv[i]);
    rrpc__sb_puts(b, "\"");
  }
  rrpc__sb_puts(b, "}");
}

static void render_json(const rrpc__varlist *l, const char *prefix, rrpc__sb *b) {
  rrpc__sb_puts(b, "{\"vars\":[");
  int first = 1;
  for (size_t i = 0; i < l->n; i++) {
    const rrpc__var *v = &l->v[i];
    if (strncmp(v->name, prefix, strlen(prefix)) != 0) continue;
    rrpc__sb_puts(b, first ? "\n{\"name\":" : ",\n{\"name\":");
    first = 0;
    char full[RRPC_VAR_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s%s", v->name, v->suffix);
    rrpc__sb_json_str(b, full);
    rrpc__sb_puts(b, ",\"labels\":{");
    for (int k = 0; k < v->nlabels; k++) {
      if (k) rrpc__sb_puts(b, ",");
      rrpc__sb_json_str(b, v->lk[k]);
      rrpc__sb_puts(b, ":");
      rrpc__sb_json_str(b, v->lv[k]);
    }
    rrpc__sb_puts(b, "},\"value\":");
    render_value(b, v->value);
    rrpc__sb_puts(b, "}");
  }
  rrpc__sb_puts(b, "\n]}\n");
}

void rrpc__vars_render(const rrpc__varlist *l, int fmt, const char *prefix, rrpc__sb *b) {
  if (prefix == NULL) prefix = "";
  if (fmt == RRPC_FMT_JSON) {
    render_json(l, prefix, b);
    return;
  }
  const char *last = "";
  for (size_t i = 0; i < l->n; i++) {
    const rrpc__var *v = &l->v[i];
    if (strncmp(v->name, prefix, strlen(prefix)) != 0) continue;
    if (fmt == RRPC_FMT_PROM && strcmp(last, v->name) != 0) {
      rrpc__sb_printf(b, "# HELP %s %s\n# TYPE %s %s\n", v->name, v->help, v->name,
                      v->is_counter == RRPC_VAR_HISTOGRAM ? "histogram"
                      : v->is_counter                     ? "counter"
                                                          : "gauge");
      last = v->name;
    }
    rrpc__sb_puts(b, v->name);
    rrpc__sb_puts(b, v->suffix);
    render_labels(b, v);
    rrpc__sb_puts(b, fmt == RRPC_FMT_PROM ? " " : " : ");
    render_value(b, v->value);
    rrpc__sb_puts(b, "\n");
  }
  if (l->truncated) rrpc__sb_puts(b, fmt == RRPC_FMT_PROM ? "# truncated: out of memory\n" : "(truncated: out of memory)\n");
}
