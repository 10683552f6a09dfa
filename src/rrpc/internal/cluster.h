/* internal/cluster.h - private to the rrpc core: the pieces of a cluster
 * channel (rrpc_channel_new_lb) - its server nodes, the load-balancer ops
 * table, and the calls between cluster.c (calls, retries, backup requests),
 * cluster_servers.c (the node list, naming thread, health checks) and the
 * lb_*.c balancers. */
#ifndef RRPC_INTERNAL_CLUSTER_H
#define RRPC_INTERNAL_CLUSTER_H

#include <netinet/in.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "rrpc/channel.h"
#include "rrpc/internal/murmur3.h"
#include "rrpc/naming.h"

typedef struct rrpc__cluster rrpc__cluster;

/* One server of a cluster. The list holds a reference while the server is
 * named; each attempt in flight and each health probe holds one too. The
 * last reference hands the node to the naming thread to free (freeing its
 * channel waits for the loops, so it never happens on one). */
typedef struct rrpc__node {
  atomic_int refs;
  rrpc__cluster *cl;           /* borrowed; outlives the node */
  rrpc_naming_entry entry;     /* what naming said */
  struct sockaddr_in sa;       /* resolved address, for health probes */
  rrpc_channel *sub;           /* owned: the single-server channel */
  atomic_int isolated;         /* 1: connection failed; only probes touch it */
  atomic_int inflight;         /* attempts in flight (la) */
  atomic_int_least64_t ewma_us;/* smoothed latency of successful attempts (la) */
  uint64_t next_probe_us;      /* naming thread only */
  uint32_t probe_delay_ms;     /* naming thread only */
  size_t index;                /* position in the current list (lb state) */
  struct rrpc__node *grave_next;
} rrpc__node;

/* What a balancer may look at for one pick. */
typedef struct rrpc__lb_input {
  uint64_t request_code;
  rrpc__node *const *exclude;  /* nodes already tried by this call */
  size_t nexclude;
} rrpc__lb_input;

/* 1 if `n` may take a call now: not isolated, not excluded. */
int rrpc__lb_usable(const rrpc__node *n, const rrpc__lb_input *in);

/* A balancer. Every op runs under the cluster's lock, so state needs no
 * locking of its own; ops must be short and must not block. */
typedef struct rrpc__lb_ops {
  const char *name;
  int (*create)(void **state);                      /* 0 or -ENOMEM */
  void (*destroy)(void *state);
  /* The list changed (nodes[i]->index == i). 0 or -ENOMEM (then the
   * balancer keeps working on what it had, and picks are checked). */
  int (*reset)(void *state, rrpc__node *const *nodes, size_t n);
  /* A usable node, or NULL if none is. */
  rrpc__node *(*pick)(void *state, rrpc__node *const *nodes, size_t n, const rrpc__lb_input *in);
} rrpc__lb_ops;

extern const rrpc__lb_ops rrpc__lb_rr;
extern const rrpc__lb_ops rrpc__lb_random;
extern const rrpc__lb_ops rrpc__lb_wrr;
extern const rrpc__lb_ops rrpc__lb_la;
extern const rrpc__lb_ops rrpc__lb_chash;

/* rrpc__lb_find - the balancer named `name` (NULL or "" = rr), or NULL. */
const rrpc__lb_ops *rrpc__lb_find(const char *name);

/* A uniformly random 64-bit number from a per-thread generator. */
uint64_t rrpc__lb_rand(void);


/* ---- the server set (cluster_servers.c) ---------------------------------- */

/* rrpc__cluster_new - fetch the first list, start the naming thread.
 * Returns the codes of rrpc_channel_new_lb. */
int rrpc__cluster_new(const char *url, const char *lb, const rrpc_channel_options *opts,
                      rrpc__cluster **out);
/* rrpc__cluster_free - stop the thread, fail what is in flight with
 * ECLOSE (each call once), wait for every call to end, free. */
void rrpc__cluster_free(rrpc__cluster *cl);

/* rrpc__cluster_pick - a usable node with a reference for the caller, or
 * NULL (none, or the cluster is closing). Counts the caller as issuing
 * until rrpc__cluster_issued: the cluster does not free node channels
 * while anyone is between the two. Any thread, never blocks. */
rrpc__node *rrpc__cluster_pick(rrpc__cluster *cl, const rrpc__lb_input *in);
void rrpc__cluster_issued(rrpc__cluster *cl);

void rrpc__node_ref(rrpc__node *n);
void rrpc__node_unref(rrpc__node *n);
/* rrpc__node_isolate - the node's connection failed: no more calls until a
 * health probe connects. Any thread, never blocks. */
void rrpc__node_isolate(rrpc__node *n);

/* Settings the call path reads (fixed after creation). */
typedef struct rrpc__cluster_conf {
  int32_t timeout_ms;
  int max_retry;
  int32_t backup_ms;
  rrpc_retry_policy_fn policy;
  void *policy_arg;
} rrpc__cluster_conf;
const rrpc__cluster_conf *rrpc__cluster_conf_of(const rrpc__cluster *cl);

/* Calls in flight: a call counts itself from start to end, so free waits. */
void rrpc__cluster_call_begin(rrpc__cluster *cl);
void rrpc__cluster_call_end(rrpc__cluster *cl);
int rrpc__cluster_closing(rrpc__cluster *cl);

typedef enum {
  RRPC__CL_RETRIES,
  RRPC__CL_BACKUPS,
  RRPC__CL_NO_SERVER,
} rrpc__cluster_counter;
void rrpc__cluster_count(rrpc__cluster *cl, rrpc__cluster_counter which);
void rrpc__cluster_stats(const rrpc__cluster *cl, rrpc_cluster_stats *out);

/* ---- calls (cluster_call.c) ------------------------------------------------ */

/* rrpc__cluster_call - rrpc_channel_call on a cluster channel. */
int rrpc__cluster_call(rrpc__cluster *cl, const char *service, const char *method,
                       rrpc_controller *cntl, const rrpc_iobuf *request, rrpc_iobuf *response,
                       rrpc_call_done done, void *arg);

#endif /* RRPC_INTERNAL_CLUSTER_H */
