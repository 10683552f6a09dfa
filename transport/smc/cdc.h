/* transport/smc/cdc.h - the SMC wire codecs (with clc.h): the 44-byte SMC-R CDC message
 * (connection data control) codec and SMC's cursor arithmetic. Pure
 * functions: thread-safe, non-blocking, no allocation; inputs are borrowed,
 * outputs are plain values.
 *
 * Layout (big-endian): 0 type 0xFE, 1 length 44, 2 sequence u16, 4 the
 * RECEIVER's alert token u32, 8 producer cursor {reserved u16, wrap u16,
 * count u32}, 16 consumer cursor (same), 24 producer flags, 25 connection
 * state flags, 26..43 reserved zero. */
#ifndef RRPC_TRANSPORT_SMC_CDC_H
#define RRPC_TRANSPORT_SMC_CDC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_CDC_TYPE = 0xfe,
  RRPC_CDC_LEN = 44,
};

/* Producer flags (byte 24). */
enum {
  RRPC_CDC_PF_WRITE_BLOCKED = 0x80,
  RRPC_CDC_PF_URG_PENDING = 0x40,
  RRPC_CDC_PF_URG_PRESENT = 0x20,
  RRPC_CDC_PF_CONS_UPDATE_REQ = 0x10,
  RRPC_CDC_PF_FAILOVER = 0x08,
};

/* Connection state flags (byte 25). */
enum {
  RRPC_CDC_CS_DONE_WRITING = 0x80, /* shutdown(SHUT_WR) */
  RRPC_CDC_CS_CLOSED = 0x40,       /* orderly close */
  RRPC_CDC_CS_ABNORMAL = 0x20,     /* abort, or close with unread data */
};

/* A ring cursor: count = byte offset in the ring (< ring size), wrap = how
 * many times the ring wrapped, modulo 2^16. */
struct rrpc__cdc_cursor {
  uint16_t wrap;
  uint32_t count;
};

struct rrpc__cdc_msg {
  uint16_t seq;   /* per connection and direction, first = 1, wraps */
  uint32_t token; /* the receiver's alert token (from its Accept/Confirm) */
  struct rrpc__cdc_cursor prod; /* how far I wrote into your ring */
  struct rrpc__cdc_cursor cons; /* how far I consumed my ring */
  uint8_t prod_flags;           /* RRPC_CDC_PF_* */
  uint8_t conn_flags;           /* RRPC_CDC_CS_* */
};

/* rrpc__cdc_encode - write the 44 bytes of m into out (reserved bytes 0). */
void rrpc__cdc_encode(const struct rrpc__cdc_msg *m, uint8_t out[RRPC_CDC_LEN]);

/* rrpc__cdc_decode - decode one CDC message. len is the received length and
 * must be exactly 44, with type 0xFE and length byte 44; reserved bytes are
 * ignored (as Linux does). Returns 0 or -RRPC_EPARSE; *out is written on
 * success only. Cursor counts are not checked against a ring size here: use
 * rrpc__cdc_cursor_to_offset, which does. */
int rrpc__cdc_decode(const uint8_t *buf, size_t len, struct rrpc__cdc_msg *out);

/* rrpc__cdc_seq_newer - 1 if seq is newer than last under 16-bit wrap
 * ((int16_t)(seq - last) > 0), else 0. A CDC that is not newer than the last
 * one accepted is stale and dropped (unless failover validation is set). */
int rrpc__cdc_seq_newer(uint16_t seq, uint16_t last);

/* rrpc__cdc_cursor_diff - bytes from old to new in a ring of ring_size,
 * SMC's rule: different wraps -> (ring_size - old.count) + new.count, same
 * wrap -> new.count - old.count, and never below 0. Assumes the cursors are
 * less than one wrap apart. */
uint32_t rrpc__cdc_cursor_diff(uint32_t ring_size,
                               const struct rrpc__cdc_cursor *old_c,
                               const struct rrpc__cdc_cursor *new_c);

/* rrpc__cdc_cursor_comp - signed distance old -> new: negative (minus the
 * diff new -> old) when old is ahead (higher wrap, or same wrap and larger
 * count), else rrpc__cdc_cursor_diff. */
int64_t rrpc__cdc_cursor_comp(uint32_t ring_size,
                              const struct rrpc__cdc_cursor *old_c,
                              const struct rrpc__cdc_cursor *new_c);

/* rrpc__cdc_cursor_is_stale - 1 if a received cursor new_c is older than the
 * current old_c and must be ignored: a higher old wrap (unless the new wrap
 * is 0, i.e. the wrap counter overflowed), or the same wrap and a larger old
 * count. */
int rrpc__cdc_cursor_is_stale(const struct rrpc__cdc_cursor *old_c,
                              const struct rrpc__cdc_cursor *new_c);

/* rrpc__cdc_cursor_from_offset - the cursor of stream offset off (total bytes
 * since the start) in a ring of ring_size (> 0). */
struct rrpc__cdc_cursor rrpc__cdc_cursor_from_offset(uint64_t off,
                                                     uint32_t ring_size);

/* rrpc__cdc_cursor_to_offset - the stream offset a received cursor stands
 * for: the one value congruent to wrap * ring_size + count modulo
 * 2^16 * ring_size that lies within half that period of ref (a recent
 * offset of the same cursor). Returns 0, or -RRPC_EPARSE when count >=
 * ring_size, ring_size is 0, or the result would be negative. */
int rrpc__cdc_cursor_to_offset(const struct rrpc__cdc_cursor *c,
                               uint32_t ring_size, uint64_t ref,
                               uint64_t *off);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_SMC_CDC_H */
