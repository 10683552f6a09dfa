/* cluster_call.c - one call on a cluster channel: pick a server, send the
 * call on its channel as an attempt, and on a connection failure send it
 * again on another server (max_retry, never after a response, never past
 * the deadline); with backup_request_ms, send a second attempt to another
 * server if the first has not answered. Whatever happens, the user's call
 * completes exactly once: the first attempt that decides it wins under the
 * call's lock, later ones are dropped.
 *
 * Threads: attempts complete on their connections' loops, the backup timer
 * fires on a loop, the caller issues the first attempt. A call is
 * refcounted: the call itself until it finishes, each attempt in flight, a
 * pending backup timer, a posted cancel, and a sync caller waiting on it.
 *
 * Cancellation (internal/cancel.h): the call installs its own canceler in
 * the user's controller; it posts a task that finishes the call with
 * ECANCELED and cancels every attempt still in flight (each attempt has a
 * controller of its own on its server's channel).
 */
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/cancel.h"
#include "rrpc/internal/cluster.h"
#include "rrpc/internal/controller.h"
#include "rrpc/internal/loop.h"

#define MAX_TRIED 8 /* servers a call remembers to avoid; beyond, any may repeat */

struct attempt;

typedef struct ccall {
  rrpc__cluster *cl;
  struct attempt *attempts; /* in flight, under mu (for cancel) */
  pthread_mutex_t mu; /* finished, inflight, retries_left, backup_*, tried */
  atomic_int refs;
  int finished;
  int inflight;
  int retries_left;
  int backup_sent;
  rrpc__loop *tloop;
  rrpc__timer_id backup_timer;
  rrpc_controller *cntl;  /* the user's, borrowed */
  rrpc_iobuf *response;   /* the user's, borrowed, may be NULL */
  rrpc_call_done done;
  void *arg;
  const char *service, *method; /* copies, in the same allocation */
  rrpc_iobuf request;           /* SHARES the user's request blocks */
  rrpc_iobuf req_att;           /* SHARES the user's request attachment */
  uint64_t request_code;
  int64_t log_id;
  uint64_t deadline_us; /* 0: none */
  rrpc__node *tried[MAX_TRIED];
  size_t ntried;
  atomic_int state; /* sync: 1 once finished (futex word) */
  int result;
} ccall;

typedef struct attempt {
  ccall *cc;
  atomic_int refs;             /* its call on the sub-channel; a cancel in progress */
  struct attempt *prev, *next; /* cc->attempts, under cc->mu */
  struct attempt *cancel_next; /* the cancel task's list (cancel_task) */
  rrpc__node *node;    /* referenced */
  rrpc_controller cntl;
  rrpc_iobuf resp;
} attempt;

