/* rrpc/controller.h - per-call state of an RPC: error, timeout, latency,
 * attachments, remote side. Used by both the caller (channel) and the
 * handler (server).
 *
 * [thread-compatible]: a controller belongs to one call at a time; do not
 * touch it while a call using it is in flight, except from the call's done
 * callback or the handler that owns it - and rrpc_controller_cancel, which
 * any thread may call at any time while the controller is alive.
 */
#ifndef RRPC_CONTROLLER_H
#define RRPC_CONTROLLER_H

#include <stdint.h>

#include "rrpc/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_controller rrpc_controller;

/* rrpc_controller_new - an empty controller (timeout: the channel's). 0 or -ENOMEM. */
int rrpc_controller_new(rrpc_controller **out);
void rrpc_controller_free(rrpc_controller *c);
/* rrpc_controller_reset - back to the state of a new controller, so it can
 * carry another call (attachments are emptied). */
void rrpc_controller_reset(rrpc_controller *c);

/* rrpc_controller_failed - 1 if the call failed. */
int rrpc_controller_failed(const rrpc_controller *c);
/* rrpc_controller_error_code - 0, or the negative code of the failure (the
 * same value a sync rrpc_channel_call returns): -RRPC_ERPCTIMEDOUT,
 * -RRPC_ENOSERVICE, a handler's code from rrpc_controller_set_failed, ... */
int rrpc_controller_error_code(const rrpc_controller *c);
/* rrpc_controller_error_text - "" when not failed. Borrowed; valid until
 * the controller changes. */
const char *rrpc_controller_error_text(const rrpc_controller *c);

/* rrpc_controller_set_failed - make the call fail with `code` (negative or
 * positive; stored negative; 0 becomes -RRPC_EINTERNAL) and a text (copied,
 * truncated to 512 bytes). In a handler, the client then sees the same code;
 * a client may also use it to mark a call it judged failed itself (e.g. a
 * response it could not parse). */
void rrpc_controller_set_failed(rrpc_controller *c, int code, const char *text);

/* Timeout of the next call in milliseconds: > 0 overrides the channel's,
 * 0 = use the channel's (default), < 0 = no timeout. */
void rrpc_controller_set_timeout_ms(rrpc_controller *c, int32_t ms);
int32_t rrpc_controller_timeout_ms(const rrpc_controller *c);

void rrpc_controller_set_log_id(rrpc_controller *c, int64_t log_id);
int64_t rrpc_controller_log_id(const rrpc_controller *c);

/* request_code (brpc's): the key that c_murmurhash balancing hashes, so
 * calls with the same code go to the same server. Default 0. */
void rrpc_controller_set_request_code(rrpc_controller *c, uint64_t code);
uint64_t rrpc_controller_request_code(const rrpc_controller *c);
/* rrpc_controller_cancel - end the call in flight on this controller at
 * once with -ECANCELED (brpc's StartCancel): a sync caller returns, an
 * async call's done runs (exactly once, on a loop thread, never inside this
 * function), a response that arrives later is dropped and counted
 * (rrpc_channel_late_responses). Cancelling a call that has completed, or a
 * controller with no call in flight, does nothing; a cancel that races the
 * call's own completion loses or wins, and the call completes once either
 * way. [thread-safe], any thread, never blocks beyond a short spin. */
void rrpc_controller_cancel(rrpc_controller *c);
/* rrpc_controller_is_canceled - 1 if the last call ended with -ECANCELED. */
int rrpc_controller_is_canceled(const rrpc_controller *c);

/* Deadlines (docs/client.md, "Deadlines"). A client sends its call's
 * timeout in RpcMeta.timeout_ms; the server takes "request read + timeout"
 * as the caller's deadline.
 * rrpc_controller_remaining_ms - server (in a handler): milliseconds left
 * before the caller gives up, 0 once it has passed, -1 if the caller sent
 * no timeout. Client: the same for a deadline inherited below. */
int64_t rrpc_controller_remaining_ms(const rrpc_controller *c);
/* rrpc_controller_inherit_deadline - cap the calls made with `child` at
 * `parent`'s deadline (typically a handler's controller, so a nested call
 * never outlives the request that caused it): each call then uses the
 * smaller of its timeout and the time left, sends that as its timeout_ms,
 * and fails at once with -RRPC_ERPCTIMEDOUT if nothing is left. A parent
 * without a deadline changes nothing; reset clears it. */
void rrpc_controller_inherit_deadline(rrpc_controller *child, const rrpc_controller *parent);

/* rrpc_controller_latency_us - client: from issuing the call to its
 * completion. Server: from receiving the request to responding. */
int64_t rrpc_controller_latency_us(const rrpc_controller *c);

/* Attachments: raw bytes carried after the message without serialization.
 * Borrowed pointers owned by the controller. Client: fill the request one
 * before the call; read the response one after. Server: read the request
 * one; fill the response one before responding. Appending SHARES or COPIES
 * per the iobuf function used; sending never copies. */
rrpc_iobuf *rrpc_controller_request_attachment(rrpc_controller *c);
rrpc_iobuf *rrpc_controller_response_attachment(rrpc_controller *c);

/* rrpc_controller_remote_side - "ip:port" of the peer into buf (NUL
 * terminated, truncated to len). Empty before the call was sent. */
void rrpc_controller_remote_side(const rrpc_controller *c, char *buf, size_t len);
/* rrpc_controller_local_side - "ip:port" of this end of the call's
 * connection into buf, the same way (NUL terminated, truncated to len).
 * Client: set when the response arrived (empty for a call that failed
 * before one). Server: set for every request. Thread-compatible, as the
 * controller. */
void rrpc_controller_local_side(const rrpc_controller *c, char *buf, size_t len);

/* rrpc_controller_used_rdma - 1 if the call's connection carried it over
 * RDMA, 0 if over TCP (including an RDMA request that fell back). */
int rrpc_controller_used_rdma(const rrpc_controller *c);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_CONTROLLER_H */
