/* transport/rdma/cm/cm.c - a connection's QP connected through rdma_cm
 * (see cm.h for the whole exchange). The QP is ours (made by endpoint.c on
 * its own verbs context); rdma_cm is told its number, so the same code
 * serves RoCE/IB (we move the QP with the attributes rdma_cm computes) and
 * iWARP (the kernel moves it while it runs MPA). */
#include "transport/rdma/cm/cm.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/endpoint.h"
#include "transport/rdma/verbs_bg.h"

/* The connect request's private data: a tag and the server's CLC token,
 * which names the endpoint waiting for it (8 of the 56 bytes IB's REQ
 * carries; iWARP's MPA request carries up to 512). */
#define CM_TAG 0x52434d31u /* "RCM1" */
struct cm_pdata {
  uint32_t tag;   /* network order */
  uint32_t token; /* network order: the server's token from its Accept */
};

/* responder_resources / initiator_depth: rrpc issues no RDMA READ or
 * atomic; 1 is what the hand-driven setup asks too. */
#define CM_RD_ATOMIC 1

static int neg_errno(void) { return errno > 0 ? -errno : -RRPC_ERDMA; }

int rrpc__cm_dev_iwarp(const rrpc__rdma_dev *d) {
  return d->ctx != NULL && d->ctx->device->transport_type == IBV_TRANSPORT_IWARP;
}

const char *rrpc__cm_dev_link(const rrpc__rdma_dev *d) {
  if (rrpc__cm_dev_iwarp(d)) return "iWARP";
  return d->link_layer == IBV_LINK_LAYER_INFINIBAND ? "IB" : "RoCE";
}

int rrpc__cm_client_wants(const rrpc__rdma_ep *ep) { return ep->opts->use_cm || rrpc__cm_dev_iwarp(ep->dev); }

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) != 0) return neg_errno();
  return 0;
}

/* The id's device must be the endpoint's: the QP number means nothing on
 * another one (two devices on one netdev, say rxe0 and siw0). */
static int same_device(const rrpc__rdma_ep *ep, const struct rdma_cm_id *id) {
  return id->verbs != NULL && strcmp(ibv_get_device_name(id->verbs->device), ep->dev->name) == 0;
}

/* RoCE/IB: move our QP to RTR, then RTS, with what rdma_cm worked out for
 * this id (path, PSNs, peer QPN); the retry settings are ours, as in the
 * hand-driven setup (endpoint.c, qp_connect). iWARP: nothing, the kernel
 * moves the QP. */
static int qp_rtr_rts(rrpc__rdma_ep *ep, struct rdma_cm_id *id) {
  if (rrpc__cm_dev_iwarp(ep->dev)) return 0;
  struct ibv_qp_attr a;
  int mask = 0;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  if (rdma_init_qp_attr(id, &a, &mask) != 0) return neg_errno();
  a.min_rnr_timer = 12; /* 0.64 ms, as qp_connect */
  mask |= IBV_QP_MIN_RNR_TIMER;
  if (ibv_modify_qp(ep->vb.qp, &a, mask) != 0) return neg_errno();
  memset(&a, 0, sizeof a);
  mask = 0;
  a.qp_state = IBV_QPS_RTS;
  if (rdma_init_qp_attr(id, &a, &mask) != 0) return neg_errno();
  a.timeout = RRPC_EP_ACK_TIMEOUT;
  a.retry_cnt = RRPC_EP_RETRY_CNT;
  a.rnr_retry = RRPC_EP_RNR_RETRY;
  mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY;
  if (ibv_modify_qp(ep->vb.qp, &a, mask) != 0) return neg_errno();
  return 0;
}

static void conn_param(const rrpc__rdma_ep *ep, struct rdma_conn_param *p, const struct cm_pdata *pd) {
  memset(p, 0, sizeof *p);
  p->private_data = pd;
  p->private_data_len = pd != NULL ? (uint8_t)sizeof *pd : 0;
  p->responder_resources = CM_RD_ATOMIC;
  p->initiator_depth = CM_RD_ATOMIC;
  p->retry_count = RRPC_EP_RETRY_CNT;
  p->rnr_retry_count = RRPC_EP_RNR_RETRY;
  p->qp_num = ep->vb.qp->qp_num;
}

