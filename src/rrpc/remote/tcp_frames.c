/* remote/tcp_frames.c - remote memory over a TCP byte stream (tcp_frames.h). */
#include "rrpc/remote/tcp_frames.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "transport/smc/bytes.h"

static const uint8_t kMagic[4] = {'R', 'M', 'E', 'M'};

/* Fields each type may set; the rest must be zero. */
static int hdr_valid(const struct rrpc__rmt_tcp_hdr *h) {
  if (h->offset > UINT64_MAX - h->length || h->status > 0) return 0;
  switch (h->type) {
  case RRPC_RMT_TCP_WRITE:
    return (h->flags & ~RRPC_RMT_TCP_F_NOTIFY) == 0 && h->status == 0 && h->id != 0;
  case RRPC_RMT_TCP_READ_REQ:
    return h->flags == 0 && h->tag == 0 && h->status == 0 && h->id != 0;
  case RRPC_RMT_TCP_READ_RESP:
    return h->flags == 0 && h->tag == 0 && (h->status == 0 || h->length == 0);
  case RRPC_RMT_TCP_DONE:
    return h->flags == 0 && h->tag == 0 && h->length == 0;
  case RRPC_RMT_TCP_CTL:
    return h->flags == 0 && h->tag == 0 && h->status == 0 && h->op == 0 && h->id == 0 &&
           h->generation == 0 && h->offset == 0 && h->length == RRPC_RMT_MSG_LEN;
  default:
    return 0;
  }
}

int rrpc__rmt_tcp_encode(const struct rrpc__rmt_tcp_hdr *h, uint8_t out[RRPC_RMT_TCP_HDR_LEN]) {
  if (!hdr_valid(h)) return -EINVAL;
  memcpy(out, kMagic, 4);
  out[4] = h->type;
  out[5] = h->flags;
  out[6] = out[7] = 0;
  rrpc__put_be32(out + 8, h->op);
  rrpc__put_be32(out + 12, h->id);
  rrpc__put_be32(out + 16, h->generation);
  rrpc__put_be32(out + 20, h->type == RRPC_RMT_TCP_WRITE ? h->tag : (uint32_t)h->status);
  rrpc__put_be64(out + 24, h->offset);
  rrpc__put_be64(out + 32, h->length);
  return 0;
}

int rrpc__rmt_tcp_decode(const uint8_t *buf, size_t len, uint32_t max_frame,
                         struct rrpc__rmt_tcp_hdr *out) {
  struct rrpc__rmt_tcp_hdr h;
  uint32_t w20;
  if (len < RRPC_RMT_TCP_HDR_LEN || memcmp(buf, kMagic, 4) != 0 || buf[6] || buf[7])
    return -RRPC_EPARSE;
  memset(&h, 0, sizeof(h));
  h.type = buf[4];
  h.flags = buf[5];
  h.op = rrpc__be32(buf + 8);
  h.id = rrpc__be32(buf + 12);
  h.generation = rrpc__be32(buf + 16);
  w20 = rrpc__be32(buf + 20);
  if (h.type == RRPC_RMT_TCP_WRITE) h.tag = w20;
  else h.status = (int32_t)w20;
  h.offset = rrpc__be64(buf + 24);
  h.length = rrpc__be64(buf + 32);
  if (!hdr_valid(&h)) return -RRPC_EPARSE;
  /* A READ_REQ's length is what it asks for, not a payload, but the owner
   * answers it in one frame: the same bound applies. */
  if (h.length > max_frame) return -RRPC_EPARSE;
  *out = h;
  return 0;
}

static void reply_hdr(const struct rrpc__rmt_tcp_hdr *h, uint8_t type, int status,
                      struct rrpc__rmt_tcp_reply *out) {
  memset(out, 0, sizeof(*out));
  out->hdr.type = type;
  out->hdr.op = h->op;
  out->hdr.id = h->id;
  out->hdr.generation = h->generation;
  out->hdr.status = status;
  out->hdr.offset = h->offset;
}

int rrpc__rmt_tcp_serve(const struct rrpc__rmt_conn *c, const struct rrpc__rmt_tcp_hdr *h,
                        const uint8_t *payload, struct rrpc__rmt_tcp_reply *out) {
  const struct rrpc__rmt_region *r = NULL;
  int rc;
  if (h->type == RRPC_RMT_TCP_WRITE) {
    rc = rrpc__rmt_own_check(c, h->id, h->generation, h->offset, h->length, RRPC_REMOTE_WRITE, &r);
    reply_hdr(h, RRPC_RMT_TCP_DONE, rc, out);
    if (rc) return 0;
    if (h->length) memcpy((uint8_t *)r->ctx + h->offset, payload, h->length);
    if (h->flags & RRPC_RMT_TCP_F_NOTIFY) out->notified = r;
    return 0;
  }
  if (h->type == RRPC_RMT_TCP_READ_REQ) {
    rc = rrpc__rmt_own_check(c, h->id, h->generation, h->offset, h->length, RRPC_REMOTE_READ, &r);
    reply_hdr(h, RRPC_RMT_TCP_READ_RESP, rc, out);
    if (rc) return 0;
    out->hdr.length = h->length;
    out->payload = (const uint8_t *)r->ctx + h->offset;
    return 0;
  }
  return -RRPC_EPARSE;
}
