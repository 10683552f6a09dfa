/* wire/grant.h - private to the RDMA transport: the codec of the elastic
 * ring's control messages (docs/elastic-rings.md) and of the immediate that
 * data writes carry in elastic mode. Pure functions: thread-safe,
 * non-blocking, no allocation; inputs are borrowed, outputs plain values.
 *
 * Every control message is 44 bytes, big-endian, sent as SEND_WITH_IMM on
 * the connection's QP exactly like a CDC (it consumes one posted receive of
 * the peer, and its immediate carries the ACK for the other direction):
 *
 *   0 type (0xE1 GRANT, 0xE2 RETIRE, 0xE3 WANT, 0xE4 HANDBACK)
 *   1 length 44
 *   2 sequence u16: per connection and direction, over ring-control
 *     messages only, first = 1, exactly +1 each (RC loses nothing)
 *   4 the RECEIVER's alert token u32 (as in a CDC)
 *   8..43 per type, see the structs below; every byte or bit not named
 *     there is reserved and must be zero.
 *
 * Byte 0 is neither the CDC type (0xFE) nor an SMC-R LLC type (v1 0x01..
 * 0x09, v2 0x21..0x29), so Wireshark's SMC-R heuristic leaves these
 * messages alone (test/tshark/check-elastic.sh checks it). */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_GRANT_H
#define RRPC_TRANSPORT_RDMA_WIRE_GRANT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_GRANT_MSG_LEN = 44,
  RRPC_GRANT_T_GRANT = 0xe1,    /* receiver -> sender: a new piece */
  RRPC_GRANT_T_RETIRE = 0xe2,   /* receiver -> sender: forget a full piece */
  RRPC_GRANT_T_WANT = 0xe3,     /* sender -> receiver: I am short of space */
  RRPC_GRANT_T_HANDBACK = 0xe4, /* sender -> receiver: I will not write it */
  /* A piece is 4 KiB << code bytes, code 0..17 (4 KiB .. 512 MiB, the
   * largest ring a CLC size code can announce). */
  RRPC_PIECE_MIN_SHIFT = 12,
  RRPC_PIECE_CODE_MAX = 17,
  RRPC_PIECE_ID_NONE = 0, /* ids are 1..65535 */
};

/* GRANT flags (byte 10). */
enum {
  RRPC_GRANT_F_IDLE = 0x80, /* the idle piece: the one a quiet sender keeps */
};

/* RETIRE reasons (byte 10). */
enum {
  RRPC_RETIRE_HELD = 1,   /* the application still holds bytes of it */
  RRPC_RETIRE_SHRINK = 2, /* released, but not needed: deregistered */
};

/* HANDBACK flags (byte 10). */
enum {
  RRPC_HANDBACK_F_IDLE = 0x80, /* handed back for idleness: the receiver
                                  grants an idle piece if none is left */
};

/* GRANT: 8 id u16, 10 flags, 11 size code, 12 rkey u32, 16 addr u64,
 * 24..43 reserved. */
struct rrpc__grant_grant {
  uint16_t id;
  uint8_t flags;     /* RRPC_GRANT_F_* */
  uint8_t size_code; /* length = 4 KiB << size_code */
  uint32_t rkey;     /* the piece's memory window, bound to this QP */
  uint64_t addr;     /* remote address of the piece's first byte */
};

/* RETIRE: 8 id u16, 10 reason, 11..43 reserved. */
struct rrpc__grant_retire {
  uint16_t id;
  uint8_t reason; /* RRPC_RETIRE_* */
};

/* WANT: 8 bytes wanted u32 (>= 1: pending bytes beyond the space the sender
 * has, capped at 2^32-1), 12..43 reserved. */
struct rrpc__grant_want {
  uint32_t bytes;
};

/* HANDBACK: 8 id u16, 10 flags, 11 reserved, 12 bytes written into the piece
 * since it was last granted or returned u32, 16..43 reserved. */
struct rrpc__grant_handback {
  uint16_t id;
  uint8_t flags; /* RRPC_HANDBACK_F_* */
  uint32_t written;
};

