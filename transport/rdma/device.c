/* device.c - the RDMA device (device.h): opening it (context, PD, port facts,
 * max_inline, MAC), the cached GID table behind the GID choice (the choice
 * itself is gid.c), and the async-event watcher that routes QP events to
 * their owners. Options and counters are api.c's; memory is pool.c's. */
#include "transport/rdma/device.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"
#include "transport/rdma/gid.h"
#include "transport/rdma/siw.h"

enum {
  WATCH_BUCKETS = 64,                /* qp_num hash; a power of two */
  PORT_RECHECK_US = 1000000,         /* re-query the port at most once a second */
  GID_RETRY_US = 1000000,            /* re-read the GID table on a miss at most this often */
  INLINE_PROBE = 64,                 /* max_inline_data asked of the probe QP */
};

typedef struct watch_entry {
  struct watch_entry *next;
  uint32_t qp_num;
  rrpc__rdma_async_cb cb;
  void *arg; /* borrowed; handed to cb */
} watch_entry;

/* The device as device.c sees it; `pub` is what the rest of the transport
 * gets (container_of in to_impl). */
typedef struct dev_impl {
  rrpc__rdma_dev pub;

  atomic_int port_active;            /* last known state of pub.port */
  _Atomic uint64_t port_checked_us;  /* when it was last queried */
  atomic_int dead;                   /* DEVICE_FATAL seen: unusable for good */

  /* async events */
  rrpc__loop *loop; /* borrowed from the global group */
  rrpc__watcher watcher;
  int watching;

  /* QP watch registry. `mu` guards the table; `cb_mu` is held while
   * callbacks run, so an unwatch that took the entry out of the table only
   * has to pass through cb_mu once to know no callback is running. */
  pthread_mutex_t mu;
  pthread_mutex_t cb_mu;
  watch_entry *buckets[WATCH_BUCKETS];
  size_t nwatch;

  /* GID table of pub.port, cached (gid_mu). */
  pthread_mutex_t gid_mu;
  rrpc__rdma_gid_entry *gids; /* owned */
  size_t ngids;
  uint64_t gids_read_us;
  atomic_int gids_stale; /* set by GID_CHANGE/PORT_ACTIVE events */

  struct ibv_cq *siw_plug; /* siw only: keeps libsiw's bad mmap key taken (siw.c) */
} dev_impl;

static dev_impl *to_impl(rrpc__rdma_dev *d) {
  return (dev_impl *)((char *)d - offsetof(dev_impl, pub));
}

/* The device whose callbacks this thread is running (for unwatch from
 * inside a callback, which must not wait for itself). */
static _Thread_local dev_impl *tl_dispatching;

/* ---- port and netdev facts ------------------------------------------------ */

static const char *mtu_name(enum ibv_mtu m) {
  switch (m) {
    case IBV_MTU_256: return "256";
    case IBV_MTU_512: return "512";
    case IBV_MTU_1024: return "1024";
    case IBV_MTU_2048: return "2048";
    case IBV_MTU_4096: return "4096";
  }
  return "?";
}

/* MAC of a netdev by name: SIOCGIFHWADDR. 0 or -errno. */
static int mac_of_ifname(const char *ifname, uint8_t mac[6]) {
  struct ifreq ifr;
  memset(&ifr, 0, sizeof ifr);
  if (strlen(ifname) >= sizeof ifr.ifr_name) return -ENAMETOOLONG;
  memcpy(ifr.ifr_name, ifname, strlen(ifname));
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int rc = ioctl(fd, SIOCGIFHWADDR, &ifr) ? -errno : 0;
  close(fd);
  if (rc == 0) memcpy(mac, ifr.ifr_hwaddr.sa_data, 6);
  return rc;
}

/* Netdev name of GID `idx`: from its ifindex when the kernel gave one, else
 * from sysfs (gid_attrs/ndevs/<idx> holds the name; older kernels and some
 * containers give no ifindex). 0 or -ENOENT. */
