/* baidu_std.c - baidu_std framing over iobufs: cut frames off a read iobuf
 * and pack frames into a write iobuf. The RpcMeta bytes themselves are
 * rpc_meta.c's; fds, sockets and threads are someone else's. */
#include "rrpc/internal/baidu_std.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"

static const uint8_t k_magic[4] = {'P', 'R', 'P', 'C'};

/* Payloads up to this size are copied into the header's block by pack. */
#define PACK_COPY_MAX 128

static uint32_t load_be32(const uint8_t *p) {
  return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void store_be32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

void rrpc__baidu_msg_init(rrpc__baidu_msg *m) {
  memset(&m->meta, 0, sizeof(m->meta));
  m->meta_bytes = NULL;
  rrpc__iobuf_init(&m->payload);
  rrpc__iobuf_init(&m->attachment);
  m->bad_attachment = 0;
}

void rrpc__baidu_msg_destroy(rrpc__baidu_msg *m) {
  if (m->meta_bytes != NULL && m->meta_bytes != m->meta_inline) free(m->meta_bytes);
  rrpc__iobuf_destroy(&m->payload);
  rrpc__iobuf_destroy(&m->attachment);
  rrpc__baidu_msg_init(m);
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

int rrpc__baidu_cut(rrpc_iobuf *in, size_t max_body, rrpc__baidu_msg *out) {
  uint8_t scratch[RRPC_BAIDU_HEADER_SIZE];
  size_t avail = rrpc_iobuf_length(in);
  size_t have = avail < RRPC_BAIDU_HEADER_SIZE ? avail : RRPC_BAIDU_HEADER_SIZE;
  const uint8_t *h;
  uint32_t body_size, meta_size;
  size_t rest, att_len;
  long moved;
  int rc;

  rrpc__baidu_msg_init(out);
  if (max_body == 0)
    max_body = RRPC_BAIDU_DEFAULT_MAX_BODY;
  if (have == 0)
    return 0;
  h = rrpc__iobuf_contiguous(in, have, scratch);
  if (h == NULL)
    return 0; /* cannot happen: `have` bytes are there */
  rc = check_header(h, have, max_body);
  if (rc < 0 || have < RRPC_BAIDU_HEADER_SIZE)
    return rc;
  body_size = load_be32(h + 4);
  meta_size = load_be32(h + 8);
  if (avail - RRPC_BAIDU_HEADER_SIZE < body_size)
    return 0;

  /* meta_size <= body_size <= max_body: the allocation is bounded. */
  if (meta_size > 0) {
    out->meta_bytes = meta_size <= sizeof out->meta_inline ? out->meta_inline : malloc(meta_size);
    if (out->meta_bytes == NULL)
      return -ENOMEM;
    rrpc_iobuf_copy_out(in, RRPC_BAIDU_HEADER_SIZE, out->meta_bytes, meta_size);
  }
  rc = rrpc__rpc_meta_decode(out->meta_bytes, meta_size, &out->meta);
  if (rc < 0)
    goto fail;

  rest = (size_t)body_size - meta_size;
  att_len = 0;
  if ((out->meta.has & RRPC_META_HAS_ATTACHMENT_SIZE) && out->meta.attachment_size != 0) {
    if (out->meta.attachment_size < 0 || (size_t)out->meta.attachment_size > rest)
      out->bad_attachment = 1; /* the RPC fails, the stream stays in sync */
    else
      att_len = (size_t)out->meta.attachment_size;
  }

  /* Header, meta and payload move in one cut (nothing moves if it fails);
   * the header and meta are then dropped from the front of the payload. */
  moved = rrpc_iobuf_cut(in, RRPC_BAIDU_HEADER_SIZE + (size_t)meta_size + (rest - att_len),
                        &out->payload);
  if (moved < 0) {
    rc = (int)moved;
    goto fail;
  }
  rrpc_iobuf_pop_front(&out->payload, RRPC_BAIDU_HEADER_SIZE + (size_t)meta_size);
  if (att_len > 0) {
    moved = rrpc_iobuf_cut(in, att_len, &out->attachment);
    if (moved < 0) {
      rc = (int)moved;
      goto fail;
    }
  }
  return 1;

fail:
  rrpc__baidu_msg_destroy(out);
  return rc;
}

int rrpc__baidu_pack(rrpc_iobuf *out, rrpc__rpc_meta *meta, const rrpc_iobuf *payload,
                     const rrpc_iobuf *attachment) {
  size_t pay_len = payload ? rrpc_iobuf_length(payload) : 0;
  size_t att_len = attachment ? rrpc_iobuf_length(attachment) : 0;
  size_t meta_len, head_len, body_len;
  rrpc_iobuf frame;
  void *space;
  size_t space_len;
  uint8_t *p;
  int rc;

  if (att_len > INT32_MAX)
    return -RRPC_ETOOBIG;
  /* Decide the attachment field before sizing the meta. The caller's meta
   * is only changed once the frame is sure to fit. */
  rrpc__rpc_meta m = *meta;
  if (att_len > 0) {
    m.has |= RRPC_META_HAS_ATTACHMENT_SIZE;
    m.attachment_size = (int32_t)att_len;
  } else {
    m.has &= ~(uint32_t)RRPC_META_HAS_ATTACHMENT_SIZE;
    m.attachment_size = 0;
  }
  meta_len = rrpc__rpc_meta_size(&m);
  if (meta_len > UINT32_MAX || pay_len > UINT32_MAX - meta_len ||
      att_len > UINT32_MAX - meta_len - pay_len)
    return -RRPC_ETOOBIG;
  body_len = meta_len + pay_len + att_len;
  head_len = RRPC_BAIDU_HEADER_SIZE + meta_len;

  /* A small payload (a typical protobuf message) is copied behind the meta
   * in the header's block: cheaper than sharing its block (a ref, an atomic
   * pair, an iovec). Attachments are always shared (sending never copies). */
  size_t copied = pay_len <= PACK_COPY_MAX ? pay_len : 0;

  /* Build the frame aside and move it into `out` last, so that a failure
   * anywhere leaves `out` as it was - or straight in an empty `out`, which
   * a failure simply empties again. The header and meta are encoded
   * straight into block memory: no staging buffer. */
  int direct = rrpc_iobuf_length(out) == 0;
  rrpc_iobuf *f = direct ? out : &frame;
  rrpc__iobuf_init(&frame);
  rc = rrpc__iobuf_reserve(f, head_len + copied, &space, &space_len);
  if (rc < 0)
    goto done;
  p = space;
  memcpy(p, k_magic, 4);
  store_be32(p + 4, (uint32_t)body_len);
  store_be32(p + 8, (uint32_t)meta_len);
  rrpc__rpc_meta_encode(&m, p + RRPC_BAIDU_HEADER_SIZE);
  if (copied > 0)
    rrpc_iobuf_copy_out(payload, 0, p + head_len, copied);
  rrpc__iobuf_commit(f, head_len + copied);
  if (pay_len > copied && (rc = rrpc_iobuf_append_iobuf(f, payload)) < 0)
    goto done;
  if (att_len > 0 && (rc = rrpc_iobuf_append_iobuf(f, attachment)) < 0)
    goto done;
  if (!direct && (rc = rrpc_iobuf_move(out, &frame)) < 0)
    goto done;
  meta->has = m.has;
  meta->attachment_size = m.attachment_size;

done:
  if (rc < 0 && direct)
    rrpc_iobuf_clear(out);
  rrpc__iobuf_destroy(&frame);
  return rc;
}
