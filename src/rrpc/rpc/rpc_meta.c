/* rpc_meta.c - the protobuf wire codec for baidu_std's RpcMeta (package
 * brpc.policy): decode from hostile bytes, encode exactly as the C++ library
 * serializes. Knows nothing about frames or iobufs (that is baidu_std.c).
 *
 * Only the fields listed in internal/baidu_std.h are understood; every other
 * field of wire type 0, 1, 2 or 5 is skipped. Groups (wire types 3 and 4),
 * wire types 6 and 7 and field number 0 are malformed. */
#include "rrpc/internal/baidu_std.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/copy_short.h"

enum {
  WT_VARINT = 0,
  WT_FIXED64 = 1,
  WT_LEN = 2,
  WT_FIXED32 = 5,
};

/* Field numbers (facts: specs/brpc-rdma-facts.md section 6). */
enum {
  F_META_REQUEST = 1,
  F_META_RESPONSE = 2,
  F_META_COMPRESS_TYPE = 3,
  F_META_CORRELATION_ID = 4,
  F_META_ATTACHMENT_SIZE = 5,
  F_REQ_SERVICE_NAME = 1,
  F_REQ_METHOD_NAME = 2,
  F_REQ_LOG_ID = 3,
  F_REQ_TIMEOUT_MS = 8,
  F_RESP_ERROR_CODE = 1,
  F_RESP_ERROR_TEXT = 2,
};

/* ---- decoding ------------------------------------------------------------
 * A cursor over borrowed bytes; every read checks the bytes left first. */
typedef struct cursor {
  const uint8_t *p;
  const uint8_t *end;
} cursor;

/* A varint is at most 10 bytes. Like the C++ parser, bits past 64 in the
 * tenth byte are dropped, and a tenth byte that still has its continuation
 * bit set is an error. Out of line: read_varint inlines the common case. */
static int read_varint_long(cursor *c, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned i = 0; i < 10; i++) {
    if (c->p == c->end)
      return -RRPC_EPARSE;
    uint8_t b = *c->p++;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -RRPC_EPARSE;
}

/* Tags, lengths and small values are one byte: inline, no loop for them
 * (a request's meta has a dozen varints; a call each cost ~15 instructions).
 * Two and three bytes are inline too: rrpc's correlation ids count up from
 * 1, so every meta carries one of that size for most of a connection's
 * life, and the loop paid a bound check, a shift count and a branch per
 * byte for it. */
static inline int read_varint(cursor *c, uint64_t *out) {
  const uint8_t *p = c->p;
  size_t left = (size_t)(c->end - p);
  if (left != 0 && !(p[0] & 0x80)) {
    *out = p[0];
    c->p = p + 1;
    return 0;
  }
  if (left >= 2 && !(p[1] & 0x80)) {
    *out = (uint64_t)(p[0] & 0x7f) | (uint64_t)p[1] << 7;
    c->p = p + 2;
    return 0;
  }
  if (left >= 3 && !(p[2] & 0x80)) {
    *out = (uint64_t)(p[0] & 0x7f) | (uint64_t)(p[1] & 0x7f) << 7 | (uint64_t)p[2] << 14;
    c->p = p + 3;
    return 0;
  }
  return read_varint_long(c, out);
}

/* Tags are 32-bit in protobuf; the field number is the tag >> 3. */
static inline int read_tag(cursor *c, uint32_t *field, unsigned *wire_type) {
  uint64_t tag;
  int rc = read_varint(c, &tag);
  if (rc < 0)
    return rc;
  if (tag > UINT32_MAX || (tag >> 3) == 0)
    return -RRPC_EPARSE;
  *field = (uint32_t)(tag >> 3);
  *wire_type = (unsigned)(tag & 7);
  return 0;
}

/* A length-delimited value: the bytes must all be there. */
static inline int read_len(cursor *c, cursor *inner) {
  uint64_t len;
  int rc = read_varint(c, &len);
  if (rc < 0)
    return rc;
  if (len > (uint64_t)(c->end - c->p))
    return -RRPC_EPARSE;
  inner->p = c->p;
  inner->end = c->p + len;
  c->p += len;
  return 0;
}