static int netdev_of_gid(dev_impl *d, uint32_t idx, uint32_t ifindex, char name[IF_NAMESIZE]) {
  if (ifindex != 0 && if_indextoname(ifindex, name) != NULL) return 0;
  char path[256];
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/gid_attrs/ndevs/%u", d->pub.name,
           (unsigned)d->pub.port, (unsigned)idx);
  FILE *f = fopen(path, "re");
  if (f == NULL) return -ENOENT;
  char buf[64] = {0};
  char *got = fgets(buf, sizeof buf, f);
  fclose(f);
  if (got == NULL) return -ENOENT;
  buf[strcspn(buf, "\n")] = '\0';
  if (buf[0] == '\0' || strlen(buf) >= IF_NAMESIZE) return -ENOENT;
  memcpy(name, buf, strlen(buf) + 1);
  return 0;
}

/* ---- GID table -------------------------------------------------------------- */

/* Read pub.port's valid GID entries into a new array. One
 * ibv_query_gid_table call covers every port; if the provider or kernel
 * cannot do that, fall back to ibv_query_gid_ex per index (ENODATA = empty
 * slot). Never the private ibv_query_gid_type. 0, -ENOMEM or -RRPC_ERDMA. */
static int gid_table_read(dev_impl *d, rrpc__rdma_gid_entry **out, size_t *n_out) {
  struct ibv_device_attr da;
  struct ibv_port_attr pa;
  if (ibv_query_device(d->pub.ctx, &da) || ibv_query_port(d->pub.ctx, d->pub.port, &pa))
    return -RRPC_ERDMA;
  size_t total = (size_t)pa.gid_tbl_len * (da.phys_port_cnt ? da.phys_port_cnt : 1);
  if (total == 0) total = 1;

  rrpc__rdma_gid_entry *t = calloc(pa.gid_tbl_len ? pa.gid_tbl_len : 1, sizeof *t);
  struct ibv_gid_entry *raw = calloc(total, sizeof *raw);
  if (t == NULL || raw == NULL) {
    free(t);
    free(raw);
    return -ENOMEM;
  }
  size_t n = 0;
  ssize_t got = ibv_query_gid_table(d->pub.ctx, raw, total, 0);
  if (got >= 0) {
    for (ssize_t i = 0; i < got && n < (size_t)pa.gid_tbl_len; i++) {
      if (raw[i].port_num != d->pub.port) continue;
      t[n].index = raw[i].gid_index;
      t[n].type = raw[i].gid_type;
      t[n].ifindex = raw[i].ndev_ifindex;
      memcpy(t[n].raw, raw[i].gid.raw, 16);
      n++;
    }
  } else {
    RRPC_LOG(DEBUG, "rdma %s: ibv_query_gid_table: %s; querying %d entries one by one",
             d->pub.name, strerror((int)-got), pa.gid_tbl_len);
    for (int i = 0; i < pa.gid_tbl_len; i++) {
      struct ibv_gid_entry e;
      if (ibv_query_gid_ex(d->pub.ctx, d->pub.port, (uint32_t)i, &e, 0) != 0) continue;
      t[n].index = e.gid_index;
      t[n].type = e.gid_type;
      t[n].ifindex = e.ndev_ifindex;
      memcpy(t[n].raw, e.gid.raw, 16);
      n++;
    }
  }
  free(raw);
  *out = t;
  *n_out = n;
  return 0;
}

/* With gid_mu held: re-read the table. On failure the old one stays. */
static int gid_refresh_locked(dev_impl *d) {
  rrpc__rdma_gid_entry *t;
  size_t n;
  int rc = gid_table_read(d, &t, &n);
  if (rc) return rc;
  free(d->gids);
  d->gids = t;
  d->ngids = n;
  d->gids_read_us = rrpc__now_us();
  atomic_store_explicit(&d->gids_stale, 0, memory_order_relaxed);
  return 0;
}

