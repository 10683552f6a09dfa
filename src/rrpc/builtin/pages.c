/* pages.c - the builtin pages that need nothing but this thread: the index,
 * /status, /vars, /metrics, /flags, /health and /version, as plain text or
 * JSON (?format=json); a browser (Accept: text/html) gets the text pages
 * wrapped in HTML with links to the others. /connections and /rdma ask each connection's loop and
 * live in conn_pages.c. Reads the server's view and the metrics; changes
 * nothing. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/builtin/builtin.h"
#include "rrpc/builtin/vars.h"
#include "rrpc/errors.h"
#include "rrpc/internal/socket.h"
#include "rrpc/rdma.h"
#include "rrpc/version.h"

#define TEXT "text/plain; charset=utf-8"
#define JSON "application/json"
#define PROM "text/plain; version=0.0.4; charset=utf-8"
#define HTML "text/html; charset=utf-8"

int rrpc__page_want_json(const rrpc__http_req *req) {
  char v[16];
  return rrpc__http_query_get(req->query, "format", v, sizeof v) && strcmp(v, "json") == 0;
}

/* ---- HTML for browsers ---------------------------------------------------------- */

static const char *const k_nav[] = {"/", "/status", "/connections", "/connections?detail=1", "/rdma",
                                    "/vars", "/flags", "/metrics", "/health", "/version"};

