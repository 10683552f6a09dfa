/* baidu_std.c - baidu_std framing over iobufs: cut frames off a read iobuf
 * and pack frames into a write iobuf. The RpcMeta bytes themselves are
 * rpc_meta.c's; fds, sockets and threads are someone else's. */
#include "rrpc/internal/baidu_std.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/internal/copy_short.h"

static const uint8_t k_magic[4] = {'P', 'R', 'P', 'C'};

/* Payloads up to this size are copied into the header's block by pack. */
#define PACK_COPY_MAX 128
_Static_assert(RRPC_BAIDU_HEADER_SIZE + RRPC_META_SHORT_MAX + PACK_COPY_MAX <= RRPC_IOBUF_DEFAULT_BLOCK_SIZE,
               "pack_small's frame fits a default block");

/* Whole-word loads and stores with a byte swap: GCC merged the header's two
 * byte-wise stores into one 64-bit store assembled by ~25 shifts and ors. */
static inline uint32_t load_be32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

static inline void store_be32(uint8_t *p, uint32_t v) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  memcpy(p, &v, 4);
}

void rrpc__baidu_msg_init(rrpc__baidu_msg *m) {
  memset(&m->meta, 0, sizeof(m->meta));
  m->meta_bytes = NULL;
  m->meta_block = NULL;
  rrpc__iobuf_init(&m->payload);
  rrpc__iobuf_init(&m->attachment);
  m->bad_attachment = 0;
  m->body_skip = m->body_payload = m->body_attachment = 0;
}

/* Everything but the meta, which decode fills (zeroed first) on cut's
 * main path: cut clears it itself only when it returns without a frame. */
static void msg_init_but_meta(rrpc__baidu_msg *m) {
  m->meta_bytes = NULL;
  m->meta_block = NULL;
  rrpc__iobuf_init(&m->payload);
  rrpc__iobuf_init(&m->attachment);
  m->bad_attachment = 0;
}

void rrpc__baidu_msg_destroy(rrpc__baidu_msg *m) {
  if (m->meta_bytes != NULL && m->meta_bytes != m->meta_inline) free(m->meta_bytes);
  if (m->meta_block != NULL) rrpc__block_unref(m->meta_block);
  rrpc__iobuf_destroy(&m->payload); /* each left empty and usable */
  rrpc__iobuf_destroy(&m->attachment);
  m->meta_bytes = NULL;
  m->meta_block = NULL;
  m->bad_attachment = 0;
}

/* Checks the header as far as `have` bytes of it are known, so that a wrong
 * header fails as soon as the offending bytes arrived. */
static int check_header(const uint8_t *h, size_t have, size_t max_body) {
  if (have >= 4 && memcmp(h, k_magic, 4) != 0)
    return -RRPC_EPARSE;
  if (have >= 8 && load_be32(h + 4) > max_body)
    return -RRPC_ETOOBIG;
  if (have >= 12 && load_be32(h + 8) > load_be32(h + 4))
    return -RRPC_EPARSE;
  return 0;
}

/* The meta's bytes, borrowed from the first piece of `in` when header and
 * meta lie in it (the usual case: no copy; *in_place is set, and
 * keep_meta_block makes the message hold that block if the decoded meta
 * points into it), else copied into the message. */
static const uint8_t *meta_bytes(rrpc_iobuf *in, uint32_t meta_size, rrpc__baidu_msg *out, int *in_place) {
  const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(in, 0);
  if (r->len >= RRPC_BAIDU_HEADER_SIZE + (size_t)meta_size) {
    *in_place = 1;
    return (const uint8_t *)r->block->data + r->off + RRPC_BAIDU_HEADER_SIZE;
  }
  out->meta_bytes = meta_size <= sizeof out->meta_inline ? out->meta_inline : malloc(meta_size);
  if (out->meta_bytes != NULL)
    rrpc_iobuf_copy_out(in, RRPC_BAIDU_HEADER_SIZE, out->meta_bytes, meta_size);
  return out->meta_bytes;
}

/* A meta decoded in place whose strings are not empty: the message holds a
 * reference to their block, so they live as long as it does, whatever
 * becomes of the input and the payload. A response without an error text
 * (the usual one) has none: no reference taken and dropped (two locked
 * instructions a frame). */
static void keep_meta_block(rrpc_iobuf *in, rrpc__baidu_msg *out) {
  const rrpc__rpc_meta *m = &out->meta;
  if ((m->service_name.len | m->method_name.len | m->error_text.len) == 0) return;
  const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(in, 0);
  out->meta_block = r->block;
  rrpc__block_ref(r->block);
}