int rrpc__rdma_dev_pick_gid(rrpc__rdma_dev *pub, const struct sockaddr_storage *local,
                            int *gid_index, union ibv_gid *gid) {
  dev_impl *d = to_impl(pub);
  const rrpc_rdma_options *o = rrpc__rdma_options();
  int is_ib = pub->link_layer == IBV_LINK_LAYER_INFINIBAND;
  size_t pos = 0;
  int rc = 0;

  pthread_mutex_lock(&d->gid_mu);
  if (atomic_exchange_explicit(&d->gids_stale, 0, memory_order_relaxed)) gid_refresh_locked(d);
  rc = rrpc__rdma_gid_choose(d->gids, d->ngids, is_ib, o->gid_index_plus1, local, &pos);
  if (rc && rrpc__now_us() - d->gids_read_us >= GID_RETRY_US && gid_refresh_locked(d) == 0)
    rc = rrpc__rdma_gid_choose(d->gids, d->ngids, is_ib, o->gid_index_plus1, local, &pos);
  if (rc == 0) {
    *gid_index = (int)d->gids[pos].index;
    memcpy(gid->raw, d->gids[pos].raw, 16);
  }
  pthread_mutex_unlock(&d->gid_mu);
  if (rc) {
    if (o->gid_index_plus1 > 0)
      RRPC_LOG(WARNING, "rdma %s: --rdma_gid_index %d is not a valid GID of port %u", pub->name,
               o->gid_index_plus1 - 1, (unsigned)pub->port);
    else
      RRPC_LOG(WARNING, "rdma %s: port %u has no usable GID", pub->name, (unsigned)pub->port);
  }
  return rc;
}

int rrpc__rdma_dev_gid_mac(rrpc__rdma_dev *pub, int gid_index, uint8_t mac[6]) {
  dev_impl *d = to_impl(pub);
  uint32_t ifindex = 0;
  int found = 0;
  pthread_mutex_lock(&d->gid_mu);
  for (size_t i = 0; i < d->ngids; i++) {
    if (d->gids[i].index == (uint32_t)gid_index) {
      ifindex = d->gids[i].ifindex;
      found = 1;
      break;
    }
  }
  pthread_mutex_unlock(&d->gid_mu);
  if (!found || pub->link_layer != IBV_LINK_LAYER_ETHERNET) return -ENOENT;
  char ifname[IF_NAMESIZE];
  int rc = netdev_of_gid(d, (uint32_t)gid_index, ifindex, ifname);
  if (rc) return rc;
  return mac_of_ifname(ifname, mac);
}

/* ---- async events ------------------------------------------------------------ */

static watch_entry **bucket_of(dev_impl *d, uint32_t qp_num) {
  return &d->buckets[(qp_num * 2654435761u) >> 26 & (WATCH_BUCKETS - 1)];
}

/* With mu held. */
static watch_entry *find_locked(dev_impl *d, uint32_t qp_num) {
  for (watch_entry *e = *bucket_of(d, qp_num); e; e = e->next)
    if (e->qp_num == qp_num) return e;
  return NULL;
}

int rrpc__rdma_dev_watch_qp(rrpc__rdma_dev *pub, uint32_t qp_num, rrpc__rdma_async_cb cb, void *arg) {
  dev_impl *d = to_impl(pub);
  if (cb == NULL) return -EINVAL;
  watch_entry *e = malloc(sizeof *e);
  if (e == NULL) return -ENOMEM;
  e->qp_num = qp_num;
  e->cb = cb;
  e->arg = arg;
  pthread_mutex_lock(&d->mu);
  if (find_locked(d, qp_num)) {
    pthread_mutex_unlock(&d->mu);
    free(e);
    return -EEXIST;
  }
  watch_entry **b = bucket_of(d, qp_num);
  e->next = *b;
  *b = e;
  d->nwatch++;
  pthread_mutex_unlock(&d->mu);
  return 0;
}

void rrpc__rdma_dev_unwatch_qp(rrpc__rdma_dev *pub, uint32_t qp_num) {
  dev_impl *d = to_impl(pub);
  watch_entry *e = NULL;
  pthread_mutex_lock(&d->mu);
  for (watch_entry **p = bucket_of(d, qp_num); *p; p = &(*p)->next) {
    if ((*p)->qp_num == qp_num) {
      e = *p;
      *p = e->next;
      d->nwatch--;
      break;
    }
  }
  pthread_mutex_unlock(&d->mu);
  if (e == NULL) return;
  /* Out of the table, so no dispatch can pick it up any more; one that
   * already did holds cb_mu until its callback returns. Inside a callback
   * we hold cb_mu ourselves and the running callback is the caller. */
  if (tl_dispatching != d) {
    pthread_mutex_lock(&d->cb_mu);
    pthread_mutex_unlock(&d->cb_mu);
  }
  free(e);
}