static int skip_field(cursor *c, unsigned wire_type) {
  uint64_t v;
  cursor inner;
  size_t fixed;
  switch (wire_type) {
  case WT_VARINT:
    return read_varint(c, &v);
  case WT_LEN:
    return read_len(c, &inner);
  case WT_FIXED64:
    fixed = 8;
    break;
  case WT_FIXED32:
    fixed = 4;
    break;
  default: /* 3/4 are groups (not accepted), 6/7 do not exist */
    return -RRPC_EPARSE;
  }
  if ((size_t)(c->end - c->p) < fixed)
    return -RRPC_EPARSE;
  c->p += fixed;
  return 0;
}

/* Scalars of a known field: the wire type must match. int32 values arrive
 * as 64-bit varints (negatives sign-extended to 10 bytes) and, as in C++,
 * keep their low 32 bits. */
static inline int read_i64(cursor *c, unsigned wire_type, int64_t *out) {
  uint64_t v;
  if (wire_type != WT_VARINT)
    return -RRPC_EPARSE;
  int rc = read_varint(c, &v);
  if (rc < 0)
    return rc;
  *out = (int64_t)v; /* two's complement on every target we build for */
  return 0;
}

static inline int read_i32(cursor *c, unsigned wire_type, int32_t *out) {
  int64_t v;
  int rc = read_i64(c, wire_type, &v);
  if (rc < 0)
    return rc;
  *out = (int32_t)(uint32_t)(uint64_t)v;
  return 0;
}

static inline int read_str(cursor *c, unsigned wire_type, rrpc__str *out) {
  cursor inner;
  if (wire_type != WT_LEN)
    return -RRPC_EPARSE;
  int rc = read_len(c, &inner);
  if (rc < 0)
    return rc;
  out->ptr = (const char *)inner.p;
  out->len = (size_t)(inner.end - inner.p);
  return 0;
}

/* RpcRequestMeta. Called once per occurrence: protobuf merges repeated
 * occurrences of a sub-message, so fields already set stay unless this
 * occurrence sets them again. *seen collects the required fields. */
static int decode_request(cursor *c, rrpc__rpc_meta *m, unsigned *seen) {
  while (c->p < c->end) {
    uint32_t field;
    unsigned wt;
    int rc = read_tag(c, &field, &wt);
    if (rc < 0)
      return rc;
    switch (field) {
    case F_REQ_SERVICE_NAME:
      rc = read_str(c, wt, &m->service_name);
      *seen |= 1u;
      break;
    case F_REQ_METHOD_NAME:
      rc = read_str(c, wt, &m->method_name);
      *seen |= 2u;
      break;
    case F_REQ_LOG_ID:
      rc = read_i64(c, wt, &m->log_id);
      m->has |= RRPC_META_HAS_LOG_ID;
      break;
    case F_REQ_TIMEOUT_MS:
      rc = read_i32(c, wt, &m->timeout_ms);
      m->has |= RRPC_META_HAS_TIMEOUT_MS;
      break;
    default:
      rc = skip_field(c, wt);
      break;
    }
    if (rc < 0)
      return rc;
  }
  return 0;
}

static int decode_response(cursor *c, rrpc__rpc_meta *m) {
  while (c->p < c->end) {
    uint32_t field;
    unsigned wt;
    int rc = read_tag(c, &field, &wt);
    if (rc < 0)
      return rc;
    switch (field) {
    case F_RESP_ERROR_CODE:
      rc = read_i32(c, wt, &m->error_code);
      m->has |= RRPC_META_HAS_ERROR_CODE;
      break;
    case F_RESP_ERROR_TEXT:
      rc = read_str(c, wt, &m->error_text);
      m->has |= RRPC_META_HAS_ERROR_TEXT;
      break;
    default:
      rc = skip_field(c, wt);
      break;
    }
    if (rc < 0)
      return rc;
  }
  return 0;
}

/* The general decoder: any field order, repeats, unknown fields. Thread-safe
 * (no shared state); strings in *out borrow from p. */
