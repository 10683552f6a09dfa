/* server.c - the rrpc server: listener, accepted connections, method table
 * and request dispatch over baidu_std. Transport-agnostic: connections get
 * the ops that rrpc__transport_pick returns for the server's options. */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/internal/accept_guard.h"
#include "rrpc/internal/addr.h"
#include "rrpc/internal/admission.h"
#include "rrpc/internal/baidu_std.h"
#include "rrpc/internal/controller.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"
#include "rrpc/internal/metrics.h"
#include "rrpc/builtin/builtin.h"
#include "rrpc/internal/socket.h"
#include "rrpc/internal/worker_pool.h"
#include "rrpc/remote/link.h"
#include "rrpc/errors.h"
#include "rrpc/server.h"

struct method {
  char *service;
  char *name;
  size_t service_len, name_len; /* strlen of each, for find_method */
  rrpc_handler_fn fn;
  void *arg;
  rrpc__gate gate; /* the method's own max_concurrency */
  rrpc_run_mode mode;
  int in_loop; /* resolved at start from mode and the server's default */
  rrpc__call_stats *stats;
  rrpc__stats_reg *reg;
};

enum {
  DEFAULT_POOL_MIN_THREADS = 4,
  DEFAULT_POOL_QUEUE_MAX = 65536,
  DEFAULT_POOL_RESCUE_US = 1000,
  DEFAULT_POOL_SHORT_TASK_US = 50,
  DEFAULT_POOL_WRITE_FLUSH_US = 1000,
};

/* One accepted connection. Listed in the server until its socket's
 * on_close; alive until that and every call read from it are done (refs:
 * one for the socket, one per call), since its calls come back to it. */
struct sconn {
  struct sconn *prev, *next;
  rrpc_server *srv;
  rrpc__socket *sock;        /* a reference, dropped when the sconn goes */
  int proto;                 /* loop thread: PROTO_* once the first bytes told */
  rrpc__http_conn *http;     /* builtin pages state of an HTTP connection */
  /* Finished call objects, reused for the next requests (no malloc/free
   * per call; a call is allocated on the loop and often ends on a worker,
   * which glibc's per-thread caches serve badly). `spare` is the loop
   * thread's; other threads push onto `returned`, which the loop takes
   * whole (push and take-all only: no ABA). */
  rrpc_server_call *spare;
  int nspare;
  /* Apart from the loop's fields above: workers write these per call. */
  char pad_[64];
  atomic_int refs;
  _Atomic(rrpc_server_call *) returned;
  /* Pushes onto `returned`, counted before each push: the loop's estimate
   * of the list's length without walking it. A pusher must not read the
   * list's head (the count once lived there): the loop may have taken,
   * reused or freed that call meanwhile. */
  atomic_int returned_n;
};

/* Spare calls a connection keeps beyond those in flight: a round of
 * pipelined requests, at about 1 KiB each (an idle connection should stay
 * small: issue 12). */
enum { CALL_SPARE_MAX = 16 };

enum { PROTO_UNKNOWN, PROTO_BAIDU, PROTO_HTTP };

/* STOPPING: listener closed, new requests answered with ELOGOFF. */
enum { SRV_NEW, SRV_RUNNING, SRV_STOPPING, SRV_STOPPED };

struct rrpc_server {
  rrpc_server_options opts;
  size_t max_body;
  struct method *methods;
  size_t nmethods, cap_methods;
  rrpc__loop_group *group;
  int own_group;
  rrpc__worker_pool *pool; /* NULL when every method runs in the loop */
  int pool_queue_max;
  const rrpc_transport_ops *ops;
  int listen_fd;
  int port;
  char unix_path[108]; /* the unix socket this server bound, to remove; "" */
  rrpc__loop *lloop;
  rrpc__watcher lwatch;
  rrpc__accept_guard accept_guard; /* listener's loop thread */
  rrpc__timer_id accept_resume;    /* accepts paused at the fd limit; 0 = not */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  /* Written under mu; read without it by a request being admitted (see
   * live_calls), so atomic (sequentially consistent). */
  _Atomic int state;
  struct sconn conns; /* list head */
  size_t nconns;
  /* Connections with calls handed to handlers and not yet responded (0
   * exactly when no call is live). A connection counts from its socket's
   * pending requests going 0 -> 1 to their going 1 -> 0 (see
   * rrpc__socket_request_begin): one step per busy spell, not two per call
   * - this line was written by the loops and every pool worker per call,
   * 2 % of the CPU at saturation. Raised before the state is read, both
   * sequentially consistent, so a call that saw the server running is
   * counted (by itself, or by its connection's spell, which cannot end
   * before the call does) before a shutdown that stores STOPPING reads the
   * count (no lock when a call starts); lowered by call_release, under mu
   * for the one that reaches 0, which signals cv. From SRV_RUNNING until
   * the stop it holds 1 more, the running bias, set and removed under mu
   * with the state: only once stopping can a call lower it to 0. */
  _Atomic size_t live_calls;
  int listener_closed;
  rrpc__gate gate;   /* max_concurrency */
  rrpc__timer_id idle_timer; /* the idle sweep, on lloop; 0 = none */
  rrpc__call_stats *stats; /* totals of every call answered */
  rrpc__stats_reg *reg;
};

struct rrpc_server_call {
  rrpc__work work; /* its place in the worker queue */
  rrpc_server *srv;
  struct sconn *conn; /* a reference: the call returns to its cache */
  rrpc__socket *sock; /* conn's */
  rrpc_server_call *spare_next; /* in conn's spare or returned list */
  int64_t cid;
  struct method *m;
  int admitted; /* holds places in the server's and the method's gates */
  rrpc_iobuf request;
  rrpc_controller cntl; /* controller_init sets it up, not a memset */
};

static const rrpc__socket_handler server_handler;

/* ---- lifetime -------------------------------------------------------------- */

