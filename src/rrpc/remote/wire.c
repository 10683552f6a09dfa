/* remote/wire.c - token and control-message codecs of remote memory (wire.h). */
#include "rrpc/remote/wire.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"

enum {
  MAGIC0 = 0x52,
  MAGIC1 = 0x4d,
  /* token offsets */
  T_RIGHTS = 3,
  T_ID = 4,
  T_GEN = 8,
  T_CONN = 12,
  T_LEN = 20,
  T_RKEY = 28,
  T_ADDR = 32,
  /* message offsets */
  M_SEQ = 2,
  M_RSV4 = 4,
  M_ID = 8,
  M_GEN = 12,
  M_RIGHTS = 16,
  M_RKEY = 20,
  M_ADDR = 24,
  M_LEN = 32,
  M_TAG = 16,
  M_OFF = 24,
};

static int rights_valid(uint8_t r) {
  return r != 0 && (r & ~RRPC_RMT_RIGHTS_ALL) == 0;
}

/* addr + len - 1 must not pass 2^64 - 1 (len >= 1). */
static int span_valid(uint64_t addr, uint64_t len) {
  return len != 0 && addr <= UINT64_MAX - (len - 1);
}

static int token_valid(const struct rrpc__rmt_token *t) {
  return rights_valid(t->rights) && t->id != 0 && span_valid(t->addr, t->length);
}

int rrpc__rmt_token_encode(const struct rrpc__rmt_token *t, uint8_t out[RRPC_RMT_TOKEN_LEN]) {
  if (!token_valid(t)) return -EINVAL;
  out[0] = MAGIC0;
  out[1] = MAGIC1;
  out[2] = RRPC_RMT_TOKEN_VERSION;
  out[T_RIGHTS] = t->rights;
  rrpc__put_be32(out + T_ID, t->id);
  rrpc__put_be32(out + T_GEN, t->generation);
  rrpc__put_be64(out + T_CONN, t->conn_id);
  rrpc__put_be64(out + T_LEN, t->length);
  rrpc__put_be32(out + T_RKEY, t->rkey);
  rrpc__put_be64(out + T_ADDR, t->addr);
  return 0;
}

int rrpc__rmt_token_decode(const uint8_t *buf, size_t len, struct rrpc__rmt_token *out) {
  struct rrpc__rmt_token t;
  if (len != RRPC_RMT_TOKEN_LEN || buf[0] != MAGIC0 || buf[1] != MAGIC1 ||
      buf[2] != RRPC_RMT_TOKEN_VERSION)
    return -RRPC_EPARSE;
  t.rights = buf[T_RIGHTS];
  t.id = rrpc__be32(buf + T_ID);
  t.generation = rrpc__be32(buf + T_GEN);
  t.conn_id = rrpc__be64(buf + T_CONN);
  t.length = rrpc__be64(buf + T_LEN);
  t.rkey = rrpc__be32(buf + T_RKEY);
  t.addr = rrpc__be64(buf + T_ADDR);
  if (!token_valid(&t)) return -RRPC_EPARSE;
  *out = t;
  return 0;
}

int rrpc__rmt_is_msg(const uint8_t *buf, size_t len) {
  return len > 0 && (buf[0] == RRPC_RMT_T_ANNOUNCE || buf[0] == RRPC_RMT_T_REVOKE ||
                     buf[0] == RRPC_RMT_T_NOTIFY || buf[0] == RRPC_RMT_T_HELLO);
}

static int msg_valid(const struct rrpc__rmt_msg *m) {
  if (m->type == RRPC_RMT_T_HELLO) return m->conn_id != 0;
  if (m->id == 0) return 0;
  switch (m->type) {
  case RRPC_RMT_T_ANNOUNCE: return rights_valid(m->rights) && span_valid(m->addr, m->length);
  case RRPC_RMT_T_REVOKE: return 1;
  case RRPC_RMT_T_NOTIFY: return m->offset <= UINT64_MAX - m->length;
  default: return 0;
  }
}

