/* channel.c - the client side: one connection per channel, many calls in
 * flight on it, each completed exactly once (response, timeout, or the
 * connection failing).
 *
 * Every ending of a call is decided on its connection's loop thread: the
 * response is cut there, its timeout timer lives there, and the socket's
 * on_close runs there. So an ending that cancels the timer either removes
 * it (it will never run) or finds that it already ran - never that it is
 * running - and calls need no reference counts of their own. Once decided
 * (the call is out of the pending map, its timer cancelled), the rest of
 * the completion - bookkeeping, waking a sync caller, an async `done` - may
 * run on another loop of the group (completion hand-off, below), so one
 * busy connection is not capped at one core.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rrpc/internal/addr.h"
#include "rrpc/internal/baidu_std.h"
#include "rrpc/internal/cancel.h"
#include "rrpc/internal/cluster.h"
#include "rrpc/internal/controller.h"
#include "rrpc/internal/idmap.h"
#include "rrpc/internal/lock.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/metrics.h"
#include "rrpc/internal/request_pack_hook.h"
#include "rrpc/internal/socket.h"
#include "rrpc/remote/link.h"
#include "rrpc/channel.h"
#include "rrpc/errors.h"
#include "rrpc/rdma.h"

#define DEFAULT_TIMEOUT_MS 500
#define DEFAULT_CONNECT_TIMEOUT_MS 200
#define DEFAULT_MAX_RETRY 3
#define DEFAULT_POOL_MAX 100 /* brpc's max_connection_pool_size */

struct conn;

/* Every field is set by rrpc_channel_call (call_init) without a memset:
 * a new field must be set there too. */
struct call {
  uint64_t cid;
  struct conn *conn;
  rrpc_controller *cntl;
  rrpc_iobuf *response;
  rrpc_call_done done;
  void *arg;
  rrpc__timer_id timer;    /* its own loop timer, or 0: on the connection's deadline list */
  uint64_t deadline_us;    /* on the deadline list: when it times out */
  struct call *dl_prev, *dl_next; /* the deadline list, under the connection's mu */
  int on_dl;
  rrpc__call_stats *stats; /* the channel's; outlives every call */
  struct conn *held; /* pooled/short: this call's own connection (a reference) */
  /* sync calls: the caller sleeps on `state` (futex word) */
  atomic_int state;
  int result;
  struct call *next_done; /* a batch of decided calls (client_on_data) */
};

struct conn {
  atomic_int refs;
  rrpc_channel *ch;
  rrpc__socket *sock;
  rrpc__loop *loop;
  rrpc__lock mu;
  rrpc__idmap pending; /* cid -> struct call */
  /* Calls with a timeout, in deadline order (under mu): one loop timer per
   * connection (dl_timer, armed at or before the head's deadline while the
   * list is not empty) instead of a timer added and cancelled per call. */
  struct call *dl_head, *dl_tail;
  rrpc__timer_id dl_timer; /* 0: not armed */
  uint64_t dl_armed_for;
  int closed;
  char peer[80];
  struct conn *live_prev, *live_next; /* ch->live, under ch->mu */
  struct conn *retired_next; /* ch->retired, under ch->mu */
};

struct rrpc_channel {
  rrpc__addr addr;
  char addr_str[80];
  int32_t timeout_ms;
  int32_t connect_timeout_ms;
  int max_retry;
  size_t max_body;
  const rrpc_transport_ops *ops;
  rrpc__loop_group *group;
  pthread_mutex_t mu; /* conn's changes, nconns, closing, retired */
  pthread_cond_t cv;
  /* single: the current connection; the channel holds a reference to it.
   * Written only under mu; read without it by conn_get_fast (see there). */
  _Atomic(struct conn *) conn;
  atomic_uint getters;   /* conn_get_fast calls between their pin and unpin */
  struct conn *retired;  /* the channel's references to former `conn`s, not yet dropped */
  atomic_int nretired;   /* entries on `retired`, read without mu by the last getter out */
  int nconns; /* connections whose on_close has not run yet */
  int handoffs; /* completion batches handed to another loop, not yet finished */
  int closing;
  atomic_uint_least64_t next_cid;
  _Atomic uint64_t late_responses; /* responses whose call had ended */
  rrpc__call_stats *stats; /* totals of every call on the channel */
  rrpc__stats_reg *reg;
  rrpc__cluster *cluster; /* a cluster channel (cluster_*.c) instead: no conn */
  /* connection_type (brpc's): single uses `conn`; pooled and short give
   * each call a connection of its own (call.held). Under mu. */
  int conn_type;
  int pool_max;          /* idle pooled connections kept, at most */
  struct conn **idle;    /* pooled: idle connections, each a reference */
  int nidle;
  struct conn *live;     /* every connection whose on_close has not run */
  rrpc_channel_conn_stats cstats;
};

static const rrpc__socket_handler client_handler;

_Static_assert(sizeof(struct call) <= RRPC__CALL_SPACE, "struct call must fit in rrpc_controller.call_space");
_Static_assert(_Alignof(struct call) <= 16, "rrpc_controller.call_space is 16-byte aligned");

/* Every channel's late responses, for the metrics pages (channels come and
 * go; the process total stays). */
static _Atomic uint64_t g_late_responses;

uint64_t rrpc__late_responses_total(void) {
  return atomic_load_explicit(&g_late_responses, memory_order_relaxed);
}

/* ---- completing calls -------------------------------------------------------- */