int rrpc_server_new(const rrpc_server_options *opts, rrpc_server **out) {
  rrpc_server *s = calloc(1, sizeof *s);
  if (s == NULL) return -ENOMEM;
  if (opts != NULL) s->opts = *opts;
  if (s->opts.num_threads < 0 || s->opts.pool_threads < 0 || s->opts.pool_queue_max < 0 ||
      s->opts.max_concurrency < 0) {
    free(s);
    return -EINVAL;
  }
  s->max_body = s->opts.max_body_size ? s->opts.max_body_size : RRPC_BAIDU_DEFAULT_MAX_BODY;
  s->listen_fd = -1;
  s->port = -RRPC_ENOTREADY;
  s->conns.next = s->conns.prev = &s->conns;
  s->gate.max = s->opts.max_concurrency;
  atomic_init(&s->gate.running, 0);
  if (rrpc__call_stats_new(&s->stats) != 0) {
    free(s);
    return -ENOMEM;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  *out = s;
  return 0;
}

int rrpc_server_add_method(rrpc_server *s, const char *service, const char *method,
                           rrpc_handler_fn fn, void *arg) {
  if (service == NULL || method == NULL || fn == NULL || *service == '\0' || *method == '\0')
    return -EINVAL;
  if (s->state != SRV_NEW) return -EBUSY;
  for (size_t i = 0; i < s->nmethods; i++)
    if (strcmp(s->methods[i].service, service) == 0 && strcmp(s->methods[i].name, method) == 0)
      return -EEXIST;
  if (s->nmethods == s->cap_methods) {
    size_t ncap = s->cap_methods ? s->cap_methods * 2 : 8;
    struct method *nm = realloc(s->methods, ncap * sizeof *nm);
    if (nm == NULL) return -ENOMEM;
    s->methods = nm;
    s->cap_methods = ncap;
  }
  struct method *m = &s->methods[s->nmethods];
  memset(m, 0, sizeof *m);
  m->service = strdup(service);
  m->name = strdup(method);
  if (m->service == NULL || m->name == NULL || rrpc__call_stats_new(&m->stats) != 0 ||
      rrpc__call_stats_add_part(s->stats, m->stats) != 0) {
    rrpc__call_stats_free(m->stats); /* NULL unless made */
    free(m->service);
    free(m->name);
    return -ENOMEM;
  }
  m->service_len = strlen(service);
  m->name_len = strlen(method);
  m->fn = fn;
  m->arg = arg;
  m->gate.max = 0;
  atomic_init(&m->gate.running, 0);
  m->mode = RRPC_RUN_DEFAULT;
  m->in_loop = 0;
  s->nmethods++;
  return 0;
}

int rrpc_server_set_method_mode(rrpc_server *s, const char *service, const char *method,
                                rrpc_run_mode mode) {
  if (s == NULL || service == NULL || method == NULL) return -EINVAL;
  if (mode != RRPC_RUN_DEFAULT && mode != RRPC_RUN_IN_POOL && mode != RRPC_RUN_IN_LOOP) return -EINVAL;
  if (s->state != SRV_NEW) return -EBUSY;
  for (size_t i = 0; i < s->nmethods; i++) {
    if (strcmp(s->methods[i].service, service) == 0 && strcmp(s->methods[i].name, method) == 0) {
      s->methods[i].mode = mode;
      return 0;
    }
  }
  return -ENOENT;
}

uint64_t rrpc_server_pool_rejected(const rrpc_server *s) {
  return s->pool != NULL ? rrpc__worker_pool_rejected(s->pool) : 0;
}

uint64_t rrpc_server_pool_rescues(const rrpc_server *s) {
  return s->pool != NULL ? rrpc__worker_pool_rescues(s->pool) : 0;
}

uint64_t rrpc_server_pool_write_rescues(const rrpc_server *s) {
  return s->pool != NULL ? rrpc__worker_pool_write_rescues(s->pool) : 0;
}

uint64_t rrpc_server_pool_left_to_busy(const rrpc_server *s) {
  return s->pool != NULL ? rrpc__worker_pool_left_to_busy(s->pool) : 0;
}

/* Linear: services have a handful of methods; a table lookup costs less
 * than hashing two strings at this size. */
static int find_method(const rrpc_server *s, rrpc__str svc, rrpc__str name,
                       struct method **out) {
  int service_seen = 0;
  for (size_t i = 0; i < s->nmethods; i++) {
    struct method *m = &s->methods[i];
    if (!rrpc__str_eqn(svc, m->service, m->service_len)) continue;
    service_seen = 1;
    if (rrpc__str_eqn(name, m->name, m->name_len)) {
      *out = m;
      return 0;
    }
  }
  return service_seen ? -RRPC_ENOMETHOD : -RRPC_ENOSERVICE;
}

/* ---- metrics: one begin and one end per call ----------------------------- */

/* A call is recorded into its method's recorder, or the server's own when
 * it found no method; the server's totals read its methods' recorders as
 * parts of its own (rrpc__call_stats_add_part), so each call is recorded
 * once, not into two recorders. */
static rrpc__call_stats *call_stats(const rrpc_server_call *call) {
  return call->m != NULL ? call->m->stats : call->srv->stats;
}

static void stats_begin(const rrpc_server_call *call) {
  if (!rrpc__metrics_on()) return;
  rrpc__call_stats_begin(call_stats(call));
}

static void stats_end(const rrpc_server_call *call) {
  if (!rrpc__metrics_on()) return;
  rrpc__call_stats_end(call_stats(call), call->cntl.latency_us, call->cntl.error_code);
}

int rrpc_server_set_method_max_concurrency(rrpc_server *s, const char *service, const char *method,
                                           int max_concurrency) {
  if (service == NULL || method == NULL || max_concurrency < 0) return -EINVAL;
  if (s->state != SRV_NEW) return -EBUSY;
  struct method *m;
  rrpc__str svc = {service, strlen(service)}, name = {method, strlen(method)};
  if (find_method(s, svc, name, &m) != 0) return -ENOENT;
  m->gate.max = max_concurrency;
  return 0;
}

/* ---- responding ------------------------------------------------------------ */

/* ---- call objects: one cache per connection --------------------------------- */

static void free_calls(rrpc_server_call *list) {
  while (list != NULL) {
    rrpc_server_call *next = list->spare_next;
    free(list);
    list = next;
  }
}

/* `sock` is c's: passed in, since adopt may still be storing c->sock when
 * the loop already runs the connection's first callbacks. */
static void conn_unref(struct sconn *c, rrpc__socket *sock) {
  if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
  free_calls(c->spare);
  free_calls(atomic_load_explicit(&c->returned, memory_order_acquire));
  rrpc__socket_unref(sock);
  free(c);
}

/* Loop thread: a spare call, or a new one. */
static rrpc_server_call *call_alloc(struct sconn *c) {
  if (c->spare == NULL) {
    /* Take what other threads returned; keep CALL_SPARE_MAX of it. The
     * length comes from the push counter: walking the list to count
     * touched every call a worker had just written (a cache miss each, 2 %
     * of the CPU at saturation). A push counted but not yet linked makes
     * the estimate high, by the pushes in flight (it lands in the next
     * take, low by as much): the walk below stops at the list's end. */
    rrpc_server_call *list = atomic_exchange_explicit(&c->returned, NULL, memory_order_acquire);
    int n = atomic_exchange_explicit(&c->returned_n, 0, memory_order_relaxed);
    c->spare = list;
    c->nspare = list != NULL ? n : 0;
    if (list != NULL && n > CALL_SPARE_MAX) {
      int kept = 1;
      while (kept < CALL_SPARE_MAX && list->spare_next != NULL) {
        list = list->spare_next;
        kept++;
      }
      free_calls(list->spare_next);
      list->spare_next = NULL;
      c->nspare = kept;
    }
  }
  rrpc_server_call *call = c->spare;
  if (call == NULL) return malloc(sizeof *call);
  c->spare = call->spare_next;
  if (c->nspare > 0) c->nspare--; /* the estimate may run low: see above */
  /* The next spare was last written by a worker on another core: start
   * fetching it now, so the next request's pop does not wait for it (that
   * wait was the loop's largest stall per pool request at saturation). */
  if (c->spare != NULL) __builtin_prefetch(c->spare, 1);
  return call;
}

/* Any thread, the call's contents destroyed: back to its connection. */
static void call_recycle(struct sconn *c, rrpc_server_call *call) {
  if (rrpc__loop_in_thread(rrpc__socket_loop(call->sock))) {
    if (c->nspare >= CALL_SPARE_MAX) {
      free(call);
      return;
    }
    call->spare_next = c->spare;
    c->spare = call;
    c->nspare++;
    return;
  }
  atomic_fetch_add_explicit(&c->returned_n, 1, memory_order_relaxed); /* before the push: see sconn */
  rrpc_server_call *head = atomic_load_explicit(&c->returned, memory_order_relaxed);
  do call->spare_next = head;
  while (!atomic_compare_exchange_weak_explicit(&c->returned, &head, call, memory_order_release,
                                                memory_order_relaxed));
}

/* The last step is lowered under mu: rrpc_server_free frees the server as
 * soon as it sees 0 under mu, so nothing may touch it after that (lowering
 * it first and locking after could lock a freed mutex). Any other step is
 * lowered without the lock: another one still counted keeps the count
 * above 0, and this thread touches nothing of the server after its
 * compare-and-swap. (The lock per call was contended by the pool's
 * workers at saturation.) While the server runs, the count holds one more
 * than the busy connections (the running bias, see live_calls), so no
 * call reaches 0 and none takes the lock. */
static void live_calls_lower(rrpc_server *srv) {
  size_t n = atomic_load(&srv->live_calls);
  while (n > 1)
    if (atomic_compare_exchange_weak(&srv->live_calls, &n, n - 1)) return;
  pthread_mutex_lock(&srv->mu);
  if (atomic_fetch_sub(&srv->live_calls, 1) == 1) pthread_cond_broadcast(&srv->cv);
  pthread_mutex_unlock(&srv->mu);
}

/* Once its connection's last pending request ends, this call's thread
 * owns the connection's step in live_calls; any other must not touch the
 * server after request_end (the last one may stop it meanwhile). */
static void call_release(rrpc_server_call *call) {
  rrpc_server *srv = call->srv;
  struct sconn *c = call->conn;
  if (call->admitted) rrpc__gates_leave(&srv->gate, &call->m->gate);
  int left = rrpc__socket_request_end(call->sock);
  rrpc__iobuf_destroy(&call->request);
  rrpc__controller_destroy(&call->cntl);
  rrpc__socket *sock = call->sock;
  call_recycle(c, call);
  conn_unref(c, sock); /* may free the call with its connection */
  if (left == 0) live_calls_lower(srv);
}

static void overcrowded(rrpc_server_call *call) {
  char peer[64];
  rrpc__socket_peer_str(call->sock, peer, sizeof peer);
  RRPC_LOG(WARNING, "closing connection from %s: its unread responses pass "
           "socket_max_unwritten_bytes (%zu)", peer, rrpc__limit_socket_max_unwritten());
  rrpc__socket_fail(call->sock, -RRPC_EOVERCROWDED);
}

/* What send_response packs, and pack's own outcome (told apart from the
 * write's: a frame that cannot be packed fails the connection). */
struct response_pack {
  rrpc__rpc_meta meta;
  const rrpc_iobuf *payload, *attachment;
  int rc;
};

static int pack_response(void *arg, rrpc_iobuf *out) {
  struct response_pack *rp = arg;
  rp->rc = rrpc__baidu_pack(out, &rp->meta, rp->payload, rp->attachment);
  return rp->rc;
}

/* The response frame goes to the connection; the call stays. The frame is
 * packed by the socket's writer (rrpc__socket_write_packed): behind the
 * responses already pending when this thread holds the flush. */
static int send_response(rrpc_server_call *call, const rrpc_iobuf *response) {
  rrpc_controller *c = &call->cntl;
  /* Only the fields named in `has` are read (rpc_meta's encoder), and
   * attachment_size, which pack sets: the rest is left unwritten. */
  struct response_pack rp;
  rp.meta.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
  rp.meta.correlation_id = call->cid;
  rp.meta.attachment_size = 0;
  rp.rc = 0;
  int failed = c->error_code != 0;
  if (failed) {
    /* The wire carries brpc's positive codes. */
    rp.meta.has |= RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT;
    rp.meta.error_code = -c->error_code;
    rp.meta.error_text.ptr = c->error_text;
    rp.meta.error_text.len = strlen(c->error_text);
  }
  rp.payload = failed ? NULL : response;
  rp.attachment = failed ? NULL : &c->resp_att;
  uint64_t now = rrpc__now_us();
  c->latency_us = (int64_t)now - c->start_us;
  stats_end(call);
  uint64_t lent = rrpc__round_lend(now); /* a worker's write stamps with this read */
  int rc = rrpc__socket_write_packed(call->sock, 1, pack_response, &rp);
  rrpc__round_unlend(lent);
  if (rp.rc < 0) {
    RRPC_LOG(ERROR, "cannot pack response of %s.%s: %s", call->m ? call->m->service : "?",
             call->m ? call->m->name : "?", rrpc_strerror(rc));
    rrpc__socket_fail(call->sock, rc); /* the client must not wait forever */
  } else if (rc == -RRPC_EOVERCROWDED) {
    /* A client that sends requests and never reads the responses: its
     * connection goes, not the process's memory. */
    overcrowded(call);
  }
  return rc;
}

int rrpc_server_call_respond(rrpc_server_call *call, const rrpc_iobuf *response) {
  int rc = send_response(call, response);
  call_release(call);
  return rc;
}

int rrpc_server_call_respond_hold(rrpc_server_call *call, const rrpc_iobuf *response) {
  return send_response(call, response);
}

void rrpc_server_call_release(rrpc_server_call *call) { call_release(call); }

const rrpc_iobuf *rrpc_server_call_request(const rrpc_server_call *call) { return &call->request; }
rrpc_controller *rrpc_server_call_controller(rrpc_server_call *call) { return &call->cntl; }
const char *rrpc_server_call_service(const rrpc_server_call *call) { return call->m->service; }
const char *rrpc_server_call_method(const rrpc_server_call *call) { return call->m->name; }

/* ---- dispatch -------------------------------------------------------------- */

static void run_handler(void *arg) {
  rrpc_server_call *call = arg;
  call->m->fn(call->m->arg, call);
}

/* Decide whether the request can reach a handler; if not, fail it with the
 * code brpc would use and the name that was not found. */
static int check_request(rrpc_server *srv, rrpc__baidu_msg *msg, rrpc_server_call *call) {
  const rrpc__rpc_meta *meta = &msg->meta;
  char text[300];
  int rc = find_method(srv, meta->service_name, meta->method_name, &call->m);
  if (rc == -RRPC_ENOSERVICE) {
    snprintf(text, sizeof text, "no service named '%.*s'", (int)(meta->service_name.len > 200 ? 200 : meta->service_name.len),
             meta->service_name.ptr);
  } else if (rc == -RRPC_ENOMETHOD) {
    snprintf(text, sizeof text, "service '%.*s' has no method '%.*s'",
             (int)(meta->service_name.len > 120 ? 120 : meta->service_name.len), meta->service_name.ptr,
             (int)(meta->method_name.len > 120 ? 120 : meta->method_name.len), meta->method_name.ptr);
  } else if (msg->bad_attachment) {
    rc = -RRPC_EREQUEST;
    snprintf(text, sizeof text, "attachment_size %d is larger than the body", meta->attachment_size);
  } else if ((meta->has & RRPC_META_HAS_COMPRESS_TYPE) && meta->compress_type != 0) {
    rc = -RRPC_EREQUEST;
    snprintf(text, sizeof text, "compress_type %d is not supported", meta->compress_type);
  }
  if (rc != 0) rrpc__controller_fail(&call->cntl, rc, text, strlen(text));
  return rc;
}

/* A found method runs only if the server is not stopping and both
 * concurrency gates have room; else the call fails fast, unexecuted. */
static int admit(rrpc_server *srv, rrpc_server_call *call, int stopping) {
  int rc;
  if (stopping) {
    rc = -RRPC_ELOGOFF;
    rrpc__limit_count(RRPC__LC_LOGOFF_REJECTS);
  } else {
    rc = rrpc__gates_enter(&srv->gate, &call->m->gate);
    call->admitted = rc == 0;
  }
  if (rc != 0) {
    const char *text = rc == -RRPC_ELOGOFF ? "server is stopping" : "max_concurrency reached";
    rrpc__controller_fail(&call->cntl, rc, text, strlen(text));
  }
  return rc;
}

/* Requests for the pool, collected while one read is cut into frames. */
struct batch {
  rrpc__work *head, *tail;
  int n;
  /* When the read was delivered (rrpc__socket_read_us): every request of
   * the read was received then (no clock read of our own). */
  uint64_t read_us;
};

static void batch_add(struct batch *b, rrpc_server_call *call) {
  call->work = (rrpc__work){.next = NULL, .fn = run_handler, .arg = call};
  if (b->tail) b->tail->next = &call->work;
  else b->head = &call->work;
  b->tail = &call->work;
  b->n++;
}

/* A call for a frame whose header rrpc__baidu_cut_head decoded, with the
 * frame's body cut straight into the call's request and attachment (no
 * move from the message's own iobufs); NULL and *rc when it cannot be. */
static rrpc_server_call *call_for_frame(struct sconn *c, rrpc_iobuf *rbuf, rrpc__baidu_msg *msg, int *rc) {
  rrpc_server_call *call = call_alloc(c);
  if (call == NULL) {
    *rc = -ENOMEM;
    return NULL;
  }
  /* Only the fields read before they are set are cleared (a memset of the
   * whole head, ~200 bytes with the request's inline refs, cost ~25
   * instructions a request): handle_request sets srv, conn, sock and cid
   * next, batch_add the work node, the spare lists spare_next. */
  call->m = NULL; /* until find_method finds it */
  call->admitted = 0;
  rrpc__iobuf_init(&call->request);
  rrpc__controller_init(&call->cntl);
  *rc = rrpc__baidu_cut_body(rbuf, msg, &call->request, &call->cntl.req_att);
  if (*rc < 0) { /* nothing counts it yet: plain memory */
    rrpc__iobuf_destroy(&call->request);
    rrpc__controller_destroy(&call->cntl);
    free(call);
    return NULL;
  }
  return call;
}

/* `msg` is a frame's decoded header (rrpc__baidu_cut_head); its body is
 * still at the front of rbuf. */
static int handle_request(struct sconn *c, rrpc__socket *sock, rrpc_iobuf *rbuf, rrpc__baidu_msg *msg,
                          struct batch *b) {
  rrpc_server *srv = c->srv;
  if (!(msg->meta.has & RRPC_META_HAS_REQUEST)) {
    RRPC_LOG(WARNING, "closing a connection that sent a baidu_std frame without a request");
    return -RRPC_EPARSE;
  }
  int rc;
  rrpc_server_call *call = call_for_frame(c, rbuf, msg, &rc);
  if (call == NULL) return rc;
  call->srv = srv;
  call->conn = c;
  atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
  call->sock = sock;
  if (rrpc__socket_request_begin(sock) == 0) atomic_fetch_add(&srv->live_calls, 1);
  call->cid = msg->meta.correlation_id;
  call->cntl.start_us = (int64_t)b->read_us;
  call->cntl.log_id = msg->meta.log_id;
  /* The caller's deadline, from when its request was read (brpc counts
   * from the same point); handlers read it as rrpc_controller_remaining_ms.
   * An expired request still runs, as in brpc: the handler may check. */
  if ((msg->meta.has & RRPC_META_HAS_TIMEOUT_MS) && msg->meta.timeout_ms > 0)
    call->cntl.deadline_us = call->cntl.start_us + (int64_t)msg->meta.timeout_ms * 1000;
  call->cntl.used_rdma = rrpc__socket_is_rdma(sock);
  call->cntl.remote_ref = rrpc__socket_peer_cstr(sock); /* read in place: see controller.h */
  call->cntl.local_ref = rrpc__socket_local_cstr(sock);
  int stopping = atomic_load(&srv->state) != SRV_RUNNING;
  int bad = check_request(srv, msg, call) != 0 || admit(srv, call, stopping) != 0;
  stats_begin(call);
  if (bad) {
    rrpc_server_call_respond(call, NULL);
    return 0;
  }
  if (call->m->in_loop || srv->pool == NULL) {
    run_handler(call); /* run to completion on the loop thread */
    return 0;
  }
  batch_add(b, call);
  return 0;
}

/* A request the pool could not take. Running it here instead would let a
 * burst block the loop: refuse it, as brpc does when a server is over
 * capacity. */
static void refuse(rrpc_server *srv, rrpc_server_call *call, int why) {
  char text[96];
  if (why == -RRPC_EOVERCROWDED)
    snprintf(text, sizeof text, "the server's worker queue is full (%d waiting)", srv->pool_queue_max);
  else
    snprintf(text, sizeof text, "cannot queue the request: %s", rrpc_strerror(why));
  rrpc__controller_fail(&call->cntl, why, text, strlen(text));
  rrpc_server_call_respond(call, NULL);
}

/* Hand every pool request cut from one read to the pool at once. */
static void batch_flush(rrpc_server *srv, struct batch *b) {
  if (b->n == 0) return;
  rrpc__work *rest = NULL;
  int why = 0;
  rrpc__worker_pool_submit(srv->pool, b->head, b->n, &rest, &why);
  while (rest != NULL) {
    rrpc__work *next = rest->next; /* refuse frees the call and its node */
    refuse(srv, rest->arg, why);
    rest = next;
  }
  b->head = b->tail = NULL;
  b->n = 0;
}

/* The pool requests of one loop round: every read the round made for one
 * server adds its batch here, and the round's end (rrpc__loop_defer, run
 * before the loop can block) hands them to the pool at once - one pool
 * lock and at most one wake-up per round instead of per read. The calls
 * are counted live, so their server cannot go meanwhile. Loop thread only. */
struct round_batch {
  rrpc_server *srv;
  struct batch b;
};
static _Thread_local struct round_batch tls_round;

static void round_flush(void *arg) {
  (void)arg;
  struct round_batch *r = &tls_round;
  if (r->b.n > 0) batch_flush(r->srv, &r->b);
  r->srv = NULL;
}

/* One read's batch joins its round's (another server's requests first go
 * out on their own); off a loop thread it goes to the pool at once. */
static void round_add(rrpc_server *srv, struct batch *b) {
  if (b->n == 0) return;
  struct round_batch *r = &tls_round;
  rrpc__loop *loop = rrpc__loop_current();
  if (r->srv != NULL && r->srv != srv) round_flush(NULL);
  if (r->srv == NULL) {
    if (loop == NULL || rrpc__loop_defer(loop, round_flush, NULL) != 0) {
      batch_flush(srv, b);
      return;
    }
    r->srv = srv;
  }
  if (r->b.tail) r->b.tail->next = b->head;
  else r->b.head = b->head;
  r->b.tail = b->tail;
  r->b.n += b->n;
}

static int server_on_data(void *owner, rrpc__socket *sock, rrpc_iobuf *rbuf) {
  struct sconn *c = owner;
  int rm = c->proto == PROTO_HTTP ? 0 : rrpc__rmt_stream_cut(sock, rbuf); /* remote-memory frames */
  if (rm == -EAGAIN || (rm == 0 && rrpc__iobuf_length(rbuf) == 0)) return 0;
  if (rm < 0) return rm;
  if (c->proto == PROTO_UNKNOWN) {
    /* baidu_std opens with "PRPC"; an HTTP request with its method. */
    int http = c->srv->opts.no_builtin_services ? 0 : rrpc__builtin_sniff(rbuf);
    if (http == -EAGAIN) return 0;
    c->proto = http == 1 ? PROTO_HTTP : PROTO_BAIDU;
  }
  if (c->proto == PROTO_HTTP) return rrpc__builtin_on_data(&c->http, c->srv, sock, rbuf);
  struct batch b = {NULL, NULL, 0, rrpc__socket_read_us(sock)};
  int rc;
  for (;;) {
    /* Back-pressure: requests wait in the buffer while responses pile up. */
    if (rrpc__socket_pause_if_congested(sock)) {
      rc = 0;
      break;
    }
    /* Remote-memory frames between requests (the delivery's first cut is
     * the one above). */
    rc = rrpc__rmt_next_cut(sock, rbuf);
    if (rc == -EAGAIN) {
      rc = 0;
      break;
    }
    if (rc < 0) break;
    if (rrpc__iobuf_length(rbuf) == 0) break; /* the usual end: every frame cut, no partial one */
    rrpc__baidu_msg msg; /* cut_head initialises it, whatever it returns */
    rc = rrpc__baidu_cut_head(rbuf, c->srv->max_body, &msg);
    if (rc == 0) break;
    if (rc < 0) {
      char peer[64];
      rrpc__socket_peer_str(sock, peer, sizeof peer);
      RRPC_LOG(WARNING, "closing connection from %s: %s", peer, rrpc_strerror(rc));
      break;
    }
    rc = handle_request(c, sock, rbuf, &msg, &b);
    rrpc__baidu_msg_destroy(&msg);
    if (rc < 0) break;
  }
  round_add(c->srv, &b); /* what was cut before an error is still served */
  return rc;
}

static void server_on_close(void *owner, rrpc__socket *sock, int code) {
  (void)code;
  struct sconn *c = owner;
  rrpc_server *srv = c->srv;
  pthread_mutex_lock(&srv->mu);
  c->prev->next = c->next;
  c->next->prev = c->prev;
  if (--srv->nconns == 0) pthread_cond_broadcast(&srv->cv);
  pthread_mutex_unlock(&srv->mu);
  rrpc__builtin_conn_free(c->http);
  c->http = NULL;
  conn_unref(c, sock);
}

static const rrpc__socket_handler server_handler = {
    .on_data = server_on_data,
    .on_close = server_on_close,
};

/* ---- listening ------------------------------------------------------------- */

static void adopt(rrpc_server *srv, int fd) {
  struct sconn *c = calloc(1, sizeof *c);
  if (c == NULL) {
    close(fd);
    return;
  }
  c->srv = srv;
  atomic_init(&c->refs, 1);
  atomic_init(&c->returned, NULL);
  atomic_init(&c->returned_n, 0);
  pthread_mutex_lock(&srv->mu);
  if (srv->state != SRV_RUNNING) {
    pthread_mutex_unlock(&srv->mu);
    free(c);
    close(fd);
    return;
  }
  /* Linked before the socket exists so on_close always finds it. */
  c->next = srv->conns.next;
  c->prev = &srv->conns;
  srv->conns.next->prev = c;
  srv->conns.next = c;
  srv->nconns++;
  int rc = rrpc__socket_create(rrpc__loop_group_next(srv->group), fd, 0, srv->ops, &server_handler, c,
                               &c->sock);
  if (rc != 0) {
    c->prev->next = c->next;
    c->next->prev = c->prev;
    srv->nconns--;
    free(c);
    RRPC_LOG(ERROR, "cannot start an accepted connection: %s", rrpc_strerror(rc));
  }
  pthread_mutex_unlock(&srv->mu);
}

/* Out of descriptors with none in reserve: stop watching the listener for a
 * moment rather than spin on it. */
#define ACCEPT_BACKOFF_US 100000u

static void on_accept(rrpc__watcher *w, uint32_t events);

static void resume_accept(void *arg) {
  rrpc_server *srv = arg;
  srv->accept_resume = 0;
  if (rrpc__loop_watch_mod(srv->lloop, &srv->lwatch, EPOLLIN) != 0)
    RRPC_LOG(ERROR, "port %d: cannot resume accepting", srv->port);
}

static void pause_accept(rrpc_server *srv) {
  if (srv->accept_resume != 0) return;
  if (rrpc__loop_watch_mod(srv->lloop, &srv->lwatch, 0) != 0) return;
  if (rrpc__loop_timer_add(srv->lloop, rrpc__now_us() + ACCEPT_BACKOFF_US, resume_accept, srv,
                           &srv->accept_resume) != 0)
    resume_accept(srv);
}

static void on_accept(rrpc__watcher *w, uint32_t events) {
  (void)events;
  rrpc_server *srv = w->arg;
  for (int i = 0; i < 64; i++) {
    int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE) {
        int shed = rrpc__accept_guard_shed(&srv->accept_guard, srv->listen_fd, srv->port, errno);
        if (shed > 0) continue;
        if (shed < 0) pause_accept(srv);
        return;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        RRPC_LOG(WARNING, "accept on port %d: %s", srv->port, rrpc_strerror(-errno));
      return;
    }
    adopt(srv, fd);
  }
}