int rrpc__rpc_meta_decode_general(const uint8_t *p, size_t n, rrpc__rpc_meta *out) {
  cursor c;
  unsigned seen = 0; /* required fields of the request: 1 service, 2 method */
  int rc = 0;

  memset(out, 0, sizeof(*out));
  if (n == 0)
    return 0; /* an empty message; p may be NULL, so no arithmetic on it */
  c.p = p;
  c.end = p + n;
  while (c.p < c.end) {
    uint32_t field;
    unsigned wt;
    cursor inner;
    rc = read_tag(&c, &field, &wt);
    if (rc < 0)
      goto fail;
    switch (field) {
    case F_META_REQUEST:
    case F_META_RESPONSE:
      if (wt != WT_LEN) {
        rc = -RRPC_EPARSE;
        break;
      }
      rc = read_len(&c, &inner);
      if (rc < 0)
        break;
      if (field == F_META_REQUEST) {
        out->has |= RRPC_META_HAS_REQUEST;
        rc = decode_request(&inner, out, &seen);
      } else {
        out->has |= RRPC_META_HAS_RESPONSE;
        rc = decode_response(&inner, out);
      }
      break;
    case F_META_COMPRESS_TYPE:
      rc = read_i32(&c, wt, &out->compress_type);
      out->has |= RRPC_META_HAS_COMPRESS_TYPE;
      break;
    case F_META_CORRELATION_ID:
      rc = read_i64(&c, wt, &out->correlation_id);
      out->has |= RRPC_META_HAS_CORRELATION_ID;
      break;
    case F_META_ATTACHMENT_SIZE:
      rc = read_i32(&c, wt, &out->attachment_size);
      out->has |= RRPC_META_HAS_ATTACHMENT_SIZE;
      break;
    default:
      rc = skip_field(&c, wt);
      break;
    }
    if (rc < 0)
      goto fail;
  }
  /* service_name and method_name are `required`: C++ ParseFromArray fails
   * without them, and so do we. */
  if ((out->has & RRPC_META_HAS_REQUEST) && seen != 3u) {
    rc = -RRPC_EPARSE;
    goto fail;
  }
  return 0;

fail:
  memset(out, 0, sizeof(*out)); /* no half-decoded values, no stray pointers */
  return rc;
}

/* ---- the fast path ---------------------------------------------------------
 * Every meta rrpc and brpc write has each field once, in field-number order,
 * with one-byte tags: request {service_name, method_name, log_id?,
 * timeout_ms?} and/or response {error_code?, error_text?}, then
 * compress_type?, correlation_id?, attachment_size?. The general loop pays
 * for a tag decode, its range checks and a switch per field; here each tag
 * is one byte compare against the field the shape says may come next.
 *
 * Why the result is always the general decoder's: decode_fast never
 * rejects. At the first byte that is not the next field of that shape
 * (an unknown field, another order, a repeat, a tag of more than one
 * byte, a missing required name, a bad length or varint, bytes left over)
 * it returns false and the general decoder starts again from the first
 * byte with a fresh struct. What it accepts, the general decoder accepts
 * too: it reads each value with the same helpers (read_len, read_str,
 * read_i32, read_i64, so the same truncation and sign rules) into the same
 * zeroed struct and sets the same has-bits; with every field present at
 * most once, protobuf's "last value wins" and "sub-messages merge" have
 * nothing to choose between. test/baidu_std_unittest.cc and the fuzzer
 * compare the two paths on valid and malformed metas. */

