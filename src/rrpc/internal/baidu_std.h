/* internal/baidu_std.h - private to rrpc: the baidu_std protocol, byte for
 * byte compatible with brpc's: "PRPC" | body_size (u32 BE) | meta_size
 * (u32 BE), then RpcMeta (protobuf, package brpc.policy), the message and
 * the attachment. Pure codecs over bytes and iobufs: no fds, no threads.
 *
 * RpcMeta fields handled: 1 request {1 service_name, 2 method_name,
 * 3 log_id, 8 timeout_ms}, 2 response {1 error_code, 2 error_text},
 * 3 compress_type, 4 correlation_id, 5 attachment_size. Other fields are
 * skipped on decode (they are valid protobuf) and never encoded.
 */
#ifndef RRPC_INTERNAL_BAIDU_STD_H
#define RRPC_INTERNAL_BAIDU_STD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rrpc/internal/iobuf.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RRPC_BAIDU_HEADER_SIZE 12
#define RRPC_BAIDU_DEFAULT_MAX_BODY (64u << 20)

/* A borrowed string: not NUL-terminated, points into someone else's bytes. */
typedef struct rrpc__str {
  const char *ptr;
  size_t len;
} rrpc__str;

enum {
  RRPC_META_HAS_REQUEST = 1u << 0,
  RRPC_META_HAS_RESPONSE = 1u << 1,
  RRPC_META_HAS_CORRELATION_ID = 1u << 2,
  RRPC_META_HAS_ATTACHMENT_SIZE = 1u << 3,
  RRPC_META_HAS_COMPRESS_TYPE = 1u << 4,
  RRPC_META_HAS_LOG_ID = 1u << 5,
  RRPC_META_HAS_TIMEOUT_MS = 1u << 6,
  RRPC_META_HAS_ERROR_CODE = 1u << 7,
  RRPC_META_HAS_ERROR_TEXT = 1u << 8,
  /* Encoding only: with HAS_REQUEST, `names_encoded` holds the request's
   * service_name and method_name fields as rrpc__rpc_meta_names_encode
   * wrote them, copied as they are instead of the two names (rrpc_method).
   * The decoder never sets it. */
  RRPC_META_HAS_NAMES_ENCODED = 1u << 9,
};

typedef struct rrpc__rpc_meta {
  uint32_t has; /* RRPC_META_HAS_* bits */
  /* request */
  rrpc__str service_name;
  rrpc__str method_name;
  int64_t log_id;
  int32_t timeout_ms;
  /* response */
  int32_t error_code;
  rrpc__str error_text;
  /* both */
  int32_t compress_type;
  int64_t correlation_id;
  int32_t attachment_size;
  /* encoding only: see RRPC_META_HAS_NAMES_ENCODED */
  rrpc__str names_encoded;
} rrpc__rpc_meta;

/* rrpc__rpc_meta_decode - parse protobuf bytes. Strings in *out borrow from
 * `p`. 0, or -RRPC_EPARSE for anything that is not valid protobuf of this
 * schema (truncated varint/length, wrong wire type for a known field, a
 * request/response sub-message that does not parse, missing required
 * service_name/method_name in a request, field number 0, groups). As in
 * protobuf, a repeated scalar keeps the last value and repeated sub-messages
 * merge. The has-bits of sub-message fields (LOG_ID, TIMEOUT_MS, ERROR_*) are
 * set only inside a present request/response. On error *out is zeroed.
 * Never reads outside [p, p+n). Thread-safe. */
int rrpc__rpc_meta_decode(const uint8_t *p, size_t n, rrpc__rpc_meta *out);

/* The two halves of rrpc__rpc_meta_decode, for tests and fuzzers that check
 * they agree. _fast reads only the shape rrpc and brpc write (each known
 * field once, in field-number order, one-byte tags, nothing unknown): 0
 * with *out as _decode gives it, or -EAGAIN for any other input (valid or
 * not) with *out zeroed; it never rejects. _general is the full decoder,
 * with _decode's contract. Both thread-safe. */
int rrpc__rpc_meta_decode_fast(const uint8_t *p, size_t n, rrpc__rpc_meta *out);
int rrpc__rpc_meta_decode_general(const uint8_t *p, size_t n, rrpc__rpc_meta *out);

/* rrpc__rpc_meta_size - bytes rrpc__rpc_meta_encode will write. */
size_t rrpc__rpc_meta_size(const rrpc__rpc_meta *m);

