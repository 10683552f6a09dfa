/* metrics_registry.c - the process-wide list of call-figure recorders, so
 * the builtin pages can show every server, method and channel. Owns only the
 * list entries (labels copied); the recorders are their owners'. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/internal/metrics.h"

struct rrpc__stats_reg {
  struct rrpc__stats_reg *prev, *next;
  rrpc__stats_info info;
  char *service, *method, *peer;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc__stats_reg g_head = {.prev = &g_head, .next = &g_head};

static char *dup_or_empty(const char *s) { return strdup(s ? s : ""); }

int rrpc__stats_register(rrpc__stats_kind kind, int port, const char *service, const char *method,
                         const char *peer, const rrpc__call_stats *stats, rrpc__stats_reg **out) {
  rrpc__stats_reg *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  r->service = dup_or_empty(service);
  r->method = dup_or_empty(method);
  r->peer = dup_or_empty(peer);
  if (!r->service || !r->method || !r->peer) {
    free(r->service);
    free(r->method);
    free(r->peer);
    free(r);
    return -ENOMEM;
  }
  r->info = (rrpc__stats_info){.kind = kind, .port = port, .service = r->service,
                               .method = r->method, .peer = r->peer, .stats = stats};
  pthread_mutex_lock(&g_mu);
  r->prev = g_head.prev;
  r->next = &g_head;
  g_head.prev->next = r;
  g_head.prev = r;
  pthread_mutex_unlock(&g_mu);
  *out = r;
  return 0;
}

void rrpc__stats_unregister(rrpc__stats_reg *r) {
  if (r == NULL) return;
  pthread_mutex_lock(&g_mu);
  r->prev->next = r->next;
  r->next->prev = r->prev;
  pthread_mutex_unlock(&g_mu);
  free(r->service);
  free(r->method);
  free(r->peer);
  free(r);
}

void rrpc__stats_visit(void (*fn)(void *ctx, const rrpc__stats_info *info), void *ctx) {
  pthread_mutex_lock(&g_mu);
  for (rrpc__stats_reg *r = g_head.next; r != &g_head; r = r->next) fn(ctx, &r->info);
  pthread_mutex_unlock(&g_mu);
}
