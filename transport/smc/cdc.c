/* transport/smc/cdc.c - SMC-R CDC message codec and cursor arithmetic (see cdc.h). */
#include "transport/smc/cdc.h"

#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"

enum {
  OFF_SEQ = 2,
  OFF_TOKEN = 4,
  OFF_PROD = 8, /* reserved u16, wrap u16, count u32 */
  OFF_CONS = 16,
  OFF_PROD_FLAGS = 24,
  OFF_CONN_FLAGS = 25,
};

static void put_cursor(uint8_t *p, const struct rrpc__cdc_cursor *c) {
  rrpc__put_be16(p, 0);
  rrpc__put_be16(p + 2, c->wrap);
  rrpc__put_be32(p + 4, c->count);
}

static struct rrpc__cdc_cursor get_cursor(const uint8_t *p) {
  struct rrpc__cdc_cursor c;
  c.wrap = rrpc__be16(p + 2);
  c.count = rrpc__be32(p + 4);
  return c;
}

void rrpc__cdc_encode(const struct rrpc__cdc_msg *m, uint8_t out[RRPC_CDC_LEN]) {
  memset(out, 0, RRPC_CDC_LEN);
  out[0] = RRPC_CDC_TYPE;
  out[1] = RRPC_CDC_LEN;
  rrpc__put_be16(out + OFF_SEQ, m->seq);
  rrpc__put_be32(out + OFF_TOKEN, m->token);
  put_cursor(out + OFF_PROD, &m->prod);
  put_cursor(out + OFF_CONS, &m->cons);
  out[OFF_PROD_FLAGS] = m->prod_flags;
  out[OFF_CONN_FLAGS] = m->conn_flags;
}

int rrpc__cdc_decode(const uint8_t *buf, size_t len, struct rrpc__cdc_msg *out) {
  if (len != RRPC_CDC_LEN || buf[0] != RRPC_CDC_TYPE || buf[1] != RRPC_CDC_LEN)
    return -RRPC_EPARSE;
  out->seq = rrpc__be16(buf + OFF_SEQ);
  out->token = rrpc__be32(buf + OFF_TOKEN);
  out->prod = get_cursor(buf + OFF_PROD);
  out->cons = get_cursor(buf + OFF_CONS);
  out->prod_flags = buf[OFF_PROD_FLAGS];
  out->conn_flags = buf[OFF_CONN_FLAGS];
  return 0;
}

int rrpc__cdc_seq_newer(uint16_t seq, uint16_t last) {
  return (int16_t)(uint16_t)(seq - last) > 0;
}

uint32_t rrpc__cdc_cursor_diff(uint32_t ring_size,
                               const struct rrpc__cdc_cursor *old_c,
                               const struct rrpc__cdc_cursor *new_c) {
  int64_t d;
  if (old_c->wrap != new_c->wrap)
    d = ((int64_t)ring_size - old_c->count) + new_c->count;
  else
    d = (int64_t)new_c->count - old_c->count;
  if (d < 0) return 0;
  /* Only reachable with counts beyond the ring (a hostile cursor): clamp so
   * the result still fits. */
  return d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
}

int64_t rrpc__cdc_cursor_comp(uint32_t ring_size,
                              const struct rrpc__cdc_cursor *old_c,
                              const struct rrpc__cdc_cursor *new_c) {
  if (old_c->wrap > new_c->wrap ||
      (old_c->wrap == new_c->wrap && old_c->count > new_c->count))
    return -(int64_t)rrpc__cdc_cursor_diff(ring_size, new_c, old_c);
  return rrpc__cdc_cursor_diff(ring_size, old_c, new_c);
}

int rrpc__cdc_cursor_is_stale(const struct rrpc__cdc_cursor *old_c,
                              const struct rrpc__cdc_cursor *new_c) {
  if (old_c->wrap > new_c->wrap && new_c->wrap != 0) return 1;
  return old_c->wrap == new_c->wrap && old_c->count > new_c->count;
}

struct rrpc__cdc_cursor rrpc__cdc_cursor_from_offset(uint64_t off,
                                                     uint32_t ring_size) {
  struct rrpc__cdc_cursor c;
  c.wrap = (uint16_t)(off / ring_size);
  c.count = (uint32_t)(off % ring_size);
  return c;
}

int rrpc__cdc_cursor_to_offset(const struct rrpc__cdc_cursor *c,
                               uint32_t ring_size, uint64_t ref,
                               uint64_t *off) {
  int64_t period, half, d;
  if (ring_size == 0 || c->count >= ring_size) return -RRPC_EPARSE;
  /* Everything below is under 2^49, so plain int64 arithmetic is safe. */
  period = (int64_t)ring_size << 16;
  half = period / 2;
  /* Signed distance from ref to the cursor's position, brought into
   * [-half, half]. */
  d = ((int64_t)c->wrap * ring_size + c->count) - (int64_t)(ref % (uint64_t)period);
  if (d > half)
    d -= period;
  else if (d < -half)
    d += period;
  if (d < 0 && (uint64_t)-d > ref) return -RRPC_EPARSE; /* before the start */
  if (d > 0 && ref > UINT64_MAX - (uint64_t)d) return -RRPC_EPARSE;
  *off = ref + (uint64_t)d;
  return 0;
}