/* With cb_mu held: call the callback of qp_num, if any, without holding mu
 * (so the callback may watch/unwatch). 1 if there was one. */
static int call_one(dev_impl *d, uint32_t qp_num, enum ibv_event_type ev) {
  pthread_mutex_lock(&d->mu);
  watch_entry *e = find_locked(d, qp_num);
  rrpc__rdma_async_cb cb = e ? e->cb : NULL;
  void *arg = e ? e->arg : NULL;
  pthread_mutex_unlock(&d->mu);
  if (cb) cb(arg, ev);
  return cb != NULL;
}

static void dispatch_qp(dev_impl *d, uint32_t qp_num, enum ibv_event_type ev) {
  pthread_mutex_lock(&d->cb_mu);
  tl_dispatching = d;
  int known = call_one(d, qp_num, ev);
  if (!known)
    RRPC_LOG(WARNING, "rdma %s: %s on QP %u, which nobody watches", d->pub.name,
             ibv_event_type_str(ev), qp_num);
  tl_dispatching = NULL;
  pthread_mutex_unlock(&d->cb_mu);
}

/* Every watcher gets the event. The qp_nums are copied first and each is
 * looked up again before its call, so entries removed meanwhile are
 * skipped and callbacks may unwatch. */
static void broadcast(dev_impl *d, enum ibv_event_type ev) {
  pthread_mutex_lock(&d->cb_mu);
  tl_dispatching = d;
  pthread_mutex_lock(&d->mu);
  size_t n = d->nwatch, k = 0;
  uint32_t *qps = n ? malloc(n * sizeof *qps) : NULL;
  if (qps) {
    for (int b = 0; b < WATCH_BUCKETS; b++)
      for (watch_entry *e = d->buckets[b]; e && k < n; e = e->next) qps[k++] = e->qp_num;
  }
  pthread_mutex_unlock(&d->mu);
  if (n && !qps)
    RRPC_LOG(ERROR, "rdma %s: out of memory: %s not passed to %zu connections", d->pub.name,
             ibv_event_type_str(ev), n);
  for (size_t i = 0; i < k; i++) call_one(d, qps[i], ev);
  free(qps);
  tl_dispatching = NULL;
  pthread_mutex_unlock(&d->cb_mu);
}

/* Which element an async event names (ibv_async_event.element). */
static int event_names_qp(enum ibv_event_type ev) {
  switch (ev) {
  case IBV_EVENT_QP_FATAL:
  case IBV_EVENT_QP_REQ_ERR:
  case IBV_EVENT_QP_ACCESS_ERR:
  case IBV_EVENT_COMM_EST:
  case IBV_EVENT_SQ_DRAINED:
  case IBV_EVENT_PATH_MIG:
  case IBV_EVENT_PATH_MIG_ERR:
  case IBV_EVENT_QP_LAST_WQE_REACHED:
    return 1;
  default:
    return 0;
  }
}

static int event_names_port(enum ibv_event_type ev) {
  switch (ev) {
  case IBV_EVENT_PORT_ACTIVE:
  case IBV_EVENT_PORT_ERR:
  case IBV_EVENT_LID_CHANGE:
  case IBV_EVENT_PKEY_CHANGE:
  case IBV_EVENT_SM_CHANGE:
  case IBV_EVENT_CLIENT_REREGISTER:
  case IBV_EVENT_GID_CHANGE:
    return 1;
  default:
    return 0;
  }
}

/* Loop thread: drain the async fd (non-blocking). Each event is acked right
 * after its facts are copied out, before any callback runs: ibv_destroy_qp
 * waits for the acks of its QP's events, so a callback that destroys its QP
 * (or a thread woken by it) must not find an unacked event. */