/* ---- server: the listener and the table of endpoints waiting on it ---------------- */

struct waiter {
  struct waiter *next;
  uint32_t token;
  rrpc__rdma_ep *ep; /* holds a reference */
};

static struct {
  pthread_mutex_t mu;
  struct rdma_event_channel *ch;
  struct rdma_cm_id *id;
  rrpc__watcher w;
  rrpc__loop *loop;
  uint16_t port;
  struct waiter *waiting;
} g_lis = {.mu = PTHREAD_MUTEX_INITIALIZER};

int rrpc__cm_server_expect(rrpc__rdma_ep *ep) {
  struct waiter *w = malloc(sizeof *w);
  if (w == NULL) return -ENOMEM;
  atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
  *w = (struct waiter){.token = ep->my_token, .ep = ep};
  pthread_mutex_lock(&g_lis.mu);
  w->next = g_lis.waiting;
  g_lis.waiting = w;
  pthread_mutex_unlock(&g_lis.mu);
  ep->cm.registered = 1;
  return 0;
}

/* Take the endpoint waiting with `token` (or `ep` itself, token ignored)
 * out of the table; its reference comes with it. */
static rrpc__rdma_ep *waiter_take(uint32_t token, const rrpc__rdma_ep *ep) {
  rrpc__rdma_ep *found = NULL;
  pthread_mutex_lock(&g_lis.mu);
  for (struct waiter **pp = &g_lis.waiting; *pp != NULL; pp = &(*pp)->next) {
    struct waiter *w = *pp;
    if (ep != NULL ? w->ep == ep : w->token == token) {
      *pp = w->next;
      found = w->ep;
      free(w);
      break;
    }
  }
  pthread_mutex_unlock(&g_lis.mu);
  return found;
}

struct accept_task {
  rrpc__rdma_ep *ep; /* the table's reference, passed on */
  struct rdma_cm_id *id;
};

static void reject(struct rdma_cm_id *id) {
  (void)rdma_reject(id, NULL, 0);
  rrpc__rdma_count(RRPC_RDMA_CNT_CM_FAILURES, 1);
  /* Its events are acknowledged as they are read, so this does not wait. */
  (void)rdma_destroy_id(id);
}

/* On the endpoint's loop: the QP waits in INIT for exactly this request. */
static void accept_task(void *arg) {
  struct accept_task *t = arg;
  rrpc__rdma_ep *ep = t->ep;
  int rc = -ENOTCONN;
  ep->cm.registered = 0;
  if (ep->s != NULL && ep->state == EP_SERVER_WAIT_CONFIRM && ep->vb.qp != NULL && ep->cm.id == NULL) {
    rc = same_device(ep, t->id) ? qp_rtr_rts(ep, t->id) : -ENODEV;
    if (rc == 0) {
      struct rdma_conn_param p;
      conn_param(ep, &p, NULL);
      if (rdma_accept(t->id, &p) != 0) rc = neg_errno();
    }
  }
  if (rc == 0) {
    ep->cm.id = t->id;
    ep->cm.accepted = 1;
    rrpc__rdma_count(RRPC_RDMA_CNT_CM_ACCEPTS, 1);
  } else {
    RRPC_LOG(WARNING, "rdma_cm: cannot accept the connect request for qpn=%u: %s",
             ep->vb.qp != NULL ? ep->vb.qp->qp_num : 0, rrpc_strerror(rc));
    reject(t->id);
  }
  free(t);
  rrpc__ep_unref(ep);
}

/* A connect request's token, read from its private data while the event
 * (which owns that memory) is not yet acknowledged; 0 = not ours. */
