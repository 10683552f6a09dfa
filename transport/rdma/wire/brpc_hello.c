/* wire/brpc_hello.c - brpc's RDMA hello (v2 fixed form, v3 protobuf form)
 * and ACK (brpc_hello.h). The v3 body is proto2 `RdmaHello`; rrpc reads and
 * writes those few fields by hand rather than pulling protobuf into the C
 * core. */
#include "transport/rdma/wire/brpc_hello.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"

static const uint8_t MAGIC_V2[RRPC_BRPC_MAGIC_LEN] = {'R', 'D', 'M', 'A'};
static const uint8_t MAGIC_V3[RRPC_BRPC_MAGIC_LEN] = {'R', 'D', 'M', '3'};

/* ---- framing -------------------------------------------------------------- */

/* 2 or 3 for a whole magic, 1 for a prefix of one, 0 for neither. */
static int magic_kind(const uint8_t *buf, size_t n) {
  size_t m = n < RRPC_BRPC_MAGIC_LEN ? n : RRPC_BRPC_MAGIC_LEN;
  int v2 = memcmp(buf, MAGIC_V2, m) == 0, v3 = memcmp(buf, MAGIC_V3, m) == 0;
  if (!v2 && !v3) return 0;
  if (n < RRPC_BRPC_MAGIC_LEN) return 1;
  return v2 ? 2 : 3;
}

int rrpc__brpc_hello_frame(const uint8_t *buf, size_t n, size_t *len) {
  int kind = magic_kind(buf, n);
  if (kind == 0) return RRPC_BRPC_NOT;
  if (kind == 1) return RRPC_BRPC_WAIT;
  size_t hdr = kind == 2 ? 6 : RRPC_BRPC_V3_HDR_LEN;
  if (n < hdr) return RRPC_BRPC_WAIT;
  size_t total;
  if (kind == 2) {
    total = rrpc__be16(buf + 4);
    if (total < RRPC_BRPC_V2_LEN || total > RRPC_BRPC_V2_MAX_LEN) return -RRPC_EPARSE;
  } else {
    uint32_t pb = rrpc__be32(buf + 4);
    if (pb < 1 || pb > RRPC_BRPC_V3_PB_MAX) return -RRPC_EPARSE;
    total = RRPC_BRPC_V3_HDR_LEN + pb;
  }
  if (n < total) return RRPC_BRPC_WAIT;
  *len = total;
  return RRPC_BRPC_WHOLE;
}

/* ---- v2 ------------------------------------------------------------------- */

static void decode_v2(const uint8_t *p, struct rrpc__brpc_hello *h) {
  h->version = 2;
  h->hello_ver = rrpc__be16(p + 6);
  h->impl_ver = rrpc__be16(p + 8);
  h->block_size = rrpc__be32(p + 10);
  h->sq_size = rrpc__be16(p + 14);
  h->rq_size = rrpc__be16(p + 16);
  h->lid = rrpc__be16(p + 18);
  memcpy(h->gid, p + 20, 16);
  h->gid_len = 16;
  h->qp_num = rrpc__be32(p + 36);
}

static int encode_v2(const struct rrpc__brpc_hello *h, uint8_t *p, size_t cap, size_t *len) {
  if (cap < RRPC_BRPC_V2_LEN || h->sq_size > 0xFFFF || h->rq_size > 0xFFFF || h->lid > 0xFFFF) return -EINVAL;
  memcpy(p, MAGIC_V2, RRPC_BRPC_MAGIC_LEN);
  rrpc__put_be16(p + 4, RRPC_BRPC_V2_LEN);
  rrpc__put_be16(p + 6, h->hello_ver);
  rrpc__put_be16(p + 8, h->impl_ver);
  rrpc__put_be32(p + 10, h->block_size);
  rrpc__put_be16(p + 14, (uint16_t)h->sq_size);
  rrpc__put_be16(p + 16, (uint16_t)h->rq_size);
  rrpc__put_be16(p + 18, (uint16_t)h->lid);
  memcpy(p + 20, h->gid, 16);
  rrpc__put_be32(p + 36, h->qp_num);
  *len = RRPC_BRPC_V2_LEN;
  return 0;
}

/* ---- v3: proto2 RdmaHello ---------------------------------------------------
 * 1 block_size, 2 sq_size, 3 rq_size, 4 lid (uint32), 5 gid (bytes),
 * 6 qp_num (uint32): all required; 7 optional RdmaEce {1 vendor_id,
 * 2 options, 3 comp_mask: uint32, required}. */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

