/* loop_group.c - fixed sets of event loops picked round robin, and the
 * process-wide group that channels and servers share (internal/loop.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"
#include "rrpc/loops.h"

enum { THREAD_NAME_MAX = 16 };

struct rrpc__loop_group {
  int n;
  atomic_ulong next; /* round-robin cursor; 64 bits, so it never wraps */
  rrpc__loop *loops[]; /* owned; n entries */
};

static _Atomic(rrpc__loop_group *) g_global;
static int g_global_n; /* rrpc_set_event_dispatcher_num; 0 = default (under g_global_mu) */
static pthread_mutex_t g_global_mu = PTHREAD_MUTEX_INITIALIZER;

/* "name-i", cutting `name` rather than the suffix to fit the 15 characters
 * Linux keeps of a thread name. */
static void member_name(char out[THREAD_NAME_MAX], const char *name, int i) {
  char suffix[16];
  size_t slen = (size_t)snprintf(suffix, sizeof suffix, "-%d", i);
  size_t keep = strlen(name);
  if (keep > THREAD_NAME_MAX - 1 - slen) keep = THREAD_NAME_MAX - 1 - slen;
  memcpy(out, name, keep);
  memcpy(out + keep, suffix, slen + 1);
}

int rrpc__loop_group_start(int n, const char *name, rrpc__loop_group **out) {
  if (n <= 0) return -EINVAL;
  rrpc__loop_group *g = calloc(1, sizeof *g + (size_t)n * sizeof g->loops[0]);
  if (!g) return -ENOMEM;
  atomic_init(&g->next, 0);
  int rc = 0;
  for (g->n = 0; g->n < n; g->n++) {
    char tname[THREAD_NAME_MAX];
    member_name(tname, name ? name : "rrpc-loop", g->n);
    rc = rrpc__loop_start(tname, &g->loops[g->n]);
    if (rc) goto fail;
  }
  *out = g;
  return 0;

fail:
  while (g->n > 0) rrpc__loop_stop(g->loops[--g->n]);
  free(g);
  return rc;
}

void rrpc__loop_group_stop(rrpc__loop_group *g) {
  if (!g) return;
  if (g == atomic_load_explicit(&g_global, memory_order_acquire)) {
    RRPC_LOG(ERROR, "rrpc__loop_group_stop: the global group lives until exit; ignored");
    return;
  }
  for (int i = 0; i < g->n; i++) rrpc__loop_stop(g->loops[i]);
  free(g);
}

int rrpc__loop_group_size(const rrpc__loop_group *g) { return g->n; }

rrpc__loop *rrpc__loop_group_next(rrpc__loop_group *g) {
  unsigned long i = atomic_fetch_add_explicit(&g->next, 1, memory_order_relaxed);
  return g->loops[i % (unsigned long)g->n];
}

/* One loop per CPU: a loop is one thread that is either busy (then it
 * wants a core) or asleep in epoll (then it costs nothing). Fewer loops cap
 * a process with many connections at fewer cores, which issue 11 measured
 * (4 loops: the client stopped near 720k QPS on 16 cores). */
static int default_size(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus < 1 ? 1 : (int)cpus;
}

int rrpc_set_event_dispatcher_num(int n) {
  if (n < 0) return -EINVAL;
  int rc = 0;
  pthread_mutex_lock(&g_global_mu);
  rrpc__loop_group *g = atomic_load_explicit(&g_global, memory_order_relaxed);
  if (g != NULL && n != g->n && !(n == 0 && g->n == default_size())) rc = -EBUSY;
  else if (g == NULL) g_global_n = n;
  pthread_mutex_unlock(&g_global_mu);
  return rc;
}

int rrpc_event_dispatcher_num(void) {
  pthread_mutex_lock(&g_global_mu);
  rrpc__loop_group *g = atomic_load_explicit(&g_global, memory_order_relaxed);
  int n = g != NULL ? g->n : g_global_n ? g_global_n : default_size();
  pthread_mutex_unlock(&g_global_mu);
  return n;
}

int rrpc__loop_group_global(int n, rrpc__loop_group **out) {
  if (n < 0) return -EINVAL;
  rrpc__loop_group *g = atomic_load_explicit(&g_global, memory_order_acquire);
  if (g) goto done;
  /* A mutex rather than pthread_once: a failed start must leave the next
   * caller free to try again, and the error must reach this caller. */
  pthread_mutex_lock(&g_global_mu);
  g = atomic_load_explicit(&g_global, memory_order_relaxed);
  if (!g) {
    if (n == 0) n = g_global_n ? g_global_n : default_size();
    int rc = rrpc__loop_group_start(n, "rrpc-loop", &g);
    if (rc) {
      pthread_mutex_unlock(&g_global_mu);
      return rc;
    }
    atomic_store_explicit(&g_global, g, memory_order_release);
  }
  pthread_mutex_unlock(&g_global_mu);
done:
  *out = g;
  return 0;
}