/* The one-byte tags of that shape (field << 3 | wire type). */
enum {
  T_META_REQUEST = F_META_REQUEST << 3 | WT_LEN,
  T_META_RESPONSE = F_META_RESPONSE << 3 | WT_LEN,
  T_META_COMPRESS_TYPE = F_META_COMPRESS_TYPE << 3 | WT_VARINT,
  T_META_CORRELATION_ID = F_META_CORRELATION_ID << 3 | WT_VARINT,
  T_META_ATTACHMENT_SIZE = F_META_ATTACHMENT_SIZE << 3 | WT_VARINT,
  T_REQ_SERVICE_NAME = F_REQ_SERVICE_NAME << 3 | WT_LEN,
  T_REQ_METHOD_NAME = F_REQ_METHOD_NAME << 3 | WT_LEN,
  T_REQ_LOG_ID = F_REQ_LOG_ID << 3 | WT_VARINT,
  T_REQ_TIMEOUT_MS = F_REQ_TIMEOUT_MS << 3 | WT_VARINT,
  T_RESP_ERROR_CODE = F_RESP_ERROR_CODE << 3 | WT_VARINT,
  T_RESP_ERROR_TEXT = F_RESP_ERROR_TEXT << 3 | WT_LEN,
};

/* Consume the next byte if it is the one-byte tag `tag`. */
static inline bool take_tag(cursor *c, uint8_t tag) {
  if (c->p == c->end || *c->p != tag)
    return false;
  c->p++;
  return true;
}

/* One optional varint field: absent, or read and its has-bit set. false:
 * a bad varint (the general decoder starts over). */
static inline bool fast_i32(cursor *c, uint8_t tag, int32_t *out, uint32_t bit, uint32_t *has) {
  if (!take_tag(c, tag))
    return true;
  if (read_i32(c, WT_VARINT, out) < 0)
    return false;
  *has |= bit;
  return true;
}

static inline bool fast_i64(cursor *c, uint8_t tag, int64_t *out, uint32_t bit, uint32_t *has) {
  if (!take_tag(c, tag))
    return true;
  if (read_i64(c, WT_VARINT, out) < 0)
    return false;
  *has |= bit;
  return true;
}

static inline bool fast_request(cursor *c, rrpc__rpc_meta *m) {
  /* Both names are required: without them the general decoder rejects. */
  if (!take_tag(c, T_REQ_SERVICE_NAME) || read_str(c, WT_LEN, &m->service_name) < 0)
    return false;
  if (!take_tag(c, T_REQ_METHOD_NAME) || read_str(c, WT_LEN, &m->method_name) < 0)
    return false;
  return fast_i64(c, T_REQ_LOG_ID, &m->log_id, RRPC_META_HAS_LOG_ID, &m->has) &&
         fast_i32(c, T_REQ_TIMEOUT_MS, &m->timeout_ms, RRPC_META_HAS_TIMEOUT_MS, &m->has) &&
         c->p == c->end;
}

static inline bool fast_response(cursor *c, rrpc__rpc_meta *m) {
  if (!fast_i32(c, T_RESP_ERROR_CODE, &m->error_code, RRPC_META_HAS_ERROR_CODE, &m->has))
    return false;
  if (take_tag(c, T_RESP_ERROR_TEXT)) {
    if (read_str(c, WT_LEN, &m->error_text) < 0)
      return false;
    m->has |= RRPC_META_HAS_ERROR_TEXT;
  }
  return c->p == c->end;
}

/* *m is zeroed and n > 0. true: decoded; false: the general decoder must
 * start over (m may be half written). */
static inline bool decode_fast(const uint8_t *p, size_t n, rrpc__rpc_meta *m) {
  cursor c = {p, p + n};
  cursor inner;
  if (take_tag(&c, T_META_REQUEST)) {
    if (read_len(&c, &inner) < 0 || !fast_request(&inner, m))
      return false;
    m->has |= RRPC_META_HAS_REQUEST;
  }
  if (take_tag(&c, T_META_RESPONSE)) {
    if (read_len(&c, &inner) < 0 || !fast_response(&inner, m))
      return false;
    m->has |= RRPC_META_HAS_RESPONSE;
  }
  if (!fast_i32(&c, T_META_COMPRESS_TYPE, &m->compress_type, RRPC_META_HAS_COMPRESS_TYPE, &m->has))
    return false;
  if (!fast_i64(&c, T_META_CORRELATION_ID, &m->correlation_id, RRPC_META_HAS_CORRELATION_ID, &m->has))
    return false;
  if (!fast_i32(&c, T_META_ATTACHMENT_SIZE, &m->attachment_size, RRPC_META_HAS_ATTACHMENT_SIZE,
                &m->has))
    return false;
  return c.p == c.end;
}

