/* controller.c - per-call state shared by the client and server sides. */
#include "rrpc/internal/controller.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/loop.h"

void rrpc__controller_init(rrpc_controller *c) {
  /* The scalars only: the iobufs are initialised below, and a memset over
   * them too (288 bytes) became a `rep stos` of 36 rounds, where 80 bytes
   * are five vector stores. */
  memset(c, 0, offsetof(rrpc_controller, req_att));
  c->remote_ref = c->local_ref = NULL;
  c->remote[0] = '\0';
  c->local[0] = '\0';
  c->error_text[0] = '\0';
  atomic_init(&c->cancel_state, 0);
  atomic_init(&c->cancel_lock, 0);
  rrpc__iobuf_init(&c->req_att);
  rrpc__iobuf_init(&c->resp_att);
}

void rrpc__controller_destroy(rrpc_controller *c) {
  rrpc__iobuf_destroy(&c->req_att);
  rrpc__iobuf_destroy(&c->resp_att);
}

int rrpc_controller_new(rrpc_controller **out) {
  rrpc_controller *c = malloc(sizeof *c);
  if (c == NULL) return -ENOMEM;
  rrpc__controller_init(c);
  *out = c;
  return 0;
}

void rrpc_controller_free(rrpc_controller *c) {
  if (c == NULL) return;
  rrpc__controller_destroy(c);
  free(c);
}

void rrpc_controller_reset(rrpc_controller *c) {
  rrpc__controller_destroy(c);
  rrpc__controller_init(c);
}

int rrpc_controller_failed(const rrpc_controller *c) { return c->error_code != 0; }
int rrpc_controller_error_code(const rrpc_controller *c) { return c->error_code; }
const char *rrpc_controller_error_text(const rrpc_controller *c) { return c->error_text; }

void rrpc__controller_fail(rrpc_controller *c, int code, const char *text, size_t text_len) {
  if (code > 0) code = -code;
  if (code == 0 || code == -1) code = -RRPC_EINTERNAL;
  c->error_code = code;
  if (text == NULL || text_len == 0) {
    text = rrpc_strerror(code);
    text_len = strlen(text);
  }
  if (text_len > RRPC_ERROR_TEXT_MAX) text_len = RRPC_ERROR_TEXT_MAX;
  memcpy(c->error_text, text, text_len);
  c->error_text[text_len] = '\0';
}

void rrpc_controller_set_failed(rrpc_controller *c, int code, const char *text) {
  rrpc__controller_fail(c, code, text, text ? strlen(text) : 0);
}

void rrpc_controller_set_timeout_ms(rrpc_controller *c, int32_t ms) { c->timeout_ms = ms; }
int32_t rrpc_controller_timeout_ms(const rrpc_controller *c) { return c->timeout_ms; }
void rrpc_controller_set_log_id(rrpc_controller *c, int64_t log_id) { c->log_id = log_id; }
int64_t rrpc_controller_log_id(const rrpc_controller *c) { return c->log_id; }
void rrpc_controller_set_request_code(rrpc_controller *c, uint64_t code) { c->request_code = code; }
uint64_t rrpc_controller_request_code(const rrpc_controller *c) { return c->request_code; }
int64_t rrpc_controller_latency_us(const rrpc_controller *c) { return c->latency_us; }
rrpc_iobuf *rrpc_controller_request_attachment(rrpc_controller *c) { return &c->req_att; }
rrpc_iobuf *rrpc_controller_response_attachment(rrpc_controller *c) { return &c->resp_att; }
int rrpc_controller_used_rdma(const rrpc_controller *c) { return c->used_rdma; }

/* `str` (at most `max` bytes, NUL-terminated within them) into buf. */
static void side_copy(const char *str, size_t max, char *buf, size_t len) {
  if (len == 0) return;
  size_t n = strnlen(str, max);
  if (n >= len) n = len - 1;
  memcpy(buf, str, n);
  buf[n] = '\0';
}

void rrpc_controller_remote_side(const rrpc_controller *c, char *buf, size_t len) {
  side_copy(c->remote_ref != NULL ? c->remote_ref : c->remote, sizeof c->remote, buf, len);
}

void rrpc_controller_local_side(const rrpc_controller *c, char *buf, size_t len) {
  side_copy(c->local_ref != NULL ? c->local_ref : c->local, sizeof c->local, buf, len);
}

int64_t rrpc_controller_remaining_ms(const rrpc_controller *c) {
  if (c->deadline_us == 0) return -1;
  int64_t left = c->deadline_us - (int64_t)rrpc__now_us();
  return left > 0 ? left / 1000 : 0;
}

void rrpc_controller_inherit_deadline(rrpc_controller *child, const rrpc_controller *parent) {
  if (parent->deadline_us == 0) return;
  if (child->deadline_us == 0 || parent->deadline_us < child->deadline_us)
    child->deadline_us = parent->deadline_us;
}