static int request_token(const struct rdma_cm_event *ev, uint32_t *token) {
  struct cm_pdata pd;
  if (ev->param.conn.private_data == NULL || ev->param.conn.private_data_len < sizeof pd) return 0;
  memcpy(&pd, ev->param.conn.private_data, sizeof pd);
  if (ntohl(pd.tag) != CM_TAG) return 0;
  *token = ntohl(pd.token);
  return 1;
}

static void on_connect_request(struct rdma_cm_id *id, int tagged, uint32_t token) {
  rrpc__rdma_ep *ep = tagged ? waiter_take(token, NULL) : NULL;
  if (ep == NULL) { /* a stranger's, or one whose endpoint went */
    reject(id);
    return;
  }
  struct accept_task *t = malloc(sizeof *t);
  if (t != NULL) {
    *t = (struct accept_task){.ep = ep, .id = id};
    if (rrpc__loop_post(ep->loop, accept_task, t) == 0) return;
    free(t);
  }
  reject(id);
  rrpc__ep_unref(ep);
}

/* The listener's channel: connect requests; its children's later events
 * (established, disconnected) change nothing here: the data path sees a
 * dead QP by its completions. */
static void on_listener_readable(rrpc__watcher *w, uint32_t events) {
  (void)w;
  (void)events;
  for (int i = 0; i < 64; i++) { /* bounded: the loop has other work */
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(g_lis.ch, &ev) != 0) return; /* EAGAIN: drained */
    /* The child id of a request is ours to accept or reject; acknowledging
     * first lets a rejection destroy it without waiting. */
    enum rdma_cm_event_type type = ev->event;
    struct rdma_cm_id *id = ev->id;
    uint32_t token = 0;
    int tagged = type == RDMA_CM_EVENT_CONNECT_REQUEST && request_token(ev, &token);
    (void)rdma_ack_cm_event(ev);
    if (type == RDMA_CM_EVENT_CONNECT_REQUEST) on_connect_request(id, tagged, token);
  }
}

static int listener_start(rrpc__loop *loop) {
  const rrpc_rdma_options *o = rrpc__rdma_options();
  g_lis.ch = rdma_create_event_channel();
  if (g_lis.ch == NULL) return neg_errno();
  int rc = set_nonblock(g_lis.ch->fd);
  if (rc == 0 && rdma_create_id(g_lis.ch, &g_lis.id, NULL, RDMA_PS_TCP) != 0) rc = neg_errno();
  if (rc == 0) {
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->cm_port)};
    sin.sin_addr.s_addr = htonl(INADDR_ANY);
    if (rdma_bind_addr(g_lis.id, (struct sockaddr *)&sin) != 0 || rdma_listen(g_lis.id, 128) != 0) rc = neg_errno();
  }
  if (rc == 0) {
    g_lis.port = ntohs(rdma_get_src_port(g_lis.id));
    g_lis.w = (rrpc__watcher){.fd = g_lis.ch->fd, .events = EPOLLIN, .cb = on_listener_readable};
    rc = rrpc__loop_watch_add(loop, &g_lis.w);
  }
  if (rc != 0) {
    if (g_lis.id != NULL) rdma_destroy_id(g_lis.id);
    rdma_destroy_event_channel(g_lis.ch);
    g_lis.id = NULL;
    g_lis.ch = NULL;
    return rc;
  }
  g_lis.loop = loop;
  RRPC_LOG(INFO, "rdma_cm: listening on port %u (loop %s)", g_lis.port, rrpc__loop_name(loop));
  return 0;
}

int rrpc__cm_listen_port(rrpc__loop *loop, uint16_t *port) {
  pthread_mutex_lock(&g_lis.mu);
  int rc = g_lis.ch != NULL ? 0 : listener_start(loop);
  if (rc == 0) *port = g_lis.port;
  pthread_mutex_unlock(&g_lis.mu);
  if (rc != 0) RRPC_LOG(WARNING, "rdma_cm: cannot listen: %s (is rdma_ucm loaded?)", rrpc_strerror(rc));
  return rc;
}

/* ---- client ---------------------------------------------------------------------- */