/* ---- idle connections (idle_timeout_s) ------------------------------------ */

static uint64_t idle_period_us(const rrpc_server *s) {
  uint64_t p = (uint64_t)s->opts.idle_timeout_s * 1000000u / 4;
  return p > 1000000u ? 1000000u : p;
}

/* On the listener's loop, every quarter of the timeout (at most a second):
 * a connection is closed between idle_timeout_s and 1.25 times that after
 * its last byte read or written. */
static void idle_sweep(void *arg) {
  rrpc_server *s = arg;
  s->idle_timer = 0;
  uint64_t now = rrpc__now_us(), idle = (uint64_t)s->opts.idle_timeout_s * 1000000u;
  pthread_mutex_lock(&s->mu);
  for (struct sconn *c = s->conns.next; c != &s->conns; c = c->next) {
    uint64_t last = rrpc__socket_last_active_us(c->sock); /* may be later than `now` */
    if (rrpc__socket_failed(c->sock) || last >= now || now - last < idle) continue;
    rrpc__limit_count(RRPC__LC_IDLE_CLOSES);
    rrpc__socket_fail(c->sock, -ETIMEDOUT);
  }
  int running = s->state == SRV_RUNNING;
  pthread_mutex_unlock(&s->mu);
  if (running) rrpc__loop_timer_add(s->lloop, now + idle_period_us(s), idle_sweep, s, &s->idle_timer);
}

