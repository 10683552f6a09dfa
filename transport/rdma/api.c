/* api.c - the public RDMA API of rrpc/rdma.h in a build with RDMA: global
 * options (set once, frozen on first use), availability, user memory
 * registration and the process-wide counters. The device is device.c's,
 * the pool pool.c's. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/rdma.h"
#include "rrpc/transport.h"
#include "transport/rdma/device.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/pool.h"
#include "transport/rdma/verbs_bg.h"

enum {
  DEFAULT_PORT = 1,
  DEFAULT_QUEUE = 128,
  DEFAULT_HANDSHAKE_MS = 2000,
  DEFAULT_MAX_HANDSHAKES = 64,
  DEFAULT_CLOSE_WAIT_MS = 1000,
  DEFAULT_CURSOR_STALL_MS = 60000,
  DEFAULT_TCP_ONLY_TTL_S = 300,
  DEFAULT_BRPC_ACK_SETTLE_US = 20000,
  DEFAULT_POOL_INITIAL_MB = 64,
  DEFAULT_POOL_INCREASE_MB = 64,
  DEFAULT_POOL_MAX_MB = 4096,
  DEFAULT_REGISTERED_MAX_MB = 4096 + 1024,
  DEFAULT_BG_QUEUE_MAX = 4096,
  DEFAULT_PIECE_CACHE_MB = 8, /* elastic rings: about 6 MiB is what the cache aims at (pieces_mem.c) */
  /* Elastic send queue: the peer's 16 receive credits bound the writes and
   * control messages in flight; 31 leaves room for as many window binds
   * and unsignaled WRs, and is 2^k - 1 because rxe rounds n + 1 up. */
  DEFAULT_ELASTIC_SQ = 31,
  /* Elastic rings: pieces retired while the application holds them, per
   * connection, as multiples of the ring. Half of it is the zero-copy
   * budget (elastic_dp.c), and a 1 MiB message pins ~1.25 MiB of pieces
   * until its last byte: 4 lets one go up whole without a copy. */
  RETIRED_PER_RING = 4,
  ELASTIC_SQ_MIN = 8,
  ELASTIC_SQ_MAX = 4096,
  DEVICE_NAME_MAX = 64, /* rrpc__rdma_dev.name */
  QUEUE_MAX = 65535,    /* sq/rq depths travel in 16 bits in brpc-like tools */
};
static const size_t RING_MIN = (size_t)16 << 10;
static const size_t RING_DEFAULT = (size_t)1 << 20;
/* The largest ring a CLC Accept can announce (16 KiB << 15, the code's
 * 4 bits as rrpc peers read them): a larger one would make every RDMA
 * connection fail at its handshake instead of this call. */
static const size_t RING_MAX = (size_t)512 << 20;

/* ---- options ---------------------------------------------------------------- */

static pthread_mutex_t g_opts_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_opts_frozen; /* 1 once g_opts is final; then read without the lock */
static rrpc_rdma_options g_opts;
static char g_device[DEVICE_NAME_MAX]; /* g_opts.device points here (a copy) */

void rrpc_rdma_options_init(rrpc_rdma_options *o) {
  memset(o, 0, sizeof *o);
  o->device = NULL;
  o->port = DEFAULT_PORT;
  o->gid_index_plus1 = 0;
  o->sq_size = DEFAULT_QUEUE;
  o->rq_size = DEFAULT_QUEUE;
  o->ring_size = RING_DEFAULT;
  o->pool_initial_size_mb = DEFAULT_POOL_INITIAL_MB;
  o->pool_increase_size_mb = DEFAULT_POOL_INCREASE_MB;
  o->pool_max_size_mb = DEFAULT_POOL_MAX_MB;
  o->handshake_timeout_ms = DEFAULT_HANDSHAKE_MS;
  o->zerocopy_min_size = 64 * 1024;
  o->max_handshakes = DEFAULT_MAX_HANDSHAKES;
  o->registered_max_size_mb = DEFAULT_REGISTERED_MAX_MB;
  o->close_wait_ms = DEFAULT_CLOSE_WAIT_MS;
  o->cursor_stall_ms = DEFAULT_CURSOR_STALL_MS;
  o->tcp_only_ttl_s = DEFAULT_TCP_ONLY_TTL_S;
  o->brpc_ack_settle_us = DEFAULT_BRPC_ACK_SETTLE_US;
  o->bg_queue_max = DEFAULT_BG_QUEUE_MAX;
  o->piece_cache_size_mb = DEFAULT_PIECE_CACHE_MB;
  o->elastic_sq_size = DEFAULT_ELASTIC_SQ;
  o->elastic = RRPC_RDMA_ELASTIC_ON;
}

