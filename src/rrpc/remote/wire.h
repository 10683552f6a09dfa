/* remote/wire.h - private: the codecs of remote memory (docs/remote-memory.md).
 * Pure functions: thread-safe, non-blocking, no allocation.
 *
 * Token (40 bytes, big-endian), what rrpc_remote_token holds:
 *   0 magic 0x52 0x4d ("RM")   2 version 1   3 rights (bits 0 READ, 1 WRITE)
 *   4 entry id u32 (>= 1)      8 generation u32
 *  12 connection id u64        20 length u64 (>= 1)
 *  28 rkey u32 (the type-2 window bound to that connection's QP; 0 over TCP)
 *  32 address u64 (the window's first byte; 0 over TCP)
 * address + length must not pass 2^64.
 *
 * Control messages (44 bytes, big-endian), sent on the connection like the
 * elastic ring's (a SEND consuming one of the peer's receives, or a frame of
 * the TCP carriage):
 *   0 type (0xE8 ANNOUNCE, 0xE9 REVOKE, 0xEA NOTIFY, 0xEB HELLO)   1 length 44
 *   2 sequence u16: per connection and direction over remote messages only,
 *     first 1, +1 each (the tables, not the codec, check it)
 *   4 reserved u32
 *   HELLO:    8 the sender's connection id u64 (!= 0), what the tokens it
 *             issues on this connection carry; 16..43 reserved. Sent once,
 *             before the sender's first ANNOUNCE.
 *   others:   8 entry id u32 (>= 1)   12 generation u32, then
 *   ANNOUNCE: 16 rights, 17..19 reserved, 20 rkey u32, 24 address u64,
 *             32 length u64 (>= 1), 40..43 reserved
 *   REVOKE:   16..43 reserved
 *   NOTIFY:   16 tag u32, 20..23 reserved, 24 offset u64, 32 length u64,
 *             40..43 reserved; offset + length within the region is checked
 *             by the owner's table, which knows the region.
 * Every byte not named is reserved and must be zero. The types sit next to
 * the elastic ring's 0xE1..0xE4 and are neither CDC (0xFE) nor SMC-R LLC
 * (0x01..0x09, 0x21..0x29). */
#ifndef RRPC_REMOTE_WIRE_H
#define RRPC_REMOTE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_RMT_TOKEN_LEN = 40,
  RRPC_RMT_TOKEN_VERSION = 1,
  RRPC_RMT_MSG_LEN = 44,
  RRPC_RMT_T_ANNOUNCE = 0xe8, /* owner -> peer: a new entry in your remote table */
  RRPC_RMT_T_REVOKE = 0xe9,   /* owner -> peer: that entry is gone */
  RRPC_RMT_T_NOTIFY = 0xea,   /* writer -> owner: bytes landed, tell the app */
  RRPC_RMT_T_HELLO = 0xeb,    /* owner -> peer: my id of this connection */
  RRPC_RMT_RIGHTS_ALL = 3,    /* RRPC_REMOTE_READ | RRPC_REMOTE_WRITE */
};

/* A token's fields (what rrpc__rmt_token_encode writes). */
struct rrpc__rmt_token {
  uint8_t rights;
  uint32_t id, generation;
  uint64_t conn_id, length;
  uint32_t rkey;
  uint64_t addr;
};

struct rrpc__rmt_msg {
  uint8_t type; /* RRPC_RMT_T_* */
  uint16_t seq;
  uint64_t conn_id; /* HELLO */
  uint32_t id, generation;
  /* ANNOUNCE */
  uint8_t rights;
  uint32_t rkey;
  uint64_t addr;
  /* ANNOUNCE: the region's bytes; NOTIFY: the bytes written */
  uint64_t length;
  /* NOTIFY */
  uint32_t tag;
  uint64_t offset;
};

/* rrpc__rmt_token_encode - write t into out. Returns 0, or -EINVAL when t
 * would not decode (rights 0 or unknown bits, id 0, length 0, address +
 * length past 2^64); out is then untouched. */
int rrpc__rmt_token_encode(const struct rrpc__rmt_token *t, uint8_t out[RRPC_RMT_TOKEN_LEN]);

/* rrpc__rmt_token_decode - strict: len exactly 40, magic, version, the
 * same field rules as the encoder. Returns 0 or -RRPC_EPARSE; *out written
 * on success only. */
int rrpc__rmt_token_decode(const uint8_t *buf, size_t len, struct rrpc__rmt_token *out);

/* rrpc__rmt_is_msg - 1 if buf starts like a remote control message (byte 0
 * one of the four types); 0 when len is 0. */
int rrpc__rmt_is_msg(const uint8_t *buf, size_t len);

/* rrpc__rmt_msg_encode - write m's 44 bytes (fields of other types are
 * ignored and sent as zero). Returns 0, or -EINVAL when m would not decode
 * (unknown type, id 0 (HELLO: connection id 0), ANNOUNCE with bad rights, length 0 or wrapping,
 * NOTIFY whose offset + length wraps); out is then untouched. */
int rrpc__rmt_msg_encode(const struct rrpc__rmt_msg *m, uint8_t out[RRPC_RMT_MSG_LEN]);

/* rrpc__rmt_msg_decode - strict: len exactly 44, length byte 44, a known
 * type, reserved bytes zero, the encoder's field rules. Fields of other
 * types are zero in *out. Returns 0 or -RRPC_EPARSE; *out written on
 * success only. */
int rrpc__rmt_msg_decode(const uint8_t *buf, size_t len, struct rrpc__rmt_msg *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_WIRE_H */
