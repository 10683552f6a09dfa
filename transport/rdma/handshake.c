/* handshake.c - the SMC-R CLC handshake of an RDMA endpoint, over the TCP
 * connection every rrpc connection starts with:
 *
 *   client                                   server
 *   QP in INIT, ring, receives posted
 *   Proposal (GID, MAC, rrpc features) --->  (first bytes not CLC: plain TCP)
 *                                            at most --rdma_max_concurrent_
 *                                            handshakes: QP in INIT, ring,
 *                                            receives posted
 *                                     <---   Accept (QPN, PSN, ring rkey/addr/
 *                                             size, token, MTU, RQ depth)
 *   QP -> RTR -> RTS, ring window bound
 *   Confirm (the same, MTU = min)     --->   QP -> RTR -> RTS, window bound
 *                                     <---   first CDC, over RDMA: "ready"
 *   ready: data flows over RDMA              ready
 *
 * The data-path dialect is negotiated in the same messages (rrpc feature
 * bits in reserved CLC bytes, zero from Linux): the Proposal offers WWI
 * (the imm dialect) unless the client is forced to the cursor dialect or
 * its device has no immediate data (iWARP), and CURSOR always. The server
 * takes imm when the Proposal offers it and it can (its device has
 * immediate data, its own --rdma_dialect is not cursor), else cursor - and
 * cursor for a plain SMC-R Proposal with no rrpc bits at all, a kernel
 * peer's. Its Accept says which (WWI, or CURSOR alone); the client follows
 * and its Confirm repeats it. A server that must use cursor with a client
 * that did not offer it declines (VERSMISMAT).
 *
 * Either side may answer with a Decline instead, and both then speak TCP on
 * the same connection. Every wait has a deadline (--rdma_handshake_timeout_ms);
 * a client that never sees the server's first CDC declines over TCP, so a
 * server that is up but unreachable over RDMA falls back too. CLC messages
 * are read exactly (header, then its length), so no byte after them is
 * consumed here.
 *
 * This file is a state machine: it consumes CLC bytes, deadlines and the
 * results of the steps it asked for, and returns an outcome (endpoint.h,
 * struct rrpc__hs_out). endpoint.c applies it: it owns the verbs resources,
 * the data path, the deadline timer and the connection's life. Nothing here
 * touches them; what this file writes is ep->hs, the handshake states of
 * ep->state, ep->peer and the handshake slot count. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/dialect.h"
#include "transport/rdma/endpoint.h"

/* ---- outcomes --------------------------------------------------------------------- */

static struct rrpc__hs_out out_of(enum rrpc__hs_do what) {
  return (struct rrpc__hs_out){.what = what};
}

static struct rrpc__hs_out fallback(uint32_t code, int send_decline) {
  return (struct rrpc__hs_out){.what = RRPC_HS_FALLBACK, .code = code, .send_decline = send_decline};
}

static struct rrpc__hs_out fail(int err) { return (struct rrpc__hs_out){.what = RRPC_HS_FAIL, .err = err}; }

/* Send ep->hs.out, then wait in `next` for `arm` deadline steps; a failed
 * send falls back with `code` (0: fails the connection). */
static struct rrpc__hs_out send_then(rrpc__ep_state next, int arm, uint32_t code) {
  return (struct rrpc__hs_out){.what = RRPC_HS_SEND, .next = next, .arm = arm, .code = code};
}

/* ---- handshakes in progress ------------------------------------------------------- */

/* Server endpoints that hold a QP and a ring without being up yet. A
 * Proposal costs them before the client proved anything, so they are
 * capped (--rdma_max_concurrent_handshakes). */
static atomic_uint_fast64_t g_hs_in_progress;

uint64_t rrpc__rdma_hs_in_progress(void) { return atomic_load(&g_hs_in_progress); }