static int cut_frame(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out);

int rrpc__baidu_cut_head(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out) {
  msg_init_but_meta(out);
  int rc = cut_frame(in, max_body, out);
  if (rc <= 0) /* no frame: the rare path pays for clearing the meta */
    memset(&out->meta, 0, sizeof(out->meta));
  return rc;
}

int rrpc__baidu_cut_body(rrpc_iobuf *in, rrpc__baidu_msg *m, rrpc_iobuf *payload, rrpc_iobuf *attachment) {
  /* Header and meta dropped, payload and attachment cut, in one call (a
   * frame read whole is cut without walking or popping anything). */
  return rrpc__iobuf_cut_frame(in, m->body_skip, m->body_payload, payload, m->body_attachment, attachment);
}

int rrpc__baidu_cut(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out) {
  int rc = rrpc__baidu_cut_head(in, max_body, out);
  if (rc <= 0)
    return rc;
  rc = rrpc__baidu_cut_body(in, out, &out->payload, &out->attachment);
  if (rc < 0) {
    rrpc__baidu_msg_destroy(out);
    memset(&out->meta, 0, sizeof(out->meta)); /* an error leaves *out empty */
  }
  return rc < 0 ? rc : 1;
}

/* cut_head's work on a message initialised but for its meta. */
static int cut_frame(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out) {
  uint8_t scratch[RRPC_BAIDU_HEADER_SIZE];
  size_t avail = rrpc__iobuf_length(in);
  size_t have = avail < RRPC_BAIDU_HEADER_SIZE ? avail : RRPC_BAIDU_HEADER_SIZE;
  const uint8_t *h, *meta = NULL;
  uint32_t body_size, meta_size;
  size_t rest, att_len;
  int rc;

  if (max_body == 0)
    max_body = RRPC_BAIDU_DEFAULT_MAX_BODY;
  if (have == 0)
    return 0;
  /* The header is nearly always in the first piece (a read brings it
   * whole): borrowed from there without a call. */
  const rrpc_iobuf_ref *first = rrpc__iobuf_ref_at(in, 0);
  if (first->len >= have)
    h = (const uint8_t *)first->block->data + first->off;
  else if ((h = rrpc__iobuf_contiguous(in, have, scratch)) == NULL)
    return 0; /* cannot happen: `have` bytes are there */
  rc = check_header(h, have, max_body);
  if (rc < 0 || have < RRPC_BAIDU_HEADER_SIZE)
    return rc;
  body_size = load_be32(h + 4);
  meta_size = load_be32(h + 8);
  if (avail - RRPC_BAIDU_HEADER_SIZE < body_size)
    return 0;

  /* meta_size <= body_size <= max_body: a copy's allocation is bounded. */
  int in_place = 0;
  if (meta_size > 0 && (meta = meta_bytes(in, meta_size, out, &in_place)) == NULL)
    return -ENOMEM;
  rc = rrpc__rpc_meta_decode(meta, meta_size, &out->meta);
  if (rc < 0)
    goto fail;
  if (in_place)
    keep_meta_block(in, out);

  rest = (size_t)body_size - meta_size;
  att_len = 0;
  if ((out->meta.has & RRPC_META_HAS_ATTACHMENT_SIZE) && out->meta.attachment_size != 0) {
    if (out->meta.attachment_size < 0 || (size_t)out->meta.attachment_size > rest)
      out->bad_attachment = 1; /* the RPC fails, the stream stays in sync */
    else
      att_len = (size_t)out->meta.attachment_size;
  }

  out->body_skip = RRPC_BAIDU_HEADER_SIZE + (size_t)meta_size;
  out->body_payload = rest - att_len;
  out->body_attachment = att_len;
  return 1;

fail:
  rrpc__baidu_msg_destroy(out);
  return rc;
}

/* n (1 - PACK_COPY_MAX) bytes in 16-byte moves, the last one overlapping
 * the one before it: knowing n <= 128, GCC made the memcpy a `rep movsq`,
 * whose start-up costs more than the whole copy of a typical 64-byte
 * message. Under 16 bytes, two overlapping words of the size below. */
static inline void copy_upto_max(uint8_t *dst, const uint8_t *src, size_t n) {
  if (n < 16) {
    rrpc__copy_le16(dst, src, n);
    return;
  }
  uint8_t v[16];
  for (size_t i = 0; i + 16 < n; i += 16) {
    memcpy(v, src + i, 16);
    memcpy(dst + i, v, 16);
  }
  memcpy(v, src + n - 16, 16);
  memcpy(dst + n - 16, v, 16);
}