struct pb_in {
  const uint8_t *p, *end;
};

static int get_varint(struct pb_in *in, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in->p >= in->end) return -RRPC_EPARSE;
    uint8_t b = *in->p++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return 0;
    }
  }
  return -RRPC_EPARSE; /* more than 10 bytes */
}

/* Step over a field this reader does not know (proto2 keeps parsing). */
static int skip_field(struct pb_in *in, unsigned wt) {
  uint64_t v;
  size_t k;
  switch (wt) {
  case WT_VARINT: return get_varint(in, &v);
  case WT_I64: k = 8; break;
  case WT_I32: k = 4; break;
  case WT_LEN:
    if (get_varint(in, &v) != 0) return -RRPC_EPARSE;
    if (v > (uint64_t)(in->end - in->p)) return -RRPC_EPARSE;
    in->p += v;
    return 0;
  default: return -RRPC_EPARSE; /* groups are not part of this message */
  }
  if ((size_t)(in->end - in->p) < k) return -RRPC_EPARSE;
  in->p += k;
  return 0;
}

/* Read one tag; *field 0 means the end of input. */
static int get_tag(struct pb_in *in, uint32_t *field, unsigned *wt) {
  if (in->p == in->end) {
    *field = 0;
    return 0;
  }
  uint64_t t;
  if (get_varint(in, &t) != 0 || (t >> 3) == 0 || (t >> 3) > 0x1FFFFFFF) return -RRPC_EPARSE;
  *field = (uint32_t)(t >> 3);
  *wt = (unsigned)(t & 7);
  return 0;
}

static int decode_ece(struct pb_in *in, struct rrpc__brpc_hello *h) {
  unsigned seen = 0;
  for (;;) {
    uint32_t f;
    unsigned wt;
    uint64_t v;
    if (get_tag(in, &f, &wt) != 0) return -RRPC_EPARSE;
    if (f == 0) break;
    if (f >= 1 && f <= 3 && wt == WT_VARINT) {
      if (get_varint(in, &v) != 0) return -RRPC_EPARSE;
      uint32_t *dst = f == 1 ? &h->ece_vendor_id : f == 2 ? &h->ece_options : &h->ece_comp_mask;
      *dst = (uint32_t)v; /* proto truncates a wider varint to 32 bits */
      seen |= 1u << f;
    } else if (skip_field(in, wt) != 0) {
      return -RRPC_EPARSE;
    }
  }
  return seen == 0xE ? 0 : -RRPC_EPARSE; /* 1, 2, 3 are required */
}

static int decode_len_field(struct pb_in *in, uint32_t f, struct rrpc__brpc_hello *h) {
  uint64_t n;
  if (get_varint(in, &n) != 0 || n > (uint64_t)(in->end - in->p)) return -RRPC_EPARSE;
  struct pb_in sub = {in->p, in->p + n};
  in->p += n;
  if (f == 5) {
    h->gid_len = (uint32_t)n;
    memset(h->gid, 0, sizeof h->gid);
    memcpy(h->gid, sub.p, n < 16 ? n : 16);
    return 0;
  }
  h->has_ece = 1; /* f == 7 */
  return decode_ece(&sub, h);
}