/* A compare-and-swap, not add-then-undo: a refused attempt must not lift
 * the count over the cap even for a moment, since readers (stats, /rdma,
 * the flood test) take it as the number of handshakes holding resources. */
static int hs_slot_take(rrpc__rdma_ep *ep) {
  const uint64_t cap = (uint64_t)ep->opts->max_handshakes;
  uint_fast64_t n = atomic_load(&g_hs_in_progress);
  do {
    if (n >= cap) {
      rrpc__rdma_count(RRPC_RDMA_CNT_HS_REFUSED, 1);
      return -EBUSY;
    }
  } while (!atomic_compare_exchange_weak(&g_hs_in_progress, &n, n + 1));
  atomic_store(&ep->hs.slot, 1);
  return 0;
}

int rrpc__hs_slot_try(int cap) {
  uint_fast64_t n = atomic_load(&g_hs_in_progress);
  do {
    if (n >= (uint64_t)cap) {
      rrpc__rdma_count(RRPC_RDMA_CNT_HS_REFUSED, 1);
      return -EBUSY;
    }
  } while (!atomic_compare_exchange_weak(&g_hs_in_progress, &n, n + 1));
  return 0;
}

void rrpc__hs_slot_put(void) { atomic_fetch_sub(&g_hs_in_progress, 1); }

void rrpc__hs_slot_release(rrpc__rdma_ep *ep) {
  if (atomic_exchange(&ep->hs.slot, 0)) atomic_fetch_sub(&g_hs_in_progress, 1);
}

/* ---- CLC input over the TCP fd ------------------------------------------------------ */

/* Read one whole CLC message into ep->hs.buf, exactly. 1 = complete (decoded
 * into *out), 0 = more bytes needed, -RRPC_EPARSE = not CLC, -RRPC_ECLOSE =
 * EOF, or -errno. */
