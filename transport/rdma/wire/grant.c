/* wire/grant.c - the elastic ring's control-message codec (see grant.h). */
#include "transport/rdma/wire/grant.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"

enum {
  OFF_SEQ = 2,
  OFF_TOKEN = 4,
  OFF_ID = 8,
  OFF_BYTE10 = 10, /* GRANT flags, RETIRE reason, HANDBACK flags */
  OFF_CODE = 11,
  OFF_RKEY = 12,
  OFF_WRITTEN = 12,
  OFF_ADDR = 16,
  OFF_WANT = 8,
};

/* The first reserved byte of each type: everything from it to the end must
 * be zero. Bytes inside the used part that are reserved are checked apart. */
static size_t reserved_from(uint8_t type) {
  switch (type) {
  case RRPC_GRANT_T_GRANT: return 24;
  case RRPC_GRANT_T_RETIRE: return 11;
  case RRPC_GRANT_T_WANT: return 12;
  case RRPC_GRANT_T_HANDBACK: return 16;
  default: return 0;
  }
}

int rrpc__grant_is_ctl(const uint8_t *buf, size_t len) {
  return len > 0 && reserved_from(buf[0]) != 0;
}

static int fields_valid(const struct rrpc__grant_msg *m) {
  switch (m->type) {
  case RRPC_GRANT_T_GRANT:
    return m->u.grant.id != RRPC_PIECE_ID_NONE && (m->u.grant.flags & ~RRPC_GRANT_F_IDLE) == 0 &&
           m->u.grant.size_code <= RRPC_PIECE_CODE_MAX;
  case RRPC_GRANT_T_RETIRE:
    return m->u.retire.id != RRPC_PIECE_ID_NONE &&
           (m->u.retire.reason == RRPC_RETIRE_HELD || m->u.retire.reason == RRPC_RETIRE_SHRINK);
  case RRPC_GRANT_T_WANT:
    return m->u.want.bytes >= 1;
  case RRPC_GRANT_T_HANDBACK:
    return m->u.handback.id != RRPC_PIECE_ID_NONE &&
           (m->u.handback.flags & ~RRPC_HANDBACK_F_IDLE) == 0;
  default:
    return 0;
  }
}

int rrpc__grant_encode(const struct rrpc__grant_msg *m, uint8_t out[RRPC_GRANT_MSG_LEN]) {
  if (!fields_valid(m)) return -EINVAL;
  memset(out, 0, RRPC_GRANT_MSG_LEN);
  out[0] = m->type;
  out[1] = RRPC_GRANT_MSG_LEN;
  rrpc__put_be16(out + OFF_SEQ, m->seq);
  rrpc__put_be32(out + OFF_TOKEN, m->token);
  switch (m->type) {
  case RRPC_GRANT_T_GRANT:
    rrpc__put_be16(out + OFF_ID, m->u.grant.id);
    out[OFF_BYTE10] = m->u.grant.flags;
    out[OFF_CODE] = m->u.grant.size_code;
    rrpc__put_be32(out + OFF_RKEY, m->u.grant.rkey);
    rrpc__put_be32(out + OFF_ADDR, (uint32_t)(m->u.grant.addr >> 32));
    rrpc__put_be32(out + OFF_ADDR + 4, (uint32_t)m->u.grant.addr);
    break;
  case RRPC_GRANT_T_RETIRE:
    rrpc__put_be16(out + OFF_ID, m->u.retire.id);
    out[OFF_BYTE10] = m->u.retire.reason;
    break;
  case RRPC_GRANT_T_WANT:
    rrpc__put_be32(out + OFF_WANT, m->u.want.bytes);
    break;
  default: /* HANDBACK: fields_valid admitted nothing else */
    rrpc__put_be16(out + OFF_ID, m->u.handback.id);
    out[OFF_BYTE10] = m->u.handback.flags;
    rrpc__put_be32(out + OFF_WRITTEN, m->u.handback.written);
    break;
  }
  return 0;
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return 0;
  return 1;
}

int rrpc__grant_decode(const uint8_t *buf, size_t len, struct rrpc__grant_msg *out) {
  if (len != RRPC_GRANT_MSG_LEN || buf[1] != RRPC_GRANT_MSG_LEN) return -RRPC_EPARSE;
  size_t rsv = reserved_from(buf[0]);
  if (rsv == 0 || !all_zero(buf + rsv, RRPC_GRANT_MSG_LEN - rsv)) return -RRPC_EPARSE;
  struct rrpc__grant_msg m;
  memset(&m, 0, sizeof(m));
  m.type = buf[0];
  m.seq = rrpc__be16(buf + OFF_SEQ);
  m.token = rrpc__be32(buf + OFF_TOKEN);
  switch (m.type) {
  case RRPC_GRANT_T_GRANT:
    m.u.grant.id = rrpc__be16(buf + OFF_ID);
    m.u.grant.flags = buf[OFF_BYTE10];
    m.u.grant.size_code = buf[OFF_CODE];
    m.u.grant.rkey = rrpc__be32(buf + OFF_RKEY);
    m.u.grant.addr = rrpc__be64(buf + OFF_ADDR);
    break;
  case RRPC_GRANT_T_RETIRE:
    m.u.retire.id = rrpc__be16(buf + OFF_ID);
    m.u.retire.reason = buf[OFF_BYTE10];
    break;
  case RRPC_GRANT_T_WANT:
    m.u.want.bytes = rrpc__be32(buf + OFF_WANT);
    break;
  default: /* HANDBACK: byte 11 is reserved inside the used part */
    if (buf[OFF_CODE] != 0) return -RRPC_EPARSE;
    m.u.handback.id = rrpc__be16(buf + OFF_ID);
    m.u.handback.flags = buf[OFF_BYTE10];
    m.u.handback.written = rrpc__be32(buf + OFF_WRITTEN);
    break;
  }
  if (!fields_valid(&m)) return -RRPC_EPARSE;
  *out = m;
  return 0;
}

int rrpc__grant_piece_code(uint32_t len, uint8_t *code) {
  for (uint8_t c = 0; c <= RRPC_PIECE_CODE_MAX; c++) {
    if (rrpc__grant_piece_len(c) == len) {
      *code = c;
      return 0;
    }
  }
  return -EINVAL;
}
