/* transport/rdma/cm/cm.h - private to the RDMA transport: connecting a
 * connection's QP through rdma_cm (librdmacm) instead of moving it
 * INIT/RTR/RTS by hand (--rdma_use_cm; the only way on iWARP).
 *
 * The CLC exchange over the TCP connection still decides: the client offers
 * rdma_cm in its Proposal (RRPC_CLC_FEAT_CM), the server's Accept agrees and
 * names the port of its rdma_cm listener (iWARP's MPA runs over a TCP
 * connection of its own, to that port, not the service's). The QP itself is
 * made as always (endpoint.c, on the setup thread, in INIT with its
 * receives posted); rdma_cm only connects it, by QP number:
 *   client  resolve address -> resolve route -> connect (private data: the
 *           server's CLC token) -> RoCE/IB: CONNECT_RESPONSE, then RTR/RTS
 *           with the attributes rdma_cm gives and rdma_establish; iWARP:
 *           ESTABLISHED (the kernel moved the QP) -> Confirm over TCP.
 *   server  the listener's CONNECT_REQUEST names a token -> the endpoint
 *           waiting with it moves its QP RTR/RTS (RoCE/IB) and accepts;
 *           the Confirm then finds the QP connected.
 * Nothing here blocks a loop thread: client ids share one event channel
 * per loop (an fd watched there, like its completion channel), the
 * listener's is on the loop of the first server that needed it; every
 * event is acknowledged where it is read. */
#ifndef RRPC_TRANSPORT_RDMA_CM_CM_H
#define RRPC_TRANSPORT_RDMA_CM_CM_H

#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "rrpc/internal/loop.h"
#include "transport/rdma/device.h"

struct rrpc__rdma_ep;

/* One connection's rdma_cm state (in the endpoint; its loop thread's). */
struct rrpc__ep_cm {
  int want;        /* client: offered in the Proposal; server: the Proposal asked */
  int used;        /* the QP is connected through rdma_cm (both agreed) */
  int accepted;    /* server: rdma_accept went out for this QP */
  int registered;  /* server: in the token table, waiting for CONNECT_REQUEST */
  int done;        /* client: the connect finished (either way) */
  int port_retries; /* client: fresh ids taken after a local port TCP could not use (cm.c) */
  uint16_t port;   /* client: the server's listener port (from its Accept) */
  struct rdma_cm_id *id; /* client: its id (on its loop's channel); server: the listener's child */
  void (*on_done)(struct rrpc__rdma_ep *ep, int rc); /* client: the connect's result */
};

/* 1 where the device is iWARP: rdma_cm is the only way to connect there. */
int rrpc__cm_dev_iwarp(const rrpc__rdma_dev *d);
/* "iWARP", "RoCE" or "IB": what the device's link is, for the facts. */
const char *rrpc__cm_dev_link(const rrpc__rdma_dev *d);
/* Client: offer rdma_cm (--rdma_use_cm, or an iWARP device). */
int rrpc__cm_client_wants(const struct rrpc__rdma_ep *ep);

/* Server: the port of the process's rdma_cm listener, which is started on
 * first use (bound to --rdma_cm_port, 0 = any) with its channel on `loop`.
 * 0 or a negative code (no rdma_cm: module, device, port in use). */
int rrpc__cm_listen_port(rrpc__loop *loop, uint16_t *port);
/* Server: wait for the client's connect request naming ep->my_token (the
 * table holds a reference). Loop thread. 0 or -ENOMEM. */
int rrpc__cm_server_expect(struct rrpc__rdma_ep *ep);

/* Client: connect ep's QP (INIT, receives posted) to the server named by
 * the TCP peer's address and ep->cm.port; on_done(ep, rc) follows on the
 * endpoint's loop unless the endpoint is torn down first. 0 when under way
 * or a negative code. Loop thread. */
int rrpc__cm_client_connect(struct rrpc__rdma_ep *ep, void (*on_done)(struct rrpc__rdma_ep *ep, int rc));

/* Teardown (endpoint.c, before the QP goes): out of the token table, the
 * client's channel off the loop; the id and channel are handed over in
 * *id and *ch, to be destroyed after the QP (rrpc__cm_destroy). */
void rrpc__cm_detach(struct rrpc__rdma_ep *ep, struct rdma_cm_id **id, struct rdma_event_channel **ch);
/* Destroy what rrpc__cm_detach handed over (any thread; may wait for the
 * kernel, so the background verbs thread). */
void rrpc__cm_destroy(struct rdma_cm_id *id, struct rdma_event_channel *ch);

#endif /* RRPC_TRANSPORT_RDMA_CM_CM_H */