/* The first reserved byte of each type; bytes 4..7 and the gaps named in
 * wire.h are checked apart. */
static size_t reserved_from(uint8_t type) {
  return type == RRPC_RMT_T_REVOKE || type == RRPC_RMT_T_HELLO ? 16 : 40;
}

int rrpc__rmt_msg_encode(const struct rrpc__rmt_msg *m, uint8_t out[RRPC_RMT_MSG_LEN]) {
  if (!msg_valid(m)) return -EINVAL;
  memset(out, 0, RRPC_RMT_MSG_LEN);
  out[0] = m->type;
  out[1] = RRPC_RMT_MSG_LEN;
  rrpc__put_be16(out + M_SEQ, m->seq);
  if (m->type == RRPC_RMT_T_HELLO) {
    rrpc__put_be64(out + M_ID, m->conn_id);
    return 0;
  }
  rrpc__put_be32(out + M_ID, m->id);
  rrpc__put_be32(out + M_GEN, m->generation);
  if (m->type == RRPC_RMT_T_ANNOUNCE) {
    out[M_RIGHTS] = m->rights;
    rrpc__put_be32(out + M_RKEY, m->rkey);
    rrpc__put_be64(out + M_ADDR, m->addr);
    rrpc__put_be64(out + M_LEN, m->length);
  } else if (m->type == RRPC_RMT_T_NOTIFY) {
    rrpc__put_be32(out + M_TAG, m->tag);
    rrpc__put_be64(out + M_OFF, m->offset);
    rrpc__put_be64(out + M_LEN, m->length);
  }
  return 0;
}

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* Reserved bytes inside the used part: 4..7 always, ANNOUNCE 17..19,
 * NOTIFY 20..23. */
static int gaps_zero(const uint8_t *buf) {
  if (!all_zero(buf + M_RSV4, 4)) return 0;
  if (buf[0] == RRPC_RMT_T_ANNOUNCE) return all_zero(buf + 17, 3);
  if (buf[0] == RRPC_RMT_T_NOTIFY) return all_zero(buf + 20, 4);
  return 1;
}

static void decode_fields(const uint8_t *buf, struct rrpc__rmt_msg *m) {
  memset(m, 0, sizeof(*m));
  m->type = buf[0];
  m->seq = rrpc__be16(buf + M_SEQ);
  if (m->type == RRPC_RMT_T_HELLO) {
    m->conn_id = rrpc__be64(buf + M_ID);
    return;
  }
  m->id = rrpc__be32(buf + M_ID);
  m->generation = rrpc__be32(buf + M_GEN);
  if (m->type == RRPC_RMT_T_ANNOUNCE) {
    m->rights = buf[M_RIGHTS];
    m->rkey = rrpc__be32(buf + M_RKEY);
    m->addr = rrpc__be64(buf + M_ADDR);
    m->length = rrpc__be64(buf + M_LEN);
  } else if (m->type == RRPC_RMT_T_NOTIFY) {
    m->tag = rrpc__be32(buf + M_TAG);
    m->offset = rrpc__be64(buf + M_OFF);
    m->length = rrpc__be64(buf + M_LEN);
  }
}

int rrpc__rmt_msg_decode(const uint8_t *buf, size_t len, struct rrpc__rmt_msg *out) {
  struct rrpc__rmt_msg m;
  size_t from;
  if (len != RRPC_RMT_MSG_LEN || !rrpc__rmt_is_msg(buf, len) || buf[1] != RRPC_RMT_MSG_LEN)
    return -RRPC_EPARSE;
  from = reserved_from(buf[0]);
  if (!all_zero(buf + from, RRPC_RMT_MSG_LEN - from) || !gaps_zero(buf)) return -RRPC_EPARSE;
  decode_fields(buf, &m);
  if (!msg_valid(&m)) return -RRPC_EPARSE;
  *out = m;
  return 0;
}
