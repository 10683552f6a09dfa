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
  int is_counter;   /* else a gauge */
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
} rrpc__process_facts;
/* From /proc/self; fields it cannot read stay 0. */
void rrpc__process_facts_get(rrpc__process_facts *out);

#endif /* RRPC_BUILTIN_VARS_H */
