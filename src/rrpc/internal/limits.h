/* internal/limits.h - private to rrpc and its transports: the accounting
 * behind rrpc/limits.h. Sockets report the bytes they buffer and queue here,
 * and the process-wide totals are checked against the limits in force. */
#ifndef RRPC_INTERNAL_LIMITS_H
#define RRPC_INTERNAL_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/limits.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The limits in force, defaults filled in. Any thread; a relaxed load each. */
size_t rrpc__limit_max_input(void);
int rrpc__limit_sniff_timeout_ms(void);
#ifndef __cplusplus
#include <stdatomic.h>
/* The two a socket asks about per request and per write (congestion, the
 * pause and resume of reads), inline: a call into limits.c each cost ~10
 * instructions, four or five times a request. The variables are
 * limits.c's; only rrpc_limits_set writes them. (C only: no C++ code
 * needs them.) */
extern _Atomic size_t rrpc__socket_max_unwritten_limit;
extern atomic_int rrpc__socket_max_pending_limit;
static inline size_t rrpc__limit_socket_max_unwritten(void) {
  return atomic_load_explicit(&rrpc__socket_max_unwritten_limit, memory_order_relaxed);
}
static inline int rrpc__limit_socket_max_pending_requests(void) {
  return atomic_load_explicit(&rrpc__socket_max_pending_limit, memory_order_relaxed);
}
#endif

/* rrpc__input_account - a connection now holds `now` bytes of partial
 * frames, `*held` of which were counted before: move the process total by
 * the difference and remember `now` in *held. Returns 1 when the total is
 * past max_input_bytes and this connection grew it (the caller fails the
 * connection), else 0. Any thread; *held belongs to the caller. */
int rrpc__input_account(size_t *held, size_t now);

/* rrpc__unwritten_reserve - a connection with `queued` bytes already queued
 * wants to queue `add` more: 0 (the process total now includes them) or
 * -RRPC_EOVERCROWDED (nothing counted). A connection with nothing queued
 * may always queue one message, however large, so that one big response
 * can still go out. rrpc__unwritten_release gives `n` back. Any thread. */
int rrpc__unwritten_reserve(size_t queued, size_t add);
void rrpc__unwritten_release(size_t n);

/* Counters that only go up. */
typedef enum rrpc__limit_counter {
  RRPC__LC_INPUT_LIMIT_CLOSES,
  RRPC__LC_OVERCROWDED_WRITES,
  RRPC__LC_READ_PAUSES,
  RRPC__LC_CLC_SNIFF_TIMEOUTS,
  RRPC__LC_ACCEPT_FD_EXHAUSTED,
  RRPC__LC_IDLE_CLOSES,
  RRPC__LC_CONCURRENCY_REJECTS,
  RRPC__LC_LOGOFF_REJECTS,
  RRPC__LC_BRPC_HELLO_ERRORS,
  RRPC__LC_COUNT
} rrpc__limit_counter;
void rrpc__limit_count(rrpc__limit_counter c);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_LIMITS_H */