/* rrpc__rpc_meta_encode - serialize the fields whose has-bits are set, in
 * field-number order (as the C++ library does). service_name/method_name
 * are always written when HAS_REQUEST is set (they are required); LOG_ID and
 * TIMEOUT_MS only count with HAS_REQUEST, ERROR_* only with HAS_RESPONSE.
 * A field that does not count is never read, so it may be left unset (the
 * frame builders do not clear the whole struct). `out` must hold rrpc__rpc_meta_size(m) bytes. Returns the bytes written. */
size_t rrpc__rpc_meta_encode(const rrpc__rpc_meta *m, uint8_t *out);

/* The same in two steps, for a framer that needs the size before it has
 * the memory: measure returns rrpc__rpc_meta_size(m) and keeps the
 * sub-messages' sizes in *s; encode_sized writes what encode would, given
 * that *s of the unchanged *m. */
typedef struct rrpc__rpc_meta_sizes {
  size_t request;  /* RpcRequestMeta's body, 0 without HAS_REQUEST */
  size_t response; /* RpcResponseMeta's body, 0 without HAS_RESPONSE */
} rrpc__rpc_meta_sizes;
size_t rrpc__rpc_meta_measure(const rrpc__rpc_meta *m, rrpc__rpc_meta_sizes *s);
size_t rrpc__rpc_meta_encode_sized(const rrpc__rpc_meta *m, const rrpc__rpc_meta_sizes *s, uint8_t *out);

/* rrpc__rpc_meta_encode_short - encode in one pass, without measuring
 * first, a meta whose sub-message (request or response) is shorter than
 * 128 bytes whatever its integers' values: so its length is one byte,
 * written after the body. The same bytes as rrpc__rpc_meta_encode. 0 when
 * *m is not of that shape (long names or error text: use measure and
 * encode_sized) or has nothing to write; else the bytes written, at most
 * RRPC_META_SHORT_MAX. */
#define RRPC_META_SHORT_MAX 200
size_t rrpc__rpc_meta_encode_short(const rrpc__rpc_meta *m, uint8_t *out);

/* rrpc__rpc_meta_names_size / _encode - RpcRequestMeta's service_name and
 * method_name fields (tags, lengths and bytes), for a caller that encodes
 * them once and sends them with RRPC_META_HAS_NAMES_ENCODED. `out` must
 * hold _size bytes; _encode returns the bytes written. Thread-safe. */
size_t rrpc__rpc_meta_names_size(rrpc__str service, rrpc__str method);
size_t rrpc__rpc_meta_names_encode(rrpc__str service, rrpc__str method, uint8_t *out);

/* One cut message. Strings in `meta` point into the input's block (the
 * usual case: header and meta in one piece, read in place; meta_block holds
 * a reference to it when a string is not empty, NULL for a meta without
 * strings) or into meta_bytes, a copy: either way they are valid until the
 * message is destroyed. The payload/attachment iobufs SHARE blocks with
 * the input. */
typedef struct rrpc__baidu_msg {
  rrpc__rpc_meta meta;
  uint8_t *meta_bytes; /* NULL (meta read in place), meta_inline, or a heap copy */
  rrpc_block *meta_block; /* a reference to a borrowed meta's strings' block, or NULL */
  rrpc_iobuf payload;
  rrpc_iobuf attachment;
  /* Set when attachment_size exceeds the bytes after the meta, or is
   * negative: the frame is well formed, so the connection survives, but the
   * RPC must fail (server: answer EREQUEST; client: fail the call with
   * ERESPONSE). The whole rest of the body is then in payload. */
  int bad_attachment;
  /* The body rrpc__baidu_cut_head left in the input: header and meta bytes
   * still before it, then the payload's and the attachment's lengths. */
  size_t body_skip, body_payload, body_attachment;
  /* Most metas (names, ids, sizes) are well under this: no malloc per frame. */
  uint8_t meta_inline[192];
} rrpc__baidu_msg;

/* init makes an empty message; destroy frees meta_bytes, drops the iobuf
 * references and leaves the message empty but for the meta's fields, which
 * it does not clear (a message is destroyed per frame, and nothing reads
 * them after; its strings may point into freed memory then). Destroying
 * twice is harmless. A message embeds iobufs: do not copy it by value. */
void rrpc__baidu_msg_init(rrpc__baidu_msg *m);
void rrpc__baidu_msg_destroy(rrpc__baidu_msg *m);

