/* remote/tcp_frames.h - private: remote memory over a TCP byte stream (a
 * connection that fell back from RDMA). The same operations and checks as
 * over RDMA, carried in frames; the owner copies the bytes (TCP has no
 * one-sided access). Pure functions plus the owner's side of a request;
 * not thread-safe (the connection serializes calls).
 *
 * Frame header, 40 bytes, big-endian, then `length` payload bytes for
 * WRITE, READ_RESP and CTL:
 *   0 magic "RMEM"   4 type   5 flags (WRITE: bit 0 NOTIFY)   6 reserved u16
 *   8 op number u32 (the accessing side's; DONE/READ_RESP echo it)
 *  12 entry id u32  16 generation u32
 *  20 WRITE: tag u32; DONE/READ_RESP: status (0 or a negative code, as i32)
 *  24 offset u64    32 length u64
 * Types: 1 WRITE (accessor -> owner, payload = the bytes), 2 READ_REQ
 * (accessor -> owner, length = bytes wanted), 3 READ_RESP (owner ->
 * accessor, payload = the bytes when status is 0), 4 DONE (owner ->
 * accessor: a WRITE's outcome), 5 CTL (either way: payload is one 44-byte
 * control message of wire.h; id/generation/offset zero).
 * Every field a type does not use is zero. A payload is at most max_frame
 * bytes (the ops queue's piece size); more is a protocol error. */
#ifndef RRPC_REMOTE_TCP_FRAMES_H
#define RRPC_REMOTE_TCP_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/remote/table.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_RMT_TCP_HDR_LEN = 40,
  RRPC_RMT_TCP_WRITE = 1,
  RRPC_RMT_TCP_READ_REQ = 2,
  RRPC_RMT_TCP_READ_RESP = 3,
  RRPC_RMT_TCP_DONE = 4,
  RRPC_RMT_TCP_CTL = 5,
  RRPC_RMT_TCP_F_NOTIFY = 1,
  RRPC_RMT_TCP_MAX_FRAME_DEFAULT = 1 << 20,
};

struct rrpc__rmt_tcp_hdr {
  uint8_t type, flags;
  uint32_t op;
  uint32_t id, generation;
  uint32_t tag;   /* WRITE */
  int32_t status; /* DONE, READ_RESP */
  uint64_t offset, length;
};

/* rrpc__rmt_tcp_encode - 40 bytes of h into out. 0 or -EINVAL (unknown
 * type or flags, a field the type does not use set, CTL not 44 bytes,
 * status > 0, offset + length wrapping). */
int rrpc__rmt_tcp_encode(const struct rrpc__rmt_tcp_hdr *h, uint8_t out[RRPC_RMT_TCP_HDR_LEN]);

/* rrpc__rmt_tcp_decode - strict: len at least 40 (only 40 are read), magic,
 * the encoder's rules, and a payload no longer than max_frame. 0 or
 * -RRPC_EPARSE. */
int rrpc__rmt_tcp_decode(const uint8_t *buf, size_t len, uint32_t max_frame,
                         struct rrpc__rmt_tcp_hdr *out);

/* What the owner does with one request (WRITE or READ_REQ). */
struct rrpc__rmt_tcp_reply {
  struct rrpc__rmt_tcp_hdr hdr;             /* DONE or READ_RESP to send */
  const uint8_t *payload;                   /* READ_RESP with status 0: the region's bytes */
  const struct rrpc__rmt_region *notified;  /* a NOTIFY write that landed: tell the app */
};

/* rrpc__rmt_tcp_serve - the owner's side: check h against c's owner table
 * (the region's ctx is its first byte) and, when allowed, copy a WRITE's
 * payload (h->length bytes) into the region or point the reply at the bytes
 * to READ. A refused access touches nothing and replies with its code
 * (-RRPC_EREMOTE{NOENT,REVOKED,RIGHTS,RANGE}). Returns 0, or -RRPC_EPARSE
 * when h is not a request. */
int rrpc__rmt_tcp_serve(const struct rrpc__rmt_conn *c, const struct rrpc__rmt_tcp_hdr *h,
                        const uint8_t *payload, struct rrpc__rmt_tcp_reply *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_TCP_FRAMES_H */