int rrpc__rpc_meta_decode_fast(const uint8_t *p, size_t n, rrpc__rpc_meta *out) {
  memset(out, 0, sizeof(*out));
  if (n == 0)
    return 0; /* an empty message is valid; p may be NULL */
  if (decode_fast(p, n, out))
    return 0;
  memset(out, 0, sizeof(*out));
  return -EAGAIN;
}

/* Every field of *m zeroed, one store each: a memset of the 104-byte
 * struct compiled to a `rep stos` of 13 rounds and its set-up (~25
 * instructions), the fields to about a dozen plain or vector stores. The
 * padding is left as it was: nothing reads or compares it. */
static inline void meta_clear(rrpc__rpc_meta *m) {
  m->has = 0;
  m->service_name = (rrpc__str){NULL, 0};
  m->method_name = (rrpc__str){NULL, 0};
  m->log_id = 0;
  m->timeout_ms = 0;
  m->error_code = 0;
  m->error_text = (rrpc__str){NULL, 0};
  m->compress_type = 0;
  m->correlation_id = 0;
  m->attachment_size = 0;
}

/* The meta of nearly every response: an empty RpcResponseMeta and a
 * correlation id of 1 - 3 varint bytes (4 - 6 bytes in all), matched whole
 * with the bytes' values known, without decode_fast's field-by-field tests
 * (~70 instructions a response). *m is cleared; false: not that shape,
 * *m untouched. */
static inline bool plain_response(const uint8_t *p, size_t n, rrpc__rpc_meta *m) {
  if (n < 4 || n > 6 || p[0] != T_META_RESPONSE || p[1] != 0 || p[2] != T_META_CORRELATION_ID)
    return false;
  uint64_t v = 0;
  for (size_t i = 3; i < n; i++) {
    /* The continuation bit on every byte but the last. */
    if (((p[i] & 0x80) != 0) != (i + 1 < n))
      return false;
    v |= (uint64_t)(p[i] & 0x7f) << (7 * (i - 3));
  }
  m->has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
  m->correlation_id = (int64_t)v;
  return true;
}

/* Thread-safe (no shared state); strings in *out borrow from p. */
int rrpc__rpc_meta_decode(const uint8_t *p, size_t n, rrpc__rpc_meta *out) {
  meta_clear(out);
  if (n == 0)
    return 0; /* an empty message; p may be NULL, so no arithmetic on it */
  if (plain_response(p, n, out) || decode_fast(p, n, out))
    return 0;
  return rrpc__rpc_meta_decode_general(p, n, out);
}

/* ---- encoding ------------------------------------------------------------ */

/* Bytes of v as a varint, without a loop: 7 bits a byte, so
 * (floor(log2(v|1)) * 9 + 73) / 64 (the formula protobuf's own coder uses).
 * Most values sized per frame (the names' lengths, the sub-messages'
 * sizes, an attachment under 128 bytes) take one byte: a compare answers
 * those before the bit count and the arithmetic (~10 instructions each,
 * six or so a request). */
static inline size_t varint_size(uint64_t v) {
  if (v < 0x80)
    return 1;
  return ((size_t)(63 - __builtin_clzll(v)) * 9 + 73) / 64;
}

/* int32 and int64 fields encode as a 64-bit varint of the sign-extended
 * value, so a negative number always takes 10 bytes. */
static uint64_t i64_bits(int64_t v) { return (uint64_t)v; }
static uint64_t i32_bits(int32_t v) { return (uint64_t)(int64_t)v; }