/* rrpc__baidu_cut - try to cut one frame off the front of `in`.
 * `out` is (re)initialized by the call: it must not hold a live message.
 * Returns 1 and fills *out (destroy it later) when a whole frame was there;
 * 0 when more bytes are needed (nothing consumed; a header that is already
 * wrong is reported at once, without waiting for more bytes);
 * -RRPC_EPARSE for bad magic, meta_size > body_size or garbage meta;
 * -RRPC_ETOOBIG when body_size > max_body (0 = RRPC_BAIDU_DEFAULT_MAX_BODY);
 * -ENOMEM. On 0 and on errors *out is left empty.
 * On an error the connection must be closed: the stream is unusable (`in`
 * is unchanged, except after -ENOMEM, where part of the frame may be gone).
 * The meta is read in place when header and meta lie in the first piece
 * of `in`, else COPIED into out->meta_bytes (at most body_size bytes,
 * checked against max_body first); payload and attachment SHARE blocks
 * with `in`.
 * [thread-compatible]: `in` and `out` belong to the caller's thread. */
int rrpc__baidu_cut(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out);

/* The same in two halves, so that the body goes straight into the iobufs
 * that keep it (a server's call), without a move from the message's own.
 * rrpc__baidu_cut_head returns as rrpc__baidu_cut, but after 1 only the
 * header is decoded: the frame stays in `in` (the meta may be borrowed from
 * it) until rrpc__baidu_cut_body, which must come next, before anything
 * else is cut from `in` (or the connection closes). cut_body appends the
 * payload to `payload` and the attachment to `attachment` (two different
 * iobufs, neither `in`): 0, or -ENOMEM (close the connection; the message
 * is still the caller's to destroy). */
int rrpc__baidu_cut_head(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out);
int rrpc__baidu_cut_body(rrpc_iobuf *in, rrpc__baidu_msg *m, rrpc_iobuf *payload, rrpc_iobuf *attachment);

/* rrpc__baidu_pack - append one frame to `out`: header and meta COPIED,
 * payload and attachment SHARED (either may be NULL = empty). Sets
 * meta->attachment_size (and its has-bit) from the attachment when it is
 * non-empty and clears both when it is empty (brpc sends attachment_size
 * only when > 0). 0, -RRPC_ETOOBIG (body over 4 GiB - 1, or an attachment
 * over INT32_MAX), or -ENOMEM / the allocator's error; on any error `out`
 * and *meta are unchanged. Strings in *meta are borrowed for the call only.
 * [thread-compatible]. */
int rrpc__baidu_pack(rrpc_iobuf *out, rrpc__rpc_meta *meta, const rrpc_iobuf *payload,
                     const rrpc_iobuf *attachment);

/* rrpc__str_eq - compare a borrowed string with a C string. */
int rrpc__str_eq(rrpc__str s, const char *cstr);

/* rrpc__bytes_eq - n bytes at a and b equal. Inline and without a memcmp
 * call: names are a few dozen bytes, compared eight at a time (unaligned
 * loads through memcpy) with the last word overlapping the one before it;
 * four to seven bytes as two four-byte words; under four, a byte loop. A
 * server's method lookup compares two names a request, and memcmp's call
 * and set-up cost more than the bytes. */
static inline int rrpc__bytes_eq(const char *a, const char *b, size_t n) {
  if (n < 8) {
    if (n < 4) {
      for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
          return 0;
      return 1;
    }
    uint32_t u, v, w, z; /* the first and the last four, which may overlap */
    memcpy(&u, a, 4);
    memcpy(&v, b, 4);
    memcpy(&w, a + n - 4, 4);
    memcpy(&z, b + n - 4, 4);
    return ((u ^ v) | (w ^ z)) == 0;
  }
  uint64_t x, y;
  for (size_t i = 0; i + 8 < n; i += 8) {
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    if (x != y)
      return 0;
  }
  memcpy(&x, a + n - 8, 8);
  memcpy(&y, b + n - 8, 8);
  return x == y;
}

/* rrpc__str_eqn - the same with the C string's length known (a lookup
 * table keeps it): a length test rejects most entries without reading
 * their bytes. */
static inline int rrpc__str_eqn(rrpc__str s, const char *p, size_t n) {
  return s.len == n && rrpc__bytes_eq(s.ptr, p, n);
}

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_BAIDU_STD_H */