static void on_async(rrpc__watcher *w, uint32_t events) {
  (void)events;
  dev_impl *d = w->arg;
  for (;;) {
    struct ibv_async_event ae;
    if (ibv_get_async_event(d->pub.ctx, &ae)) {
      if (errno != EAGAIN && errno != EINTR)
        RRPC_LOG(ERROR, "rdma %s: ibv_get_async_event: %s", d->pub.name, strerror(errno));
      return;
    }
    enum ibv_event_type ev = ae.event_type;
    uint32_t qp_num = event_names_qp(ev) ? ae.element.qp->qp_num : 0;
    int port = event_names_port(ev) ? ae.element.port_num : 0;
    ibv_ack_async_event(&ae);

    if (event_names_qp(ev)) {
      if (ev == IBV_EVENT_QP_FATAL || ev == IBV_EVENT_QP_REQ_ERR || ev == IBV_EVENT_QP_ACCESS_ERR ||
          ev == IBV_EVENT_PATH_MIG_ERR)
        RRPC_LOG(WARNING, "rdma %s: %s on QP %u", d->pub.name, ibv_event_type_str(ev), qp_num);
      else
        RRPC_LOG(DEBUG, "rdma %s: %s on QP %u", d->pub.name, ibv_event_type_str(ev), qp_num);
      dispatch_qp(d, qp_num, ev);
    } else if (event_names_port(ev)) {
      if (port != d->pub.port) continue; /* another port of this device: not ours */
      if (ev == IBV_EVENT_PORT_ERR)
        RRPC_LOG(WARNING, "rdma %s: %s on port %d", d->pub.name, ibv_event_type_str(ev), port);
      else
        RRPC_LOG(INFO, "rdma %s: %s on port %d", d->pub.name, ibv_event_type_str(ev), port);
      if (ev == IBV_EVENT_PORT_ERR || ev == IBV_EVENT_PORT_ACTIVE) {
        atomic_store_explicit(&d->port_active, ev == IBV_EVENT_PORT_ACTIVE, memory_order_relaxed);
        atomic_store_explicit(&d->port_checked_us, rrpc__now_us(), memory_order_relaxed);
      }
      if (ev == IBV_EVENT_GID_CHANGE || ev == IBV_EVENT_PORT_ACTIVE)
        atomic_store_explicit(&d->gids_stale, 1, memory_order_relaxed);
      broadcast(d, ev);
    } else if (ev == IBV_EVENT_DEVICE_FATAL) {
      RRPC_LOG(ERROR, "rdma %s: device fatal error; RDMA is off for new connections", d->pub.name);
      atomic_store_explicit(&d->dead, 1, memory_order_relaxed);
      atomic_store_explicit(&d->port_active, 0, memory_order_relaxed);
      broadcast(d, ev);
    } else {
      /* CQ_ERR (an overrun: the owner's sizing bug) and SRQ events name
       * no QP; the owner sees the damage in its completions. */
      RRPC_LOG(ERROR, "rdma %s: async event %s", d->pub.name, ibv_event_type_str(ev));
    }
  }
}

/* A task on the watcher's loop: once it runs, no on_async call that began
 * before the watch_del is still running (the loop runs a round's events
 * before the next round's tasks). */
typedef struct loop_barrier {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} loop_barrier;

static void barrier_task(void *arg) {
  loop_barrier *b = arg;
  pthread_mutex_lock(&b->mu);
  b->done = 1;
  pthread_cond_signal(&b->cv);
  pthread_mutex_unlock(&b->mu);
}

static void async_unwatch(dev_impl *d) {
  if (!d->watching) return;
  rrpc__loop_watch_del(d->loop, &d->watcher);
  d->watching = 0;
  if (rrpc__loop_in_thread(d->loop)) return;
  loop_barrier b = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .done = 0};
  if (rrpc__loop_post(d->loop, barrier_task, &b)) return; /* the loop is stopping: no callbacks */
  pthread_mutex_lock(&b.mu);
  while (!b.done) pthread_cond_wait(&b.cv, &b.mu);
  pthread_mutex_unlock(&b.mu);
}

static int async_watch(dev_impl *d) {
  int fd = d->pub.ctx->async_fd;
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -errno;
  rrpc__loop_group *g;
  int rc = rrpc__loop_group_global(0, &g);
  if (rc) return rc;
  d->loop = rrpc__loop_group_next(g);
  d->watcher.fd = fd;
  d->watcher.events = EPOLLIN;
  d->watcher.cb = on_async;
  d->watcher.arg = d;
  rc = rrpc__loop_watch_add(d->loop, &d->watcher);
  if (rc == 0) d->watching = 1;
  return rc;
}

/* ---- open / close ------------------------------------------------------------- */