static void futex_wake_all(atomic_int *w) {
  syscall(SYS_futex, (int *)w, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
}

static void futex_wait_while(atomic_int *w, int val) {
  while (atomic_load_explicit(w, memory_order_acquire) == val)
    syscall(SYS_futex, (int *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void conn_release(struct conn *cn);
static void retire_locked(rrpc_channel *ch, struct conn *cn);
static struct conn *reclaim_locked(rrpc_channel *ch);
static void unref_retired(struct conn *list);

/* The channel's part of finishing a call: record the outcome in its
 * controller and the channel's stats, give back its own connection. The
 * last use of the channel on the way to the caller. */
static void finish(struct call *c, int code, const char *text) {
  rrpc_controller *cntl = c->cntl;
  rrpc__loop_note(RRPC__WORK_COMPLETIONS, 1);
  if (c->held != NULL) conn_release(c->held); /* pooled: back to the pool; short: closed */
  c->held = NULL;
  rrpc__controller_call_end(cntl); /* no cancel may reach `c` after this */
  /* A decided call's latency was taken with its read's batch (decide). */
  if (!cntl->responded) cntl->latency_us = (int64_t)rrpc__now_us() - cntl->start_us;
  if (code != 0) rrpc__controller_fail(cntl, code, text, text ? strlen(text) : 0);
  if (rrpc__metrics_on()) rrpc__call_stats_end(c->stats, cntl->latency_us, cntl->error_code);
}

/* The caller's part: wake a sync caller or run the callback. After this
 * the call must not be touched. */
static void notify(struct call *c) {
  rrpc_controller *cntl = c->cntl;
  if (c->done == NULL) {
    c->result = cntl->error_code;
    /* The caller's stack frame holds the call: after this store it may
     * return at any time, so the wake uses only the word's address. */
    atomic_store_explicit(&c->state, 1, memory_order_release);
    futex_wake_all(&c->state);
    return;
  }
  /* An async call lives in its controller (rrpc_channel_call): read what
   * is needed first, since `done` may start the next call on it or free it. */
  rrpc_call_done done = c->done;
  void *arg = c->arg;
  done(arg, cntl);
}

static void complete(struct call *c, int code, const char *text) {
  finish(c, code, text);
  notify(c);
}

static void fail_task(void *arg) {
  struct call *c = arg;
  complete(c, c->result, NULL);
}

/* Fail a call that never reached a connection: inline for sync callers,
 * on a loop thread for async ones (a callback never runs inside the call). */
static int fail_unsent(rrpc_channel *ch, struct call *c, int code, const char *text) {
  if (c->done == NULL) {
    complete(c, code, text);
    return c->result;
  }
  rrpc__controller_fail(c->cntl, code, text, text ? strlen(text) : 0);
  c->result = code;
  if (rrpc__loop_post(rrpc__loop_group_next(ch->group), fail_task, c) != 0) {
    /* No loop can take it (the process is shutting down): the contract of
     * "never inside the call" yields to "exactly once". */
    fail_task(c);
  }
  return 0;
}

/* ---- connections ------------------------------------------------------------- */

static void conn_unref(struct conn *cn) {
  if (atomic_fetch_sub_explicit(&cn->refs, 1, memory_order_acq_rel) != 1) return;
  if (cn->sock != NULL) rrpc__socket_unref(cn->sock);
  rrpc__idmap_destroy(&cn->pending);
  free(cn);
}

/* ---- deadlines -------------------------------------------------------------
 * A call with a timeout goes on its connection's deadline list when its
 * deadline is not earlier than the list's tail (the usual case: calls on
 * one channel share a timeout and are issued in order), and the list's one
 * loop timer fires for the head. Ending a call early only unlinks it,
 * under the lock that takes it out of the pending map anyway: no timer
 * heap and no loop lock per call (the add/cancel pair was ~330
 * instructions per call). The timer may fire early for a head that has
 * gone; it then re-arms for the new head. A call that would land elsewhere
 * (an earlier deadline than the tail's, which a shorter timeout or a
 * caller preempted between its clock read and its enrolment gives) keeps a
 * loop timer of its own, as before. */

static void dl_unlink_locked(struct conn *cn, struct call *c) {
  if (!c->on_dl) return;
  if (c->dl_prev) c->dl_prev->dl_next = c->dl_next;
  else cn->dl_head = c->dl_next;
  if (c->dl_next) c->dl_next->dl_prev = c->dl_prev;
  else cn->dl_tail = c->dl_prev;
  c->on_dl = 0;
}

/* Under mu: the call answering cid, out of the pending map and the list. */
static struct call *take_locked(struct conn *cn, uint64_t cid) {
  struct call *c = rrpc__idmap_take(&cn->pending, cid);
  if (c != NULL) dl_unlink_locked(cn, c);
  return c;
}

/* A call out of the map: its own timer (if it has one) goes too. On the
 * connection's loop thread, or from a thread whose cancel the timer's
 * callback tolerates (it finds the call gone from the map). */
static void drop_timer(struct conn *cn, struct call *c) {
  if (c->timer != 0) rrpc__loop_timer_cancel(cn->loop, c->timer);
}

static void timeout_call(struct conn *cn, struct call *c);
static void dl_on_timer(void *arg);

/* Under mu: arm the list's timer for `deadline` (it holds a reference). */
static int dl_arm_locked(struct conn *cn, uint64_t deadline) {
  atomic_fetch_add(&cn->refs, 1);
  int rc = rrpc__loop_timer_add(cn->loop, deadline, dl_on_timer, cn, &cn->dl_timer);
  if (rc != 0) {
    atomic_fetch_sub(&cn->refs, 1); /* the caller holds one too: not the last */
    cn->dl_timer = 0;
    return rc;
  }
  cn->dl_armed_for = deadline;
  return 0;
}

/* Under mu: put c on the list if it fits there (see above): 1 if it did,
 * 0 if it needs a timer of its own, or a negative code. */
static int dl_add_locked(struct conn *cn, struct call *c, uint64_t deadline) {
  if (cn->dl_tail != NULL ? deadline < cn->dl_tail->deadline_us
                          : cn->dl_timer != 0 && deadline < cn->dl_armed_for)
    return 0;
  if (cn->dl_timer == 0) {
    int rc = dl_arm_locked(cn, deadline);
    if (rc != 0) return rc;
  }
  c->deadline_us = deadline;
  c->dl_next = NULL;
  c->dl_prev = cn->dl_tail;
  if (cn->dl_tail) cn->dl_tail->dl_next = c;
  else cn->dl_head = c;
  cn->dl_tail = c;
  c->on_dl = 1;
  return 1;
}

/* The list's timer (loop thread): time out what is due, re-arm for the rest. */
static void dl_on_timer(void *arg) {
  struct conn *cn = arg;
  uint64_t now = rrpc__now_us();
  struct call *due = NULL, **tail = &due;
  rrpc__lock_acquire(&cn->mu);
  cn->dl_timer = 0;
  while (cn->dl_head != NULL && cn->dl_head->deadline_us <= now) {
    struct call *c = take_locked(cn, cn->dl_head->cid);
    c->next_done = NULL;
    *tail = c;
    tail = &c->next_done;
  }
  if (cn->dl_head != NULL && dl_arm_locked(cn, cn->dl_head->deadline_us) != 0) {
    /* No timer (out of memory): the rest time out now rather than never. */
    while (cn->dl_head != NULL) {
      struct call *c = take_locked(cn, cn->dl_head->cid);
      c->next_done = NULL;
      *tail = c;
      tail = &c->next_done;
    }
  }
  rrpc__lock_release(&cn->mu);
  while (due != NULL) {
    struct call *next = due->next_done;
    timeout_call(cn, due);
    due = next;
  }
  conn_unref(cn); /* the timer's reference */
}

/* Loop thread, at close: the list's timer goes (the list is empty now). */
static void dl_disarm(struct conn *cn) {
  rrpc__lock_acquire(&cn->mu);
  rrpc__timer_id t = cn->dl_timer;
  int dropped = t != 0 && rrpc__loop_timer_cancel(cn->loop, t) == 0;
  if (dropped) cn->dl_timer = 0;
  rrpc__lock_release(&cn->mu);
  if (dropped) conn_unref(cn); /* the timer's reference; the caller holds another */
}

static void on_timeout(void *arg) {
  struct call *c = arg;
  struct conn *cn = c->conn;
  rrpc__lock_acquire(&cn->mu);
  struct call *mine = take_locked(cn, c->cid);
  rrpc__lock_release(&cn->mu);
  if (mine == NULL) return;
  timeout_call(cn, c);
}

/* A call out of the map whose deadline passed. */
static void timeout_call(struct conn *cn, struct call *c) {
  char text[160];
  snprintf(text, sizeof text, "RPC to %s timed out after %lld ms", cn->peer,
           (long long)(rrpc__now_us() - (uint64_t)c->cntl->start_us) / 1000);
  if (rrpc__log_enabled(RRPC_LOG_DEBUG)) {
    char d[512];
    rrpc__socket_describe(cn->sock, d, sizeof d);
    RRPC_LOG(DEBUG, "%s; connection: %s", text, d);
  }
  complete(c, -RRPC_ERPCTIMEDOUT, text);
}

/* ---- completion hand-off -------------------------------------------------------
 * The responses cut from one read are decided on the connection's loop
 * (out of the pending map, timer cancelled, outcome in the controller) and
 * collected; then half of them are handed, as one task, to another loop of
 * the group while this loop completes the other half. Only when it pays:
 * it is turned on (rrpc_set_completion_handoff; off by default: on the
 * 2-core machines it was measured on it cost CPU), the batch has at least
 * its minimum of calls (one call gains nothing from a
 * hop) and the other loop is asleep (idle CPU; a busy one has connections
 * of its own, and trading completions between busy loops only adds work).
 * One loop in the group (--event_dispatcher_num=1): everything inline, as
 * before. A handed-off `done` still runs on a loop thread, so the rules for
 * completions (never block, no sync call) are unchanged. */
static atomic_int g_handoff_min = -1; /* rrpc_set_completion_handoff; -1: off (the default) */
static _Atomic uint64_t g_handed_off; /* completions run on another loop */

int rrpc_set_completion_handoff(int min_batch) {
  if (min_batch == 1) return -EINVAL;
  atomic_store(&g_handoff_min, min_batch <= 0 ? -1 : min_batch);
  return 0;
}

int rrpc_completion_handoff(void) { return atomic_load(&g_handoff_min); }

uint64_t rrpc__completions_handed_off_total(void) {
  return atomic_load_explicit(&g_handed_off, memory_order_relaxed);
}

struct done_batch {
  rrpc_channel *ch;
  struct call *head;
};

static void handoff_end(rrpc_channel *ch) {
  pthread_mutex_lock(&ch->mu);
  if (--ch->handoffs == 0) pthread_cond_broadcast(&ch->cv);
  pthread_mutex_unlock(&ch->mu);
}

/* On the other loop: the channel's part of every call first, then the
 * count that rrpc_channel_free waits for, then the callers' part - which
 * touches no channel, so a `done` may free the channel. */
static void batch_task(void *arg) {
  struct done_batch *b = arg;
  rrpc_channel *ch = b->ch;
  struct call *c = b->head;
  free(b);
  for (struct call *x = c; x != NULL; x = x->next_done) finish(x, 0, NULL);
  handoff_end(ch);
  while (c != NULL) {
    struct call *next = c->next_done; /* a woken sync caller's frame goes away */
    notify(c);
    c = next;
  }
}

/* Another loop of the channel's group that is asleep, or NULL. */
static rrpc__loop *idle_helper(rrpc_channel *ch, rrpc__loop *own) {
  if (rrpc__loop_group_size(ch->group) < 2) return NULL;
  rrpc__loop *l = rrpc__loop_group_next(ch->group);
  if (l == own) l = rrpc__loop_group_next(ch->group);
  return l != own && !rrpc__loop_awake(l) ? l : NULL;
}

/* Hand the tail of the list (from its (n/2 + 1)-th call) to `helper`; the
 * head part stays for the caller. On failure the list is left whole. */
static int hand_off(rrpc_channel *ch, rrpc__loop *helper, struct call *head, int n) {
  struct done_batch *b = malloc(sizeof *b);
  if (b == NULL) return -ENOMEM;
  struct call *last = head;
  for (int i = 1; i < n / 2; i++) last = last->next_done;
  b->ch = ch;
  b->head = last->next_done;
  last->next_done = NULL;
  pthread_mutex_lock(&ch->mu);
  ch->handoffs++;
  pthread_mutex_unlock(&ch->mu);
  if (rrpc__loop_post(helper, batch_task, b) != 0) {
    last->next_done = b->head;
    handoff_end(ch);
    free(b);
    return -ESHUTDOWN;
  }
  atomic_fetch_add_explicit(&g_handed_off, (uint64_t)(n - n / 2), memory_order_relaxed);
  return 0;
}

/* Complete a read's decided calls: some on another loop where it pays
 * (above), the rest here. */
static void complete_batch(struct conn *cn, struct call *head, int n) {
  int min = atomic_load_explicit(&g_handoff_min, memory_order_relaxed);
  if (min > 0 && n >= min) {
    rrpc__loop *helper = idle_helper(cn->ch, cn->loop);
    if (helper != NULL) (void)hand_off(cn->ch, helper, head, n); /* a failure keeps them all here */
  }
  while (head != NULL) {
    struct call *next = head->next_done;
    complete(head, 0, NULL);
    head = next;
  }
}

/* Decide the call a response answers, taken out of the pending map by the
 * caller: timer cancelled, outcome in its controller. `read_us`: when the
 * read that brought the response was delivered (rrpc__socket_read_us: the
 * loop round's clock, shared with the socket's activity stamp; the call's
 * latency ends when its answer arrived, not when the completions queued
 * before it in the batch are done). A call started on another thread after
 * that round woke can be answered within it: its latency is then the 0
 * that the round's clock can tell, never negative. */
static int decide_meta(struct conn *cn, struct call *c, const rrpc__baidu_msg *msg, uint64_t read_us) {
  drop_timer(cn, c);
  rrpc_controller *cntl = c->cntl;
  cntl->used_rdma = rrpc__socket_is_rdma(cn->sock);
  rrpc__socket_local_str(cn->sock, cntl->local);
  cntl->responded = 1;
  int64_t lat = (int64_t)read_us - cntl->start_us;
  cntl->latency_us = lat > 0 ? lat : 0;
  const rrpc__rpc_meta *m = &msg->meta;
  if ((m->has & RRPC_META_HAS_ERROR_CODE) && m->error_code != 0) {
    size_t n = m->error_text.len > RRPC_ERROR_TEXT_MAX ? RRPC_ERROR_TEXT_MAX : m->error_text.len;
    rrpc__controller_fail(cntl, m->error_code, n ? m->error_text.ptr : NULL, n);
    return 0;
  }
  if (msg->bad_attachment) {
    static const char why[] = "response attachment_size is larger than its body";
    rrpc__controller_fail(cntl, -RRPC_ERESPONSE, why, sizeof why - 1);
    return 0;
  }
  return 1;
}

/* decide_meta's outcome in the controller, and a response's body MOVED
 * into the caller's iobufs. */
static void decide(struct conn *cn, struct call *c, rrpc__baidu_msg *msg, uint64_t read_us) {
  if (!decide_meta(cn, c, msg, read_us)) return;
  if (c->response != NULL) rrpc_iobuf_move(c->response, &msg->payload);
  rrpc_iobuf_move(&c->cntl->resp_att, &msg->attachment);
}

/* A response nobody waits for any more (timed out or cancelled already):
 * dropped, and counted. */
static void count_late(struct conn *cn) {
  atomic_fetch_add_explicit(&cn->ch->late_responses, 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&g_late_responses, 1, memory_order_relaxed);
}

/* A read that holds exactly one response (what a caller waiting for each
 * answer gets: the usual case). Its call is taken before the body is cut,
 * so payload and attachment go straight into the caller's iobufs, not
 * through the message's own (two moves). With one frame there is one
 * lookup either way: the batch below exists for reads of many. `msg` is
 * storage for the read's first frame. 1: handled, the call completed (or
 * the connection must close), *rc as client_on_data returns. 0: not a lone
 * response; *cut is 1 if the first frame was a response, now cut whole
 * into msg for the batch (its header and meta are not decoded twice), else
 * 0, msg is empty and nothing was consumed (the batch path cuts that frame
 * again and judges it). */
static int on_lone_response(struct conn *cn, rrpc_iobuf *rbuf, rrpc__baidu_msg *msg, int *cut, int *rc) {
  *cut = 0;
  /* cut_head initialises msg, whatever it returns. */
  if (rrpc__baidu_cut_head(rbuf, cn->ch->max_body, msg) <= 0 || !(msg->meta.has & RRPC_META_HAS_RESPONSE) ||
      (msg->meta.has & RRPC_META_HAS_REQUEST)) {
    rrpc__baidu_msg_destroy(msg);
    return 0;
  }
  if (msg->body_skip + msg->body_payload + msg->body_attachment != rrpc__iobuf_length(rbuf)) {
    /* More frames follow: this one joins the batch, cut whole as
     * rrpc__baidu_cut would have cut it. */
    int r = rrpc__baidu_cut_body(rbuf, msg, &msg->payload, &msg->attachment);
    if (r == 0) {
      *cut = 1;
      return 0;
    }
    rrpc__baidu_msg_destroy(msg);
    RRPC_LOG(WARNING, "closing connection to %s: %s", cn->peer, rrpc_strerror(r));
    *rc = r;
    return 1;
  }
  uint64_t read_us = rrpc__socket_read_us(cn->sock);
  rrpc__lock_acquire(&cn->mu);
  struct call *c = take_locked(cn, (uint64_t)msg->meta.correlation_id);
  rrpc__lock_release(&cn->mu);
  if (c == NULL || !decide_meta(cn, c, msg, read_us)) {
    /* Late, or failed on its meta: the body is nobody's. */
    *rc = rrpc__baidu_cut_body(rbuf, msg, &msg->payload, &msg->attachment);
  } else {
    *rc = rrpc__baidu_cut_body(rbuf, msg, c->response != NULL ? c->response : &msg->payload,
                               &c->cntl->resp_att);
    if (*rc < 0) rrpc__controller_fail(c->cntl, *rc, NULL, 0); /* out of memory: the connection closes too */
  }
  rrpc__baidu_msg_destroy(msg);
  if (c == NULL) {
    count_late(cn);
    return 1;
  }
  c->next_done = NULL;
  complete_batch(cn, c, 1);
  return 1;
}

/* Up to this many responses are cut before their calls are looked up
 * under the connection's lock, once for all of them: callers enrolling
 * calls hold that lock too, and a holder preempted on a loaded machine
 * made the loop sleep a whole time slice (260 ms seen in
 * Cluster.AsyncCallsThatCompleteBeforeTheirIssueReturns, 59 responses in
 * one read, one lock round trip each). */
enum { CUT_BATCH = 32 };

/* Cut frames into msgs after the n already there, up to CUT_BATCH: how
 * many are there then, and in *rc 0 (no complete frame left or the batch
 * is full) or why the connection must close. */
static int cut_some(struct conn *cn, rrpc_iobuf *rbuf, rrpc__baidu_msg *msgs, int n, int *rc) {
  *rc = 0;
  while (n < CUT_BATCH && rrpc__iobuf_length(rbuf) > 0) { /* an empty buffer: the usual end */
    /* Remote-memory frames between responses (client_on_data ran the
     * delivery's rrpc__rmt_on_data). */
    int rm = rrpc__rmt_next_cut(cn->sock, rbuf);
    if (rm == -EAGAIN) break;
    if (rm < 0) {
      RRPC_LOG(WARNING, "closing connection to %s: remote memory: %s", cn->peer, rrpc_strerror(rm));
      *rc = rm;
      break;
    }
    if (rrpc__iobuf_length(rbuf) == 0) break;
    rrpc__baidu_msg *msg = &msgs[n];
    int r = rrpc__baidu_cut(rbuf, cn->ch->max_body, msg); /* initialises msg, whatever it returns */
    if (r == 0) break;
    if (r < 0) {
      RRPC_LOG(WARNING, "closing connection to %s: %s", cn->peer, rrpc_strerror(r));
      *rc = r;
      break;
    }
    if (!(msg->meta.has & RRPC_META_HAS_RESPONSE) || (msg->meta.has & RRPC_META_HAS_REQUEST)) {
      rrpc__baidu_msg_destroy(msg);
      RRPC_LOG(WARNING, "closing connection to %s: a frame that is not a response", cn->peer);
      *rc = -RRPC_EPARSE;
      break;
    }
    n++;
  }
  return n;
}

/* Cut every complete frame; the calls they answer complete as one batch,
 * also when a bad frame closes the connection after them. */
static int client_on_data(void *owner, rrpc__socket *sock, rrpc_iobuf *rbuf) {
  struct conn *cn = owner;
  struct call *head = NULL, **tail = &head;
  int total = 0, rc = 0, have = 0;
  rrpc__baidu_msg msgs[CUT_BATCH];
  rrpc__rmt_on_data(sock);
  if (!rrpc__rmt_stream_is_frame(rbuf) && on_lone_response(cn, rbuf, &msgs[0], &have, &rc)) return rc;
  struct call *calls[CUT_BATCH];
  uint64_t read_us = rrpc__socket_read_us(sock);
  for (;;) {
    int n = cut_some(cn, rbuf, msgs, have, &rc);
    have = 0;
    rrpc__lock_acquire(&cn->mu);
    for (int i = 0; i < n; i++) calls[i] = take_locked(cn, (uint64_t)msgs[i].meta.correlation_id);
    rrpc__lock_release(&cn->mu);
    for (int i = 0; i < n; i++) {
      struct call *c = calls[i];
      if (c == NULL) {
        count_late(cn);
      } else {
        decide(cn, c, &msgs[i], read_us);
        c->next_done = NULL;
        *tail = c;
        tail = &c->next_done;
        total++;
      }
      rrpc__baidu_msg_destroy(&msgs[i]);
    }
    if (n < CUT_BATCH || rc != 0) break;
  }
  complete_batch(cn, head, total);
  return rc;
}

static void client_on_close(void *owner, rrpc__socket *sock, int code) {
  struct conn *cn = owner;
  rrpc_channel *ch = cn->ch;
  rrpc__lock_acquire(&cn->mu);
  cn->closed = 1;
  rrpc__lock_release(&cn->mu);
  char text[200];
  int call_code;
  if (!rrpc__socket_connected(sock)) {
    /* The connect itself failed: the caller hears why (ECONNREFUSED,
     * ETIMEDOUT, ...), as from a connect of its own. */
    snprintf(text, sizeof text, "cannot connect to %s: %s", cn->peer, rrpc_strerror(code));
    call_code = code;
  } else {
    snprintf(text, sizeof text, "connection to %s closed: %s", cn->peer, rrpc_strerror(code));
    /* A transport that refused to set up (RDMA without fallback) says why
     * in its own code; anything else is a closed connection to the caller. */
    call_code = (code == -RRPC_EDECLINED || code == -RRPC_ENODEV || code == -RRPC_EHANDSHAKE) ? code : -RRPC_ECLOSE;
  }
  /* No new call can join (closed is set), so drain without the lock held
   * while callbacks run. */
  for (;;) {
    rrpc__lock_acquire(&cn->mu);
    struct call *c = rrpc__idmap_take_any(&cn->pending);
    if (c != NULL) dl_unlink_locked(cn, c);
    rrpc__lock_release(&cn->mu);
    if (c == NULL) break;
    drop_timer(cn, c);
    complete(c, call_code, text);
  }
  dl_disarm(cn);
  pthread_mutex_lock(&ch->mu);
  if (atomic_load_explicit(&ch->conn, memory_order_relaxed) == cn) retire_locked(ch, cn);
  if (cn->live_prev) cn->live_prev->live_next = cn->live_next;
  else ch->live = cn->live_next;
  if (cn->live_next) cn->live_next->live_prev = cn->live_prev;
  ch->nconns--;
  struct conn *dead = reclaim_locked(ch);
  pthread_cond_broadcast(&ch->cv);
  pthread_mutex_unlock(&ch->mu);
  unref_retired(dead); /* the channel's reference, unless a getter may still take one */
  conn_unref(cn);      /* the socket owner's reference */
}

static const rrpc__socket_handler client_handler = {
    .on_data = client_on_data,
    .on_close = client_on_close,
};

/* A new connection. Nothing here waits: the TCP connect runs on the
 * connection's loop (rrpc__socket_connect), bounded per attempt by
 * connect_timeout_ms and retried 1 + max_retry times with backoff; calls
 * enrolled meanwhile are bounded by their own timers, so a call ends at
 * whichever deadline comes first. */
static int conn_open(rrpc_channel *ch, struct conn **out) {
  int attempts = 1 + (ch->max_retry > 0 ? ch->max_retry : 0);
  struct conn *cn = calloc(1, sizeof *cn);
  if (cn == NULL) return -ENOMEM;
  atomic_init(&cn->refs, 2); /* the channel's and the socket owner's */
  cn->ch = ch;
  cn->loop = rrpc__loop_group_next(ch->group);
  rrpc__lock_init(&cn->mu);
  rrpc__idmap_init(&cn->pending);
  snprintf(cn->peer, sizeof cn->peer, "%s", ch->addr_str);
  int rc = rrpc__socket_connect(cn->loop, (const struct sockaddr *)&ch->addr.ss, ch->addr.len, ch->connect_timeout_ms, attempts, ch->ops,
                                &client_handler, cn, &cn->sock);
  if (rc != 0) {
    rrpc__idmap_destroy(&cn->pending);
    free(cn);
    return rc;
  }
  ch->nconns++;
  cn->live_next = ch->live;
  if (ch->live) ch->live->live_prev = cn;
  ch->live = cn;
  ch->cstats.opened++;
  *out = cn;
  return 0;
}

/* pooled / short: a connection for one call. The caller gets two
 * references: one for itself, one the call holds until it completes. */
static int conn_take(rrpc_channel *ch, struct conn **out) {
  struct conn *cn = NULL;
  while (ch->conn_type == RRPC_CONNECTION_POOLED && cn == NULL && ch->nidle > 0) {
    cn = ch->idle[--ch->nidle];
    if (rrpc__socket_failed(cn->sock)) {
      conn_unref(cn); /* the pool's */
      cn = NULL;
    }
  }
  if (cn == NULL) {
    int rc = conn_open(ch, &cn); /* its "channel's" reference becomes the call's */
    if (rc != 0) return rc;
  }
  atomic_fetch_add(&cn->refs, 1);
  *out = cn;
  return 0;
}

/* A call is done with its own connection: pooled keeps it for the next
 * call (up to max_connection_pool_size idle, counted when full), short - or
 * a broken one - is closed. Any thread, never blocks beyond ch->mu. */
static void conn_release(struct conn *cn) {
  rrpc_channel *ch = cn->ch;
  int keep = 0;
  pthread_mutex_lock(&ch->mu);
  if (ch->conn_type == RRPC_CONNECTION_POOLED && !ch->closing && !rrpc__socket_failed(cn->sock)) {
    if (ch->nidle < ch->pool_max) {
      ch->idle[ch->nidle++] = cn; /* the call's reference becomes the pool's */
      keep = 1;
    } else {
      ch->cstats.pool_full_closes++;
    }
  }
  pthread_mutex_unlock(&ch->mu);
  if (keep) return;
  rrpc__socket_fail(cn->sock, -RRPC_ECLOSE);
  conn_unref(cn);
}

/* ---- the single connection without the lock --------------------------------
 * conn_get_fast takes a reference to ch->conn without ch->mu, so a call on
 * a single connection takes no channel lock. The danger is the gap between
 * loading the pointer and incrementing its count: if the channel's
 * reference were dropped there (on_close, or a slow conn_get finding it
 * broken) and the socket owner's too, the increment would land in freed
 * memory. So the channel's reference to a connection it replaces is not
 * dropped at once: retire_locked takes the connection out of ch->conn and
 * keeps the reference on ch->retired, and reclaim_locked hands the retired
 * references over for dropping only when it reads ch->getters as 0.
 *
 * Why that is enough (all accesses to conn and getters are seq_cst, so
 * they have one total order S consistent with happens-before). Take a
 * getter G that loaded connection X from ch->conn, and a reclaim R that read
 * getters == 0 after X was retired (retiring stores to ch->conn first, and
 * both run under mu, so that store precedes R's read in S). G's pin
 * precedes or follows R's read in getters' modification order:
 *  - precedes: a count of 0 means every pin before R's read has its unpin
 *    before it too (each getter unpins after it pins, and the count is the
 *    pins less the unpins), so G's unpin came first; R's read takes its
 *    value from G's unpin or a later read-modify-write of the same release
 *    sequence, so G's increment of X's count happens before R's caller
 *    drops the channel's reference, and the count never reaches 0 under G;
 *  - follows: then in S, retire's store < R's read < G's pin < G's load,
 *    and a seq_cst load reads the last store to conn before it in S
 *    (every store to conn is seq_cst): retire's NULL or a newer
 *    connection, never X (a retired connection is never published again).
 * A retired reference waits only while a getter is between pin and unpin
 * (a few instructions, unless it is preempted there). The getter whose
 * unpin brings getters to 0 then sees nretired != 0 (seq_cst too: retire's
 * increment < R's read of getters < that unpin < its load, in S) and
 * reclaims; so do the next slow conn_get and on_close, and
 * rrpc_channel_free drops whatever is left. */

/* Under mu: ch->conn is `cn` no more; keep the channel's reference. */
static void retire_locked(rrpc_channel *ch, struct conn *cn) {
  atomic_store(&ch->conn, NULL);
  cn->retired_next = ch->retired;
  ch->retired = cn;
  atomic_fetch_add(&ch->nretired, 1);
}

/* Under mu: the retired references no getter can be taking any more, to be
 * dropped (unref_retired) after mu is released; NULL if a getter is
 * between pin and unpin or none is retired. */
static struct conn *reclaim_locked(rrpc_channel *ch) {
  if (ch->retired == NULL || atomic_load(&ch->getters) != 0) return NULL;
  struct conn *list = ch->retired;
  ch->retired = NULL;
  atomic_store(&ch->nretired, 0);
  return list;
}

static void unref_retired(struct conn *list) {
  while (list != NULL) {
    struct conn *next = list->retired_next;
    conn_unref(list); /* the channel's reference */
    list = next;
  }
}

/* The current single connection with a reference for the caller, or NULL
 * (none, broken, or closing: conn_get's locked path decides). Any thread;
 * takes ch->mu only as the last getter out while references wait. */
static struct conn *conn_get_fast(rrpc_channel *ch) {
  atomic_fetch_add(&ch->getters, 1); /* pin */
  struct conn *cn = atomic_load(&ch->conn);
  if (cn != NULL && !rrpc__socket_failed(cn->sock)) atomic_fetch_add(&cn->refs, 1);
  else cn = NULL;
  if (atomic_fetch_sub(&ch->getters, 1) == 1 && /* unpin */
      atomic_load(&ch->nretired) != 0) {
    pthread_mutex_lock(&ch->mu);
    struct conn *dead = reclaim_locked(ch);
    pthread_mutex_unlock(&ch->mu);
    unref_retired(dead);
  }
  return cn;
}

/* The current connection with a reference for the caller, connecting if
 * there is none. ch->mu serializes connecting so one connection is made.
 * A single connection that is up is taken without the lock (conn_get_fast). */
static int conn_get(rrpc_channel *ch, struct conn **out) {
  if (ch->conn_type == RRPC_CONNECTION_SINGLE && (*out = conn_get_fast(ch)) != NULL) return 0;
  pthread_mutex_lock(&ch->mu);
  int rc = 0;
  if (ch->closing) {
    rc = -RRPC_ECLOSE;
  } else if (ch->conn_type != RRPC_CONNECTION_SINGLE) {
    rc = conn_take(ch, out);
  } else {
    struct conn *cur = atomic_load_explicit(&ch->conn, memory_order_relaxed); /* ours: under mu */
    if (cur != NULL && rrpc__socket_failed(cur->sock)) {
      /* Broken but its on_close has not run yet: stop handing it out. */
      retire_locked(ch, cur);
      cur = NULL;
    }
    if (cur == NULL) {
      rc = conn_open(ch, &cur);
      /* Published whole: the seq_cst store releases its fields to
       * conn_get_fast's load. */
      if (rc == 0) atomic_store(&ch->conn, cur);
    }
    if (rc == 0) {
      atomic_fetch_add(&cur->refs, 1);
      *out = cur;
    }
  }
  struct conn *dead = reclaim_locked(ch);
  pthread_mutex_unlock(&ch->mu);
  unref_retired(dead);
  return rc;
}

/* ---- calls ------------------------------------------------------------------ */

/* A prepared method (rrpc_method_new, below). */
struct rrpc_method {
  const char *service, *method; /* NUL-terminated copies in `bytes` */
  rrpc__str names;              /* the encoded fields, in `bytes` */
  char bytes[];
};

/* A request frame's parts, read by pack_request before the call is
 * enrolled (so before another thread can complete the call and reuse its
 * controller). */
struct request_pack {
  rrpc__rpc_meta meta;
  const rrpc_iobuf *request, *attachment;
  size_t max_body;
};

/* The frame appended to `out` (which may hold other frames: a socket's
 * pending output), or -RRPC_ETOOBIG / pack's error with `out` as it was. */
static int pack_request(void *arg, rrpc_iobuf *out) {
  struct request_pack *rp = arg;
  size_t before = rrpc__iobuf_length(out);
  int rc = rrpc__baidu_pack(out, &rp->meta, rp->request, rp->attachment);
  if (rc == 0 && rrpc__iobuf_length(out) - before - RRPC_BAIDU_HEADER_SIZE > rp->max_body) {
    rrpc__iobuf_truncate(out, before);
    rc = -RRPC_ETOOBIG;
  }
  return rc;
}

static void request_fill(rrpc_channel *ch, struct call *c, const char *service, const char *method,
                         const rrpc_method *pm, const rrpc_iobuf *request, int32_t timeout_ms,
                         struct request_pack *rp) {
  /* Only the fields named in `has` are read (rpc_meta's encoder), and
   * attachment_size, which pack sets: the rest is left unwritten. */
  rrpc__rpc_meta *meta = &rp->meta;
  meta->has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
  meta->attachment_size = 0;
  if (pm != NULL) {
    meta->has |= RRPC_META_HAS_NAMES_ENCODED;
    meta->names_encoded = pm->names;
  } else {
    meta->service_name = (rrpc__str){service, strlen(service)};
    meta->method_name = (rrpc__str){method, strlen(method)};
  }
  if (c->cntl->log_id != 0) {
    meta->has |= RRPC_META_HAS_LOG_ID;
    meta->log_id = c->cntl->log_id;
  }
  if (timeout_ms > 0) {
    /* The deadline travels (brpc's field): the server can tell its handler. */
    meta->has |= RRPC_META_HAS_TIMEOUT_MS;
    meta->timeout_ms = timeout_ms;
  }
  meta->correlation_id = (int64_t)c->cid;
  rp->request = request;
  rp->attachment = &c->cntl->req_att;
  rp->max_body = ch->max_body;
}

static void cancel_call(void *arg);
enum { ENROLLED_CANCELED = 1 };

rrpc__request_packed_fn rrpc__request_packed_hook;

/* Put the call on the connection (pending map + timer + canceler) unless it
 * closed. 0, ENROLLED_CANCELED (a cancel came first: its task is posted and
 * will find the call), or a negative code (not enrolled). The canceler goes
 * in under mu, before the call is in the map: once another thread can
 * complete the call, neither `c` nor its controller may be touched here. */
static int enroll(struct conn *cn, struct call *c, int32_t timeout_ms) {
  rrpc__lock_acquire(&cn->mu);
  if (cn->closed || rrpc__socket_failed(cn->sock)) {
    rrpc__lock_release(&cn->mu);
    /* A connect that failed already is this call's answer too: retrying on
     * a fresh connection would only repeat the attempts just made. */
    int code = rrpc__socket_failed(cn->sock);
    return code != 0 && !rrpc__socket_connected(cn->sock) ? code : -RRPC_ECLOSE;
  }
  /* A cancel task posted here takes mu on the loop, so it runs after the
   * call is in the map. */
  int canceled = rrpc__controller_set_canceler(c->cntl, cancel_call, c) != 0;
  int rc = rrpc__idmap_put(&cn->pending, c->cid, c);
  if (rc == 0 && timeout_ms > 0) {
    uint64_t deadline = (uint64_t)c->cntl->start_us + (uint64_t)timeout_ms * 1000u;
    rc = dl_add_locked(cn, c, deadline);
    if (rc == 0) rc = rrpc__loop_timer_add(cn->loop, deadline, on_timeout, c, &c->timer);
    else if (rc == 1) rc = 0;
    if (rc != 0) rrpc__idmap_take(&cn->pending, c->cid);
  }
  rrpc__lock_release(&cn->mu);
  return rc == 0 && canceled ? ENROLLED_CANCELED : rc;
}

/* The connection refused the request before any of it went out (its write
 * queue is over socket_max_unwritten_bytes): fail the call now with that
 * code, unless a close or a timeout finished it first. Async callbacks run
 * on the loop, never inside the call. */
static void fail_refused(struct conn *cn, struct call *c, int code) {
  rrpc__lock_acquire(&cn->mu);
  struct call *mine = take_locked(cn, c->cid);
  rrpc__lock_release(&cn->mu);
  if (mine == NULL) return;
  drop_timer(cn, c);
  char text[160];
  snprintf(text, sizeof text, "cannot send to %s: %s", cn->peer, rrpc_strerror(code));
  fail_unsent(cn->ch, c, code, text);
}

/* A cancel travels to the connection's loop as (connection, cid): the loop
 * is where the call's other endings run, so taking it out of the pending
 * map there races nothing, and the call itself may be gone by then (its
 * response won) without harm. */
struct cancel_req {
  struct conn *cn; /* holds a reference */
  uint64_t cid;
};

static void cancel_task(void *arg) {
  struct cancel_req *r = arg;
  struct conn *cn = r->cn;
  rrpc__lock_acquire(&cn->mu);
  struct call *c = take_locked(cn, r->cid);
  rrpc__lock_release(&cn->mu);
  free(r);
  if (c != NULL) {
    drop_timer(cn, c);
    complete(c, -ECANCELED, "the call was canceled");
  }
  conn_unref(cn);
}

/* The canceler of a single-server call (internal/cancel.h): runs under the
 * controller's cancel lock, on the cancelling thread, so `c` is alive. If
 * the task cannot be posted (out of memory, loops shutting down) the call
 * still ends, by its response, timeout or connection close. */
static void cancel_call(void *arg) {
  struct call *c = arg;
  struct cancel_req *r = malloc(sizeof *r);
  if (r == NULL) return;
  r->cn = c->conn;
  r->cid = c->cid;
  atomic_fetch_add(&r->cn->refs, 1);
  if (rrpc__loop_post(r->cn->loop, cancel_task, r) != 0) {
    conn_unref(r->cn);
    free(r);
  }
}

/* A connection got for a call that will not be enrolled on it. */
static void conn_drop(struct call *c, struct conn *cn) {
  if (c->held != NULL) conn_release(c->held); /* not enrolled: not this call's */
  c->held = NULL;
  conn_unref(cn);
}

static int fail_unbuilt(rrpc_channel *ch, struct call *c, int rc) {
  return fail_unsent(ch, c, rc, rc == -RRPC_ETOOBIG ? "request larger than max_body_size" : NULL);
}

/* `frame` is the request packed already, or (built 0) not yet: then, on
 * the connection's loop (its round holding the socket's deferred flush, or
 * taking the free token for it), the request is packed straight into the
 * connection's pending output before the call is enrolled
 * (rrpc__socket_pack_held: it leaves at the round's end, after the
 * enrolment, and is taken back if the call cannot be enrolled); else into
 * `frame`, once a connection is in hand. */
static int issue(rrpc_channel *ch, struct call *c, int32_t timeout_ms, struct request_pack *rp,
                 rrpc_iobuf *frame, int built) {
  char text[200];
  /* A closed connection found before the request was written is safe to
   * replace: nothing reached the server. Bounded, in case it keeps dying. */
  for (int tries = 0;; tries++) {
    struct conn *cn;
    int rc = conn_get(ch, &cn);
    if (rc != 0) {
      snprintf(text, sizeof text, "cannot connect to %s: %s", ch->addr_str, rrpc_strerror(rc));
      return fail_unsent(ch, c, rc, text);
    }
    c->conn = cn;
    if (ch->conn_type != RRPC_CONNECTION_SINGLE) c->held = cn;
    memcpy(c->cntl->remote, cn->peer, sizeof c->cntl->remote); /* same size, NUL-terminated */
    size_t mark = 0;
    int packed = !built && rrpc__socket_pack_held(cn->sock, pack_request, rp, &mark) == 0;
    if (packed && rrpc__request_packed_hook != NULL) rrpc__request_packed_hook(cn->sock, c->cntl);
    if (!packed && !built) {
      rc = pack_request(rp, frame);
      if (rc != 0) {
        conn_drop(c, cn);
        return fail_unbuilt(ch, c, rc);
      }
      built = 1;
    }
    rc = enroll(cn, c, timeout_ms);
    if (rc == 0) {
      /* From here the call belongs to the connection's loop: it may even
       * be completed before the write returns. */
      if (!packed) {
        rc = rrpc__socket_write(cn->sock, frame);
        if (rc == -RRPC_EOVERCROWDED) fail_refused(cn, c, rc);
      }
      conn_unref(cn);
      return 0;
    }
    if (packed) rrpc__socket_unpack(cn->sock, mark); /* not enrolled: it must not go out */
    if (rc == ENROLLED_CANCELED) {
      conn_unref(cn); /* its cancel task ends it; nothing needs to go out */
      return 0;
    }
    int connected = rrpc__socket_connected(cn->sock);
    conn_drop(c, cn);
    if (rc != -RRPC_ECLOSE || tries >= 3) {
      snprintf(text, sizeof text, "cannot %s %s: %s", connected ? "send to" : "connect to",
               ch->addr_str, rrpc_strerror(rc));
      return fail_unsent(ch, c, rc, text);
    }
  }
}

/* A fresh call record: each field set once (a memset of the 128-byte
 * record was a `rep stos` of 16 rounds before the fields were set again). */
static void call_init(struct call *c, rrpc_controller *cntl, rrpc_iobuf *response, rrpc_call_done done,
                      void *arg) {
  c->cid = 0;
  c->conn = NULL;
  c->cntl = cntl;
  c->response = response;
  c->done = done;
  c->arg = arg;
  c->timer = 0;
  c->deadline_us = 0;
  c->dl_prev = c->dl_next = NULL;
  c->on_dl = 0;
  c->stats = NULL;
  c->held = NULL;
  atomic_init(&c->state, 0);
  c->result = 0;
  c->next_done = NULL;
}

/* ---- prepared methods (rrpc_method) ------------------------------------------ */

int rrpc_method_new(const char *service, const char *method, rrpc_method **out) {
  if (out == NULL) return -EINVAL;
  *out = NULL;
  if (service == NULL || method == NULL) return -EINVAL;
  size_t ls = strlen(service), lm = strlen(method);
  if (ls == 0 || lm == 0 || ls > RRPC_METHOD_NAME_MAX || lm > RRPC_METHOD_NAME_MAX) return -EINVAL;
  rrpc__str s = {service, ls}, m = {method, lm};
  size_t ln = rrpc__rpc_meta_names_size(s, m);
  rrpc_method *pm = malloc(sizeof *pm + ls + 1 + lm + 1 + ln);
  if (pm == NULL) return -ENOMEM;
  char *p = pm->bytes;
  memcpy(p, service, ls + 1);
  pm->service = p;
  p += ls + 1;
  memcpy(p, method, lm + 1);
  pm->method = p;
  p += lm + 1;
  pm->names = (rrpc__str){p, rrpc__rpc_meta_names_encode(s, m, (uint8_t *)p)};
  *out = pm;
  return 0;
}

void rrpc_method_free(rrpc_method *m) { free(m); }

const char *rrpc_method_service(const rrpc_method *m) { return m ? m->service : NULL; }

const char *rrpc_method_name(const rrpc_method *m) { return m ? m->method : NULL; }

/* ---- calls ------------------------------------------------------------------ */

/* Both entry points, their arguments checked; `pm` NULL or the prepared
 * form of service.method. One body for both (inlined into each, it kept
 * neither the request's building nor its issue inline). */
static int call_start(rrpc_channel *ch, const char *service, const char *method, const rrpc_method *pm,
                      rrpc_controller *cntl, const rrpc_iobuf *request, rrpc_iobuf *response,
                      rrpc_call_done done, void *arg) {
  cntl->error_code = 0;
  cntl->error_text[0] = '\0';
  cntl->remote[0] = '\0';
  cntl->local[0] = '\0';
  cntl->used_rdma = 0;
  cntl->responded = 0;
  rrpc__iobuf_destroy(&cntl->resp_att);
  rrpc__iobuf_init(&cntl->resp_att);
  cntl->start_us = (int64_t)rrpc__now_us();
  if (ch->cluster != NULL)
    return rrpc__cluster_call(ch->cluster, service, method, cntl, request, response, done, arg);
  int32_t timeout_ms = cntl->timeout_ms != 0 ? cntl->timeout_ms : ch->timeout_ms;

  /* A sync call's record lives on this frame; an async one's in the
   * controller, which carries one call at a time and outlives it (no
   * malloc/free per call, and no free on the loop of memory allocated by
   * the caller's thread). */
  struct call local;
  struct call *c = done != NULL ? (struct call *)(void *)cntl->call_space : &local;
  call_init(c, cntl, response, done, arg);
  rrpc__controller_call_begin(cntl);
  c->cid = atomic_fetch_add(&ch->next_cid, 1);
  c->stats = ch->stats;
  if (rrpc__metrics_on()) rrpc__call_stats_begin(c->stats);

  if (done == NULL && rrpc__loop_current() != NULL)
    return fail_unsent(ch, c, -EDEADLK,
                       "a synchronous call from an rrpc loop thread would deadlock (in-loop handlers and "
                       "completions run there): call asynchronously, or run the handler on the pool");

  if (cntl->deadline_us != 0) {
    /* An inherited deadline caps this call's timeout. */
    int64_t left_us = cntl->deadline_us - cntl->start_us;
    if (left_us <= 0)
      return fail_unsent(ch, c, -RRPC_ERPCTIMEDOUT, "the deadline inherited from the caller has passed");
    int64_t left_ms = (left_us + 999) / 1000;
    if (timeout_ms < 0 || left_ms < timeout_ms) timeout_ms = (int32_t)(left_ms > INT32_MAX ? INT32_MAX : left_ms);
  }

  struct request_pack rp;
  request_fill(ch, c, service, method, pm, request, timeout_ms, &rp);
  rrpc_iobuf frame;
  rrpc__iobuf_init(&frame);
  /* A synchronous call (never on a loop) packs its request now, into a
   * frame of its own; an asynchronous one may be on its connection's loop,
   * where issue packs it into the connection's pending output instead. */
  int built = done == NULL;
  int rc = built ? pack_request(&rp, &frame) : 0;
  if (rc != 0) {
    rrpc__iobuf_destroy(&frame);
    return fail_unbuilt(ch, c, rc);
  }
  uint64_t lent = rrpc__round_lend((uint64_t)cntl->start_us); /* the write stamps with the call's read */
  rc = issue(ch, c, timeout_ms, &rp, &frame, built);
  rrpc__round_unlend(lent);
  rrpc__iobuf_destroy(&frame);
  if (done != NULL) return rc;
  futex_wait_while(&c->state, 0); /* returns at once if it failed unsent */
  return c->result;
}

int rrpc_channel_call(rrpc_channel *ch, const char *service, const char *method, rrpc_controller *cntl,
                      const rrpc_iobuf *request, rrpc_iobuf *response, rrpc_call_done done,
                      void *arg) {
  if (ch == NULL || service == NULL || method == NULL || cntl == NULL) return -EINVAL;
  return call_start(ch, service, method, NULL, cntl, request, response, done, arg);
}

int rrpc_channel_call_method(rrpc_channel *ch, const rrpc_method *m, rrpc_controller *cntl,
                             const rrpc_iobuf *request, rrpc_iobuf *response, rrpc_call_done done,
                             void *arg) {
  if (ch == NULL || m == NULL || cntl == NULL) return -EINVAL;
  return call_start(ch, m->service, m->method, m, cntl, request, response, done, arg);
}

/* ---- channel lifetime ----------------------------------------------------- */

int rrpc_channel_new(const char *addr, const rrpc_channel_options *opts, rrpc_channel **out) {
  rrpc_channel_options o;
  memset(&o, 0, sizeof o);
  if (opts != NULL) o = *opts;
  rrpc_channel *ch = calloc(1, sizeof *ch);
  if (ch == NULL) return -ENOMEM;
  int rc = rrpc__addr_parse_any(addr, &ch->addr);
  if (rc == 0 && rrpc__addr_is_any(&ch->addr)) {
    RRPC_LOG(ERROR, "channel to %s: %s is a wildcard address (a server listens on it; no server can be "
             "called there): use the server's own address, 127.0.0.1 or ::1 for this host", addr, addr);
    rc = -EINVAL;
  }
  /* A unix socket has no RDMA device behind it: it always speaks plain. */
  if (rc == 0 && (o.rdma_dialect < 0 || o.rdma_dialect > RRPC_RDMA_DIALECT_BRPC)) rc = -EINVAL;
  if (rc == 0)
    rc = rrpc__transport_pick(
        ch->addr.ss.ss_family == AF_UNIX ? 0 : rrpc__transport_rdma_want(o.use_rdma, o.rdma_dialect), &ch->ops);
  if (rc == 0) rc = rrpc__loop_group_global(0, &ch->group);
  if (rc == 0) rc = rrpc__call_stats_new(&ch->stats);
  if (rc != 0) {
    free(ch);
    return rc;
  }
  rrpc__sockaddr_str((const struct sockaddr *)&ch->addr.ss, ch->addr.len, ch->addr_str, sizeof ch->addr_str);
  (void)rrpc__stats_register(RRPC__STATS_CHANNEL, 0, NULL, NULL, ch->addr_str, ch->stats, &ch->reg);
  ch->timeout_ms = o.timeout_ms != 0 ? o.timeout_ms : DEFAULT_TIMEOUT_MS;
  ch->connect_timeout_ms = o.connect_timeout_ms > 0 ? o.connect_timeout_ms : DEFAULT_CONNECT_TIMEOUT_MS;
  ch->max_retry = o.max_retry != 0 ? o.max_retry : DEFAULT_MAX_RETRY;
  ch->max_body = o.max_body_size ? o.max_body_size : RRPC_BAIDU_DEFAULT_MAX_BODY;
  ch->conn_type = o.connection_type;
  ch->pool_max = o.max_connection_pool_size > 0 ? o.max_connection_pool_size : DEFAULT_POOL_MAX;
  if (ch->conn_type < RRPC_CONNECTION_SINGLE || ch->conn_type > RRPC_CONNECTION_SHORT) {
    rrpc__stats_unregister(ch->reg);
    rrpc__call_stats_free(ch->stats);
    free(ch);
    return -EINVAL;
  }
  if (ch->conn_type == RRPC_CONNECTION_POOLED) {
    ch->idle = calloc((size_t)ch->pool_max, sizeof *ch->idle);
    if (ch->idle == NULL) {
      rrpc__stats_unregister(ch->reg);
      rrpc__call_stats_free(ch->stats);
      free(ch);
      return -ENOMEM;
    }
  }
  pthread_mutex_init(&ch->mu, NULL);
  pthread_cond_init(&ch->cv, NULL);
  atomic_init(&ch->next_cid, 1);
  atomic_init(&ch->late_responses, 0);
  atomic_init(&ch->conn, NULL);
  atomic_init(&ch->getters, 0);
  atomic_init(&ch->nretired, 0);
  *out = ch;
  return 0;
}

int rrpc_channel_new_lb(const char *naming_url, const char *lb, const rrpc_channel_options *opts,
                        rrpc_channel **out) {
  if (naming_url == NULL || out == NULL) return -EINVAL;
  rrpc_channel *ch = calloc(1, sizeof *ch);
  if (ch == NULL) return -ENOMEM;
  int rc = rrpc__transport_pick(opts != NULL ? rrpc__transport_rdma_want(opts->use_rdma, opts->rdma_dialect) : 0,
                                &ch->ops);
  if (rc == 0) rc = rrpc__cluster_new(naming_url, lb, opts, &ch->cluster);
  if (rc != 0) {
    free(ch);
    return rc;
  }
  *out = ch;
  return 0;
}

int rrpc_channel_cluster_stats(const rrpc_channel *ch, rrpc_cluster_stats *out) {
  if (ch == NULL || ch->cluster == NULL || out == NULL) return -EINVAL;
  rrpc__cluster_stats(ch->cluster, out);
  return 0;
}

void rrpc_channel_free(rrpc_channel *ch) {
  if (ch == NULL) return;
  if (ch->cluster != NULL) {
    rrpc__cluster_free(ch->cluster);
    free(ch);
    return;
  }
  pthread_mutex_lock(&ch->mu);
  ch->closing = 1;
  for (struct conn *cn = ch->live; cn != NULL; cn = cn->live_next) rrpc__socket_fail(cn->sock, -RRPC_ECLOSE);
  while (ch->nconns > 0 || ch->handoffs > 0) pthread_cond_wait(&ch->cv, &ch->mu);
  /* No call may run any more (the caller's contract), so no getter either. */
  struct conn *dead = ch->retired;
  ch->retired = NULL;
  pthread_mutex_unlock(&ch->mu);
  unref_retired(dead);
  for (int i = 0; i < ch->nidle; i++) conn_unref(ch->idle[i]); /* the pool's */
  free(ch->idle);
  rrpc__stats_unregister(ch->reg);
  rrpc__call_stats_free(ch->stats);
  pthread_mutex_destroy(&ch->mu);
  pthread_cond_destroy(&ch->cv);
  free(ch);
}

int rrpc_channel_connection_stats(const rrpc_channel *ch, rrpc_channel_conn_stats *out) {
  if (ch == NULL || out == NULL || ch->cluster != NULL) return -EINVAL;
  rrpc_channel *m = (rrpc_channel *)ch; /* the lock, not the data, changes */
  pthread_mutex_lock(&m->mu);
  *out = ch->cstats;
  out->live = (uint64_t)ch->nconns;
  out->idle = (uint64_t)ch->nidle;
  pthread_mutex_unlock(&m->mu);
  return 0;
}

int rrpc_channel_stats(const rrpc_channel *ch, rrpc_call_stats *out) {
  if (ch->cluster != NULL) return -EINVAL;
  rrpc__call_stats_read(ch->stats, out);
  return 0;
}

uint64_t rrpc_channel_late_responses(const rrpc_channel *ch) {
  return atomic_load_explicit(&ch->late_responses, memory_order_relaxed);
}

/* ---- remote memory (rrpc/remote.h) ---------------------------------------- */

int rrpc_channel_remote_link(rrpc_channel *ch, rrpc_remote_link **out) {
  if (ch == NULL || out == NULL || ch->conn_type != RRPC_CONNECTION_SINGLE) return -EINVAL;
  struct conn *cn;
  int rc = conn_get(ch, &cn);
  if (rc != 0) return rc;
  rc = rrpc__rmt_link_of(cn->sock, out);
  conn_unref(cn);
  return rc;
}
