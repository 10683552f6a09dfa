/* remote/limits.c - the process-wide remote-memory limits (rrpc/remote.h's
 * rrpc_remote_limits): checked when set, read once by each new link so a
 * link's arrays and queues never see a limit change under them. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>

#include "rrpc/remote.h"
#include "rrpc/remote/limits.h"

enum {
  DEF_PIECE = 1 << 20,
  MIN_PIECE = 4096,
  DEF_INFLIGHT = 8,
  DEF_REGIONS = 4096,
  MAX_REGIONS = 1 << 20,
  DEF_BIND_WAIT_MS = 10000,
  MAX_BIND_WAIT_MS = 600000,
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc_remote_limits g_lim; /* zeros: defaults */

static void fill_defaults(rrpc_remote_limits *l) {
  if (l->piece_size == 0) l->piece_size = DEF_PIECE;
  if (l->max_inflight == 0) l->max_inflight = DEF_INFLIGHT;
  if (l->max_regions == 0) l->max_regions = DEF_REGIONS;
  if (l->bind_wait_ms == 0) l->bind_wait_ms = DEF_BIND_WAIT_MS;
}

/* Out-of-range values are refused, not clamped: a flag typo should be
 * seen, not quietly turned into some other limit. */
static int valid(const rrpc_remote_limits *l) {
  if (l->piece_size != 0 && (l->piece_size < MIN_PIECE || l->piece_size > DEF_PIECE)) return 0;
  if (l->max_inflight < 0 || l->max_inflight > RRPC__RMT_INFLIGHT_CAP) return 0;
  if (l->max_regions > MAX_REGIONS) return 0;
  if (l->bind_wait_ms < 0 || l->bind_wait_ms > MAX_BIND_WAIT_MS) return 0;
  return 1;
}

int rrpc_remote_limits_set(const rrpc_remote_limits *l) {
  rrpc_remote_limits n = {0};
  if (l != NULL) n = *l;
  if (!valid(&n)) return -EINVAL;
  pthread_mutex_lock(&g_mu);
  g_lim = n;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

void rrpc_remote_limits_get(rrpc_remote_limits *out) {
  pthread_mutex_lock(&g_mu);
  *out = g_lim;
  pthread_mutex_unlock(&g_mu);
  fill_defaults(out);
}
