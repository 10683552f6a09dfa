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
size_t rrpc__limit_socket_max_unwritten(void);
int rrpc__limit_sniff_timeout_ms(void);
int rrpc__limit_socket_max_pending_requests(void);

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
