/* cluster_servers.c - the server side of a cluster channel: the node list
 * that naming fills, the balancer over it, and the naming thread that
 * re-fetches periodic naming services, probes isolated servers and frees
 * nodes nobody uses any more. Owns the list and every node; the call path
 * (cluster_call.c) only picks nodes and holds references.
 *
 * Locking: `mu` guards the list, the balancer state, the grave, the probe
 * schedule and the counts. Nothing blocks under it: name resolution, file
 * reads, probes and channel frees all run on the naming thread with the
 * lock released, so no loop thread ever waits on them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/internal/addr.h"
#include "rrpc/internal/cluster.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"
#include "rrpc/internal/naming.h"

#define DEFAULT_HEALTH_CHECK_MS 3000
#define DEFAULT_NS_ACCESS_MS 5000
#define DEFAULT_MAX_SERVERS 1024
#define DEFAULT_CONNECT_TIMEOUT_MS 200
#define PROBE_BACKOFF_MAX 8 /* probes slow down to 8x health_check_interval */

struct rrpc__cluster {
  pthread_mutex_t mu;
  pthread_cond_t cv; /* wakes the naming thread and free's waits */
  rrpc__node **nodes;
  size_t n;
  const rrpc__lb_ops *lb;
  void *lb_state;
  const rrpc_naming_service *ns;
  char *param;
  rrpc_channel_options sub_opts;
  rrpc__cluster_conf conf;
  int32_t hc_ms, ns_ms, connect_ms;
  size_t max_servers;
  int closing;
  int issuing; /* between pick and issued */
  int calls;   /* calls in flight */
  int has_thread;
  pthread_t thread;
  rrpc__node *grave; /* refs reached 0: to free */
  rrpc__node **all;  /* every node not yet freed, for free() */
  size_t nall, capall;
  atomic_uint_least64_t counters[3];
  uint64_t naming_updates, naming_failures, isolations, revivals; /* under mu */
};

/* ---- nodes -------------------------------------------------------------------- */

static uint64_t now_us(void) { return rrpc__now_us(); }

void rrpc__node_ref(rrpc__node *n) { atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed); }

void rrpc__node_unref(rrpc__node *n) {
  if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) != 1) return;
  rrpc__cluster *cl = n->cl;
  pthread_mutex_lock(&cl->mu);
  n->grave_next = cl->grave;
  cl->grave = n;
  pthread_cond_broadcast(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
}

void rrpc__node_isolate(rrpc__node *n) {
  if (atomic_exchange(&n->isolated, 1) != 0) return;
  rrpc__cluster *cl = n->cl;
  pthread_mutex_lock(&cl->mu);
  n->probe_delay_ms = (uint32_t)cl->hc_ms;
  n->next_probe_us = now_us() + (uint64_t)cl->hc_ms * 1000u;
  cl->isolations++;
  pthread_cond_broadcast(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
  RRPC_LOG(WARNING, "server %s isolated after a connection failure; probing every %d ms and slower",
           n->entry.addr, cl->hc_ms);
}

/* Blocking (naming thread or creator): resolves the address. */
static int node_new(rrpc__cluster *cl, const rrpc_naming_entry *e, rrpc__node **out) {
  rrpc__node *n = calloc(1, sizeof *n);
  if (n == NULL) return -ENOMEM;
  atomic_init(&n->refs, 1);
  n->cl = cl;
  n->entry = *e;
  int rc = rrpc__addr_parse(e->addr, &n->sa);
  if (rc == 0) rc = rrpc_channel_new(e->addr, &cl->sub_opts, &n->sub);
  if (rc == 0) {
    pthread_mutex_lock(&cl->mu);
    if (cl->nall == cl->capall) {
      size_t cap = cl->capall ? cl->capall * 2 : 16;
      rrpc__node **all = realloc(cl->all, cap * sizeof *all);
      if (all == NULL) {
        rc = -ENOMEM;
      } else {
        cl->all = all;
        cl->capall = cap;
      }
    }
    if (rc == 0) cl->all[cl->nall++] = n;
    pthread_mutex_unlock(&cl->mu);
  }
  if (rc != 0) {
    if (n->sub) rrpc_channel_free(n->sub);
    free(n);
    return rc;
  }
  *out = n;
  return 0;
}

/* Frees a node whose references are gone. Not on a loop thread. */
static void node_free(rrpc__cluster *cl, rrpc__node *n) {
  pthread_mutex_lock(&cl->mu);
  for (size_t i = 0; i < cl->nall; i++) {
    if (cl->all[i] == n) {
      cl->all[i] = cl->all[--cl->nall];
      break;
    }
  }
  pthread_mutex_unlock(&cl->mu);
  if (n->sub) rrpc_channel_free(n->sub);
  free(n);
}

/* ---- applying a list ---------------------------------------------------------- */

static rrpc__node *find_node(rrpc__node **nodes, size_t n, const rrpc_naming_entry *e) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(nodes[i]->entry.addr, e->addr) == 0 && strcmp(nodes[i]->entry.tag, e->tag) == 0)
      return nodes[i];
  return NULL;
}