/* Ask a tiny RC QP shaped like a data QP (its send SGE list) for
 * INLINE_PROBE bytes of inline data and keep what the device grants: a
 * provider sizes a send WQE for the larger of the two and may grant the
 * inline bytes that size holds (Soft-RoCE: 256 for 16 SGEs) - the same
 * queue memory, and a small message sent inline needs no registered copy
 * and no key. 0 when it refuses inline data. */
static uint32_t probe_max_inline(const rrpc__rdma_dev *d) {
  struct ibv_context *ctx = d->ctx;
  struct ibv_pd *pd = d->pd;
  struct ibv_cq *cq = ibv_create_cq(ctx, 2, NULL, NULL, 0);
  if (cq == NULL) return 0;
  uint32_t got = 0;
  for (uint32_t ask = INLINE_PROBE;; ask = 0) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = cq;
    ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 1;
    ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = rrpc__rdma_send_sge(d);
    ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = ask;
    struct ibv_qp *qp = ibv_create_qp(pd, &ia);
    if (qp) {
      got = ia.cap.max_inline_data;
      ibv_destroy_qp(qp);
      break;
    }
    if (ask == 0) break;
  }
  ibv_destroy_cq(cq);
  return got;
}

/* Open `dev` and check its port. 0, -RRPC_ENODEV (port absent or not
 * ACTIVE; *ctx_out is NULL then) or -RRPC_ERDMA. */
static int open_checked(struct ibv_device *dev, int port, struct ibv_context **ctx_out,
                        struct ibv_port_attr *pa) {
  *ctx_out = NULL;
  struct ibv_context *ctx = ibv_open_device(dev);
  if (ctx == NULL) {
    RRPC_LOG(WARNING, "rdma: cannot open %s: %s", ibv_get_device_name(dev), strerror(errno));
    return -RRPC_ERDMA;
  }
  if (ibv_query_port(ctx, (uint8_t)port, pa)) {
    RRPC_LOG(DEBUG, "rdma: %s has no port %d", ibv_get_device_name(dev), port);
    ibv_close_device(ctx);
    return -RRPC_ENODEV;
  }
  if (pa->state != IBV_PORT_ACTIVE) {
    RRPC_LOG(DEBUG, "rdma: %s port %d is %s", ibv_get_device_name(dev), port,
             ibv_port_state_str(pa->state));
    ibv_close_device(ctx);
    return -RRPC_ENODEV;
  }
  *ctx_out = ctx;
  return 0;
}

