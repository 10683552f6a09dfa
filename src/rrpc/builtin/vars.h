/* builtin/vars.h - private to the builtin pages: every metric of the
 * process as one flat list of (name, labels, value), and its three
 * renderings: /vars text, JSON, and Prometheus text (/metrics). The metric
 * names live in the tables of vars.c, one table per source. */
#ifndef RRPC_BUILTIN_VARS_H
#define RRPC_BUILTIN_VARS_H

#include <stddef.h>

#include "rrpc/builtin/strbuf.h"

#define RRPC_VAR_LABELS 4
#define RRPC_VAR_NAME_MAX 64
#define RRPC_VAR_LABEL_MAX 96

typedef struct rrpc__var {
  char name[RRPC_VAR_NAME_MAX];
  const char *help; /* static */
  int is_counter;   /* RRPC_VAR_GAUGE, _COUNTER or _HISTOGRAM */
  const char *suffix; /* static; a histogram's "_bucket", "_sum" or "_count", else "" */
  int nlabels;
  const char *lk[RRPC_VAR_LABELS]; /* static */
  char lv[RRPC_VAR_LABELS][RRPC_VAR_LABEL_MAX];
  double value;
} rrpc__var;

typedef struct rrpc__varlist {
  rrpc__var *v; /* owned */
  size_t n, cap;
  int truncated; /* memory ran short: some vars are missing */
} rrpc__varlist;

/* rrpc__vars_collect - every metric, sorted by name (labels keep their
 * collection order). Any thread; never blocks beyond the registry lock. */
void rrpc__vars_collect(rrpc__varlist *out);
void rrpc__vars_free(rrpc__varlist *l);

enum { RRPC_VAR_GAUGE = 0, RRPC_VAR_COUNTER = 1, RRPC_VAR_HISTOGRAM = 2 };

/* Append one var (labels: NULL-terminated key/value pairs). */
void rrpc__vars_add(rrpc__varlist *l, const char *name, const char *help, int is_counter, double value,
                    ...);

enum { RRPC_FMT_TEXT, RRPC_FMT_JSON, RRPC_FMT_PROM };
/* rrpc__vars_render - vars whose name starts with `prefix` ("" = all). */
void rrpc__vars_render(const rrpc__varlist *l, int fmt, const char *prefix, rrpc__sb *out);

/* ---- process.c ------------------------------------------------------------- */
typedef struct rrpc__process_facts {
  double cpu_seconds;  /* user + system since start */
  double uptime_seconds;
  unsigned long long rss_bytes, vsize_bytes;
  long threads;
  long open_fds;
  double start_unix; /* wall-clock start, seconds since the epoch */
} rrpc__process_facts;
/* From /proc/self; fields it cannot read stay 0. */
void rrpc__process_facts_get(rrpc__process_facts *out);
/* The command line, arguments separated by spaces, cut to len-1 bytes
 * ("" when unreadable). */
void rrpc__process_cmdline(char *buf, size_t len);

#endif /* RRPC_BUILTIN_VARS_H */