static int same_list(rrpc__node **a, size_t na, rrpc__node **b, size_t nb) {
  if (na != nb) return 0;
  for (size_t i = 0; i < na; i++)
    if (a[i] != b[i]) return 0;
  return 1;
}

/* Make `e` the list. Only the naming thread (or the creator, before it
 * starts) changes the list, so reading cl->nodes here needs no lock; the
 * swap takes it. Calls in flight on removed nodes keep their references and
 * finish normally; the nodes are freed after. */
static int apply(rrpc__cluster *cl, const rrpc_naming_entry *e, size_t ne) {
  rrpc__node **fresh = ne ? calloc(ne, sizeof *fresh) : NULL;
  if (ne && fresh == NULL) return -ENOMEM;
  size_t nf = 0;
  for (size_t i = 0; i < ne; i++) {
    if (find_node(fresh, nf, &e[i]) != NULL) continue; /* a duplicate line */
    rrpc__node *n = find_node(cl->nodes, cl->n, &e[i]);
    if (n != NULL && n->entry.weight == e[i].weight) {
      rrpc__node_ref(n);
    } else {
      int rc = node_new(cl, &e[i], &n);
      if (rc != 0) {
        RRPC_LOG(WARNING, "cluster: cannot add server %s: %s", e[i].addr, strerror(-rc));
        continue;
      }
    }
    fresh[nf++] = n;
  }
  if (same_list(fresh, nf, cl->nodes, cl->n)) {
    for (size_t i = 0; i < nf; i++) rrpc__node_unref(fresh[i]);
    free(fresh);
    return 0;
  }
  pthread_mutex_lock(&cl->mu);
  rrpc__node **old = cl->nodes;
  size_t nold = cl->n;
  for (size_t i = 0; i < nf; i++) fresh[i]->index = i;
  cl->nodes = fresh;
  cl->n = nf;
  if (cl->lb->reset(cl->lb_state, fresh, nf) != 0)
    RRPC_LOG(ERROR, "cluster: balancer %s could not take the new list (out of memory)", cl->lb->name);
  cl->naming_updates++;
  pthread_mutex_unlock(&cl->mu);
  for (size_t i = 0; i < nold; i++) rrpc__node_unref(old[i]);
  free(old);
  return 0;
}

/* Fetch and apply. Blocking; not on a loop thread. */
static int refresh(rrpc__cluster *cl) {
  rrpc_naming_entry *e = calloc(cl->max_servers, sizeof *e);
  if (e == NULL) return -ENOMEM;
  size_t n = 0;
  int rc = cl->ns->fetch(cl->ns->arg, cl->param, e, cl->max_servers, &n);
  if (rc == 0 && n > cl->max_servers) rc = -E2BIG; /* a user fetch that overran */
  if (rc == 0) rc = apply(cl, e, n);
  free(e);
  if (rc != 0) {
    pthread_mutex_lock(&cl->mu);
    cl->naming_failures++;
    pthread_mutex_unlock(&cl->mu);
  }
  return rc;
}

/* ---- health probes -------------------------------------------------------------- */

/* A TCP connect bounded by connect_ms. 0 if it connected. Blocking. */
static int probe(const struct sockaddr_in *sa, int connect_ms) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  int rc = connect(fd, (const struct sockaddr *)sa, sizeof *sa);
  if (rc != 0 && errno == EINPROGRESS) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    rc = poll(&p, 1, connect_ms);
    if (rc == 1) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      rc = err ? -err : 0;
    } else {
      rc = -ETIMEDOUT;
    }
  } else if (rc != 0) {
    rc = -errno;
  }
  close(fd);
  return rc;
}

/* The isolated node due first (with a reference), or NULL; *next_us gets
 * the earliest probe time seen. Under mu. */
static rrpc__node *due_probe(rrpc__cluster *cl, uint64_t now, uint64_t *next_us) {
  for (size_t i = 0; i < cl->n; i++) {
    rrpc__node *n = cl->nodes[i];
    if (!atomic_load(&n->isolated)) continue;
    if (n->next_probe_us <= now) {
      rrpc__node_ref(n);
      return n;
    }
    if (n->next_probe_us < *next_us) *next_us = n->next_probe_us;
  }
  return NULL;
}

