/* describe.c - what the RDMA transport tells the builtin pages: the facts
 * of one connection (QPN, rings, window, credits) and of the runtime
 * (device, port, pool). Reads endpoint and device state only; changes
 * nothing, opens nothing, never blocks. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/device.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/pool.h"
#include "transport/smc/cdc.h"

static int mtu_bytes(enum ibv_mtu m) {
  switch (m) {
  case IBV_MTU_256: return 256;
  case IBV_MTU_512: return 512;
  case IBV_MTU_1024: return 1024;
  case IBV_MTU_2048: return 2048;
  case IBV_MTU_4096: return 4096;
  }
  return 0;
}

static void gid_str(const union ibv_gid *g, char *buf, size_t len) {
  if (inet_ntop(AF_INET6, g->raw, buf, (socklen_t)len) == NULL) snprintf(buf, len, "?");
}

/* Loop thread (the facts op): the endpoint's handshake state and verbs
 * objects belong to it; the data path's state comes as one copy
 * (the dialect's dp_view), never read field by field. */
void rrpc__rdma_conn_facts(const rrpc__socket *s, rrpc__conn_facts *out) {
  rrpc__rdma_ep *ep = rrpc__socket_tstate(s);
  out->gid_index = -1;
  if (ep == NULL) {
    snprintf(out->state, sizeof out->state, "CLOSED");
    return;
  }
  snprintf(out->state, sizeof out->state, "%s", rrpc__ep_state_name(ep->state));
  out->is_rdma = ep->state == EP_UP;
  snprintf(out->device, sizeof out->device, "%s", ep->dev->name);
  out->port = ep->dev->port;
  if (ep->state >= EP_CLIENT_WAIT_ACCEPT) {
    out->gid_index = ep->hs.gid_index;
    gid_str(&ep->hs.gid, out->gid, sizeof out->gid);
  }
  out->qpn = ep->vb.qp ? ep->vb.qp->qp_num : 0;
  out->peer_qpn = ep->peer.qpn;
  out->ring_size = ep->vb.ring_size;
  out->sq_size = ep->vb.sq_size;
  out->rq_size = ep->vb.rq_size;
  struct rrpc__dp_view v;
  ep->dl->dp_view(ep, &v);
  out->peer_ring_size = v.peer_ring_size;
  out->window_free = v.window_free;
  out->credits = v.credits;
  out->credits_max = v.credits_max;
  out->sq_used = v.sq_used;
  out->write_blocked = v.write_blocked;
  out->zc_held = v.zc_held;
  snprintf(out->dialect, sizeof out->dialect, "%s", ep->dl->name);
  if (!v.cursor || v.peer_ring_size == 0 || v.my_ring_size == 0) return;
  out->cursor = 1;
  struct rrpc__cdc_cursor c = rrpc__cdc_cursor_from_offset(v.tx_prod, v.peer_ring_size);
  out->prod_wrap = c.wrap, out->prod_count = c.count;
  c = rrpc__cdc_cursor_from_offset(v.rx_cons, v.my_ring_size);
  out->cons_wrap = c.wrap, out->cons_count = c.count;
  c = rrpc__cdc_cursor_from_offset(v.rx_prod, v.my_ring_size);
  out->peer_prod_wrap = c.wrap, out->peer_prod_count = c.count;
  c = rrpc__cdc_cursor_from_offset(v.tx_peer_cons, v.peer_ring_size);
  out->peer_cons_wrap = c.wrap, out->peer_cons_count = c.count;
  out->tx_prod_flags = v.tx_prod_flags;
  out->tx_conn_flags = v.tx_conn_flags;
  out->rx_prod_flags = v.rx_prod_flags;
  out->rx_conn_flags = v.rx_conn_flags;
}

int rrpc__rdma_runtime_facts_get(rrpc__rdma_runtime_facts *out) {
  memset(out, 0, sizeof *out);
  const rrpc_rdma_options *o = rrpc__rdma_options();
  out->sq_size = o->sq_size;
  out->rq_size = o->rq_size;
  out->ring_size = o->ring_size;
  out->use_polling = o->use_polling;
  out->fallback = !o->no_fallback;
  out->recv_zerocopy = o->recv_zerocopy;
  out->handshake_timeout_ms = o->handshake_timeout_ms;
  out->pool_max_bytes = (uint64_t)o->pool_max_size_mb << 20;
  out->pool_bytes = rrpc__rdma_pool_bytes();
  /* The pool registers on the device once it is open; before that, asking
   * for the device would open it (blocking verbs calls on a loop thread). */
  rrpc__rdma_dev *d;
  if (out->pool_bytes == 0 || rrpc__rdma_dev_get(&d) != 0) return 0;
  out->device_open = 1;
  snprintf(out->device, sizeof out->device, "%s", d->name);
  out->port = d->port;
  snprintf(out->link_layer, sizeof out->link_layer, "%s",
           d->link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand" : "Ethernet");
  out->active_mtu = mtu_bytes(d->active_mtu);
  out->max_inline = d->max_inline;
  return 0;
}