/* Smallest 16 KiB << n that holds `want` (the ring is indexed with a mask
 * and SMC-R encodes RMB sizes as 16 KiB << n, so sizes in between would
 * only be wasted or unencodable; rounding up never gives less than asked). */
static size_t ring_round_up(size_t want) {
  size_t r = RING_MIN;
  while (r < want) r <<= 1;
  return r;
}

/* An environment variable "0" or "1" overrides a switch; anything else is
 * ignored. */
static void env_switch(const char *name, int *sw) {
  const char *v = getenv(name);
  if (v != NULL && (v[0] == '0' || v[0] == '1') && v[1] == '\0') *sw = v[0] == '1';
}

/* Copy `in` with zeros turned into defaults and checked. 0 or -EINVAL. */
static int options_normalize(const rrpc_rdma_options *in, rrpc_rdma_options *out,
                             char device[DEVICE_NAME_MAX]) {
  rrpc_rdma_options def;
  rrpc_rdma_options_init(&def);
  *out = *in;
  if (in->port < 0 || in->port > 255 || in->gid_index_plus1 < 0 || in->sq_size < 0 ||
      in->sq_size > QUEUE_MAX || in->rq_size < 0 || in->rq_size > QUEUE_MAX ||
      in->handshake_timeout_ms < 0 || in->ring_size > RING_MAX || in->max_handshakes < 0 ||
      in->close_wait_ms < 0 || in->bg_queue_max < 0 || in->bg_setup_threads < 0 || in->bg_setup_threads > 64 || (in->dialect != RRPC_RDMA_DIALECT_AUTO && in->dialect != RRPC_RDMA_DIALECT_IMM &&
                                in->dialect != RRPC_RDMA_DIALECT_BRPC && in->dialect != RRPC_RDMA_DIALECT_CURSOR))
    return -EINVAL;
  device[0] = '\0';
  out->device = NULL;
  if (in->device && in->device[0]) {
    size_t len = strlen(in->device);
    if (len >= DEVICE_NAME_MAX) return -EINVAL;
    memcpy(device, in->device, len + 1);
    out->device = device;
  }
  if (out->port == 0) out->port = def.port;
  if (out->sq_size == 0) out->sq_size = def.sq_size;
  if (out->rq_size == 0) out->rq_size = def.rq_size;
  out->ring_size = out->ring_size ? ring_round_up(out->ring_size) : def.ring_size;
  if (out->pool_initial_size_mb == 0) out->pool_initial_size_mb = def.pool_initial_size_mb;
  if (out->pool_increase_size_mb == 0) out->pool_increase_size_mb = def.pool_increase_size_mb;
  if (out->pool_max_size_mb == 0) out->pool_max_size_mb = def.pool_max_size_mb;
  /* A cap below the first region would refuse the first region: the cap
   * wins, as it is the promise about pinned memory. */
  if (out->pool_initial_size_mb > out->pool_max_size_mb)
    out->pool_initial_size_mb = out->pool_max_size_mb;
  if (out->handshake_timeout_ms == 0) out->handshake_timeout_ms = def.handshake_timeout_ms;
  if (out->zerocopy_min_size == 0) out->zerocopy_min_size = def.zerocopy_min_size;
  if (out->max_handshakes == 0) out->max_handshakes = def.max_handshakes;
  if (out->close_wait_ms == 0) out->close_wait_ms = def.close_wait_ms;
  if (out->cursor_stall_ms == 0) out->cursor_stall_ms = def.cursor_stall_ms;
  if (out->tcp_only_ttl_s == 0) out->tcp_only_ttl_s = def.tcp_only_ttl_s;
  if (out->brpc_ack_settle_us == 0) out->brpc_ack_settle_us = def.brpc_ack_settle_us;
  if (out->bg_queue_max == 0) out->bg_queue_max = def.bg_queue_max;
  if (out->registered_max_size_mb == 0) out->registered_max_size_mb = def.registered_max_size_mb;
  if (out->registered_max_size_mb > (SIZE_MAX >> 21)) return -EINVAL;
  out->use_polling = in->use_polling != 0;
  out->trace_verbose = in->trace_verbose != 0;
  out->no_fallback = in->no_fallback != 0;
  out->recv_zerocopy = in->recv_zerocopy != 0;
  if (in->elastic < RRPC_RDMA_ELASTIC_OFF || in->elastic > RRPC_RDMA_ELASTIC_ON) return -EINVAL;
  out->elastic = in->elastic != RRPC_RDMA_ELASTIC_OFF;
  if (in->ring_idle_ms < 0) return -EINVAL;
  if (in->elastic_sq_size != 0 && (in->elastic_sq_size < ELASTIC_SQ_MIN || in->elastic_sq_size > ELASTIC_SQ_MAX))
    return -EINVAL;
  if (out->elastic_sq_size == 0) out->elastic_sq_size = DEFAULT_ELASTIC_SQ;
  if (out->ring_idle_ms == 0) out->ring_idle_ms = 2000;
  if (out->retired_max_size == 0) out->retired_max_size = RETIRED_PER_RING * out->ring_size;
  if (out->piece_cache_size_mb == 0) out->piece_cache_size_mb = DEFAULT_PIECE_CACHE_MB;
  /* The cache's bytes are registered: never more than the process may pin
   * (a small cap with the default cache is a valid setting, not an error). */
  if (out->piece_cache_size_mb > out->registered_max_size_mb) out->piece_cache_size_mb = out->registered_max_size_mb;
  /* Knobs for a whole test suite's processes, whatever options each test
   * passes: RRPC_RDMA_ELASTIC=1 (or 0) and RRPC_RDMA_POLLING=1 (or 0) win. */
  env_switch("RRPC_RDMA_ELASTIC", &out->elastic);
  env_switch("RRPC_RDMA_POLLING", &out->use_polling);
  out->use_cm = in->use_cm != 0;
  if (in->cm_port < 0 || in->cm_port > 65535) return -EINVAL;
  env_switch("RRPC_RDMA_USE_CM", &out->use_cm);
  /* The suite's cursor pass (test/rdma/cursor-mode.sh) forces the dialect
   * of every process it starts, as RRPC_RDMA_POLLING does polling. */
  const char *d = getenv("RRPC_RDMA_DIALECT");
  if (d != NULL && strcmp(d, "cursor") == 0) out->dialect = RRPC_RDMA_DIALECT_CURSOR;
  else if (d != NULL && strcmp(d, "imm") == 0) out->dialect = RRPC_RDMA_DIALECT_IMM;
  return 0;
}