/* Probe one node, mu released around the connect. Called with mu held. */
static void probe_node(rrpc__cluster *cl, rrpc__node *n) {
  pthread_mutex_unlock(&cl->mu);
  int rc = probe(&n->sa, cl->connect_ms);
  pthread_mutex_lock(&cl->mu);
  if (rc == 0) {
    atomic_store(&n->isolated, 0);
    cl->revivals++;
    RRPC_LOG(INFO, "server %s is back (a health probe connected)", n->entry.addr);
  } else {
    uint32_t cap = (uint32_t)cl->hc_ms * PROBE_BACKOFF_MAX;
    n->probe_delay_ms = n->probe_delay_ms * 2 > cap ? cap : n->probe_delay_ms * 2;
    n->next_probe_us = now_us() + (uint64_t)n->probe_delay_ms * 1000u;
  }
  pthread_mutex_unlock(&cl->mu);
  rrpc__node_unref(n);
  pthread_mutex_lock(&cl->mu);
}

/* ---- the naming thread ------------------------------------------------------------ */

static void wait_until(rrpc__cluster *cl, uint64_t when_us) {
  uint64_t now = now_us();
  if (when_us <= now) return;
  /* rrpc__now_us is CLOCK_MONOTONIC; the condvar is set up on it too. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = (uint64_t)ts.tv_nsec + (when_us - now) * 1000u;
  ts.tv_sec += (time_t)(ns / 1000000000u);
  ts.tv_nsec = (long)(ns % 1000000000u);
  pthread_cond_timedwait(&cl->cv, &cl->mu, &ts);
}

static void *naming_thread(void *arg) {
  rrpc__cluster *cl = arg;
  uint64_t next_fetch = cl->ns->periodic ? now_us() + (uint64_t)cl->ns_ms * 1000u : UINT64_MAX;
  pthread_mutex_lock(&cl->mu);
  while (!cl->closing) {
    if (cl->grave != NULL) {
      rrpc__node *g = cl->grave;
      cl->grave = NULL;
      pthread_mutex_unlock(&cl->mu);
      while (g != NULL) {
        rrpc__node *next = g->grave_next;
        node_free(cl, g);
        g = next;
      }
      pthread_mutex_lock(&cl->mu);
      continue;
    }
    uint64_t now = now_us();
    if (now >= next_fetch) {
      pthread_mutex_unlock(&cl->mu);
      (void)refresh(cl);
      next_fetch = now_us() + (uint64_t)cl->ns_ms * 1000u;
      pthread_mutex_lock(&cl->mu);
      continue;
    }
    uint64_t next = next_fetch;
    rrpc__node *n = due_probe(cl, now, &next);
    if (n != NULL) {
      probe_node(cl, n);
      continue;
    }
    wait_until(cl, next);
  }
  pthread_mutex_unlock(&cl->mu);
  return NULL;
}

/* ---- picking --------------------------------------------------------------------- */

rrpc__node *rrpc__cluster_pick(rrpc__cluster *cl, const rrpc__lb_input *in) {
  pthread_mutex_lock(&cl->mu);
  rrpc__node *n = NULL;
  if (!cl->closing) {
    n = cl->lb->pick(cl->lb_state, cl->nodes, cl->n, in);
    if (n != NULL) {
      rrpc__node_ref(n);
      cl->issuing++;
    }
  }
  pthread_mutex_unlock(&cl->mu);
  return n;
}

void rrpc__cluster_issued(rrpc__cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  if (--cl->issuing == 0 && cl->closing) pthread_cond_broadcast(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
}

void rrpc__cluster_call_begin(rrpc__cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  cl->calls++;
  pthread_mutex_unlock(&cl->mu);
}

void rrpc__cluster_call_end(rrpc__cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  if (--cl->calls == 0 && cl->closing) pthread_cond_broadcast(&cl->cv);
  pthread_mutex_unlock(&cl->mu);
}

int rrpc__cluster_closing(rrpc__cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  int c = cl->closing;
  pthread_mutex_unlock(&cl->mu);
  return c;
}

const rrpc__cluster_conf *rrpc__cluster_conf_of(const rrpc__cluster *cl) { return &cl->conf; }

void rrpc__cluster_count(rrpc__cluster *cl, rrpc__cluster_counter which) {
  atomic_fetch_add_explicit(&cl->counters[which], 1, memory_order_relaxed);
}

void rrpc__cluster_stats(const rrpc__cluster *cl, rrpc_cluster_stats *out) {
  rrpc__cluster *m = (rrpc__cluster *)cl; /* the lock, not the data, changes */
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&m->mu);
  out->servers = cl->n;
  for (size_t i = 0; i < cl->n; i++) out->isolated += atomic_load(&cl->nodes[i]->isolated) != 0;
  out->naming_updates = cl->naming_updates;
  out->naming_failures = cl->naming_failures;
  out->isolations = cl->isolations;
  out->revivals = cl->revivals;
  pthread_mutex_unlock(&m->mu);
  out->retries = atomic_load(&m->counters[RRPC__CL_RETRIES]);
  out->backup_requests = atomic_load(&m->counters[RRPC__CL_BACKUPS]);
  out->no_server = atomic_load(&m->counters[RRPC__CL_NO_SERVER]);
}

/* ---- lifetime ------------------------------------------------------------------------ */

static int init_sync(rrpc__cluster *cl) {
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int rc = pthread_cond_init(&cl->cv, &ca);
  pthread_condattr_destroy(&ca);
  if (rc != 0) return -rc;
  pthread_mutex_init(&cl->mu, NULL);
  return 0;
}

static void configure(rrpc__cluster *cl, const rrpc_channel_options *o) {
  cl->sub_opts = *o;
  cl->sub_opts.max_retry = -1; /* a failed connect goes to another server at once */
  cl->conf.timeout_ms = o->timeout_ms != 0 ? o->timeout_ms : 500;
  cl->conf.max_retry = o->max_retry == 0 ? 3 : (o->max_retry < 0 ? 0 : o->max_retry);
  cl->conf.backup_ms = o->backup_request_ms > 0 ? o->backup_request_ms : 0;
  cl->conf.policy = o->retry_policy;
  cl->conf.policy_arg = o->retry_policy_arg;
  cl->hc_ms = o->health_check_interval_ms > 0 ? o->health_check_interval_ms : DEFAULT_HEALTH_CHECK_MS;
  cl->ns_ms = o->ns_access_interval_ms > 0 ? o->ns_access_interval_ms : DEFAULT_NS_ACCESS_MS;
  cl->connect_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  cl->max_servers = o->max_servers > 0 ? (size_t)o->max_servers : DEFAULT_MAX_SERVERS;
}

int rrpc__cluster_new(const char *url, const char *lb, const rrpc_channel_options *opts,
                      rrpc__cluster **out) {
  rrpc_channel_options o;
  memset(&o, 0, sizeof o);
  if (opts != NULL) o = *opts;
  const rrpc_naming_service *ns;
  const char *param;
  const rrpc__lb_ops *ops = rrpc__lb_find(lb);
  if (ops == NULL || rrpc__naming_lookup(url, &ns, &param) != 0) return -EINVAL;
  if (o.connection_type < RRPC_CONNECTION_SINGLE || o.connection_type > RRPC_CONNECTION_SHORT) return -EINVAL;
  rrpc__cluster *cl = calloc(1, sizeof *cl);
  if (cl == NULL) return -ENOMEM;
  int rc = init_sync(cl);
  if (rc != 0) {
    free(cl);
    return rc;
  }
  configure(cl, &o);
  cl->lb = ops;
  cl->ns = ns;
  cl->param = strdup(param);
  rc = cl->param ? ops->create(&cl->lb_state) : -ENOMEM;
  if (rc == 0) rc = refresh(cl);
  if (rc == 0 && cl->n == 0) rc = -ENOENT;
  if (rc == 0) rc = -pthread_create(&cl->thread, NULL, naming_thread, cl);
  if (rc != 0) {
    rrpc__cluster_free(cl);
    return rc;
  }
  cl->has_thread = 1;
  *out = cl;
  return 0;
}

void rrpc__cluster_free(rrpc__cluster *cl) {
  pthread_mutex_lock(&cl->mu);
  cl->closing = 1;
  pthread_cond_broadcast(&cl->cv);
  while (cl->issuing > 0) pthread_cond_wait(&cl->cv, &cl->mu);
  pthread_mutex_unlock(&cl->mu);
  if (cl->has_thread) pthread_join(cl->thread, NULL);
  /* No attempt can start now. Freeing each node's channel fails what is in
   * flight on it (ECLOSE; closing stops retries), so every call ends. */
  pthread_mutex_lock(&cl->mu);
  for (size_t i = 0; i < cl->nall; i++) {
    rrpc__node *n = cl->all[i];
    rrpc_channel *sub = n->sub;
    n->sub = NULL;
    pthread_mutex_unlock(&cl->mu);
    if (sub) rrpc_channel_free(sub);
    pthread_mutex_lock(&cl->mu);
  }
  while (cl->calls > 0) pthread_cond_wait(&cl->cv, &cl->mu);
  rrpc__node **nodes = cl->nodes;
  size_t n = cl->n;
  cl->nodes = NULL;
  cl->n = 0;
  pthread_mutex_unlock(&cl->mu);
  for (size_t i = 0; i < n; i++) rrpc__node_unref(nodes[i]);
  free(nodes);
  while (cl->grave != NULL) {
    rrpc__node *g = cl->grave;
    cl->grave = g->grave_next;
    node_free(cl, g);
  }
  if (cl->lb_state) cl->lb->destroy(cl->lb_state);
  free(cl->all);
  free(cl->param);
  pthread_cond_destroy(&cl->cv);
  pthread_mutex_destroy(&cl->mu);
  free(cl);
}