void rrpc__page_html_begin(rrpc__sb *b, const char *title) {
  rrpc__sb_puts(b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>rrpc ");
  rrpc__sb_html(b, title, strlen(title));
  rrpc__sb_puts(b, "</title><style>"
                   "body{font-family:sans-serif;margin:12px}nav a{margin-right:14px}"
                   "pre{font-size:13px}table{border-collapse:collapse;font:11px monospace}"
                   "th,td{border:1px solid #ccc;padding:2px 3px;text-align:left;vertical-align:top;white-space:nowrap}"
                   "td.w{white-space:normal;overflow-wrap:anywhere;min-width:9em}"
                   "th{background:#eee}td.n{text-align:right}tr:nth-child(even){background:#f8f8f8}"
                   "</style></head><body><nav>");
  for (size_t i = 0; i < sizeof k_nav / sizeof k_nav[0]; i++) {
    rrpc__sb_puts(b, "<a href=\"");
    rrpc__sb_html(b, k_nav[i], strlen(k_nav[i]));
    rrpc__sb_puts(b, "\">");
    rrpc__sb_html(b, k_nav[i], strlen(k_nav[i]));
    rrpc__sb_puts(b, "</a>");
  }
  rrpc__sb_puts(b, "</nav>\n");
}

void rrpc__page_html_end(rrpc__sb *b) { rrpc__sb_puts(b, "</body></html>\n"); }

void rrpc__page_respond(rrpc__socket *sock, const rrpc__http_req *req, const char *ctype, rrpc__sb *b) {
  if (b->truncated) rrpc__sb_puts(b, "\n(truncated)\n");
  rrpc__builtin_count_status(200);
  if (!req->accepts_html || strcmp(ctype, TEXT) != 0) {
    rrpc__http_respond(sock, 200, ctype, b, req->is_head);
    return;
  }
  /* A browser: the same text, escaped, in a page with links to the others. */
  rrpc__sb h;
  rrpc__sb_init(&h, RRPC_SB_PAGE_MAX);
  rrpc__page_html_begin(&h, req->path);
  rrpc__sb_puts(&h, "<pre>");
  rrpc__sb_html(&h, b->p ? b->p : "", b->len);
  rrpc__sb_puts(&h, "</pre>");
  rrpc__page_html_end(&h);
  rrpc__http_respond(sock, 200, HTML, &h, req->is_head);
  rrpc__sb_free(&h);
}

static void finish(rrpc__socket *sock, const rrpc__http_req *req, const char *ctype, rrpc__sb *b) {
  rrpc__page_respond(sock, req, ctype, b);
}

/* ---- /status ----------------------------------------------------------------- */

struct code_ctx {
  rrpc__sb *b;
  int json, first;
};

static void status_code(void *ctx, int code, uint64_t n) {
  struct code_ctx *c = ctx;
  const char *name = code ? rrpc_err_name(code) : "OTHER";
  if (c->json) rrpc__sb_printf(c->b, "%s\"%s\":%llu", c->first ? "" : ",", name, (unsigned long long)n);
  else rrpc__sb_printf(c->b, "%s%s=%llu", c->first ? "" : " ", name, (unsigned long long)n);
  c->first = 0;
}

static void stats_json(rrpc__sb *b, const rrpc_call_stats *st, const rrpc__call_stats *rec) {
  rrpc__sb_printf(b,
                  "\"calls\":%llu,\"errors\":%llu,\"in_flight\":%lld,\"qps\":%.3f,\"latency_avg_us\":%llu,"
                  "\"latency_p50_us\":%llu,\"latency_p90_us\":%llu,\"latency_p99_us\":%llu,"
                  "\"latency_p999_us\":%llu,\"latency_max_us\":%llu,\"errors_by_code\":{",
                  (unsigned long long)st->calls, (unsigned long long)st->errors, (long long)st->in_flight,
                  st->qps, (unsigned long long)st->latency_avg_us, (unsigned long long)st->latency_p50_us,
                  (unsigned long long)st->latency_p90_us, (unsigned long long)st->latency_p99_us,
                  (unsigned long long)st->latency_p999_us, (unsigned long long)st->latency_max_us);
  struct code_ctx c = {b, 1, 1};
  rrpc__call_stats_errors(rec, status_code, &c);
  rrpc__sb_puts(b, "}");
}

static void stats_text(rrpc__sb *b, const char *name, const rrpc_call_stats *st, const rrpc__call_stats *rec) {
  rrpc__sb_printf(b, "%-40s %10llu %8llu %6lld %9.1f %8llu %8llu %8llu %8llu %8llu %8llu  ", name,
                  (unsigned long long)st->calls, (unsigned long long)st->errors, (long long)st->in_flight,
                  st->qps, (unsigned long long)st->latency_avg_us, (unsigned long long)st->latency_p50_us,
                  (unsigned long long)st->latency_p90_us, (unsigned long long)st->latency_p99_us,
                  (unsigned long long)st->latency_p999_us, (unsigned long long)st->latency_max_us);
  struct code_ctx c = {b, 0, 1};
  rrpc__call_stats_errors(rec, status_code, &c);
  rrpc__sb_puts(b, c.first ? "-\n" : "\n");
}

static void page_status(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req, int json) {
  rrpc__sb b;
  rrpc__sb_init(&b, RRPC_SB_PAGE_MAX);
  size_t nconns = 0;
  rrpc__server_conns(srv, NULL, 0, &nconns);
  rrpc__process_facts p;
  rrpc__process_facts_get(&p);
  rrpc_call_stats tot;
  rrpc__call_stats_read(rrpc__server_totals(srv), &tot);
  char started[32] = "?", cmdline[1024];
  time_t t0 = (time_t)p.start_unix;
  struct tm tm0;
  if (p.start_unix > 0 && gmtime_r(&t0, &tm0) != NULL) strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%SZ", &tm0);
  rrpc__process_cmdline(cmdline, sizeof cmdline);
  if (json) {
    rrpc__sb_printf(&b, "{\"port\":%d,\"connections\":%zu,\"uptime_s\":%.1f,\"metrics_enabled\":%d,"
                        "\"version\":\"%s\",\"pid\":%ld,\"start_time\":\"%s\",\"command_line\":",
                    rrpc_server_port(srv), nconns, p.uptime_seconds, rrpc_metrics_enabled(), rrpc_version_string(),
                    (long)getpid(), started);
    rrpc__sb_json_str(&b, cmdline);
    rrpc__sb_puts(&b, ",\"total\":{");
    stats_json(&b, &tot, rrpc__server_totals(srv));
    rrpc__sb_puts(&b, "},\"methods\":[");
  } else {
    rrpc__sb_printf(&b, "rrpc %s server on port %d: %zu connections, up %.0f s, metrics %s\n"
                        "pid %ld, started %s\ncommand line: %s\n"
                        "latencies in us over the last %d s\n\n",
                    rrpc_version_string(), rrpc_server_port(srv), nconns, p.uptime_seconds,
                    rrpc_metrics_enabled() ? "on" : "off", (long)getpid(), started, cmdline, RRPC_METRICS_WINDOW_S);
    rrpc__sb_printf(&b, "%-40s %10s %8s %6s %9s %8s %8s %8s %8s %8s %8s  %s\n", "Method", "Calls", "Errors",
                    "InFl", "QPS", "Avg", "P50", "P90", "P99", "P999", "Max", "ErrorsByCode");
  }
  size_t nm = rrpc__server_method_count(srv);
  for (size_t i = 0; i < nm; i++) {
    const char *svc, *m;
    const rrpc__call_stats *rec;
    rrpc__server_method_at(srv, i, &svc, &m, &rec);
    rrpc_call_stats st;
    rrpc__call_stats_read(rec, &st);
    if (json) {
      rrpc__sb_puts(&b, i ? ",{\"service\":" : "{\"service\":");
      rrpc__sb_json_str(&b, svc);
      rrpc__sb_puts(&b, ",\"method\":");
      rrpc__sb_json_str(&b, m);
      rrpc__sb_puts(&b, ",");
      stats_json(&b, &st, rec);
      rrpc__sb_puts(&b, "}");
    } else {
      char name[300];
      snprintf(name, sizeof name, "%s.%s", svc, m);
      stats_text(&b, name, &st, rec);
    }
  }
  if (json) rrpc__sb_puts(&b, "]}\n");
  else stats_text(&b, "(all calls)", &tot, rrpc__server_totals(srv));
  finish(sock, req, json ? JSON : TEXT, &b);
  rrpc__sb_free(&b);
}

/* ---- /vars and /metrics -------------------------------------------------------- */

static void page_vars(rrpc__socket *sock, const rrpc__http_req *req, int fmt) {
  char prefix[RRPC_HTTP_QUERY_MAX] = "";
  if (fmt != RRPC_FMT_PROM) rrpc__http_query_get(req->query, "prefix", prefix, sizeof prefix);
  rrpc__varlist l;
  rrpc__vars_collect(&l);
  rrpc__sb b;
  rrpc__sb_init(&b, RRPC_SB_PAGE_MAX);
  rrpc__vars_render(&l, fmt, prefix, &b);
  rrpc__vars_free(&l);
  finish(sock, req, fmt == RRPC_FMT_JSON ? JSON : fmt == RRPC_FMT_PROM ? PROM : TEXT, &b);
  rrpc__sb_free(&b);
}

/* ---- /flags ----------------------------------------------------------------- */

static pthread_mutex_t g_flags_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc_flags_source_fn g_flags_fn;
static void *g_flags_arg;

void rrpc_builtin_set_flags_source(rrpc_flags_source_fn fn, void *arg) {
  pthread_mutex_lock(&g_flags_mu);
  g_flags_fn = fn;
  g_flags_arg = arg;
  pthread_mutex_unlock(&g_flags_mu);
}

struct flag_ctx {
  rrpc__sb *b;
  int json, first;
};

static void flag_row(void *ctx, const char *name, const char *value, const char *desc) {
  struct flag_ctx *f = ctx;
  if (f->json) {
    rrpc__sb_puts(f->b, f->first ? "\n{\"name\":" : ",\n{\"name\":");
    rrpc__sb_json_str(f->b, name);
    rrpc__sb_puts(f->b, ",\"value\":");
    rrpc__sb_json_str(f->b, value);
    rrpc__sb_puts(f->b, ",\"description\":");
    rrpc__sb_json_str(f->b, desc ? desc : "");
    rrpc__sb_puts(f->b, "}");
  } else {
    rrpc__sb_printf(f->b, "%-36s %-20s %s\n", name, value, desc ? desc : "");
  }
  f->first = 0;
}

static void flag_num(struct flag_ctx *f, const char *name, long long v, const char *desc) {
  char s[32];
  snprintf(s, sizeof s, "%lld", v);
  flag_row(f, name, s, desc);
}

static void page_flags(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req, int json) {
  rrpc__sb b;
  rrpc__sb_init(&b, RRPC_SB_PAGE_MAX);
  struct flag_ctx f = {&b, json, 1};
  if (json) rrpc__sb_puts(&b, "{\"flags\":[");
  else rrpc__sb_printf(&b, "%-36s %-20s %s\n", "Name", "Value", "Description");
  rrpc_builtin_options bo;
  rrpc_builtin_get_options(&bo);
  flag_num(&f, "builtin_max_request_bytes", (long long)bo.max_request_bytes, "largest HTTP request head");
  flag_num(&f, "builtin_max_connections_listed", (long long)bo.max_connections_listed, "rows of /connections");
  flag_num(&f, "builtin_max_concurrent_listings", (long long)bo.max_concurrent_listings,
           "/connections and /rdma pages built at once");
  flag_num(&f, "metrics_enabled", rrpc_metrics_enabled(), "call figures recorded");
  const rrpc_server_options *o = rrpc__server_options(srv);
  flag_num(&f, "server.num_threads", o->num_threads, "loop threads of this server (0 = shared)");
  flag_num(&f, "server.use_rdma", o->use_rdma, "this server offers RDMA");
  /* handlers_in_pool is the option as given (brpc's usercode_in_pthread,
   * kept for compatibility); where handlers run is handlers_in_loop's. */
  flag_num(&f, "server.handlers_in_pool", !o->handlers_in_loop,
           "handlers run on the worker pool (all but RRPC_RUN_IN_LOOP methods)");
  flag_num(&f, "server.handlers_in_loop", o->handlers_in_loop, "handlers run on the loop thread that read them");
  flag_num(&f, "server.max_body_size", (long long)o->max_body_size, "0 = 64 MiB");
  rrpc__rdma_runtime_facts rt;
  if (rrpc__rdma_runtime_facts_get(&rt) == 0) {
    flag_num(&f, "rdma.sq_size", rt.sq_size, "send queue depth");
    flag_num(&f, "rdma.rq_size", rt.rq_size, "receive queue depth");
    flag_num(&f, "rdma.ring_size", (long long)rt.ring_size, "receive ring bytes per connection");
    flag_num(&f, "rdma.use_polling", rt.use_polling, "busy-poll CQs");
    flag_num(&f, "rdma.fallback", rt.fallback, "fall back to TCP when RDMA cannot be set up");
    flag_num(&f, "rdma.handshake_timeout_ms", rt.handshake_timeout_ms, "per CLC step");
    flag_num(&f, "rdma.pool_max_bytes", (long long)rt.pool_max_bytes, "cap of the registered pool");
  }
  pthread_mutex_lock(&g_flags_mu);
  rrpc_flags_source_fn fn = g_flags_fn;
  void *arg = g_flags_arg;
  pthread_mutex_unlock(&g_flags_mu);
  if (fn) fn(arg, flag_row, &f);
  if (json) rrpc__sb_puts(&b, "\n]}\n");
  finish(sock, req, json ? JSON : TEXT, &b);
  rrpc__sb_free(&b);
}

/* ---- the router ------------------------------------------------------------------ */

static const struct {
  const char *path, *what;
} k_pages[] = {
    {"/status", "version, pid, start time, command line; methods and their figures"},
    {"/connections", "one line per connection (?detail=1 for more columns)"},
    {"/rdma", "device, port, GIDs in use, memory pool, RDMA counters"},
    {"/vars", "every metric (?prefix=rrpc_method_)"},
    {"/flags", "current settings"},
    {"/metrics", "Prometheus text format"},
    {"/health", "200 \"OK\" while the server runs (load balancers, probes)"},
    {"/version", "the rrpc version"},
};

static void page_index(rrpc__socket *sock, const rrpc__http_req *req) {
  rrpc__sb b;
  rrpc__sb_init(&b, 8192);
  size_t n = sizeof k_pages / sizeof k_pages[0];
  if (req->accepts_html) {
    rrpc__page_html_begin(&b, "builtin pages");
    rrpc__sb_printf(&b, "<h3>rrpc %s builtin pages</h3><table>", rrpc_version_string());
    for (size_t i = 0; i < n; i++)
      rrpc__sb_printf(&b, "<tr><td><a href=\"%s\">%s</a></td><td>%s</td></tr>", k_pages[i].path, k_pages[i].path,
                      k_pages[i].what);
    rrpc__sb_puts(&b, "</table><p>Add ?format=json for JSON.</p>");
    rrpc__page_html_end(&b);
    rrpc__builtin_count_status(200);
    rrpc__http_respond(sock, 200, HTML, &b, req->is_head);
    rrpc__sb_free(&b);
    return;
  }
  rrpc__sb_puts(&b, "rrpc builtin pages (add ?format=json for JSON):\n");
  for (size_t i = 0; i < n; i++) rrpc__sb_printf(&b, "%-13s %s\n", k_pages[i].path, k_pages[i].what);
  finish(sock, req, TEXT, &b);
  rrpc__sb_free(&b);
}

/* /health is for probes: 200 with a short body whatever they accept. */
static void page_health(rrpc__socket *sock, const rrpc__http_req *req) {
  rrpc__sb b;
  rrpc__sb_init(&b, 64);
  rrpc__sb_puts(&b, "OK\n");
  rrpc__builtin_count_status(200);
  rrpc__http_respond(sock, 200, TEXT, &b, req->is_head);
  rrpc__sb_free(&b);
}

static void page_version(rrpc__socket *sock, const rrpc__http_req *req, int json) {
  rrpc__sb b;
  rrpc__sb_init(&b, 128);
  if (json) rrpc__sb_printf(&b, "{\"rrpc_version\":\"%s\"}\n", rrpc_version_string());
  else rrpc__sb_printf(&b, "rrpc %s\n", rrpc_version_string());
  finish(sock, req, json ? JSON : TEXT, &b);
  rrpc__sb_free(&b);
}

void rrpc__page_serve(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req) {
  int json = rrpc__page_want_json(req);
  const char *p = req->path;
  if (strcmp(p, "/") == 0 || strcmp(p, "/index") == 0) page_index(sock, req);
  else if (strcmp(p, "/status") == 0) page_status(srv, sock, req, json);
  else if (strcmp(p, "/vars") == 0) page_vars(sock, req, json ? RRPC_FMT_JSON : RRPC_FMT_TEXT);
  else if (strcmp(p, "/metrics") == 0) page_vars(sock, req, RRPC_FMT_PROM);
  else if (strcmp(p, "/flags") == 0) page_flags(srv, sock, req, json);
  else if (strcmp(p, "/connections") == 0) rrpc__page_connections(srv, sock, req, json, 0);
  else if (strcmp(p, "/rdma") == 0) rrpc__page_connections(srv, sock, req, json, 1);
  else if (strcmp(p, "/health") == 0) page_health(sock, req);
  else if (strcmp(p, "/version") == 0) page_version(sock, req, json);
  else {
    rrpc__builtin_count_status(404);
    rrpc__sb b;
    rrpc__sb_init(&b, 512);
    rrpc__sb_puts(&b, "404 Not Found: try /\n");
    rrpc__http_respond(sock, 404, TEXT, &b, req->is_head);
    rrpc__sb_free(&b);
  }
}
