/* echo_wire.h - the protobuf bytes of echo.proto's messages, written and
 * read by hand for the plain-C examples (both messages are one string in
 * field 1, so one encoder and one decoder serve both). */
#ifndef RRPC_EXAMPLES_ECHO_WIRE_H
#define RRPC_EXAMPLES_ECHO_WIRE_H

#include <stddef.h>

#include "rrpc/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* echo_wire_append - append the message {1: msg} to `out` (COPIES msg).
 * 0 or -ENOMEM. */
int echo_wire_append(rrpc_iobuf *out, const char *msg, size_t len);

/* echo_wire_decode - find field 1 in [buf, buf+len); *msg points into buf
 * (borrowed). Unknown fields are skipped, as protobuf does. 0, or -EINVAL
 * for malformed bytes or a missing field 1. */
int echo_wire_decode(const char *buf, size_t len, const char **msg, size_t *msg_len);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_EXAMPLES_ECHO_WIRE_H */