/* A small payload (n > 0 bytes, all of it) copied behind the meta: from its
 * first piece directly when it lies there (a serialized message does),
 * without copy_out's general walk. */
static inline __attribute__((always_inline)) void copy_small(const rrpc_iobuf *payload, uint8_t *dst,
                                                            size_t n) {
  const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(payload, 0);
  if (r->len >= n)
    copy_upto_max(dst, (const uint8_t *)r->block->data + r->off, n);
  else
    rrpc_iobuf_copy_out(payload, 0, dst, n);
}

/* The frame's first bytes at p: header, meta, and the first `copied`
 * bytes of the payload (0: none copied). */
static void write_head(void *space, const rrpc__rpc_meta *meta, const rrpc__rpc_meta_sizes *sizes,
                       size_t body_len, size_t meta_len, const rrpc_iobuf *payload, size_t copied) {
  uint8_t *p = space;
  memcpy(p, k_magic, 4);
  store_be32(p + 4, (uint32_t)body_len);
  store_be32(p + 8, (uint32_t)meta_len);
  rrpc__rpc_meta_encode_sized(meta, sizes, p + RRPC_BAIDU_HEADER_SIZE);
  if (copied > 0)
    copy_small(payload, p + RRPC_BAIDU_HEADER_SIZE + meta_len, copied);
}

/* The meta's attachment field says the frame's attachment: present with
 * its size, or absent (and zero). The caller keeps the two old values to
 * put back if the pack fails. */
static inline void set_attachment_field(rrpc__rpc_meta *meta, size_t att_len) {
  if (att_len > 0) {
    meta->has |= RRPC_META_HAS_ATTACHMENT_SIZE;
    meta->attachment_size = (int32_t)att_len;
  } else {
    meta->has &= ~(uint32_t)RRPC_META_HAS_ATTACHMENT_SIZE;
    meta->attachment_size = 0;
  }
}

/* The common frame - a payload of at most PACK_COPY_MAX bytes, a meta of
 * the short shape (rpc_meta's encode_short) - written in one pass: the meta
 * is encoded where it goes without a measuring pass first, the header's
 * lengths are stored after it, the payload copied behind it; an attachment
 * (att_len <= INT32_MAX) is shared behind that, as on the general path.
 * Into an empty `out` the frame gets a new block of its own; behind bytes
 * already in `out` (a socket's pending output, rrpc__socket_write_packed)
 * it goes into the last block's free tail when that has room for the
 * longest such frame, else into a new block. 1: not that frame, nothing
 * appended (an empty `out`'s block was allocated and released: a meta of
 * the long shape - names or an error text of over ~110 bytes - is rare
 * enough that testing the shape before the allocation would cost the
 * common frame more). */
static int pack_small(rrpc_iobuf *out, rrpc__rpc_meta *meta, const rrpc_iobuf *payload, size_t pay_len,
                      const rrpc_iobuf *attachment, size_t att_len) {
  enum { MOST = RRPC_BAIDU_HEADER_SIZE + RRPC_META_SHORT_MAX + PACK_COPY_MAX };
  const size_t before = rrpc__iobuf_length(out);
  rrpc_block *b = NULL;
  uint8_t *p = before != 0 ? rrpc__iobuf_tail(out, MOST) : NULL;
  int rc = 0;
  if (p == NULL) {
    /* The block holds the longest short meta: the default block size does
     * (rrpc__block_alloc gives no less), so this is one allocation as
     * before. */
    rc = rrpc__block_alloc(MOST, &b);
    if (rc < 0) return rc;
    p = (uint8_t *)b->data;
  }
  const uint32_t had = meta->has;
  const int32_t had_att = meta->attachment_size;
  set_attachment_field(meta, att_len);
  size_t meta_len = rrpc__rpc_meta_encode_short(meta, p + RRPC_BAIDU_HEADER_SIZE);
  if (meta_len == 0) {
    meta->has = had;
    meta->attachment_size = had_att;
    if (b != NULL) rrpc__block_unref(b); /* else the tail is simply not committed */
    return 1;
  }
  memcpy(p, k_magic, 4);
  /* <= 200 + 128 + INT32_MAX: no overflow of the 32-bit field. */
  store_be32(p + 4, (uint32_t)(meta_len + pay_len + att_len));
  store_be32(p + 8, (uint32_t)meta_len);
  if (pay_len > 0) copy_small(payload, p + RRPC_BAIDU_HEADER_SIZE + meta_len, pay_len);
  const uint32_t head = (uint32_t)(RRPC_BAIDU_HEADER_SIZE + meta_len + pay_len);
  if (b != NULL) {
    rc = rrpc__iobuf_append_new(out, b, head);
    if (rc < 0) rrpc__block_unref(b); /* `out` is as it was */
  } else {
    rrpc__iobuf_commit(out, head); /* into the tail: cannot fail */
  }
  if (rc == 0 && att_len > 0 && (rc = rrpc_iobuf_append_iobuf(out, attachment)) < 0)
    rrpc__iobuf_truncate(out, before); /* as it came */
  if (rc < 0) {
    meta->has = had;
    meta->attachment_size = had_att;
  }
  return rc;
}

