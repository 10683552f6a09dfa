/* internal/controller.h - private to the rrpc core: the controller layout,
 * so channel and server calls can embed one, and the setters they use. */
#ifndef RRPC_INTERNAL_CONTROLLER_H
#define RRPC_INTERNAL_CONTROLLER_H

#include <stdatomic.h>
#include <stdint.h>

#include "rrpc/internal/iobuf.h"
#include "rrpc/controller.h"

#define RRPC_ERROR_TEXT_MAX 512
#define RRPC__CALL_SPACE 128

struct rrpc_controller {
  int error_code; /* 0 or negative */
  int32_t timeout_ms;
  int64_t log_id;
  int64_t start_us;
  int64_t latency_us;
  int used_rdma;
  int responded;          /* client: the server answered (set or error) */
  uint64_t request_code;  /* client: c_murmurhash key */
  /* Server: the caller's deadline (request read + its timeout_ms). Client:
   * a cap on the next call's deadline (rrpc_controller_inherit_deadline).
   * rrpc__now_us clock; 0 = none. */
  int64_t deadline_us;
  /* Cancellation (internal/cancel.h). cancel_state: RRPC__CANCEL_* bits;
   * set to IN_CALL by the caller alone when a call begins (no cancel can
   * change a state without IN_CALL), changed otherwise only under
   * cancel_lock, a spin lock held for a few instructions or one canceler
   * run (which only posts a task). cancel_fn/arg: under cancel_lock; NULL
   * whenever IN_CALL is clear. */
  atomic_int cancel_state;
  atomic_int cancel_lock;
  void (*cancel_fn)(void *arg);
  void *cancel_arg;
  rrpc_iobuf req_att;
  rrpc_iobuf resp_att;
  /* Server: the connection's "ip:port" strings (rrpc__socket_peer_cstr),
   * read in place by remote_side / local_side instead of copied into
   * remote / local for every request (the call holds its connection until
   * the controller is destroyed). NULL: remote / local hold them. Set by
   * init itself, not by its memset of the scalars (which cost ~16
   * instructions more a call with them in it). */
  const char *remote_ref, *local_ref;
  /* The strings stay last: init clears the scalars above the iobufs,
   * initialises the iobufs, and sets only the strings' first byte (they
   * are read as NUL-terminated strings), so a call does not zero 600 bytes
   * it never reads. */
  char remote[80];
  char local[64];
  char error_text[RRPC_ERROR_TEXT_MAX + 1];
  /* Room for the channel's record of the async call in flight on this
   * controller (channel.c's struct call), so an async call allocates
   * nothing: a controller carries one call at a time, and the record is
   * not touched once the call's done starts. Never initialised here. */
  _Alignas(16) unsigned char call_space[RRPC__CALL_SPACE];
};

/* Embedded controllers. */
void rrpc__controller_init(rrpc_controller *c);
void rrpc__controller_destroy(rrpc_controller *c);

/* rrpc__controller_fail - record a failure with text (copied, truncated). A
 * code of 0 or -1 becomes -RRPC_EINTERNAL (brpc maps -1 the same way). */
void rrpc__controller_fail(rrpc_controller *c, int code, const char *text, size_t text_len);

#endif /* RRPC_INTERNAL_CONTROLLER_H */