static void client_done(rrpc__rdma_ep *ep, int rc) {
  if (ep->cm.done) return;
  ep->cm.done = 1;
  rrpc__rdma_count(rc == 0 ? RRPC_RDMA_CNT_CM_CONNECTS : RRPC_RDMA_CNT_CM_FAILURES, 1);
  ep->cm.on_done(ep, rc);
}

/* One event of the client's own id; 0, or the connect's failure. */
static int client_event(rrpc__rdma_ep *ep, const struct rdma_cm_event *ev) {
  int tmo = ep->opts->handshake_timeout_ms > 0 ? ep->opts->handshake_timeout_ms : 2000;
  struct rdma_conn_param p;
  struct cm_pdata pd;
  int rc = 0;
  switch (ev->event) {
  case RDMA_CM_EVENT_ADDR_RESOLVED:
    if (!same_device(ep, ep->cm.id)) return -ENODEV;
    return rdma_resolve_route(ep->cm.id, tmo) != 0 ? neg_errno() : 0;
  case RDMA_CM_EVENT_ROUTE_RESOLVED:
    pd = (struct cm_pdata){.tag = htonl(CM_TAG), .token = htonl(ep->peer.token)};
    conn_param(ep, &p, &pd);
    return rdma_connect(ep->cm.id, &p) != 0 ? neg_errno() : 0;
  case RDMA_CM_EVENT_CONNECT_RESPONSE: /* RoCE/IB with our own QP: we move it */
    rc = qp_rtr_rts(ep, ep->cm.id);
    if (rc == 0 && rdma_establish(ep->cm.id) != 0) rc = neg_errno();
    if (rc == 0) client_done(ep, 0);
    return rc;
  case RDMA_CM_EVENT_ESTABLISHED: /* iWARP */
    client_done(ep, 0);
    return 0;
  case RDMA_CM_EVENT_REJECTED: return -ECONNREFUSED;
  case RDMA_CM_EVENT_UNREACHABLE: return ev->status == -ETIMEDOUT ? -ETIMEDOUT : -EHOSTUNREACH;
  case RDMA_CM_EVENT_ADDR_ERROR:
  case RDMA_CM_EVENT_ROUTE_ERROR:
  case RDMA_CM_EVENT_CONNECT_ERROR: return ev->status < 0 ? ev->status : -EHOSTUNREACH;
  default: return 0; /* disconnects after the connect: the data path sees them */
  }
}

/* Client ids live on one event channel per loop, watched there like the
 * loop's completion channel: a connection costs no fd of its own. An
 * event names its id, whose context is the endpoint. Made on the loop's
 * thread on first use; taken off when the loop stops (its fd then stays
 * open until exit: ids on it may still be on their way to destruction). */
struct loop_chan {
  struct loop_chan *next;
  rrpc__loop *loop;
  struct rdma_event_channel *ch;
  rrpc__watcher w;
};
static pthread_mutex_t g_chans_mu = PTHREAD_MUTEX_INITIALIZER;
static struct loop_chan *g_chans;

static int client_port_retry(rrpc__rdma_ep *ep, int why);

static void on_client_readable(rrpc__watcher *w, uint32_t events) {
  (void)events;
  struct loop_chan *lc = w->arg;
  for (int i = 0; i < 16; i++) { /* bounded: the loop has other work */
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(lc->ch, &ev) != 0) return; /* EAGAIN: drained */
    /* Until acknowledged, the id cannot be destroyed, so its endpoint
     * (which the teardown holding the id keeps) is alive: hold it across
     * the ack. An endpoint that let the id go (cm.id changed) is done. */
    rrpc__rdma_ep *ep = ev->id->context;
    struct rdma_cm_event copy = *ev;
    atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
    (void)rdma_ack_cm_event(ev);
    if (ep->cm.id == copy.id && !ep->cm.done) {
      int rc = client_event(ep, &copy);
      if ((rc == -EADDRINUSE || rc == -EADDRNOTAVAIL) && copy.event == RDMA_CM_EVENT_ROUTE_RESOLVED)
        rc = client_port_retry(ep, rc);
      if (rc != 0) {
        RRPC_LOG(WARNING, "rdma_cm: connecting qpn=%u to port %u failed at %s: %s",
                 ep->vb.qp != NULL ? ep->vb.qp->qp_num : 0, ep->cm.port, rdma_event_str(copy.event),
                 rrpc_strerror(rc));
        client_done(ep, rc);
      }
    }
    rrpc__ep_unref(ep);
  }
}

