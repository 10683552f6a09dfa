/* remote/ctl.c - a connection's remote-memory control messages, both ways
 * (table.h): sequence numbers, HELLO before the first ANNOUNCE, and the
 * routing of what arrives to the peer or owner table. */
#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/remote/table.h"

/* Encode m with the next sequence; the sequence is spent only on success,
 * so the peer never sees a gap. */
static int tx(struct rrpc__rmt_conn *c, struct rrpc__rmt_msg *m, uint8_t out[RRPC_RMT_MSG_LEN]) {
  int rc;
  m->seq = (uint16_t)(c->tx_seq + 1);
  rc = rrpc__rmt_msg_encode(m, out);
  if (rc == 0) c->tx_seq = m->seq;
  return rc;
}

int rrpc__rmt_tx_announce(struct rrpc__rmt_conn *c, const struct rrpc__rmt_region *r,
                          uint32_t rkey, uint64_t addr, uint8_t out_hello[RRPC_RMT_MSG_LEN],
                          uint8_t out[RRPC_RMT_MSG_LEN]) {
  struct rrpc__rmt_msg m, h;
  int first = !c->hello_sent, rc;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_RMT_T_ANNOUNCE;
  m.id = r->id;
  m.generation = r->generation;
  m.rights = r->rights;
  m.rkey = rkey;
  m.addr = addr;
  m.length = r->length;
  /* Validate before spending a sequence number on the HELLO. */
  rc = rrpc__rmt_msg_encode(&m, out);
  if (rc) return rc;
  if (first) {
    memset(&h, 0, sizeof(h));
    h.type = RRPC_RMT_T_HELLO;
    h.conn_id = c->conn_id;
    rc = tx(c, &h, out_hello);
    if (rc) return rc;
    c->hello_sent = 1;
  }
  rc = tx(c, &m, out);
  if (rc) return rc;
  return first ? 2 : 1;
}

int rrpc__rmt_tx_revoke(struct rrpc__rmt_conn *c, const struct rrpc__rmt_region *r,
                        uint8_t out[RRPC_RMT_MSG_LEN]) {
  struct rrpc__rmt_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_RMT_T_REVOKE;
  m.id = r->id;
  m.generation = r->generation;
  return tx(c, &m, out);
}

int rrpc__rmt_tx_notify(struct rrpc__rmt_conn *c, const struct rrpc__rmt_entry *e, uint64_t off,
                        uint64_t len, uint32_t tag, uint8_t out[RRPC_RMT_MSG_LEN]) {
  struct rrpc__rmt_msg m;
  memset(&m, 0, sizeof(m));
  m.type = RRPC_RMT_T_NOTIFY;
  m.id = e->id;
  m.generation = e->generation;
  m.tag = tag;
  m.offset = off;
  m.length = len;
  return tx(c, &m, out);
}

static int rx_notify(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m,
                     const struct rrpc__rmt_region **notified) {
  const struct rrpc__rmt_region *r = rrpc__rmt_own_find(c, m->id);
  if (!r || r->generation != m->generation || !rrpc__rmt_in_range(r->length, m->offset, m->length)) {
    c->stats.bad_notify++;
    return 1;
  }
  *notified = r;
  return 0;
}

static int rx_apply(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m,
                    const struct rrpc__rmt_region **notified) {
  switch (m->type) {
  case RRPC_RMT_T_HELLO:
    if (c->peer_conn_id != 0) return -RRPC_EPARSE;
    c->peer_conn_id = m->conn_id;
    return 0;
  case RRPC_RMT_T_ANNOUNCE:
    return c->peer_conn_id == 0 ? -RRPC_EPARSE : rrpc__rmt_peer_add(c, m);
  case RRPC_RMT_T_REVOKE: return rrpc__rmt_peer_remove(c, m);
  default: return rx_notify(c, m, notified);
  }
}

int rrpc__rmt_conn_rx(struct rrpc__rmt_conn *c, const uint8_t *buf, size_t len,
                      struct rrpc__rmt_msg *m, const struct rrpc__rmt_region **notified) {
  int rc = rrpc__rmt_msg_decode(buf, len, m);
  if (rc == 0 && m->seq != (uint16_t)(c->rx_seq + 1)) rc = -RRPC_EPARSE;
  if (rc == 0) {
    c->rx_seq = m->seq;
    rc = rx_apply(c, m, notified);
  }
  if (rc < 0) c->stats.protocol_errors++;
  return rc;
}