int rrpc_rdma_global_init(const rrpc_rdma_options *o) {
  rrpc_rdma_options def, norm;
  char device[DEVICE_NAME_MAX];
  if (o == NULL) {
    rrpc_rdma_options_init(&def);
    o = &def;
  }
  int rc = options_normalize(o, &norm, device);
  if (rc) return rc;
  pthread_mutex_lock(&g_opts_mu);
  if (atomic_load_explicit(&g_opts_frozen, memory_order_relaxed)) {
    pthread_mutex_unlock(&g_opts_mu);
    return -EALREADY;
  }
  memcpy(g_device, device, sizeof g_device);
  g_opts = norm;
  if (g_opts.device) g_opts.device = g_device;
  atomic_store_explicit(&g_opts_frozen, 1, memory_order_release);
  pthread_mutex_unlock(&g_opts_mu);
  return 0;
}

const rrpc_rdma_options *rrpc__rdma_options(void) {
  if (!atomic_load_explicit(&g_opts_frozen, memory_order_acquire)) {
    /* First use without rrpc_rdma_global_init: freeze the defaults. Losing
     * the race to a concurrent global_init is fine: its options stand. */
    rrpc_rdma_options def;
    rrpc_rdma_options_init(&def);
    pthread_mutex_lock(&g_opts_mu);
    if (!atomic_load_explicit(&g_opts_frozen, memory_order_relaxed)) {
      options_normalize(&def, &g_opts, g_device);
      atomic_store_explicit(&g_opts_frozen, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_opts_mu);
  }
  return &g_opts;
}

/* ---- availability ---------------------------------------------------------- */

int rrpc_rdma_available(void) {
  rrpc__rdma_dev *d;
  return rrpc__rdma_dev_get(&d) == 0;
}

/* ---- user memory --------------------------------------------------------------
 * User regions are kept in a list so deregister can tell its own cookies
 * from pool regions and from garbage (both share the region magic, which
 * the data path reads), and a second deregister is -EINVAL, not a double
 * free. */

typedef struct user_region {
  rrpc__rdma_region r; /* first: the cookie handed out is &r */
  struct user_region *prev, *next;
} user_region;

static pthread_mutex_t g_user_mu = PTHREAD_MUTEX_INITIALIZER;
static user_region *g_user_head;

int rrpc_rdma_register_memory(void *addr, size_t len, void **region) {
  if (region == NULL) return -EINVAL;
  *region = NULL;
  if (addr == NULL || len == 0) return -EINVAL;
  rrpc__rdma_dev *d;
  int rc = rrpc__rdma_dev_get(&d);
  if (rc) return rc;
  user_region *u = calloc(1, sizeof *u);
  if (u == NULL) return -ENOMEM;
  /* LOCAL_WRITE only: sends need just the lkey, and no peer may write
   * here (remote access would be a liberty the user did not grant). */
  struct ibv_mr *mr = ibv_reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
  if (mr == NULL) {
    int err = errno;
    RRPC_LOG(WARNING, "rdma: registering %zu bytes of user memory at %p failed: %s%s", len, addr,
             strerror(err), err == ENOMEM || err == EPERM ? " (check ulimit -l)" : "");
    free(u);
    return -RRPC_ERDMAMEM;
  }
  u->r.magic = RRPC_RDMA_REGION_MAGIC;
  u->r.lkey = mr->lkey;
  u->r.mr = mr;
  u->r.base = addr;
  u->r.len = len;
  pthread_mutex_lock(&g_user_mu);
  u->next = g_user_head;
  if (g_user_head) g_user_head->prev = u;
  g_user_head = u;
  pthread_mutex_unlock(&g_user_mu);
  *region = &u->r;
  return 0;
}

int rrpc_rdma_deregister_memory(void *region) {
  if (region == NULL) return -EINVAL;
  pthread_mutex_lock(&g_user_mu);
  user_region *u = g_user_head;
  while (u && &u->r != region) u = u->next;
  if (u) {
    if (u->prev) u->prev->next = u->next;
    else g_user_head = u->next;
    if (u->next) u->next->prev = u->prev;
  }
  pthread_mutex_unlock(&g_user_mu);
  if (u == NULL) return -EINVAL;
  int rc = ibv_dereg_mr(u->r.mr);
  if (rc) RRPC_LOG(ERROR, "rdma: ibv_dereg_mr of user memory %p: %s", (void *)u->r.base, strerror(rc));
  u->r.magic = 0; /* a stale cookie no longer looks registered */
  free(u);
  return 0;
}

/* ---- counters ------------------------------------------------------------------ */

static _Atomic uint64_t g_counters[RRPC_RDMA_CNT__COUNT];
static _Atomic uint64_t g_fallback_reason;

/* Distinct decline codes already logged at WARNING (the rest go to DEBUG so
 * a fleet of falling-back connections does not flood the log). */
enum { SEEN_CODES = 16 };
static _Atomic uint32_t g_seen_codes[SEEN_CODES];

void rrpc__rdma_count(rrpc__rdma_counter c, uint64_t n) {
  if ((unsigned)c >= RRPC_RDMA_CNT__COUNT) return;
  atomic_fetch_add_explicit(&g_counters[c], n, memory_order_relaxed);
}

static int first_sighting(uint32_t code) {
  for (int i = 0; i < SEEN_CODES; i++) {
    uint32_t cur = atomic_load_explicit(&g_seen_codes[i], memory_order_relaxed);
    if (cur == code + 1u) return 0;
    if (cur == 0) {
      uint32_t zero = 0;
      if (atomic_compare_exchange_strong_explicit(&g_seen_codes[i], &zero, code + 1u,
                                                  memory_order_relaxed, memory_order_relaxed))
        return 1;
      if (zero == code + 1u) return 0;
    }
  }
  return 0; /* table full: enough variety logged */
}

void rrpc__rdma_note_fallback(uint32_t decline_code) {
  atomic_fetch_add_explicit(&g_counters[RRPC_RDMA_CNT_CONN_FALLBACK], 1, memory_order_relaxed);
  atomic_store_explicit(&g_fallback_reason, decline_code, memory_order_relaxed);
  if (first_sighting(decline_code))
    RRPC_LOG(WARNING, "rdma: connection falls back to TCP, reason 0x%08x %s (further ones with this "
             "reason are logged at DEBUG)", decline_code, rrpc__transport_fallback_text(decline_code));
  else
    RRPC_LOG(DEBUG, "rdma: connection falls back to TCP, reason 0x%08x %s", decline_code,
             rrpc__transport_fallback_text(decline_code));
}

static uint64_t load(rrpc__rdma_counter c) {
  return atomic_load_explicit(&g_counters[c], memory_order_relaxed);
}

int rrpc_rdma_get_stats(rrpc_rdma_stats *out) {
  if (out == NULL) return -EINVAL;
  memset(out, 0, sizeof *out);
  out->connections_rdma = load(RRPC_RDMA_CNT_CONN_RDMA);
  out->connections_fallback = load(RRPC_RDMA_CNT_CONN_FALLBACK);
  out->fallback_last_reason = atomic_load_explicit(&g_fallback_reason, memory_order_relaxed);
  out->bytes_written = load(RRPC_RDMA_CNT_BYTES_WRITTEN);
  out->bytes_received = load(RRPC_RDMA_CNT_BYTES_RECEIVED);
  out->writes = load(RRPC_RDMA_CNT_WRITES);
  out->cdc_sent = load(RRPC_RDMA_CNT_CDC_SENT);
  out->completions = load(RRPC_RDMA_CNT_COMPLETIONS);
  out->wakeups = load(RRPC_RDMA_CNT_WAKEUPS);
  out->solicited = load(RRPC_RDMA_CNT_SOLICITED);
  out->blocked_on_window = load(RRPC_RDMA_CNT_BLOCKED);
  out->pool_bytes = rrpc__rdma_pool_bytes();
  out->handshakes_refused = load(RRPC_RDMA_CNT_HS_REFUSED);
  out->handshakes_in_progress = rrpc__rdma_hs_in_progress();
  out->protocol_violations = load(RRPC_RDMA_CNT_PROTO_VIOLATION);
  out->close_unconfirmed = load(RRPC_RDMA_CNT_CLOSE_UNCONFIRMED);
  out->ring_bytes = load(RRPC_RDMA_CNT_RING_BYTES);
  out->slot_bytes = load(RRPC_RDMA_CNT_SLOT_BYTES);
  out->registered_cap_refused = load(RRPC_RDMA_CNT_OVER_REGISTERED_CAP);
  out->bytes_copied_send = load(RRPC_RDMA_CNT_COPIED_SEND);
  out->bytes_copied_recv = load(RRPC_RDMA_CNT_COPIED_RECV);
  struct rrpc__verbs_bg_stats bg;
  rrpc__verbs_bg_stats(&bg);
  out->bg_jobs_queued = bg.queued;
  out->bg_jobs_done = bg.done;
  out->bg_jobs_inline = bg.inline_run;
  out->bg_queue_max_depth = bg.max_depth;
  out->connections_elastic = load(RRPC_RDMA_CNT_CONN_ELASTIC);
  out->piece_grants = load(RRPC_RDMA_CNT_PIECE_GRANTS);
  out->piece_retires_held = load(RRPC_RDMA_CNT_PIECE_RETIRES_HELD);
  out->piece_retires_shrink = load(RRPC_RDMA_CNT_PIECE_RETIRES_SHRINK);
  out->piece_handbacks = load(RRPC_RDMA_CNT_PIECE_HANDBACKS);
  out->piece_wants = load(RRPC_RDMA_CNT_PIECE_WANTS);
  out->piece_retire_refused = load(RRPC_RDMA_CNT_PIECE_RETIRE_REFUSED);
  out->piece_grant_refused = load(RRPC_RDMA_CNT_PIECE_GRANT_REFUSED);
  out->piece_table_full = load(RRPC_RDMA_CNT_PIECE_TABLE_FULL);
  out->pool_grows_ahead = load(RRPC_RDMA_CNT_POOL_GROWS_AHEAD);
  out->pool_grows_inline = load(RRPC_RDMA_CNT_POOL_GROWS_INLINE);
  out->pool_grow_waits = load(RRPC_RDMA_CNT_POOL_GROW_WAITS);
  out->blocked_on_send_queue = load(RRPC_RDMA_CNT_BLOCKED_SQ);
  out->ring_full_held = load(RRPC_RDMA_CNT_RING_FULL_HELD);
  out->piece_bind_waits = load(RRPC_RDMA_CNT_PIECE_BIND_WAITS);
  out->cm_connects = load(RRPC_RDMA_CNT_CM_CONNECTS);
  out->cm_accepts = load(RRPC_RDMA_CNT_CM_ACCEPTS);
  out->cm_failures = load(RRPC_RDMA_CNT_CM_FAILURES);
  out->cursor_stalls = load(RRPC_RDMA_CNT_CURSOR_STALLS);
  out->cm_port_retries = load(RRPC_RDMA_CNT_CM_PORT_RETRIES);
  out->closes_after_held = load(RRPC_RDMA_CNT_CLOSES_AFTER_HELD);
  struct rrpc__dialect_mem_stats ms;
  rrpc__rdma_dialect_mem_stats(&ms);
  out->piece_cached_bytes = ms.piece_cached_bytes;
  out->piece_used_bytes = ms.piece_used_bytes;
  return 0;
}