static int read_clc(rrpc__rdma_ep *ep, struct rrpc__clc_msg *out) {
  int fd = rrpc__socket_fd(ep->s);
  for (;;) {
    size_t want = RRPC_CLC_HDR_LEN;
    if (ep->hs.len >= RRPC_CLC_HDR_LEN) {
      struct rrpc__clc_hdr h;
      int rc = rrpc__clc_peek_header(ep->hs.buf, ep->hs.len, &h);
      if (rc != 0) return rc == -EAGAIN ? 0 : rc;
      want = h.length;
    }
    if (ep->hs.len == want) break;
    ssize_t r = recv(fd, ep->hs.buf + ep->hs.len, want - ep->hs.len, MSG_DONTWAIT);
    if (r == 0) return -RRPC_ECLOSE;
    if (r < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
    ep->hs.len += (size_t)r;
    if (ep->hs.len < RRPC_CLC_HDR_LEN) {
      struct rrpc__clc_hdr h;
      if (rrpc__clc_peek_header(ep->hs.buf, ep->hs.len, &h) == -RRPC_EPARSE) return -RRPC_EPARSE;
    }
  }
  int rc = rrpc__clc_decode(ep->hs.buf, ep->hs.len, out);
  ep->hs.len = 0;
  return rc == 0 ? 1 : rc;
}

/* ---- CLC output: encoded into ep->hs.out, sent by the endpoint ------------------------ */

static void fill_local(rrpc__rdma_ep *ep, uint8_t peer_id[8], uint8_t gid[16], uint8_t mac[6]) {
  if (getrandom(peer_id, 2, 0) != 2) peer_id[0] = peer_id[1] = 0;
  if (ep->dev->link_layer == IBV_LINK_LAYER_INFINIBAND) {
    /* CLC has no LID field; rrpc peers read it from here (see ep_qp_connect). */
    peer_id[0] = (uint8_t)(ep->dev->lid >> 8);
    peer_id[1] = (uint8_t)ep->dev->lid;
  }
  memcpy(peer_id + 2, ep->hs.mac, 6);
  memcpy(gid, ep->hs.gid.raw, 16);
  memcpy(mac, ep->hs.mac, 6);
}

static int log2_u32(uint32_t v) {
  int n = 0;
  while ((1u << (n + 1)) <= v) n++;
  return n;
}

/* ---- the dialect --------------------------------------------------------------------- */

static int is_cursor(const rrpc__rdma_ep *ep) { return ep->dl == rrpc__rdma_dialect_of(RRPC_RDMA_DIALECT_CURSOR); }

/* iWARP has no immediate data: only the cursor dialect runs there. */
static int dev_has_imm(const rrpc__rdma_dev *dev) {
  return dev->ctx == NULL || dev->ctx->device->transport_type != IBV_TRANSPORT_IWARP;
}

static void use_cursor(rrpc__rdma_ep *ep) {
  ep->dl = rrpc__rdma_dialect_of(RRPC_RDMA_DIALECT_CURSOR);
  ep->elastic = 0;
}

/* clc.c answers for the imm dialect (it wants WWI and an rrpc receive
 * depth). The cursor dialect takes what a kernel SMC-R peer sends: no rrpc
 * bits, no depth (no receive credits: the peer keeps its queue full). */
static uint32_t proposal_code(const struct rrpc__clc_proposal *p, int cursor) {
  if (!cursor) return rrpc__clc_proposal_decline_code(p);
  struct rrpc__clc_proposal q = *p;
  q.rrpc_features |= RRPC_CLC_FEAT_WWI;
  if (q.rrpc_version == 0) q.rrpc_version = RRPC_CLC_WIRE_VERSION;
  return rrpc__clc_proposal_decline_code(&q);
}

/* Accept (server) or Confirm (client) describing this endpoint. */
static int encode_accept(rrpc__rdma_ep *ep, const struct rrpc__hs_local *l, uint8_t type, uint8_t mtu) {
  struct rrpc__clc_accept a;
  memset(&a, 0, sizeof a);
  a.type = type;
  a.first_contact = 1;
  fill_local(ep, a.peer_id, a.gid, a.mac);
  a.qpn = l->qpn;
  a.rkey = l->ring_rkey;
  a.rmbe_idx = 1;
  a.token = ep->my_token;
  if (rrpc__clc_ring_code(l->ring_size, &a.ring_code) != 0) return -EINVAL;
  a.mtu = mtu;
  a.rq_depth_log2 = (uint8_t)log2_u32(l->rq_size);
  a.ring_addr = l->ring_addr;
  a.rrpc_features = is_cursor(ep) ? RRPC_CLC_FEAT_CURSOR : RRPC_CLC_FEAT_WWI;
  if (ep->elastic) {
    /* The ring code is the cap of granted bytes; pieces come as GRANTs. */
    a.rrpc_features |= RRPC_CLC_FEAT_ELASTIC;
    a.rkey = 0;
    a.ring_addr = 0;
  }
  a.psn = ep->my_psn;
  return rrpc__clc_encode_accept(&a, ep->hs.out, sizeof ep->hs.out, &ep->hs.out_len);
}

static int encode_proposal(rrpc__rdma_ep *ep) {
  struct rrpc__clc_proposal p;
  memset(&p, 0, sizeof p);
  fill_local(ep, p.peer_id, p.gid, p.mac);
  p.has_ip_area = 1;
  struct sockaddr_storage local;
  rrpc__socket_local_addr(ep->s, &local);
  if (local.ss_family == AF_INET) {
    p.ipv4_subnet = ntohl(((struct sockaddr_in *)&local)->sin_addr.s_addr);
    p.ipv4_prefix_len = 32;
  }
  p.rrpc_features = RRPC_CLC_FEAT_CURSOR;
  if (!is_cursor(ep)) p.rrpc_features |= RRPC_CLC_FEAT_WWI | (ep->offer_elastic ? RRPC_CLC_FEAT_ELASTIC : 0);
  p.rrpc_version = RRPC_CLC_WIRE_VERSION;
  return rrpc__clc_encode_proposal(&p, ep->hs.out, sizeof ep->hs.out, &ep->hs.out_len);
}

static int pick_gid(rrpc__rdma_ep *ep) {
  struct sockaddr_storage local;
  rrpc__socket_local_addr(ep->s, &local);
  int rc = rrpc__rdma_dev_pick_gid(ep->dev, &local, &ep->hs.gid_index, &ep->hs.gid);
  /* A GID on a VLAN or macvlan netdev has that netdev's MAC. */
  if (rc == 0 && rrpc__rdma_dev_gid_mac(ep->dev, ep->hs.gid_index, ep->hs.mac) != 0) memcpy(ep->hs.mac, ep->dev->mac, 6);
  return rc;
}

static void trace(const rrpc__rdma_ep *ep, const char *what) {
  if (ep->opts->trace_verbose)
    RRPC_LOG(INFO, "rdma handshake (%s): %s", ep->is_client ? "client" : "server", what);
}

/* The peer's Accept or Confirm: 0 if usable, else the Decline code. */
static uint32_t check_accept(const struct rrpc__clc_accept *a, uint8_t want_type, int cursor) {
  struct rrpc__clc_accept q = *a;
  if (cursor) { /* see proposal_code */
    q.rrpc_features |= RRPC_CLC_FEAT_WWI;
    if (q.rq_depth_log2 == 0) q.rq_depth_log2 = RRPC_CLC_RQ_DEPTH_LOG2_MIN;
  }
  uint32_t code = a->type == want_type ? rrpc__clc_accept_decline_code(&q) : RRPC_CLC_DECL_SYNCERR;
  if (code == 0 && rrpc__clc_ring_size(a->ring_code) > UINT32_MAX) code = RRPC_CLC_DECL_CNFERR;
  return code;
}

/* ---- client ----------------------------------------------------------------------- */

static struct rrpc__hs_out client_start(rrpc__rdma_ep *ep) {
  if (pick_gid(ep) != 0) return fallback(RRPC_CLC_DECL_NOSMCRDEV, 1);
  /* The client's QP and ring exist before its Proposal: creating them
   * after the Accept would spend the server's Confirm deadline on our
   * verbs calls (hundreds of connections at once under emulation). The
   * server, which pays for strangers' Proposals, creates them late. */
  return out_of(RRPC_HS_CREATE);
}

static struct rrpc__hs_out client_on_accept(rrpc__rdma_ep *ep, const struct rrpc__clc_accept *a) {
  /* The server chose: WWI is the imm dialect (which we offered only if we
   * can), anything else the cursor dialect. */
  int cursor = !(a->rrpc_features & RRPC_CLC_FEAT_WWI);
  uint32_t code = check_accept(a, RRPC_CLC_ACCEPT, cursor);
  if (code == 0 && !cursor && is_cursor(ep)) code = RRPC_CLC_DECL_SYNCERR; /* imm, not offered */
  if (code != 0) return fallback(code, 1);
  ep->peer = *a;
  if (cursor) use_cursor(ep);
  else ep->elastic = ep->offer_elastic && (a->rrpc_features & RRPC_CLC_FEAT_ELASTIC);
  trace(ep, cursor ? "cursor dialect" : ep->elastic ? "elastic rings agreed" : "ring mode");
  return out_of(RRPC_HS_CONNECT);
}

struct rrpc__hs_out rrpc__hs_on_first_cdc(rrpc__rdma_ep *ep) {
  if (ep->state != EP_CLIENT_WAIT_READY) return out_of(RRPC_HS_CONTINUE);
  trace(ep, "first CDC received: RDMA is up");
  return out_of(RRPC_HS_ESTABLISH);
}

/* ---- server ----------------------------------------------------------------------- */

static struct rrpc__hs_out server_on_proposal(rrpc__rdma_ep *ep, const struct rrpc__clc_proposal *p) {
  /* imm when offered and possible here; cursor otherwise, which a client
   * must have offered - or be a kernel peer (no rrpc bits: version 0). */
  int imm = (p->rrpc_features & RRPC_CLC_FEAT_WWI) && dev_has_imm(ep->dev) && !is_cursor(ep);
  int cursor_ok = (p->rrpc_features & RRPC_CLC_FEAT_CURSOR) || p->rrpc_version == 0;
  uint32_t code = imm || cursor_ok ? proposal_code(p, !imm) : RRPC_CLC_DECL_VERSMISMAT;
  if (code == 0 && pick_gid(ep) != 0) code = RRPC_CLC_DECL_NOSMCRDEV;
  /* Too many handshakes in progress: decline now, before any resource. */
  if (code == 0 && hs_slot_take(ep) != 0) code = RRPC_CLC_DECL_MEM;
  if (code != 0) return fallback(code, 1);
  /* Elastic rings when both offer them: decided here, before the
   * resources (no ring is made then). */
  if (imm) {
    ep->dl = rrpc__rdma_dialect_of(RRPC_RDMA_DIALECT_IMM);
    ep->elastic = ep->offer_elastic && (p->rrpc_features & RRPC_CLC_FEAT_ELASTIC);
  } else {
    use_cursor(ep);
  }
  trace(ep, imm ? "Proposal: imm dialect" : "Proposal: cursor dialect");
  return out_of(RRPC_HS_CREATE);
}

static struct rrpc__hs_out server_on_confirm(rrpc__rdma_ep *ep, const struct rrpc__clc_accept *c) {
  uint32_t code = check_accept(c, RRPC_CLC_CONFIRM, is_cursor(ep));
  /* The client must follow our Accept's dialect and mode. */
  if (code == 0 && (!!(c->rrpc_features & RRPC_CLC_FEAT_ELASTIC) != !!ep->elastic ||
                    ((c->rrpc_features & RRPC_CLC_FEAT_WWI) == 0) != is_cursor(ep)))
    code = RRPC_CLC_DECL_SYNCERR;
  if (code != 0) return fallback(code, 1);
  ep->peer = *c;
  return out_of(RRPC_HS_CONNECT);
}

/* The first bytes of a connection to an RDMA server: CLC, another
 * dialect's hello (*other) or plain TCP? */
static int server_sniff(rrpc__rdma_ep *ep, const struct rrpc__rdma_dialect **other) {
  uint8_t buf[RRPC_CLC_HDR_LEN];
  ssize_t n = recv(rrpc__socket_fd(ep->s), buf, sizeof buf, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return -RRPC_ECLOSE;
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : -errno;
  *other = rrpc__rdma_dialect_by_hello(buf, (size_t)n);
  if (*other != NULL) return 2;
  struct rrpc__clc_hdr h;
  int rc = rrpc__clc_peek_header(buf, (size_t)n, &h);
  if (rc != 0 && rc != -EAGAIN) return -RRPC_EPARSE;
  return 1;
}

/* ---- results of the steps the endpoint took ----------------------------------------- */

struct rrpc__hs_out rrpc__hs_created(rrpc__rdma_ep *ep, int rc, const struct rrpc__hs_local *l) {
  if (rc != 0) return fallback(RRPC_CLC_DECL_MEM, 1);
  if (ep->is_client) {
    rc = encode_proposal(ep);
    if (rc != 0) return fail(rc);
    trace(ep, "Proposal sent");
    return send_then(EP_CLIENT_WAIT_ACCEPT, 1, 0);
  }
  rc = encode_accept(ep, l, RRPC_CLC_ACCEPT, (uint8_t)ep->dev->active_mtu);
  if (rc != 0) return fail(rc);
  trace(ep, "Proposal received, Accept sent");
  /* Twice the step: the client's deadline for the Accept decides, and its
   * Decline reaches us before ours fires. With equal deadlines both sides
   * could time out at once and each read the other's Decline as the first
   * bytes of TCP traffic. A client that stalls here is still dropped, and
   * the handshake cap bounds how many may wait. */
  return send_then(EP_SERVER_WAIT_CONFIRM, 2, 0);
}

struct rrpc__hs_out rrpc__hs_connected(rrpc__rdma_ep *ep, int rc, const struct rrpc__hs_local *l) {
  if (ep->is_client) {
    uint8_t mtu = ep->dev->active_mtu < ep->peer.mtu ? (uint8_t)ep->dev->active_mtu : ep->peer.mtu;
    if (rc == 0) rc = encode_accept(ep, l, RRPC_CLC_CONFIRM, mtu);
    if (rc != 0) {
      RRPC_LOG(WARNING, "rdma handshake: cannot connect the QP: %s", rrpc_strerror(rc));
      return fallback(RRPC_CLC_DECL_INTERR, 1);
    }
    trace(ep, "Accept received, Confirm sent");
    /* A Confirm that cannot be sent is the same failure as a QP that
     * cannot connect: Decline, go on over TCP. */
    return send_then(EP_CLIENT_WAIT_READY, 1, RRPC_CLC_DECL_INTERR);
  }
  if (rc != 0) {
    RRPC_LOG(WARNING, "rdma handshake: cannot bring the QP up: %s", rrpc_strerror(rc));
    return fallback(RRPC_CLC_DECL_INTERR, 1);
  }
  trace(ep, "Confirm received, first CDC sent: RDMA is up");
  /* The first CDC tells the client the QP works both ways. */
  return (struct rrpc__hs_out){.what = RRPC_HS_ESTABLISH, .first_cdc = 1};
}

/* ---- inputs ----------------------------------------------------------------------- */

struct rrpc__hs_out rrpc__hs_start(rrpc__rdma_ep *ep) {
  if (ep->is_client) return client_start(ep);
  ep->state = EP_SERVER_WAIT_PROPOSAL;
  return out_of(RRPC_HS_CONTINUE);
}

struct rrpc__hs_out rrpc__hs_on_deadline(rrpc__rdma_ep *ep) {
  if (ep->opts->trace_verbose)
    RRPC_LOG(INFO, "rdma handshake: deadline in state %s", rrpc__ep_state_name(ep->state));
  switch (ep->state) {
  case EP_CLIENT_WAIT_ACCEPT:
  case EP_SERVER_WAIT_CONFIRM:
  case EP_CLIENT_WAIT_READY:
    return fallback(RRPC_CLC_DECL_TIMEOUT_CL, 1);
  case EP_SERVER_WAIT_PROPOSAL:
    /* Started a CLC message and stalled: nothing sane to fall back to. */
    return fail(-RRPC_EHANDSHAKE);
  default:
    return out_of(RRPC_HS_CONTINUE);
  }
}

/* Dispatch on the message's own type (the peer chose it), then check that
 * this state expects it: the union is only ever read as what the decoder
 * said it holds. */
static struct rrpc__hs_out on_clc(rrpc__rdma_ep *ep, const struct rrpc__clc_msg *m) {
  switch (m->hdr.type) {
  case RRPC_CLC_DECLINE:
    trace(ep, "Decline received");
    return fallback(m->u.decline.diag, 0);
  case RRPC_CLC_PROPOSAL:
    if (ep->state == EP_SERVER_WAIT_PROPOSAL) return server_on_proposal(ep, &m->u.proposal);
    break;
  case RRPC_CLC_ACCEPT:
    if (ep->state == EP_CLIENT_WAIT_ACCEPT) return client_on_accept(ep, &m->u.accept);
    break;
  case RRPC_CLC_CONFIRM:
    if (ep->state == EP_SERVER_WAIT_CONFIRM) return server_on_confirm(ep, &m->u.accept);
    break;
  default:
    break;
  }
  /* A CLC message out of order: SMC's answer is a Decline. */
  return fallback(RRPC_CLC_DECL_SYNCERR, 1);
}

struct rrpc__hs_out rrpc__hs_on_readable(rrpc__rdma_ep *ep) {
  int arm = 0;
  if (ep->state == EP_SERVER_WAIT_PROPOSAL && ep->hs.len == 0) {
    const struct rrpc__rdma_dialect *other = NULL;
    int rc = server_sniff(ep, &other);
    if (rc == 0) return out_of(RRPC_HS_CONTINUE);
    if (rc == 2) {
      trace(ep, "first bytes are another dialect's hello");
      struct rrpc__hs_out o = out_of(RRPC_HS_HANDOVER);
      o.dialect = other;
      return o;
    }
    if (rc == -RRPC_EPARSE) {
      trace(ep, "first bytes are not CLC: plain TCP");
      return out_of(RRPC_HS_PLAIN_TCP);
    }
    if (rc < 0) return fail(rc);
    /* Even a partial header that could be CLC commits to the handshake
     * (no TCP protocol rrpc serves starts with the CLC eyecatcher): read_clc
     * consumes the bytes, so a peer that stops after a few bytes cannot make
     * the level-triggered loop spin on what it peeked. The deadline runs
     * from this first byte. */
    if (ep->hs.timer == 0) arm = 1;
  }
  struct rrpc__clc_msg m;
  int rc = read_clc(ep, &m);
  if (rc == 0) return (struct rrpc__hs_out){.what = RRPC_HS_CONTINUE, .arm = arm};
  if ((rc == -RRPC_ECLOSE || rc == -ECONNRESET) && ep->state == EP_CLIENT_WAIT_ACCEPT && ep->hs.len == 0) {
    /* Closed on our Proposal without a byte of answer: a server that
     * predates CLC. TCP once more, and it is remembered. */
    trace(ep, "the server closed on the Proposal: TCP");
    return out_of(RRPC_HS_RETRY_TCP);
  }
  if (rc < 0) {
    /* EOF, or bytes that are not CLC where CLC must come. */
    if (rc != -RRPC_ECLOSE) RRPC_LOG(WARNING, "rdma handshake in state %s: %s", rrpc__ep_state_name(ep->state),
                                     rrpc_strerror(rc));
    return fail(rc == -RRPC_EPARSE ? -RRPC_EHANDSHAKE : rc);
  }
  struct rrpc__hs_out o = on_clc(ep, &m);
  if (o.arm == 0) o.arm = arm;
  return o;
}

struct rrpc__hs_out rrpc__hs_on_tcp_after_up(rrpc__rdma_ep *ep) {
  if (ep->state == EP_UP && !ep->is_client && !ep->got_peer_data) {
    /* The client may have given up waiting for our first CDC and declined:
     * then both go on over TCP (nothing was sent over RDMA yet). */
    struct rrpc__clc_msg m;
    int rc = read_clc(ep, &m);
    if (rc == 0) return out_of(RRPC_HS_CONTINUE);
    if (rc == 1 && m.hdr.type == RRPC_CLC_DECLINE) {
      trace(ep, "late Decline: the client never saw RDMA come up");
      return fallback(m.u.decline.diag, 0);
    }
    return fail(rc == -RRPC_ECLOSE ? -RRPC_ECLOSE : -RRPC_EPARSE);
  }
  /* Once RDMA carries the data, the TCP connection only tells liveness. */
  uint8_t b[64];
  ssize_t r = recv(rrpc__socket_fd(ep->s), b, sizeof b, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return out_of(RRPC_HS_CONTINUE);
  int code = r == 0 ? -RRPC_ECLOSE : (r < 0 ? -errno : -RRPC_EPARSE);
  if (r > 0) RRPC_LOG(WARNING, "rdma: %zd unexpected bytes on the TCP connection after the handshake", r);
  return fail(code);
}