/* Inline: almost every value written is a tag, a length or a small number.
 * Up to three bytes without the loop (a correlation id counted from 1 is
 * that size until it passes 2^21). */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v) {
  if (v < 0x80) {
    *p = (uint8_t)v;
    return p + 1;
  }
  if (v < 0x4000) {
    p[0] = (uint8_t)(v | 0x80);
    p[1] = (uint8_t)(v >> 7);
    return p + 2;
  }
  if (v < 0x200000) {
    p[0] = (uint8_t)(v | 0x80);
    p[1] = (uint8_t)((v >> 7) | 0x80);
    p[2] = (uint8_t)(v >> 14);
    return p + 3;
  }
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint8_t *put_tag(uint8_t *p, uint32_t field, unsigned wt) {
  return put_varint(p, ((uint64_t)field << 3) | wt);
}

/* n bytes from src to dst without a memcpy call when n <= 32: a request
 * writes two names (a service's full name is a few dozen bytes), and the
 * call and its size dispatch cost more than the copy. Fixed-size memcpys
 * are single loads and stores; the second of each pair overlaps the first
 * (n not a multiple of the word), so each size class is two or four. */
static inline void copy_short(uint8_t *dst, const char *src, size_t n) {
  uint64_t a, b, c, d;
  if (n > 32) {
    memcpy(dst, src, n);
  } else if (n > 16) {
    memcpy(&a, src, 8);
    memcpy(&b, src + 8, 8);
    memcpy(&c, src + n - 16, 8);
    memcpy(&d, src + n - 8, 8);
    memcpy(dst, &a, 8);
    memcpy(dst + 8, &b, 8);
    memcpy(dst + n - 16, &c, 8);
    memcpy(dst + n - 8, &d, 8);
  } else {
    rrpc__copy_le16(dst, src, n);
  }
}

static inline uint8_t *put_str(uint8_t *p, uint32_t field, rrpc__str s) {
  p = put_tag(p, field, WT_LEN);
  p = put_varint(p, s.len);
  copy_short(p, s.ptr, s.len);
  return p + s.len;
}

/* All our field numbers are < 16, so every tag is one byte. */
static size_t str_field_size(rrpc__str s) { return 1 + varint_size(s.len) + s.len; }
static size_t int_field_size(uint64_t bits) { return 1 + varint_size(bits); }

static size_t request_body_size(const rrpc__rpc_meta *m) {
  size_t n = (m->has & RRPC_META_HAS_NAMES_ENCODED)
                 ? m->names_encoded.len
                 : str_field_size(m->service_name) + str_field_size(m->method_name);
  if (m->has & RRPC_META_HAS_LOG_ID)
    n += int_field_size(i64_bits(m->log_id));
  if (m->has & RRPC_META_HAS_TIMEOUT_MS)
    n += int_field_size(i32_bits(m->timeout_ms));
  return n;
}

static size_t response_body_size(const rrpc__rpc_meta *m) {
  size_t n = 0;
  if (m->has & RRPC_META_HAS_ERROR_CODE)
    n += int_field_size(i32_bits(m->error_code));
  if (m->has & RRPC_META_HAS_ERROR_TEXT)
    n += str_field_size(m->error_text);
  return n;
}

/* Thread-safe; reads *m only. The sub-messages' sizes are kept for
 * encode_sized, which must write them before their bodies: worked out once
 * per frame instead of once here and again there. */
size_t rrpc__rpc_meta_measure(const rrpc__rpc_meta *m, rrpc__rpc_meta_sizes *s) {
  size_t n = 0;
  s->request = s->response = 0;
  if (m->has & RRPC_META_HAS_REQUEST) {
    s->request = request_body_size(m);
    n += 1 + varint_size(s->request) + s->request;
  }
  if (m->has & RRPC_META_HAS_RESPONSE) {
    s->response = response_body_size(m);
    n += 1 + varint_size(s->response) + s->response;
  }
  if (m->has & RRPC_META_HAS_COMPRESS_TYPE)
    n += int_field_size(i32_bits(m->compress_type));
  if (m->has & RRPC_META_HAS_CORRELATION_ID)
    n += int_field_size(i64_bits(m->correlation_id));
  if (m->has & RRPC_META_HAS_ATTACHMENT_SIZE)
    n += int_field_size(i32_bits(m->attachment_size));
  return n;
}

size_t rrpc__rpc_meta_size(const rrpc__rpc_meta *m) {
  rrpc__rpc_meta_sizes s;
  return rrpc__rpc_meta_measure(m, &s);
}

/* The request's integer fields, after its names (both encoders). */
static inline __attribute__((always_inline)) uint8_t *put_request_ints(uint8_t *p, const rrpc__rpc_meta *m,
                                                                       uint32_t has) {
  if (has & RRPC_META_HAS_LOG_ID) {
    *p++ = T_REQ_LOG_ID;
    p = put_varint(p, i64_bits(m->log_id));
  }
  if (has & RRPC_META_HAS_TIMEOUT_MS) {
    *p++ = T_REQ_TIMEOUT_MS;
    p = put_varint(p, i32_bits(m->timeout_ms));
  }
  return p;
}

/* The fields after the sub-messages, in the field order both encoders
 * write. */
static inline __attribute__((always_inline)) uint8_t *put_tail(uint8_t *p, const rrpc__rpc_meta *m,
                                                               uint32_t has) {
  if (__builtin_expect(has & RRPC_META_HAS_COMPRESS_TYPE, 0)) {
    *p++ = T_META_COMPRESS_TYPE;
    p = put_varint(p, i32_bits(m->compress_type));
  }
  if (has & RRPC_META_HAS_CORRELATION_ID) {
    *p++ = T_META_CORRELATION_ID;
    p = put_varint(p, i64_bits(m->correlation_id));
  }
  if (has & RRPC_META_HAS_ATTACHMENT_SIZE) {
    *p++ = T_META_ATTACHMENT_SIZE;
    p = put_varint(p, i32_bits(m->attachment_size));
  }
  return p;
}

/* Thread-safe; reads *m and *s, writes exactly the measured bytes. */
size_t rrpc__rpc_meta_encode_sized(const rrpc__rpc_meta *m, const rrpc__rpc_meta_sizes *s, uint8_t *out) {
  uint8_t *p = out;
  if (m->has & RRPC_META_HAS_REQUEST) {
    p = put_tag(p, F_META_REQUEST, WT_LEN);
    p = put_varint(p, s->request);
    if (m->has & RRPC_META_HAS_NAMES_ENCODED) {
      copy_short(p, m->names_encoded.ptr, m->names_encoded.len);
      p += m->names_encoded.len;
    } else {
      p = put_str(p, F_REQ_SERVICE_NAME, m->service_name);
      p = put_str(p, F_REQ_METHOD_NAME, m->method_name);
    }
    p = put_request_ints(p, m, m->has);
  }
  if (m->has & RRPC_META_HAS_RESPONSE) {
    p = put_tag(p, F_META_RESPONSE, WT_LEN);
    p = put_varint(p, s->response);
    if (m->has & RRPC_META_HAS_ERROR_CODE) {
      p = put_tag(p, F_RESP_ERROR_CODE, WT_VARINT);
      p = put_varint(p, i32_bits(m->error_code));
    }
    if (m->has & RRPC_META_HAS_ERROR_TEXT)
      p = put_str(p, F_RESP_ERROR_TEXT, m->error_text);
  }
  return (size_t)(put_tail(p, m, m->has) - out);
}

/* The most a varint field (tag and value) takes: a negative int32 or any
 * int64 is 10 bytes of value. */
enum { INT_FIELD_MAX = 11 };

/* The sub-message's body bytes at most, whatever the integers' values:
 * strings and their one- or two-byte length, 11 for each integer. */
static size_t request_body_bound(const rrpc__rpc_meta *m) {
  size_t n = (m->has & RRPC_META_HAS_NAMES_ENCODED) ? m->names_encoded.len
                                                    : m->service_name.len + m->method_name.len + 6;
  if (m->has & RRPC_META_HAS_LOG_ID) n += INT_FIELD_MAX;
  if (m->has & RRPC_META_HAS_TIMEOUT_MS) n += INT_FIELD_MAX;
  return n;
}

static size_t response_body_bound(const rrpc__rpc_meta *m) {
  size_t n = 0;
  if (m->has & RRPC_META_HAS_ERROR_CODE) n += INT_FIELD_MAX;
  if (m->has & RRPC_META_HAS_ERROR_TEXT) n += m->error_text.len + 3;
  return n;
}

/* A request's meta; request_body_bound(m) < 128. */
static size_t short_request(const rrpc__rpc_meta *m, uint8_t *out) {
  const uint32_t has = m->has;
  uint8_t *p = out, *len_at;
  *p++ = T_META_REQUEST;
  len_at = p++;
  if (has & RRPC_META_HAS_NAMES_ENCODED) {
    copy_short(p, m->names_encoded.ptr, m->names_encoded.len);
    p += m->names_encoded.len;
  } else {
    /* Each name under 128 bytes: one-byte lengths. */
    *p++ = T_REQ_SERVICE_NAME;
    *p++ = (uint8_t)m->service_name.len;
    copy_short(p, m->service_name.ptr, m->service_name.len);
    p += m->service_name.len;
    *p++ = T_REQ_METHOD_NAME;
    *p++ = (uint8_t)m->method_name.len;
    copy_short(p, m->method_name.ptr, m->method_name.len);
    p += m->method_name.len;
  }
  p = put_request_ints(p, m, has);
  *len_at = (uint8_t)(p - len_at - 1);
  return (size_t)(put_tail(p, m, has) - out);
}

/* A response's meta (or one without a sub-message); no error text, or a
 * short one. */
static size_t short_response(const rrpc__rpc_meta *m, uint8_t *out) {
  const uint32_t has = m->has;
  uint8_t *p = out;
  if (has & RRPC_META_HAS_RESPONSE) {
    uint8_t *len_at;
    *p++ = T_META_RESPONSE;
    len_at = p++;
    if (__builtin_expect(has & (RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT), 0)) {
      if (has & RRPC_META_HAS_ERROR_CODE) {
        *p++ = T_RESP_ERROR_CODE;
        p = put_varint(p, i32_bits(m->error_code));
      }
      if (has & RRPC_META_HAS_ERROR_TEXT) {
        *p++ = T_RESP_ERROR_TEXT;
        *p++ = (uint8_t)m->error_text.len;
        copy_short(p, m->error_text.ptr, m->error_text.len);
        p += m->error_text.len;
      }
    }
    *len_at = (uint8_t)(p - len_at - 1);
  }
  return (size_t)(put_tail(p, m, has) - out);
}

/* One pass: each sub-message's one length byte is reserved and filled in
 * after its body (the bounds above keep it under 128; so are the strings'
 * own lengths, one byte each). Field order as encode_sized's. At most
 * 2 + 127 + 3 x 11 = 162 bytes (a meta with both sub-messages, which no
 * frame has, goes the general way). */
size_t rrpc__rpc_meta_encode_short(const rrpc__rpc_meta *m, uint8_t *out) {
  const uint32_t has = m->has;
  if (has & RRPC_META_HAS_REQUEST) {
    if ((has & RRPC_META_HAS_RESPONSE) || request_body_bound(m) >= 0x80) return 0;
    return short_request(m, out);
  }
  if ((has & RRPC_META_HAS_RESPONSE) && response_body_bound(m) >= 0x80) return 0;
  return short_response(m, out);
}

size_t rrpc__rpc_meta_names_size(rrpc__str service, rrpc__str method) {
  return str_field_size(service) + str_field_size(method);
}

size_t rrpc__rpc_meta_names_encode(rrpc__str service, rrpc__str method, uint8_t *out) {
  uint8_t *p = put_str(out, F_REQ_SERVICE_NAME, service);
  p = put_str(p, F_REQ_METHOD_NAME, method);
  return (size_t)(p - out);
}

size_t rrpc__rpc_meta_encode(const rrpc__rpc_meta *m, uint8_t *out) {
  rrpc__rpc_meta_sizes s;
  rrpc__rpc_meta_measure(m, &s);
  return rrpc__rpc_meta_encode_sized(m, &s, out);
}

int rrpc__str_eq(rrpc__str s, const char *cstr) {
  size_t n = strlen(cstr);
  return s.len == n && (n == 0 || memcmp(s.ptr, cstr, n) == 0);
}
