/* wire/cursor_window.c - the cursor dialect's flow control (cursor_window.h). */
#include "transport/rdma/wire/cursor_window.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"

int rrpc__cur_init(struct rrpc__cur_window *w, uint32_t tx_ring, uint32_t rx_ring, uint32_t token) {
  if (tx_ring == 0 || rx_ring == 0 || tx_ring > (1u << 31) || rx_ring > (1u << 31)) return -EINVAL;
  memset(w, 0, sizeof *w);
  w->tx_ring = tx_ring;
  w->rx_ring = rx_ring;
  w->token = token;
  return 0;
}

uint32_t rrpc__cur_tx_free(const struct rrpc__cur_window *w) {
  return w->tx_ring - (uint32_t)(w->tx_prod - w->tx_peer_cons);
}

uint32_t rrpc__cur_tx_plan(const struct rrpc__cur_window *w, uint64_t want, struct rrpc__cur_seg seg[2],
                           int *nseg) {
  uint32_t free = rrpc__cur_tx_free(w);
  uint32_t n = want < free ? (uint32_t)want : free;
  *nseg = 0;
  if (n == 0) return 0;
  uint32_t off = (uint32_t)(w->tx_prod % w->tx_ring);
  uint32_t first = w->tx_ring - off < n ? w->tx_ring - off : n;
  seg[0] = (struct rrpc__cur_seg){.off = off, .len = first};
  *nseg = 1;
  if (first < n) {
    seg[1] = (struct rrpc__cur_seg){.off = 0, .len = n - first};
    *nseg = 2;
  }
  return n;
}

void rrpc__cur_tx_commit(struct rrpc__cur_window *w, uint32_t n) { w->tx_prod += n; }

void rrpc__cur_make_cdc(struct rrpc__cur_window *w, uint32_t peer_token, uint8_t conn_flags,
                        struct rrpc__cdc_msg *out) {
  memset(out, 0, sizeof *out);
  out->seq = ++w->tx_seq;
  out->token = peer_token;
  out->prod = rrpc__cdc_cursor_from_offset(w->tx_prod, w->tx_ring);
  out->cons = rrpc__cdc_cursor_from_offset(w->rx_cons, w->rx_ring);
  out->prod_flags = w->tx_flags;
  out->conn_flags = conn_flags;
  w->rx_cons_sent = w->rx_cons;
}

const char *rrpc__cur_violation_text(enum rrpc__cur_violation v) {
  switch (v) {
  case RRPC_CUR_OK: return "ok";
  case RRPC_CUR_BAD_TOKEN: return "a CDC for another connection (token)";
  case RRPC_CUR_AFTER_CLOSE: return "a CDC or data after the peer's close";
  case RRPC_CUR_BAD_PROD: return "a producer cursor past the free room of the ring, or backwards";
  case RRPC_CUR_BAD_CONS: return "a consumer cursor past what was written, or backwards";
  }
  return "?";
}

static int refuse(enum rrpc__cur_violation v, enum rrpc__cur_violation *why) {
  *why = v;
  return -RRPC_EPARSE;
}

int rrpc__cur_on_cdc(struct rrpc__cur_window *w, const struct rrpc__cdc_msg *m, struct rrpc__cur_event *ev,
                     enum rrpc__cur_violation *why) {
  memset(ev, 0, sizeof *ev);
  *why = RRPC_CUR_OK;
  if (m->token != w->token) return refuse(RRPC_CUR_BAD_TOKEN, why);
  if (w->rx_conn_flags & (RRPC_CDC_CS_CLOSED | RRPC_CDC_CS_ABNORMAL)) return refuse(RRPC_CUR_AFTER_CLOSE, why);
  if (!rrpc__cdc_seq_newer(m->seq, w->rx_seq)) {
    ev->stale = 1;
    return 0;
  }
  uint64_t prod, cons;
  if (rrpc__cdc_cursor_to_offset(&m->prod, w->rx_ring, w->rx_prod, &prod) != 0 || prod < w->rx_prod ||
      prod - w->rx_cons > w->rx_ring)
    return refuse(RRPC_CUR_BAD_PROD, why);
  if (prod > w->rx_prod && (w->rx_conn_flags & RRPC_CDC_CS_DONE_WRITING)) return refuse(RRPC_CUR_AFTER_CLOSE, why);
  if (rrpc__cdc_cursor_to_offset(&m->cons, w->tx_ring, w->tx_peer_cons, &cons) != 0 || cons < w->tx_peer_cons ||
      cons > w->tx_prod)
    return refuse(RRPC_CUR_BAD_CONS, why);
  ev->new_bytes = (uint32_t)(prod - w->rx_prod);
  ev->freed = (uint32_t)(cons - w->tx_peer_cons);
  ev->conn_flags = (uint8_t)(m->conn_flags & ~w->rx_conn_flags);
  w->rx_seq = m->seq;
  w->rx_prod = prod;
  w->tx_peer_cons = cons;
  w->rx_prod_flags = m->prod_flags;
  w->rx_conn_flags |= m->conn_flags;
  return 0;
}

void rrpc__cur_rx_consume(struct rrpc__cur_window *w, uint32_t n) { w->rx_cons += n; }

int rrpc__cur_update_due(const struct rrpc__cur_window *w) {
  uint64_t to_confirm = w->rx_cons - w->rx_cons_sent;
  if (to_confirm == 0) return 0;
  if (w->rx_prod_flags & RRPC_CDC_PF_CONS_UPDATE_REQ) return 1;
  uint32_t limit = w->rx_ring / 10 > RRPC_CUR_UPDATE_MIN ? w->rx_ring / 10 : RRPC_CUR_UPDATE_MIN;
  uint64_t sender_free = w->rx_ring - (w->rx_prod - w->rx_cons_sent);
  return to_confirm > limit && (sender_free <= w->rx_ring / 2 || (w->rx_prod_flags & RRPC_CDC_PF_WRITE_BLOCKED));
}