int rrpc__baidu_pack(rrpc_iobuf *out, rrpc__rpc_meta *meta, const rrpc_iobuf *payload,
                     const rrpc_iobuf *attachment) {
  size_t pay_len = payload ? rrpc__iobuf_length(payload) : 0;
  size_t att_len = attachment ? rrpc__iobuf_length(attachment) : 0;
  if (pay_len <= PACK_COPY_MAX && att_len <= INT32_MAX) {
    int rc = pack_small(out, meta, payload, pay_len, attachment, att_len);
    if (rc <= 0) return rc;
  }
  size_t meta_len, head_len, body_len;
  rrpc_iobuf frame;
  void *space;
  size_t space_len;
  int rc;

  if (att_len > INT32_MAX)
    return -RRPC_ETOOBIG;
  /* Build the frame aside and move it into `out` last, so that a failure
   * anywhere leaves `out` as it was - or straight in an empty `out`, which
   * a failure simply empties again. The header and meta are encoded
   * straight into block memory: no staging buffer. */
  rrpc__iobuf_init(&frame); /* done: destroys it */
  int direct = rrpc__iobuf_length(out) == 0;
  rrpc_iobuf *f = direct ? out : &frame;
  /* Decide the attachment field before sizing the meta, in the caller's
   * meta itself (a copy of the whole struct cost more than keeping the two
   * fields); a failure puts them back, so *meta is unchanged then. */
  const uint32_t had = meta->has;
  const int32_t had_att = meta->attachment_size;
  set_attachment_field(meta, att_len);
  rrpc__rpc_meta_sizes sizes;
  meta_len = rrpc__rpc_meta_measure(meta, &sizes);
  if (meta_len > UINT32_MAX || pay_len > UINT32_MAX - meta_len ||
      att_len > UINT32_MAX - meta_len - pay_len) {
    rc = -RRPC_ETOOBIG;
    goto done;
  }
  body_len = meta_len + pay_len + att_len;
  head_len = RRPC_BAIDU_HEADER_SIZE + meta_len;

  /* A small payload (a typical protobuf message) is copied behind the meta
   * in the header's block: cheaper than sharing its block (a ref, an atomic
   * pair, an iovec). Attachments are always shared (sending never copies). */
  size_t copied = pay_len <= PACK_COPY_MAX ? pay_len : 0;

  if (direct) {
    /* `out` is empty: its first piece is a new block anyway, so it is
     * made, written and appended whole (no reserve and commit; ~70
     * instructions a frame fewer). */
    rrpc_block *b;
    rc = rrpc__block_alloc(head_len + copied, &b);
    if (rc < 0)
      goto done;
    write_head(b->data, meta, &sizes, body_len, meta_len, payload, copied);
    rc = rrpc__iobuf_append_new(f, b, (uint32_t)(head_len + copied));
    if (rc < 0) {
      rrpc__block_unref(b);
      goto done;
    }
  } else {
    rc = rrpc__iobuf_reserve(f, head_len + copied, &space, &space_len);
    if (rc < 0)
      goto done;
    write_head(space, meta, &sizes, body_len, meta_len, payload, copied);
    rrpc__iobuf_commit(f, head_len + copied);
  }
  if (pay_len > copied && (rc = rrpc_iobuf_append_iobuf(f, payload)) < 0)
    goto done;
  if (att_len > 0 && (rc = rrpc_iobuf_append_iobuf(f, attachment)) < 0)
    goto done;
  if (!direct && (rc = rrpc_iobuf_move(out, &frame)) < 0)
    goto done;

done:
  if (rc < 0) {
    meta->has = had;
    meta->attachment_size = had_att;
    if (direct)
      rrpc_iobuf_clear(out);
  }
  rrpc__iobuf_destroy(&frame);
  return rc;
}
