/* limits.c - process-wide limits on buffered input and queued output, and
 * the counters of every limit (rrpc/limits.h). Totals are plain atomics: a
 * check and the add that follows it are not one step, so concurrent
 * connections may pass a limit by at most one read or one message each,
 * which is the price of never taking a lock on the data path. */
#include "rrpc/internal/limits.h"

#include <stdatomic.h>

#include "rrpc/errors.h"

#define DEFAULT_MAX_INPUT ((size_t)1 << 30)
#define DEFAULT_SOCKET_MAX_UNWRITTEN ((size_t)64 << 20)
#define DEFAULT_MAX_UNWRITTEN ((size_t)1 << 30)
#define DEFAULT_SNIFF_TIMEOUT_MS 2000
#define DEFAULT_MAX_PENDING_REQUESTS 1024

static _Atomic size_t max_input = DEFAULT_MAX_INPUT;
_Atomic size_t rrpc__socket_max_unwritten_limit = DEFAULT_SOCKET_MAX_UNWRITTEN; /* internal/limits.h */
static _Atomic size_t max_unwritten = DEFAULT_MAX_UNWRITTEN;
static atomic_int sniff_timeout_ms = DEFAULT_SNIFF_TIMEOUT_MS;
atomic_int rrpc__socket_max_pending_limit = DEFAULT_MAX_PENDING_REQUESTS; /* internal/limits.h */

static _Atomic size_t input_total;
static _Atomic size_t unwritten_total;
static _Atomic uint64_t counters[RRPC__LC_COUNT];

void rrpc_limits_set(const rrpc_limits *l) {
  rrpc_limits d = {0};
  if (l == NULL) l = &d;
  atomic_store(&max_input, l->max_input_bytes ? l->max_input_bytes : DEFAULT_MAX_INPUT);
  atomic_store(&rrpc__socket_max_unwritten_limit,
               l->socket_max_unwritten_bytes ? l->socket_max_unwritten_bytes : DEFAULT_SOCKET_MAX_UNWRITTEN);
  atomic_store(&max_unwritten, l->max_unwritten_bytes ? l->max_unwritten_bytes : DEFAULT_MAX_UNWRITTEN);
  atomic_store(&sniff_timeout_ms, l->clc_sniff_timeout_ms > 0 ? l->clc_sniff_timeout_ms : DEFAULT_SNIFF_TIMEOUT_MS);
  atomic_store(&rrpc__socket_max_pending_limit,
               l->socket_max_pending_requests > 0 ? l->socket_max_pending_requests : DEFAULT_MAX_PENDING_REQUESTS);
}

void rrpc_limits_get(rrpc_limits *out) {
  out->max_input_bytes = atomic_load(&max_input);
  out->socket_max_unwritten_bytes = atomic_load(&rrpc__socket_max_unwritten_limit);
  out->max_unwritten_bytes = atomic_load(&max_unwritten);
  out->clc_sniff_timeout_ms = atomic_load(&sniff_timeout_ms);
  out->socket_max_pending_requests = atomic_load(&rrpc__socket_max_pending_limit);
}

size_t rrpc__limit_max_input(void) { return atomic_load_explicit(&max_input, memory_order_relaxed); }
int rrpc__limit_sniff_timeout_ms(void) { return atomic_load_explicit(&sniff_timeout_ms, memory_order_relaxed); }

int rrpc__input_account(size_t *held, size_t now) {
  size_t before = *held;
  *held = now;
  if (now <= before) {
    atomic_fetch_sub_explicit(&input_total, before - now, memory_order_relaxed);
    return 0;
  }
  size_t total = atomic_fetch_add_explicit(&input_total, now - before, memory_order_relaxed) + (now - before);
  return total > rrpc__limit_max_input();
}

int rrpc__unwritten_reserve(size_t queued, size_t add) {
  if (queued > 0) {
    size_t cap = rrpc__limit_socket_max_unwritten();
    size_t total = atomic_load_explicit(&unwritten_total, memory_order_relaxed);
    if (queued + add > cap || total + add > atomic_load_explicit(&max_unwritten, memory_order_relaxed)) {
      rrpc__limit_count(RRPC__LC_OVERCROWDED_WRITES);
      return -RRPC_EOVERCROWDED;
    }
  }
  atomic_fetch_add_explicit(&unwritten_total, add, memory_order_relaxed);
  return 0;
}

void rrpc__unwritten_release(size_t n) {
  if (n) atomic_fetch_sub_explicit(&unwritten_total, n, memory_order_relaxed);
}

void rrpc__limit_count(rrpc__limit_counter c) {
  atomic_fetch_add_explicit(&counters[c], 1, memory_order_relaxed);
}

void rrpc_limit_stats_get(rrpc_limit_stats *out) {
  out->input_bytes = atomic_load(&input_total);
  out->unwritten_bytes = atomic_load(&unwritten_total);
  out->input_limit_closes = atomic_load(&counters[RRPC__LC_INPUT_LIMIT_CLOSES]);
  out->overcrowded_writes = atomic_load(&counters[RRPC__LC_OVERCROWDED_WRITES]);
  out->read_pauses = atomic_load(&counters[RRPC__LC_READ_PAUSES]);
  out->clc_sniff_timeouts = atomic_load(&counters[RRPC__LC_CLC_SNIFF_TIMEOUTS]);
  out->accept_fd_exhausted = atomic_load(&counters[RRPC__LC_ACCEPT_FD_EXHAUSTED]);
  out->idle_closes = atomic_load(&counters[RRPC__LC_IDLE_CLOSES]);
  out->concurrency_rejects = atomic_load(&counters[RRPC__LC_CONCURRENCY_REJECTS]);
  out->logoff_rejects = atomic_load(&counters[RRPC__LC_LOGOFF_REJECTS]);
  out->brpc_hello_errors = atomic_load(&counters[RRPC__LC_BRPC_HELLO_ERRORS]);
}