int rrpc__rdma_dev_open(const char *name, int port, rrpc__rdma_dev **out) {
  int rc, n = 0;
  if (port <= 0) port = 1;
  if (port > 255) return -RRPC_ENODEV;
  const int by_name = name != NULL && name[0] != '\0';

  struct ibv_device **list = ibv_get_device_list(&n);
  if (list == NULL) {
    RRPC_LOG(DEBUG, "rdma: no verbs devices (%s)", strerror(errno));
    return -RRPC_ENODEV;
  }
  struct ibv_context *ctx = NULL;
  struct ibv_port_attr pa;
  rc = -RRPC_ENODEV;
  for (int i = 0; i < n && ctx == NULL; i++) {
    if (by_name && strcmp(ibv_get_device_name(list[i]), name) != 0) continue;
    rc = open_checked(list[i], port, &ctx, &pa);
    if (by_name) break;
  }
  ibv_free_device_list(list); /* open contexts stay valid */
  if (ctx == NULL) {
    if (by_name && rc == -RRPC_ENODEV)
      RRPC_LOG(DEBUG, "rdma: device %s not found or port %d not ACTIVE", name, port);
    return rc;
  }

  dev_impl *d = calloc(1, sizeof *d);
  if (d == NULL) {
    rc = -ENOMEM;
    goto fail_ctx;
  }
  pthread_mutex_init(&d->mu, NULL);
  pthread_mutex_init(&d->cb_mu, NULL);
  pthread_mutex_init(&d->gid_mu, NULL);
  d->pub.ctx = ctx;
  d->pub.port = (uint8_t)port;
  d->pub.link_layer = pa.link_layer;
  d->pub.active_mtu = pa.active_mtu;
  d->pub.lid = pa.lid;
  snprintf(d->pub.name, sizeof d->pub.name, "%s", ibv_get_device_name(ctx->device));
  atomic_init(&d->port_active, 1);
  atomic_init(&d->port_checked_us, rrpc__now_us());

  struct ibv_device_attr da;
  if (ibv_query_device(ctx, &da)) {
    RRPC_LOG(WARNING, "rdma %s: ibv_query_device: %s", d->pub.name, strerror(errno));
    rc = -RRPC_ERDMA;
    goto fail_impl;
  }
  d->pub.max_sge = da.max_sge;
  d->pub.max_cqe = da.max_cqe;
  /* Soft-iWARP (siw, vendor id "bmt") in Linux 6.1 raises a CQ event for
   * a received SEND only when the CQ is armed for every completion: its
   * receive completion path tests the armed flags against "signalled", never
   * against the SEND's solicited bit, so a receive CQ armed solicited-only
   * sleeps through every message (the client never hears the server's first
   * CDC). Its receive CQs wake on every completion instead. */
  d->pub.rx_events_all = rrpc__siw_is(ctx, &da);
  if (rrpc__siw_is(ctx, &da)) {
    /* Before anything else is mapped in this context (siw.c). */
    d->siw_plug = rrpc__siw_key_plug(ctx);
    if (d->siw_plug == NULL)
      RRPC_LOG(WARNING, "rdma %s: cannot reserve siw's bad mmap key (%s): after about ten connections, "
               "new QPs fail with errno 0", d->pub.name, strerror(errno));
  }
  d->pub.mw_type2 = (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) != 0 ||
                    (da.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2A) != 0;
  if (!d->pub.mw_type2)
    RRPC_LOG(WARNING,
             "rdma %s: no type-2 memory windows: receive rings are registered for remote write in the "
             "shared protection domain, so a peer that learns another connection's ring key can write "
             "into it (docs/security.md)",
             ibv_get_device_name(ctx->device));

  d->pub.pd = ibv_alloc_pd(ctx);
  if (d->pub.pd == NULL) {
    RRPC_LOG(WARNING, "rdma %s: ibv_alloc_pd: %s", d->pub.name, strerror(errno));
    rc = -RRPC_ERDMA;
    goto fail_impl;
  }
  d->pub.max_inline = probe_max_inline(&d->pub);

  pthread_mutex_lock(&d->gid_mu);
  rc = gid_refresh_locked(d);
  pthread_mutex_unlock(&d->gid_mu);
  if (rc) {
    RRPC_LOG(WARNING, "rdma %s: cannot read the GID table: %s", d->pub.name, rrpc_strerror(rc));
    goto fail_pd;
  }
  /* The port's own netdev is the one behind the lowest GID index. */
  if (d->pub.link_layer == IBV_LINK_LAYER_ETHERNET && d->ngids > 0) {
    size_t lo = 0;
    for (size_t i = 1; i < d->ngids; i++)
      if (d->gids[i].index < d->gids[lo].index) lo = i;
    if (rrpc__rdma_dev_gid_mac(&d->pub, (int)d->gids[lo].index, d->pub.mac))
      RRPC_LOG(INFO, "rdma %s: MAC of the port's netdev unknown", d->pub.name);
  }

  rc = async_watch(d);
  if (rc) {
    RRPC_LOG(WARNING, "rdma %s: cannot watch async events: %s", d->pub.name, rrpc_strerror(rc));
    goto fail_gids;
  }

  const uint8_t *m = d->pub.mac;
  RRPC_LOG(INFO,
           "rdma: using %s port %u (%s, MTU %s, LID %u, max_inline %u, max_sge %d, "
           "MAC %02x:%02x:%02x:%02x:%02x:%02x, %zu GIDs)",
           d->pub.name, (unsigned)d->pub.port,
           d->pub.ctx->device->transport_type == IBV_TRANSPORT_IWARP   ? "iWARP"
           : d->pub.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
                                                            : "RoCE",
           mtu_name(d->pub.active_mtu), (unsigned)d->pub.lid, (unsigned)d->pub.max_inline,
           d->pub.max_sge, m[0], m[1], m[2], m[3], m[4], m[5], d->ngids);
  *out = &d->pub;
  return 0;

fail_gids:
  free(d->gids);
fail_pd:
  ibv_dealloc_pd(d->pub.pd);
fail_impl:
  if (d->siw_plug != NULL) ibv_destroy_cq(d->siw_plug);
  pthread_mutex_destroy(&d->gid_mu);
  pthread_mutex_destroy(&d->cb_mu);
  pthread_mutex_destroy(&d->mu);
  free(d);
fail_ctx:
  ibv_close_device(ctx);
  return rc;
}