static void chan_on_loop_stop(void *arg) {
  struct loop_chan *lc = arg;
  (void)rrpc__loop_watch_del(lc->loop, &lc->w);
  pthread_mutex_lock(&g_chans_mu);
  for (struct loop_chan **pp = &g_chans; *pp != NULL; pp = &(*pp)->next)
    if (*pp == lc) {
      *pp = lc->next;
      break;
    }
  pthread_mutex_unlock(&g_chans_mu);
  free(lc);
}

/* The loop's channel (loop thread; only it creates its own). */
static int loop_chan_get(rrpc__loop *loop, struct rdma_event_channel **out) {
  pthread_mutex_lock(&g_chans_mu);
  for (struct loop_chan *lc = g_chans; lc != NULL; lc = lc->next)
    if (lc->loop == loop) {
      *out = lc->ch;
      pthread_mutex_unlock(&g_chans_mu);
      return 0;
    }
  pthread_mutex_unlock(&g_chans_mu);
  struct loop_chan *lc = calloc(1, sizeof *lc);
  if (lc == NULL) return -ENOMEM;
  lc->loop = loop;
  lc->ch = rdma_create_event_channel();
  int rc = lc->ch == NULL ? neg_errno() : set_nonblock(lc->ch->fd);
  if (rc == 0) {
    lc->w = (rrpc__watcher){.fd = lc->ch->fd, .events = EPOLLIN, .cb = on_client_readable, .arg = lc};
    rc = rrpc__loop_watch_add(loop, &lc->w);
    if (rc == 0 && (rc = rrpc__loop_stop_hook_add(loop, chan_on_loop_stop, lc)) != 0)
      (void)rrpc__loop_watch_del(loop, &lc->w);
  }
  if (rc != 0) {
    if (lc->ch != NULL) rdma_destroy_event_channel(lc->ch);
    free(lc);
    return rc;
  }
  pthread_mutex_lock(&g_chans_mu);
  lc->next = g_chans;
  g_chans = lc;
  pthread_mutex_unlock(&g_chans_mu);
  *out = lc->ch;
  return 0;
}

/* A client id that lost its local port (client_port_retry): destroyed on
 * the background thread (rdma_destroy_id waits for its events to be
 * acknowledged, which the loop does), holding its endpoint, which events
 * still queued for the id name as their context, until then. */
struct id_drop_job {
  struct rrpc__bg_job job;
  struct rdma_cm_id *id;
  rrpc__rdma_ep *ep;
};

static void id_drop_run(struct rrpc__bg_job *j) {
  struct id_drop_job *d = (struct id_drop_job *)j;
  (void)rdma_destroy_id(d->id);
  rrpc__ep_unref(d->ep);
  free(d);
}

static int client_resolve(rrpc__rdma_ep *ep);

/* rdma_cm takes an iWARP connect's local port from its own port space,
 * which does not see the TCP stack's sockets; the driver then binds MPA's
 * TCP socket to that port and connects it, and rdma_connect fails with
 * EADDRINUSE when a TCP connection (this process's own handshake
 * connections among them) holds the port, or EADDRNOTAVAIL when an earlier
 * MPA connection from that port to the same listener is still in
 * TIME_WAIT (rdma_cm hands a freed port out again at once). With a few
 * hundred TCP ports in use, about one connect in a hundred hit one on siw.
 * Another id gets another port: at most CM_PORT_RETRIES times per
 * connection, each counted. Loop thread. */
enum { CM_PORT_RETRIES = 4 };