static void start_idle_sweep(void *arg) {
  rrpc_server *s = arg;
  pthread_mutex_lock(&s->mu);
  int closed = s->listener_closed;
  pthread_mutex_unlock(&s->mu);
  if (closed) return;
  rrpc__loop_timer_add(s->lloop, rrpc__now_us() + idle_period_us(s), idle_sweep, s, &s->idle_timer);
}

/* A unix socket path left by a server that died is in the way of bind; one
 * that a live server still listens on is not ours to take. A connect tells
 * the two apart: only a path nobody listens on refuses it. Non-blocking, so
 * a live server with a full backlog (EAGAIN) counts as live, at once. */
static int unix_path_stale(const struct sockaddr_un *un, socklen_t len) {
  struct stat st;
  if (lstat(un->sun_path, &st) != 0 || !S_ISSOCK(st.st_mode)) return 0;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  int stale = connect(fd, (const struct sockaddr *)un, len) != 0 && errno == ECONNREFUSED;
  close(fd);
  return stale;
}

static int bind_listen(int fd, const rrpc__addr *a) {
  if (bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) {
    const struct sockaddr_un *un = (const struct sockaddr_un *)&a->ss;
    if (errno != EADDRINUSE || a->ss.ss_family != AF_UNIX || !unix_path_stale(un, a->len)) return -errno;
    unlink(un->sun_path);
    if (bind(fd, (const struct sockaddr *)&a->ss, a->len) != 0) return -errno;
  }
  return listen(fd, 1024) != 0 ? -errno : 0;
}

