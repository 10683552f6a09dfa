/* echo_wire.c - hand-written protobuf encoding of echo.proto's messages
 * for the plain-C examples (see echo_wire.h). */
#include "examples/echo/echo_wire.h"

#include <errno.h>
#include <stdint.h>

static size_t put_varint(uint8_t *p, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    p[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  p[n++] = (uint8_t)v;
  return n;
}

/* Reads a varint at *pos; -EINVAL if it runs past end or past 10 bytes. */
static int get_varint(const uint8_t *buf, size_t len, size_t *pos, uint64_t *v) {
  *v = 0;
  for (unsigned shift = 0; shift < 70 && *pos < len; shift += 7) {
    uint8_t b = buf[(*pos)++];
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -EINVAL;
}

int echo_wire_append(rrpc_iobuf *out, const char *msg, size_t len) {
  uint8_t head[11];
  size_t n = 0;
  head[n++] = (1 << 3) | 2; /* field 1, length-delimited */
  n += put_varint(head + n, len);
  int rc = rrpc_iobuf_append(out, head, n);
  if (rc == 0 && len > 0) rc = rrpc_iobuf_append(out, msg, len);
  return rc;
}

int echo_wire_decode(const char *buf, size_t len, const char **msg, size_t *msg_len) {
  const uint8_t *p = (const uint8_t *)buf;
  size_t pos = 0;
  int found = 0;
  while (pos < len) {
    uint64_t key, v;
    if (get_varint(p, len, &pos, &key)) return -EINVAL;
    switch (key & 7) {
      case 0: /* varint */
        if (get_varint(p, len, &pos, &v)) return -EINVAL;
        break;
      case 1: /* 64-bit */
        if (len - pos < 8) return -EINVAL;
        pos += 8;
        break;
      case 2: /* length-delimited */
        if (get_varint(p, len, &pos, &v) || v > len - pos) return -EINVAL;
        if ((key >> 3) == 1) {
          *msg = buf + pos;
          *msg_len = (size_t)v;
          found = 1; /* the last occurrence wins, as in protobuf */
        }
        pos += (size_t)v;
        break;
      case 5: /* 32-bit */
        if (len - pos < 4) return -EINVAL;
        pos += 4;
        break;
      default:
        return -EINVAL;
    }
  }
  return found ? 0 : -EINVAL;
}