static int client_port_retry(rrpc__rdma_ep *ep, int why) {
  if (ep->cm.port_retries >= CM_PORT_RETRIES) return why;
  struct id_drop_job *d = malloc(sizeof *d);
  if (d == NULL) return why;
  ep->cm.port_retries++;
  RRPC_LOG(DEBUG, "rdma_cm: local port %u unusable for TCP (%s): connecting again with a new id (%d of %d)",
           (unsigned)ntohs(rdma_get_src_port(ep->cm.id)), rrpc_strerror(why), ep->cm.port_retries, CM_PORT_RETRIES);
  rrpc__rdma_count(RRPC_RDMA_CNT_CM_PORT_RETRIES, 1);
  atomic_fetch_add_explicit(&ep->refs, 1, memory_order_relaxed);
  *d = (struct id_drop_job){.job.fn = id_drop_run, .id = ep->cm.id, .ep = ep};
  ep->cm.id = NULL;
  rrpc__verbs_bg_submit(&d->job);
  return client_resolve(ep);
}

int rrpc__cm_client_connect(rrpc__rdma_ep *ep, void (*on_done)(rrpc__rdma_ep *ep, int rc)) {
  ep->cm.on_done = on_done;
  int rc = client_resolve(ep);
  if (rc != 0) rrpc__rdma_count(RRPC_RDMA_CNT_CM_FAILURES, 1);
  return rc; /* an id made goes at teardown (rrpc__cm_detach) */
}

/* A new id on the loop's channel, resolving from the TCP connection's local
 * address (any port) to the server's listener. */
static int client_resolve(rrpc__rdma_ep *ep) {
  struct sockaddr_storage src, dst;
  if (rrpc__socket_local_addr(ep->s, &src) != 0) return -EINVAL;
  rrpc__socket_peer_addr(ep->s, &dst);
  if (dst.ss_family == AF_INET) {
    ((struct sockaddr_in *)&dst)->sin_port = htons(ep->cm.port);
    ((struct sockaddr_in *)&src)->sin_port = 0;
  } else if (dst.ss_family == AF_INET6) {
    ((struct sockaddr_in6 *)&dst)->sin6_port = htons(ep->cm.port);
    ((struct sockaddr_in6 *)&src)->sin6_port = 0;
  } else {
    return -EAFNOSUPPORT;
  }
  struct rdma_event_channel *ch;
  int rc = loop_chan_get(ep->loop, &ch);
  if (rc == 0 && rdma_create_id(ch, &ep->cm.id, ep, RDMA_PS_TCP) != 0) rc = neg_errno();
  int tmo = ep->opts->handshake_timeout_ms > 0 ? ep->opts->handshake_timeout_ms : 2000;
  /* The TCP connection's own addresses: the route, and so the device, the
   * handshake picked its GID for. */
  if (rc == 0 && rdma_resolve_addr(ep->cm.id, (struct sockaddr *)&src, (struct sockaddr *)&dst, tmo) != 0)
    rc = neg_errno();
  return rc;
}

/* ---- teardown -------------------------------------------------------------------- */

void rrpc__cm_detach(rrpc__rdma_ep *ep, struct rdma_cm_id **id, struct rdma_event_channel **ch) {
  if (ep->cm.registered) {
    ep->cm.registered = 0;
    rrpc__rdma_ep *mine = waiter_take(0, ep);
    if (mine != NULL) rrpc__ep_unref(mine); /* never the last: the caller holds one */
  }
  *id = ep->cm.id;
  *ch = NULL; /* clients share their loop's channel; the listener's stays */
  ep->cm.id = NULL;
}

void rrpc__cm_destroy(struct rdma_cm_id *id, struct rdma_event_channel *ch) {
  /* A connected id disconnects first: on iWARP that ends MPA's TCP
   * connection in order instead of leaving the peer to time out. */
  if (id != NULL) {
    (void)rdma_disconnect(id);
    (void)rdma_destroy_id(id);
  }
  if (ch != NULL) rdma_destroy_event_channel(ch);
}