static int open_listener(rrpc_server *s, const rrpc__addr *a) {
  int fd = socket(a->ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int one = 1;
  if (a->ss.ss_family != AF_UNIX) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc = bind_listen(fd, a);
  if (rc != 0) {
    close(fd);
    return rc;
  }
  struct sockaddr_storage bound;
  socklen_t len = sizeof bound;
  getsockname(fd, (struct sockaddr *)&bound, &len);
  s->listen_fd = fd;
  if (bound.ss_family == AF_INET) s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
  else if (bound.ss_family == AF_INET6) s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
  else s->port = 0; /* a unix socket has no port */
  if (a->ss.ss_family == AF_UNIX) {
    /* Ours now: removed again when the listener closes. */
    snprintf(s->unix_path, sizeof s->unix_path, "%s", ((const struct sockaddr_un *)&a->ss)->sun_path);
  }
  return 0;
}

/* Handlers may block (a sleep, a synchronous call to another service), so
 * the pool has a few threads even on a small machine; more CPUs, more. */
static int pool_size(const rrpc_server_options *o) {
  if (o->pool_threads > 0) return o->pool_threads;
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > DEFAULT_POOL_MIN_THREADS ? (int)cpus : DEFAULT_POOL_MIN_THREADS;
}

static int start_runtime(rrpc_server *s) {
  int rc;
  if (s->opts.num_threads > 0) {
    rc = rrpc__loop_group_start(s->opts.num_threads, "rrpc-srv", &s->group);
    s->own_group = (rc == 0);
  } else {
    rc = rrpc__loop_group_global(0, &s->group);
  }
  if (rc != 0) return rc;
  int need_pool = 0;
  for (size_t i = 0; i < s->nmethods; i++) {
    struct method *m = &s->methods[i];
    m->in_loop = m->mode == RRPC_RUN_IN_LOOP || (m->mode == RRPC_RUN_DEFAULT && s->opts.handlers_in_loop);
    if (!m->in_loop) need_pool = 1;
  }
  if (need_pool) {
    s->pool_queue_max = s->opts.pool_queue_max > 0 ? s->opts.pool_queue_max : DEFAULT_POOL_QUEUE_MAX;
    rrpc__worker_pool_config cfg = {
        .nthreads = pool_size(&s->opts),
        .max_queue = s->pool_queue_max,
        .rescue_us = s->opts.pool_rescue_us != 0 ? s->opts.pool_rescue_us : DEFAULT_POOL_RESCUE_US,
        .batch_sched = s->opts.pool_batch_sched > 0,
        .busy_queue = s->opts.pool_busy_queue, /* opt-in: see server.h */
        .short_task_us = s->opts.pool_short_task_us != 0 ? s->opts.pool_short_task_us : DEFAULT_POOL_SHORT_TASK_US,
        .flush_us = s->opts.pool_write_flush_us != 0 ? s->opts.pool_write_flush_us : DEFAULT_POOL_WRITE_FLUSH_US,
    };
    rc = rrpc__worker_pool_start(&cfg, "rrpc-work", &s->pool);
  }
  return rc;
}

/* Make the figures visible to the pages; a failure only hides them. */
static void register_stats(rrpc_server *s) {
  (void)rrpc__stats_register(RRPC__STATS_SERVER, s->port, NULL, NULL, NULL, s->stats, &s->reg);
  for (size_t i = 0; i < s->nmethods; i++) {
    struct method *m = &s->methods[i];
    (void)rrpc__stats_register(RRPC__STATS_METHOD, s->port, m->service, m->name, NULL, m->stats, &m->reg);
  }
}

int rrpc_server_start(rrpc_server *s, const char *addr) {
  if (s->state != SRV_NEW) return -EBUSY;
  rrpc__addr sa;
  int rc = rrpc__addr_parse_any(addr, &sa);
  if (rc != 0) return rc;
  /* A unix socket never attempts RDMA (no device behind it). */
  rc = rrpc__transport_pick(sa.ss.ss_family == AF_UNIX ? 0 : s->opts.use_rdma, &s->ops);
  if (rc != 0) return rc;
  rc = start_runtime(s);
  if (rc != 0) return rc;
  rc = open_listener(s, &sa);
  if (rc != 0) return rc;
  s->lloop = rrpc__loop_group_next(s->group);
  rrpc__accept_guard_init(&s->accept_guard);
  s->lwatch = (rrpc__watcher){.fd = s->listen_fd, .events = EPOLLIN, .cb = on_accept, .arg = s};
  pthread_mutex_lock(&s->mu);
  s->state = SRV_RUNNING;
  atomic_fetch_add(&s->live_calls, 1); /* the running bias */
  pthread_mutex_unlock(&s->mu);
  register_stats(s);
  rc = rrpc__loop_watch_add(s->lloop, &s->lwatch);
  if (rc != 0) {
    pthread_mutex_lock(&s->mu);
    s->state = SRV_STOPPED;
    atomic_fetch_sub(&s->live_calls, 1); /* no call came: nothing listened */
    pthread_mutex_unlock(&s->mu);
    close(s->listen_fd);
    s->listen_fd = -1;
    if (s->unix_path[0] != '\0') unlink(s->unix_path);
    rrpc__accept_guard_destroy(&s->accept_guard);
    return rc;
  }
  /* The sweep's timer id belongs to the listener's loop thread. */
  if (s->opts.idle_timeout_s > 0) rrpc__loop_post(s->lloop, start_idle_sweep, s);
  return 0;
}

int rrpc_server_port(const rrpc_server *s) { return s->port; }

/* On the listener's loop, so no accept callback can be running. */
static void close_listener_task(void *arg) {
  rrpc_server *s = arg;
  rrpc__loop_watch_del(s->lloop, &s->lwatch);
  if (s->accept_resume != 0) rrpc__loop_timer_cancel(s->lloop, s->accept_resume);
  s->accept_resume = 0;
  if (s->idle_timer != 0) rrpc__loop_timer_cancel(s->lloop, s->idle_timer);
  s->idle_timer = 0;
  close(s->listen_fd);
  if (s->unix_path[0] != '\0') unlink(s->unix_path);
  rrpc__accept_guard_destroy(&s->accept_guard);
  pthread_mutex_lock(&s->mu);
  s->listen_fd = -1;
  s->listener_closed = 1;
  pthread_cond_broadcast(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

/* Under mu: 1 while a response is still queued on some connection. */
static int output_pending(rrpc_server *s) {
  for (struct sconn *c = s->conns.next; c != &s->conns; c = c->next)
    if (rrpc__socket_unwritten(c->sock) > 0 && !rrpc__socket_failed(c->sock)) return 1;
  return 0;
}

/* Under mu: wait for running handlers, then for their responses to leave,
 * until `deadline_us`. Responses are not signalled one by one, so the
 * second wait looks again every few milliseconds. */
static void drain_until(rrpc_server *s, uint64_t deadline_us) {
  while (atomic_load(&s->live_calls) > 0 && rrpc__now_us() < deadline_us) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t left = deadline_us - rrpc__now_us();
    ts.tv_sec += (time_t)(left / 1000000u);
    ts.tv_nsec += (long)(left % 1000000u) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
  }
  while (output_pending(s) && rrpc__now_us() < deadline_us) {
    pthread_mutex_unlock(&s->mu);
    struct timespec nap = {0, 2 * 1000 * 1000};
    nanosleep(&nap, NULL);
    pthread_mutex_lock(&s->mu);
  }
}

void rrpc_server_shutdown(rrpc_server *s, int closewait_ms) {
  pthread_mutex_lock(&s->mu);
  int was_running = s->state == SRV_RUNNING;
  if (was_running) {
    s->state = SRV_STOPPING;
    /* From here the call that lowers the count to 0 signals cv; one that
     * read the bias before this and lowers 2 to 1 needs not. */
    atomic_fetch_sub(&s->live_calls, 1);
  }
  pthread_mutex_unlock(&s->mu);
  if (!was_running) return;
  uint64_t deadline = rrpc__now_us() + (closewait_ms > 0 ? (uint64_t)closewait_ms * 1000u : 0);
  if (rrpc__loop_post(s->lloop, close_listener_task, s) != 0) close_listener_task(s);
  pthread_mutex_lock(&s->mu);
  while (!s->listener_closed) pthread_cond_wait(&s->cv, &s->mu);
  drain_until(s, deadline);
  s->state = SRV_STOPPED;
  for (struct sconn *c = s->conns.next; c != &s->conns; c = c->next)
    rrpc__socket_fail(c->sock, -RRPC_ELOGOFF);
  while (s->nconns > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
}

void rrpc_server_stop(rrpc_server *s) { rrpc_server_shutdown(s, 0); }

void rrpc_server_free(rrpc_server *s) {
  if (s == NULL) return;
  rrpc_server_stop(s);
  pthread_mutex_lock(&s->mu);
  while (atomic_load(&s->live_calls) > 0) pthread_cond_wait(&s->cv, &s->mu);
  pthread_mutex_unlock(&s->mu);
  if (s->pool != NULL) rrpc__worker_pool_stop(s->pool);
  if (s->own_group) rrpc__loop_group_stop(s->group);
  rrpc__stats_unregister(s->reg);
  rrpc__call_stats_free(s->stats);
  for (size_t i = 0; i < s->nmethods; i++) {
    rrpc__stats_unregister(s->methods[i].reg);
    rrpc__call_stats_free(s->methods[i].stats);
    free(s->methods[i].service);
    free(s->methods[i].name);
  }
  free(s->methods);
  pthread_mutex_destroy(&s->mu);
  pthread_cond_destroy(&s->cv);
  free(s);
}

/* ---- what the builtin pages and rrpc/metrics.h read ------------------------
 * Methods are fixed once the server started, so they are read without the
 * lock; the connection list is the lock's. */

const rrpc_server_options *rrpc__server_options(const rrpc_server *s) { return &s->opts; }
/* Not s->state: Stop writes it under the lock while a page is being served.
 * Pages are served only by a started server, and methods are added only
 * before the start, so nmethods is stable here. */
size_t rrpc__server_method_count(const rrpc_server *s) { return s->nmethods; }

void rrpc__server_method_at(const rrpc_server *s, size_t i, const char **service, const char **method,
                            const rrpc__call_stats **stats) {
  *service = s->methods[i].service;
  *method = s->methods[i].name;
  *stats = s->methods[i].stats;
}

const rrpc__call_stats *rrpc__server_totals(const rrpc_server *s) { return s->stats; }

size_t rrpc__server_conns(rrpc_server *s, rrpc__socket **out, size_t max, size_t *total) {
  size_t n = 0;
  pthread_mutex_lock(&s->mu);
  *total = s->nconns;
  for (struct sconn *c = s->conns.next; c != &s->conns && n < max; c = c->next) {
    if (c->sock == NULL) continue; /* being created under this lock by adopt */
    rrpc__socket_ref(c->sock);
    out[n++] = c->sock;
  }
  pthread_mutex_unlock(&s->mu);
  return n;
}

static const struct method *method_named(const rrpc_server *s, const char *service, const char *method) {
  for (size_t i = 0; i < rrpc__server_method_count(s); i++)
    if (strcmp(s->methods[i].service, service) == 0 && strcmp(s->methods[i].name, method) == 0)
      return &s->methods[i];
  return NULL;
}

int rrpc_server_method_stats(const rrpc_server *s, const char *service, const char *method,
                             rrpc_call_stats *out) {
  if (s->state == SRV_NEW) return -RRPC_ENOTREADY;
  const struct method *m = method_named(s, service, method);
  if (m == NULL) return -ENOENT;
  rrpc__call_stats_read(m->stats, out);
  return 0;
}

uint64_t rrpc_server_method_error_count(const rrpc_server *s, const char *service, const char *method,
                                        int code) {
  const struct method *m = method_named(s, service, method);
  return m ? rrpc__call_stats_error_count(m->stats, code) : 0;
}

int rrpc_server_stats(const rrpc_server *s, rrpc_call_stats *out) {
  if (s->state == SRV_NEW) return -RRPC_ENOTREADY;
  rrpc__call_stats_read(s->stats, out);
  return 0;
}

/* ---- remote memory (rrpc/remote.h) ---------------------------------------- */

int rrpc_server_call_remote_link(rrpc_server_call *call, rrpc_remote_link **out) {
  if (call == NULL || out == NULL) return -EINVAL;
  return rrpc__rmt_link_of(call->sock, out);
}