static void futex_wake_all(atomic_int *w) {
  syscall(SYS_futex, (int *)w, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static void futex_wait_while(atomic_int *w, int val) {
  while (atomic_load_explicit(w, memory_order_acquire) == val)
    syscall(SYS_futex, (int *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void cc_unref(ccall *cc) {
  if (atomic_fetch_sub_explicit(&cc->refs, 1, memory_order_acq_rel) != 1) return;
  rrpc__cluster *cl = cc->cl;
  rrpc__iobuf_destroy(&cc->request);
  rrpc__iobuf_destroy(&cc->req_att);
  pthread_mutex_destroy(&cc->mu);
  free(cc);
  rrpc__cluster_call_end(cl);
}

static void attempt_free(attempt *at) {
  rrpc__controller_destroy(&at->cntl);
  rrpc__iobuf_destroy(&at->resp);
  rrpc__node_unref(at->node);
  free(at);
}

static void attempt_unref(attempt *at) {
  if (atomic_fetch_sub_explicit(&at->refs, 1, memory_order_acq_rel) == 1) attempt_free(at);
}

/* Test builds only: a test program that defines it sees each attempt's
 * controller as it is launched (cluster_unittest holds one's cancel lock).
 * Nothing defines it in the library: one null test per attempt. */
void rrpc__cluster_attempt_launched_hook(rrpc_controller *attempt_cntl) __attribute__((weak));

static void link_attempt(ccall *cc, attempt *at) {
  at->prev = NULL;
  at->next = cc->attempts;
  if (cc->attempts) cc->attempts->prev = at;
  cc->attempts = at;
}

static void unlink_attempt(ccall *cc, attempt *at) {
  if (at->prev) at->prev->next = at->next;
  else if (cc->attempts == at) cc->attempts = at->next;
  if (at->next) at->next->prev = at->prev;
  at->prev = at->next = NULL;
}

/* ---- finishing -------------------------------------------------------------------- */

/* Hand the outcome to the user: the winning attempt's response, attachment
 * and error (or `code`/`text` when no attempt decided). Called with cc->mu
 * held and cc->finished just set; releases the lock. The call's own
 * reference is dropped here. */
static void finish_locked(ccall *cc, attempt *at, int code, const char *text) {
  rrpc_controller *u = cc->cntl;
  rrpc__timer_id timer = cc->backup_timer;
  cc->backup_timer = 0;
  if (at != NULL) {
    code = at->cntl.error_code;
    if (code != 0) rrpc__controller_fail(u, code, at->cntl.error_text, strlen(at->cntl.error_text));
    memcpy(u->remote, at->cntl.remote, sizeof u->remote);
    memcpy(u->local, at->cntl.local, sizeof u->local);
    u->used_rdma = at->cntl.used_rdma;
    u->responded = at->cntl.responded;
    if (code == 0 && cc->response != NULL) rrpc_iobuf_move(cc->response, &at->resp);
    rrpc_iobuf_move(&u->resp_att, &at->cntl.resp_att);
  } else {
    rrpc__controller_fail(u, code, text, text ? strlen(text) : 0);
  }
  u->latency_us = (int64_t)rrpc__now_us() - u->start_us;
  rrpc__controller_call_end(u); /* no cancel reaches cc after this */
  pthread_mutex_unlock(&cc->mu);
  if (timer != 0 && rrpc__loop_timer_cancel(cc->tloop, timer) == 0) cc_unref(cc); /* the timer's */
  if (cc->done == NULL) {
    cc->result = u->error_code;
    atomic_store_explicit(&cc->state, 1, memory_order_release);
    futex_wake_all(&cc->state);
  } else {
    cc->done(cc->arg, u);
  }
  cc_unref(cc);
}

/* Holds a reference of its own (fail_first took it): a cancel may have
 * finished the call, and dropped the call's reference, meanwhile. */
static void fail_task(void *arg) {
  ccall *cc = arg;
  pthread_mutex_lock(&cc->mu);
  if (cc->finished) { /* a cancel won */
    pthread_mutex_unlock(&cc->mu);
  } else {
    cc->finished = 1;
    finish_locked(cc, NULL, cc->result,
                  cc->result == -EHOSTDOWN ? "no server of the cluster is available (all isolated or none named)"
                                           : NULL);
  }
  cc_unref(cc); /* the task's */
}

/* ---- attempts --------------------------------------------------------------------- */

static int remaining_ms(const ccall *cc, int32_t *out) {
  if (cc->deadline_us == 0) {
    *out = -1;
    return 0;
  }
  uint64_t now = rrpc__now_us();
  if (now >= cc->deadline_us) return -RRPC_ERPCTIMEDOUT;
  *out = (int32_t)((cc->deadline_us - now + 999) / 1000);
  return 0;
}

static void on_attempt_done(void *arg, rrpc_controller *c);

/* Send the call to one more server. strict: only servers this call has not
 * tried (a backup); else an already tried one is better than none. 0 (the
 * attempt owns a reference and completes later), -EHOSTDOWN (nothing to
 * pick), -RRPC_ERPCTIMEDOUT (no time left), -ENOMEM, -EINVAL. Any thread.
 * The caller must hold a reference on cc across the call: the attempt may
 * complete, and end the call, before rrpc_channel_call even returns. */
static int launch(ccall *cc, int strict) {
  rrpc__cluster *cl = cc->cl; /* cc may be gone once the attempt is out */
  int32_t timeout;
  int rc = remaining_ms(cc, &timeout);
  if (rc != 0) return rc;
  pthread_mutex_lock(&cc->mu);
  rrpc__lb_input in = {.request_code = cc->request_code, .exclude = cc->tried, .nexclude = cc->ntried};
  rrpc__node *node = rrpc__cluster_pick(cc->cl, &in);
  if (node == NULL && !strict && in.nexclude > 0) {
    in.nexclude = 0;
    node = rrpc__cluster_pick(cc->cl, &in);
  }
  if (node == NULL) {
    pthread_mutex_unlock(&cc->mu);
    rrpc__cluster_count(cc->cl, RRPC__CL_NO_SERVER);
    return -EHOSTDOWN;
  }
  if (cc->ntried < MAX_TRIED) cc->tried[cc->ntried++] = node; /* identity only, never dereferenced */
  cc->inflight++;
  atomic_fetch_add(&cc->refs, 1);
  pthread_mutex_unlock(&cc->mu);

  attempt *at = calloc(1, sizeof *at);
  rc = at ? 0 : -ENOMEM;
  if (rc == 0) {
    at->cc = cc;
    atomic_init(&at->refs, 1);
    at->node = node;
    rrpc__controller_init(&at->cntl);
    rrpc__iobuf_init(&at->resp);
    at->cntl.timeout_ms = timeout;
    at->cntl.log_id = cc->log_id;
    at->cntl.request_code = cc->request_code;
    rc = rrpc_iobuf_append_iobuf(&at->cntl.req_att, &cc->req_att);
  }
  if (rc == 0) {
    pthread_mutex_lock(&cc->mu);
    link_attempt(cc, at);
    pthread_mutex_unlock(&cc->mu);
    if (rrpc__cluster_attempt_launched_hook) rrpc__cluster_attempt_launched_hook(&at->cntl);
    atomic_fetch_add(&node->inflight, 1);
    rc = rrpc_channel_call(node->sub, cc->service, cc->method, &at->cntl, &cc->request, &at->resp,
                           on_attempt_done, at);
    if (rc != 0) atomic_fetch_sub(&node->inflight, 1);
  }
  rrpc__cluster_issued(cl); /* not cc->cl: the attempt may have ended the call */
  if (rc == 0) return 0;
  /* Refused outright: as if never sent. */
  pthread_mutex_lock(&cc->mu);
  if (at != NULL) unlink_attempt(cc, at);
  cc->inflight--;
  pthread_mutex_unlock(&cc->mu);
  if (at != NULL) {
    at->node = node; /* attempt_free drops the node */
    attempt_unref(at);
  } else {
    rrpc__node_unref(node);
  }
  cc_unref(cc);
  return rc;
}

/* Failures of the connection, not of the call: the server never answered. */
static int connection_failed(int code) {
  switch (-code) {
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EPIPE:
    case RRPC_ECLOSE:
      return 1;
    default:
      return 0;
  }
}

/* brpc's default: retry what never reached a handler. */
static int default_policy(int code, int responded) {
  if (responded) return code == -RRPC_ELOGOFF; /* the server says: not executed */
  return connection_failed(code) || code == -RRPC_EOVERCROWDED;
}

static int may_retry(ccall *cc, int code, int responded) {
  const rrpc__cluster_conf *conf = rrpc__cluster_conf_of(cc->cl);
  if (cc->retries_left <= 0 || code == -RRPC_ERPCTIMEDOUT) return 0;
  /* Never after a response, except ELOGOFF: the server says it did not run it. */
  if (responded && code != -RRPC_ELOGOFF) return 0;
  if (cc->deadline_us != 0 && rrpc__now_us() >= cc->deadline_us) return 0;
  if (conf->policy != NULL) return conf->policy(conf->policy_arg, code, responded) != 0;
  return default_policy(code, responded);
}

static void note_node(attempt *at, int code, int responded) {
  rrpc__node *n = at->node;
  atomic_fetch_sub(&n->inflight, 1);
  if (code == 0) {
    int64_t lat = at->cntl.latency_us > 0 ? at->cntl.latency_us : 1;
    int64_t old = atomic_load_explicit(&n->ewma_us, memory_order_relaxed);
    atomic_store_explicit(&n->ewma_us, old == 0 ? lat : (old * 7 + lat) / 8, memory_order_relaxed);
  }
  if ((!responded && connection_failed(code)) || code == -RRPC_ELOGOFF) rrpc__node_isolate(n);
}

/* Runs once per attempt on its connection's loop thread. */
static void on_attempt_done(void *arg, rrpc_controller *c) {
  (void)c;
  attempt *at = arg;
  ccall *cc = at->cc;
  int code = at->cntl.error_code;
  int responded = at->cntl.responded;
  if (!rrpc__cluster_closing(cc->cl)) note_node(at, code, responded);
  else atomic_fetch_sub(&at->node->inflight, 1);
  pthread_mutex_lock(&cc->mu);
  cc->inflight--;
  unlink_attempt(cc, at);
  if (cc->finished) goto drop; /* another attempt decided: this one is dropped */
  /* may_retry asks the policy, which sees `responded`: by default only a
   * responded ELOGOFF ("not executed") goes elsewhere after an answer. */
  if (code != 0 && !rrpc__cluster_closing(cc->cl) && may_retry(cc, code, responded)) {
    cc->retries_left--;
    pthread_mutex_unlock(&cc->mu);
    rrpc__cluster_count(cc->cl, RRPC__CL_RETRIES);
    int rc = launch(cc, 0);
    pthread_mutex_lock(&cc->mu);
    if (rc == 0 || cc->finished || cc->inflight > 0) goto drop;
  } else if (code != 0 && (!responded || code == -RRPC_ELOGOFF) && cc->inflight > 0) {
    goto drop; /* a backup is still out: let it decide */
  }
  cc->finished = 1;
  finish_locked(cc, at, 0, NULL);
  attempt_unref(at);
  cc_unref(cc); /* the attempt's */
  return;
drop:
  pthread_mutex_unlock(&cc->mu);
  attempt_unref(at);
  cc_unref(cc);
}

/* The backup timer, on a loop thread. */
static void on_backup(void *arg) {
  ccall *cc = arg;
  pthread_mutex_lock(&cc->mu);
  int go = !cc->finished && !cc->backup_sent;
  cc->backup_sent = 1;
  cc->backup_timer = 0;
  pthread_mutex_unlock(&cc->mu);
  if (go && launch(cc, 1) == 0) rrpc__cluster_count(cc->cl, RRPC__CL_BACKUPS);
  cc_unref(cc); /* the timer's */
}

/* ---- cancellation --------------------------------------------------------------------- */

enum { CANCEL_RETRY_US = 1000 };

/* Cancel one attempt from a loop thread without waiting: its controller's
 * cancel lock is a spin lock, and its holder (the attempt being issued or
 * ending on another thread) may have been preempted; a busy lock is tried
 * again on a timer. Consumes the references the caller holds on the
 * attempt and on its call (which keeps the cluster, and so the attempt's
 * node, from being freed meanwhile: rrpc__cluster_free waits for calls). */
static void cancel_attempt(void *arg) {
  attempt *at = arg;
  ccall *cc = at->cc;
  rrpc__loop *loop = rrpc__loop_current();
  rrpc__timer_id id;
  if (rrpc__controller_try_cancel(&at->cntl) == -EBUSY && loop != NULL &&
      rrpc__loop_timer_add(loop, rrpc__now_us() + CANCEL_RETRY_US, cancel_attempt, at, &id) == 0)
    return; /* the timer has the references now */
  attempt_unref(at);
  cc_unref(cc);
}

/* On a loop thread: end the call with ECANCELED unless something else did,
 * then cancel the attempts still out (their answers are dropped anyway;
 * cancelling frees their servers' pending entries now). The attempts are
 * cancelled after the call's mutex is dropped and without waiting for their
 * cancel locks: before, this task held the mutex while it spun on each
 * attempt's lock, and a preempted holder kept the call from ending (145 ms
 * seen under load) and every other thread that needed the mutex waiting. */
static void cancel_task(void *arg) {
  ccall *cc = arg;
  attempt *list = NULL;
  pthread_mutex_lock(&cc->mu);
  for (attempt *at = cc->attempts; at != NULL; at = at->next) {
    atomic_fetch_add_explicit(&at->refs, 1, memory_order_relaxed); /* alive until cancelled */
    atomic_fetch_add(&cc->refs, 1);
    at->cancel_next = list;
    list = at;
  }
  if (!cc->finished) {
    cc->finished = 1;
    finish_locked(cc, NULL, -ECANCELED, "the call was canceled");
  } else {
    pthread_mutex_unlock(&cc->mu);
  }
  while (list != NULL) {
    attempt *next = list->cancel_next;
    cancel_attempt(list);
    list = next;
  }
  cc_unref(cc); /* the task's */
}

/* The cluster call's canceler: runs under the user's controller's cancel
 * lock on the cancelling thread, so cc is alive (the call ends only after
 * call_end). It only posts. */
static void cancel_call(void *arg) {
  ccall *cc = arg;
  atomic_fetch_add(&cc->refs, 1);
  rrpc__loop_group *g;
  if (rrpc__loop_group_global(0, &g) == 0 && rrpc__loop_post(rrpc__loop_group_next(g), cancel_task, cc) == 0)
    return;
  /* No loop takes tasks (the process is ending): the attempts' own
   * timeouts or closes still end the call once. */
  atomic_fetch_sub(&cc->refs, 1);
}

/* ---- the call ---------------------------------------------------------------------- */

static ccall *cc_new(rrpc__cluster *cl, const char *service, const char *method) {
  size_t ls = strlen(service) + 1, lm = strlen(method) + 1;
  ccall *cc = calloc(1, sizeof *cc + ls + lm);
  if (cc == NULL) return NULL;
  char *s = (char *)(cc + 1);
  memcpy(s, service, ls);
  memcpy(s + ls, method, lm);
  cc->service = s;
  cc->method = s + ls;
  cc->cl = cl;
  pthread_mutex_init(&cc->mu, NULL);
  rrpc__iobuf_init(&cc->request);
  rrpc__iobuf_init(&cc->req_att);
  return cc;
}

static void arm_backup(ccall *cc, int32_t backup_ms) {
  rrpc__loop_group *g;
  if (rrpc__loop_group_global(0, &g) != 0) return;
  pthread_mutex_lock(&cc->mu);
  if (!cc->finished) {
    cc->tloop = rrpc__loop_group_next(g);
    atomic_fetch_add(&cc->refs, 1);
    uint64_t when = (uint64_t)cc->cntl->start_us + (uint64_t)backup_ms * 1000u;
    if (rrpc__loop_timer_add(cc->tloop, when, on_backup, cc, &cc->backup_timer) != 0) {
      cc->backup_timer = 0;
      atomic_fetch_sub(&cc->refs, 1); /* never 1 here: the call holds its own */
    }
  }
  pthread_mutex_unlock(&cc->mu);
}

/* The first attempt could not even be sent: finish on a loop thread for
 * async callers (never inside the call), here for sync ones. */
static void fail_first(ccall *cc, int code) {
  cc->result = code;
  atomic_fetch_add(&cc->refs, 1); /* fail_task's */
  rrpc__loop_group *g;
  if (cc->done != NULL && rrpc__loop_group_global(0, &g) == 0 &&
      rrpc__loop_post(rrpc__loop_group_next(g), fail_task, cc) == 0)
    return;
  fail_task(cc);
}

int rrpc__cluster_call(rrpc__cluster *cl, const char *service, const char *method,
                       rrpc_controller *cntl, const rrpc_iobuf *request, rrpc_iobuf *response,
                       rrpc_call_done done, void *arg) {
  const rrpc__cluster_conf *conf = rrpc__cluster_conf_of(cl);
  int32_t timeout_ms = cntl->timeout_ms != 0 ? cntl->timeout_ms : conf->timeout_ms;
  if (done == NULL && rrpc__loop_current() != NULL) {
    rrpc__controller_fail(cntl, -EDEADLK, "a synchronous call from an rrpc loop thread would deadlock", 58);
    return -EDEADLK;
  }
  ccall *cc = cc_new(cl, service, method);
  if (cc == NULL || (request != NULL && rrpc_iobuf_append_iobuf(&cc->request, request) != 0) ||
      rrpc_iobuf_append_iobuf(&cc->req_att, &cntl->req_att) != 0) {
    if (cc) {
      rrpc__iobuf_destroy(&cc->request);
      rrpc__iobuf_destroy(&cc->req_att);
      pthread_mutex_destroy(&cc->mu);
      free(cc);
    }
    return -ENOMEM;
  }
  rrpc__cluster_call_begin(cl);
  rrpc__controller_call_begin(cntl);
  atomic_init(&cc->refs, done == NULL ? 2 : 1); /* the call's, and a sync waiter's */
  cc->cntl = cntl;
  cc->response = response;
  cc->done = done;
  cc->arg = arg;
  cc->request_code = cntl->request_code;
  cc->log_id = cntl->log_id;
  cc->retries_left = conf->max_retry;
  if (timeout_ms > 0) cc->deadline_us = (uint64_t)cntl->start_us + (uint64_t)timeout_ms * 1000u;
  atomic_fetch_add(&cc->refs, 1); /* ours, across launch and arm_backup */
  int rc = 0;
  if (cntl->deadline_us != 0) {
    /* An inherited deadline caps the whole call, every attempt included. */
    if (cntl->deadline_us <= cntl->start_us) rc = -RRPC_ERPCTIMEDOUT;
    if (cc->deadline_us == 0 || (uint64_t)cntl->deadline_us < cc->deadline_us)
      cc->deadline_us = (uint64_t)cntl->deadline_us;
  }
  if (rc == 0 && rrpc__controller_set_canceler(cntl, cancel_call, cc) != 0) {
    /* Cancelled before it began: the posted task finishes it. */
  } else if (rc == 0) {
    rc = launch(cc, 0);
  }
  if (rc != 0) {
    fail_first(cc, rc);
  } else if (conf->backup_ms > 0 && (timeout_ms <= 0 || conf->backup_ms < timeout_ms)) {
    arm_backup(cc, conf->backup_ms);
  }
  cc_unref(cc); /* ours */
  if (done != NULL) return 0;
  futex_wait_while(&cc->state, 0);
  int result = cc->result;
  cc_unref(cc);
  return result;
}