static int decode_v3(const uint8_t *p, size_t len, struct rrpc__brpc_hello *h) {
  static const int req[] = {1, 2, 3, 4, 5, 6};
  struct pb_in in = {p + RRPC_BRPC_V3_HDR_LEN, p + len};
  unsigned seen = 0;
  h->version = 3;
  for (;;) {
    uint32_t f;
    unsigned wt;
    if (get_tag(&in, &f, &wt) != 0) return -RRPC_EPARSE;
    if (f == 0) break;
    int rc;
    if ((f == 5 || f == 7) && wt == WT_LEN) {
      rc = decode_len_field(&in, f, h);
    } else if (f >= 1 && f <= 6 && f != 5 && wt == WT_VARINT) {
      uint64_t v;
      rc = get_varint(&in, &v);
      uint32_t *dst[] = {NULL, &h->block_size, &h->sq_size, &h->rq_size, &h->lid, NULL, &h->qp_num};
      if (rc == 0) *dst[f] = (uint32_t)v;
    } else {
      rc = skip_field(&in, wt);
    }
    if (rc != 0) return -RRPC_EPARSE;
    if (f < 32) seen |= 1u << f;
  }
  for (size_t i = 0; i < sizeof req / sizeof req[0]; i++)
    if (!(seen & (1u << req[i]))) return -RRPC_EPARSE;
  return 0;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static uint8_t *put_u32_field(uint8_t *p, uint32_t f, uint32_t v) {
  p = put_varint(p, (uint64_t)f << 3 | WT_VARINT);
  return put_varint(p, v);
}

/* Worst case: 5 uint32 fields of 6 bytes, gid 18, ECE 2 + 18. */
#define V3_BODY_MAX 80

static int encode_v3(const struct rrpc__brpc_hello *h, uint8_t *out, size_t cap, size_t *len) {
  uint8_t body[V3_BODY_MAX], *p = body;
  uint32_t gid_len = h->gid_len <= 16 ? h->gid_len : 16;
  p = put_u32_field(p, 1, h->block_size);
  p = put_u32_field(p, 2, h->sq_size);
  p = put_u32_field(p, 3, h->rq_size);
  p = put_u32_field(p, 4, h->lid);
  p = put_varint(p, 5u << 3 | WT_LEN);
  p = put_varint(p, gid_len);
  memcpy(p, h->gid, gid_len);
  p += gid_len;
  p = put_u32_field(p, 6, h->qp_num);
  if (h->has_ece) {
    uint8_t ece[18], *e = ece;
    e = put_u32_field(e, 1, h->ece_vendor_id);
    e = put_u32_field(e, 2, h->ece_options);
    e = put_u32_field(e, 3, h->ece_comp_mask);
    p = put_varint(p, 7u << 3 | WT_LEN);
    p = put_varint(p, (uint64_t)(e - ece));
    memcpy(p, ece, (size_t)(e - ece));
    p += e - ece;
  }
  size_t n = (size_t)(p - body);
  if (cap < RRPC_BRPC_V3_HDR_LEN + n) return -EINVAL;
  memcpy(out, MAGIC_V3, RRPC_BRPC_MAGIC_LEN);
  rrpc__put_be32(out + 4, (uint32_t)n);
  memcpy(out + RRPC_BRPC_V3_HDR_LEN, body, n);
  *len = RRPC_BRPC_V3_HDR_LEN + n;
  return 0;
}

/* ---- the API --------------------------------------------------------------- */

int rrpc__brpc_hello_decode(const uint8_t *buf, size_t len, struct rrpc__brpc_hello *out) {
  size_t framed = 0;
  if (rrpc__brpc_hello_frame(buf, len, &framed) != RRPC_BRPC_WHOLE || framed != len) return -RRPC_EPARSE;
  memset(out, 0, sizeof *out);
  if (buf[3] == 'A') {
    decode_v2(buf, out);
    return 0;
  }
  return decode_v3(buf, len, out);
}

int rrpc__brpc_hello_valid(const struct rrpc__brpc_hello *h) {
  if (h->block_size < 1024 || h->sq_size < 16 || h->rq_size < 16) return 0;
  if (h->version == 2) return h->hello_ver == 2 && h->impl_ver == 1;
  if (h->version != 3) return 0;
  return h->sq_size <= 0xFFFF && h->rq_size <= 0xFFFF && h->lid <= 0xFFFF && h->gid_len == 16 && h->qp_num != 0;
}

int rrpc__brpc_hello_encode(const struct rrpc__brpc_hello *h, uint8_t *buf, size_t cap, size_t *len) {
  if (h->version == 2) return encode_v2(h, buf, cap, len);
  if (h->version == 3) return encode_v3(h, buf, cap, len);
  return -EINVAL;
}

void rrpc__brpc_hello_refusal(int version, int tcp_mode, struct rrpc__brpc_hello *out) {
  memset(out, 0, sizeof *out);
  out->version = version;
  if (version == 2) {
    out->gid_len = 16;
    if (tcp_mode) out->hello_ver = RRPC_BRPC_V2_TCP_MODE_VER;
  }
}

void rrpc__brpc_ack_encode(uint32_t flags, uint8_t out[RRPC_BRPC_ACK_LEN]) { rrpc__put_be32(out, flags); }

uint32_t rrpc__brpc_ack_decode(const uint8_t in[RRPC_BRPC_ACK_LEN]) { return rrpc__be32(in); }