void rrpc__rdma_dev_close(rrpc__rdma_dev *pub) {
  if (pub == NULL) return;
  dev_impl *d = to_impl(pub);
  async_unwatch(d);
  if (d->nwatch)
    RRPC_LOG(ERROR, "rdma %s: closed with %zu QP watches left (their events are lost)", pub->name,
             d->nwatch);
  for (int b = 0; b < WATCH_BUCKETS; b++) {
    while (d->buckets[b]) {
      watch_entry *e = d->buckets[b];
      d->buckets[b] = e->next;
      free(e);
    }
  }
  if (d->siw_plug != NULL && ibv_destroy_cq(d->siw_plug) != 0)
    RRPC_LOG(ERROR, "rdma %s: cannot destroy the siw key plug CQ", pub->name);
  int rc = ibv_dealloc_pd(pub->pd);
  if (rc) RRPC_LOG(ERROR, "rdma %s: ibv_dealloc_pd: %s (resources left on it)", pub->name, strerror(rc));
  rc = ibv_close_device(pub->ctx);
  if (rc) RRPC_LOG(ERROR, "rdma %s: ibv_close_device: %s", pub->name, strerror(errno));
  free(d->gids);
  pthread_mutex_destroy(&d->gid_mu);
  pthread_mutex_destroy(&d->cb_mu);
  pthread_mutex_destroy(&d->mu);
  free(d);
}

/* ---- the process-wide device ------------------------------------------------- */

static _Atomic(dev_impl *) g_dev;
static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_open_failures; /* under g_dev_mu: log the first failure loudly, the rest quietly */

/* The port still ACTIVE? Answers from the last known state, re-querying at
 * most once a second (port events update it in between). */
static int port_usable(dev_impl *d) {
  if (atomic_load_explicit(&d->dead, memory_order_relaxed)) return 0;
  uint64_t now = rrpc__now_us();
  uint64_t last = atomic_load_explicit(&d->port_checked_us, memory_order_relaxed);
  if (now - last >= PORT_RECHECK_US &&
      atomic_compare_exchange_strong_explicit(&d->port_checked_us, &last, now,
                                              memory_order_relaxed, memory_order_relaxed)) {
    struct ibv_port_attr pa;
    int active = ibv_query_port(d->pub.ctx, d->pub.port, &pa) == 0 && pa.state == IBV_PORT_ACTIVE;
    if (active != atomic_exchange_explicit(&d->port_active, active, memory_order_relaxed))
      RRPC_LOG(WARNING, "rdma %s: port %u is %s", d->pub.name, (unsigned)d->pub.port,
               active ? "ACTIVE again" : "no longer ACTIVE");
  }
  return atomic_load_explicit(&d->port_active, memory_order_relaxed);
}

int rrpc__rdma_dev_get(rrpc__rdma_dev **out) {
  dev_impl *d = atomic_load_explicit(&g_dev, memory_order_acquire);
  if (d == NULL) {
    pthread_mutex_lock(&g_dev_mu);
    d = atomic_load_explicit(&g_dev, memory_order_relaxed);
    if (d == NULL) {
      const rrpc_rdma_options *o = rrpc__rdma_options();
      rrpc__rdma_dev *pub;
      int rc = rrpc__rdma_dev_open(o->device, o->port, &pub);
      if (rc) {
        if (g_open_failures++ == 0)
          RRPC_LOG(WARNING, "rdma: no usable device (%s%s, port %d): %s",
                   o->device ? "device " : "", o->device ? o->device : "any device", o->port,
                   rrpc_strerror(rc));
        pthread_mutex_unlock(&g_dev_mu);
        return rc;
      }
      d = to_impl(pub);
      atomic_store_explicit(&g_dev, d, memory_order_release);
    }
    pthread_mutex_unlock(&g_dev_mu);
  }
  if (!port_usable(d)) return -RRPC_ENODEV;
  *out = &d->pub;
  return 0;
}