struct rrpc__grant_msg {
  uint8_t type; /* RRPC_GRANT_T_* */
  uint16_t seq;
  uint32_t token;
  union {
    struct rrpc__grant_grant grant;
    struct rrpc__grant_retire retire;
    struct rrpc__grant_want want;
    struct rrpc__grant_handback handback;
  } u;
};

/* rrpc__grant_is_ctl - 1 if buf (len bytes received in a receive slot)
 * starts like a ring-control message (byte 0 one of the four types), so
 * the receive path hands it to rrpc__grant_decode rather than the CDC
 * decoder. Only looks at byte 0; 0 when len is 0. */
int rrpc__grant_is_ctl(const uint8_t *buf, size_t len);

/* rrpc__grant_encode - write the 44 bytes of m into out (reserved bytes 0).
 * Returns 0, or -EINVAL when m would not decode (unknown type, id 0, size
 * code > 17, unknown flag bits or reason, WANT of 0 bytes); out is then
 * untouched. */
int rrpc__grant_encode(const struct rrpc__grant_msg *m,
                       uint8_t out[RRPC_GRANT_MSG_LEN]);

/* rrpc__grant_decode - decode one control message strictly: len exactly 44,
 * length byte 44, a known type, every reserved byte and bit zero, id != 0,
 * size code <= 17, reason 1 or 2, WANT bytes >= 1. Returns 0 or
 * -RRPC_EPARSE; *out is written on success only. Sequence and token are
 * returned, not checked (the state in pieces.h checks them). */
int rrpc__grant_decode(const uint8_t *buf, size_t len,
                       struct rrpc__grant_msg *out);

/* rrpc__grant_piece_len - bytes of a piece of size code (<= 17). */
static inline uint32_t rrpc__grant_piece_len(uint8_t size_code) {
  return (uint32_t)1 << (RRPC_PIECE_MIN_SHIFT + size_code);
}

/* rrpc__grant_piece_code - the size code of len bytes. Returns 0, or
 * -EINVAL unless len is 4 KiB << n with n <= 17. */
int rrpc__grant_piece_code(uint32_t len, uint8_t *code);

/* ---- the immediate in elastic mode ---------------------------------------
 * Host-order value, sent with htonl:
 *   bit 31      ack requested (as in wire/window.h)
 *   bits 30..24 receive-WR credits returned (as in wire/window.h)
 *   bits 23..16 pieces returned: how many of the sender's full pieces, in
 *               the order it filled them, it may write again from their
 *               start (0..255; more go on the next message)
 *   bits 15..0  on a data write: the id of the piece the write went to
 *               (the receiver checks it is the piece it expects); on a
 *               SEND (CDC or control message): 0
 * The byte advance of wire/window.h's immediate is gone: space comes back
 * a piece at a time. */
enum {
  RRPC_EIMM_RETURNS_SHIFT = 16,
  RRPC_EIMM_RETURNS_MAX = 255,
};

struct rrpc__eimm {
  uint8_t ack_req; /* 0 or 1 */
  uint8_t credits; /* <= 127 */
  uint8_t returns; /* <= 255 */
  uint16_t piece;  /* RRPC_PIECE_ID_NONE on a SEND */
};

static inline uint32_t rrpc__eimm_pack(const struct rrpc__eimm *a) {
  return (a->ack_req ? 0x80000000u : 0u) | ((uint32_t)(a->credits & 0x7f) << 24) |
         ((uint32_t)a->returns << RRPC_EIMM_RETURNS_SHIFT) | a->piece;
}

static inline struct rrpc__eimm rrpc__eimm_unpack(uint32_t imm) {
  struct rrpc__eimm a;
  a.ack_req = (uint8_t)(imm >> 31);
  a.credits = (uint8_t)((imm >> 24) & 0x7f);
  a.returns = (uint8_t)(imm >> RRPC_EIMM_RETURNS_SHIFT);
  a.piece = (uint16_t)imm;
  return a;
}

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_GRANT_H */
