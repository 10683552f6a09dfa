/* remote/link.c - one connection's remote memory (rrpc/remote.h's link):
 * the owner and peer tables (table.h), the transfer queue (ops.h) and
 * their carriage. Control messages always ride the connection's byte
 * stream as tcp_frames.h frames (link.h says why). The bytes move one-sided
 * (carriage.h) when the connection carries RDMA and the peer announced the
 * region with a key; otherwise in frames too, and the owner copies: a WRITE
 * frame's payload into the region, a READ_RESP's out of it. */
#include "rrpc/remote/link.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "rrpc/errors.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/internal/loop.h"
#include "rrpc/internal/socket.h"
#include "rrpc/remote/carriage.h"
#include "rrpc/remote/limits.h"
#include "rrpc/remote/ops.h"
#include "rrpc/remote/table.h"
#include "rrpc/remote/tcp_frames.h"

/* Piece size and pieces in flight are rrpc_remote_limits, taken per link;
 * the ring tables below are sized for the most max_inflight may be. */
enum {
  LINK_MAX_FRAME = RRPC_RMT_TCP_MAX_FRAME_DEFAULT, /* the largest frame accepted */
  LINK_SLOTS = RRPC__RMT_INFLIGHT_CAP,
};

struct rrpc_remote_region {
  rrpc_remote_link *l; /* a handle */
  uint8_t *buf;
  size_t len;
  uint8_t rights;     /* 0: local only */
  uint32_t id, generation;
  int revoked;        /* under l->mu */
  struct rrpc__rmt_car_mr *mr; /* RDMA: its registration (set once, under l->mu) */
  uint32_t rkey;      /* the window's, 0 when announced without one */
  struct rrpc_remote_region *next; /* l->regions, under l->mu */
};

/* One transfer in the queue. */
struct xop {
  struct rrpc__rmt_op base; /* first: the queue hands it back */
  rrpc_remote_link *l;
  int is_write;
  uint8_t *local;
  uint32_t id, generation;
  uint64_t roff;
  int notify;
  uint32_t tag;
  int rdma;      /* one-sided: pieces posted on the QP */
  uint32_t lkey; /* rdma: the local region's */
  struct rrpc__rmt_entry entry; /* what it was checked against (NOTIFY) */
  void (*done)(void *arg, int status);
  void *arg;
  int status;
  struct xop *done_next;
};

/* A frame sent and not answered: answers come in the order requests went. */
struct sent {
  struct xop *op;
  uint64_t offset; /* within the op */
  uint32_t length, opno;
};

struct rrpc_remote_link {
  atomic_int refs; /* the socket's attachment, and one per handle */
  rrpc__socket *s; /* borrowed: every handle also holds a reference on it */
  pthread_mutex_t mu;
  struct rrpc__rmt_conn conn;
  struct rrpc__rmt_opq q;
  int failed; /* the connection's error, once it closed */
  rrpc_remote_notify_fn notify;
  void *notify_arg;
  struct rrpc_remote_region *regions; /* announced and local ones */
  struct sent sent[LINK_SLOTS];
  struct rrpc__rmt_car *car; /* the one-sided carriage, once seen (lives with the socket; under mu) */
  atomic_int car_known;      /* car is set: no more lookups */
  struct posted {
    struct xop *op;
    uint64_t seq; /* the wr_id it was posted with */
    int hold;     /* its NOTIFY is not sent yet: the poster completes it */
    int wc_seen, wc_status; /* its completion, while held */
    int err;      /* its NOTIFY could not be sent: the piece fails with this */
  } posted[LINK_SLOTS];
  uint64_t posted_seq;
  /* The posting token (see pump_locked): one thread at a time posts this
   * link's pieces, outside mu. */
  int posting;
  int end_due;    /* the link closed while the token was taken: its holder ends the pieces */
  int pump_queued; /* queued for the poster thread (under mu) */
  struct rrpc_remote_link *poster_next;
  uint32_t sent_head, sent_n, next_opno;
  struct xop *done_head, *done_tail; /* completed, callbacks not run yet */
  rrpc_remote_link_stats st;
  size_t piece; /* rrpc_remote_limits.piece_size when made */
};

/* ---- lifetime ------------------------------------------------------------- */

static void link_unref(rrpc_remote_link *l) {
  if (atomic_fetch_sub(&l->refs, 1) != 1) return;
  rrpc__rmt_conn_fini(&l->conn);
  pthread_mutex_destroy(&l->mu);
  free(l);
}

static void ext_release(void *ext) { link_unref(ext); }
static void ext_on_close(void *ext, rrpc__socket *s, int code);
static const rrpc__socket_ext_ops k_ext_ops = {.on_close = ext_on_close, .release = ext_release};

static uint64_t random64(void) {
  uint64_t v = 0;
  while (v == 0)
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) v = (uint64_t)(uintptr_t)&v ^ 0x9e3779b97f4a7c15ull;
  return v;
}

/* The transport's state is the socket's loop thread's: the carriage is
 * looked up there - on every delivery until found (a channel's link may be
 * made while its connection still shakes hands), and once when a handle is
 * taken on another thread (a round trip to the loop). */
static void note_car_on_loop(rrpc_remote_link *l) {
  if (atomic_load_explicit(&l->car_known, memory_order_acquire) || rrpc__socket_failed(l->s)) return;
  struct rrpc__rmt_car *c = rrpc__rmt_car_of(l->s);
  if (c == NULL) return;
  pthread_mutex_lock(&l->mu);
  l->car = c;
  pthread_mutex_unlock(&l->mu);
  atomic_store_explicit(&l->car_known, 1, memory_order_release);
}

struct car_probe {
  rrpc_remote_link *l;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
};

static void car_probe_task(void *arg) {
  struct car_probe *p = arg;
  note_car_on_loop(p->l);
  pthread_mutex_lock(&p->mu);
  p->done = 1;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static void note_car(rrpc_remote_link *l) {
  if (atomic_load_explicit(&l->car_known, memory_order_acquire)) return;
  rrpc__loop *loop = rrpc__socket_loop(l->s);
  if (rrpc__loop_in_thread(loop)) {
    note_car_on_loop(l);
    return;
  }
  struct car_probe p = {.l = l, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
  if (rrpc__loop_post(loop, car_probe_task, &p) != 0) return; /* the loop stops: frames then */
  pthread_mutex_lock(&p.mu);
  while (!p.done) pthread_cond_wait(&p.cv, &p.mu);
  pthread_mutex_unlock(&p.mu);
}

void rrpc__rmt_on_data(rrpc__socket *s) {
  rrpc_remote_link *l = rrpc__socket_ext(s);
  if (l != NULL) note_car_on_loop(l);
}

int rrpc__rmt_link_of(rrpc__socket *s, rrpc_remote_link **out) {
  rrpc_remote_link *l = rrpc__socket_ext(s);
  if (l == NULL) {
    rrpc_remote_link *n = calloc(1, sizeof *n);
    if (n == NULL) return -ENOMEM;
    rrpc_remote_limits lim;
    rrpc_remote_limits_get(&lim);
    n->piece = lim.piece_size;
    if (rrpc__rmt_conn_init(&n->conn, random64(), (uint32_t)random64(), lim.max_regions) != 0 ||
        rrpc__rmt_opq_init(&n->q, (uint32_t)lim.piece_size, (uint32_t)lim.max_inflight) != 0) {
      free(n);
      return -EINVAL;
    }
    atomic_init(&n->refs, 1);
    n->s = s;
    pthread_mutex_init(&n->mu, NULL);
    l = rrpc__socket_ext_install(s, n, &k_ext_ops);
    if (l != n) link_unref(n);
  }
  atomic_fetch_add(&l->refs, 1);
  rrpc__socket_ref(s);
  note_car(l);
  *out = l;
  return 0;
}

void rrpc_remote_link_release(rrpc_remote_link *l) {
  if (l == NULL) return;
  rrpc__socket *s = l->s;
  link_unref(l); /* the socket's attachment keeps l while s lives */
  rrpc__socket_unref(s);
}

rrpc__socket *rrpc__rmt_link_socket(const rrpc_remote_link *l) { return l->s; }

static int link_error_locked(const rrpc_remote_link *l) {
  if (l->failed) return l->failed;
  int f = rrpc__socket_failed(l->s);
  return f ? (f < 0 ? f : -RRPC_ECLOSE) : 0;
}

int rrpc_remote_link_failed(const rrpc_remote_link *l) {
  rrpc_remote_link *m = (rrpc_remote_link *)l;
  pthread_mutex_lock(&m->mu);
  int rc = link_error_locked(m);
  pthread_mutex_unlock(&m->mu);
  return rc;
}

void rrpc_remote_link_set_notify(rrpc_remote_link *l, rrpc_remote_notify_fn fn, void *arg) {
  pthread_mutex_lock(&l->mu);
  l->notify = fn;
  l->notify_arg = arg;
  pthread_mutex_unlock(&l->mu);
}

void rrpc_remote_link_get_stats(rrpc_remote_link *l, rrpc_remote_link_stats *out) {
  pthread_mutex_lock(&l->mu);
  *out = l->st;
  out->ops_ok = l->q.stats.ops_ok;
  out->ops_failed = l->q.stats.ops_failed;
  out->pieces = l->q.stats.pieces;
  out->bad_notify = l->conn.stats.bad_notify;
  out->refused_full = l->conn.stats.refused_full;
  out->protocol_errors = l->conn.stats.protocol_errors;
  out->live_regions = l->conn.n_own;
  out->peer_regions = l->conn.n_peer;
  out->rdma = l->car != NULL;
  pthread_mutex_unlock(&l->mu);
}

/* ---- sending frames ------------------------------------------------------- */

static void keep_user_bytes(void *data, void *arg) { (void)data, (void)arg; }

/* One frame: header, then payload - in the stream's order, which is the
 * order of these calls under l->mu. share: the payload is the application's
 * local region, unchanged until its transfer completes (after the owner's
 * answer, so after these bytes left): sent from where it is, not copied. */
static int send_frame_locked(rrpc_remote_link *l, const struct rrpc__rmt_tcp_hdr *h, const void *payload,
                             size_t n, int share) {
  uint8_t hdr[RRPC_RMT_TCP_HDR_LEN];
  int rc = rrpc__rmt_tcp_encode(h, hdr);
  if (rc != 0) return rc;
  rrpc_iobuf buf;
  rrpc__iobuf_init(&buf);
  rc = rrpc_iobuf_append(&buf, hdr, sizeof hdr);
  if (rc == 0 && n > 0)
    rc = share ? rrpc_iobuf_append_user(&buf, (void *)payload, n, NULL, keep_user_bytes, NULL)
               : rrpc_iobuf_append(&buf, payload, n);
  if (rc == 0) rc = rrpc__socket_write(l->s, &buf);
  rrpc__iobuf_destroy(&buf);
  return rc;
}

static int send_ctl_locked(rrpc_remote_link *l, const uint8_t msg[RRPC_RMT_MSG_LEN]) {
  struct rrpc__rmt_tcp_hdr h = {.type = RRPC_RMT_TCP_CTL, .length = RRPC_RMT_MSG_LEN};
  return send_frame_locked(l, &h, msg, RRPC_RMT_MSG_LEN, 0);
}

/* ---- completions ---------------------------------------------------------- */

static void op_cb(struct rrpc__rmt_op *op, int status) {
  struct xop *x = (struct xop *)op;
  rrpc_remote_link *l = x->l;
  x->status = status;
  x->done_next = NULL;
  if (l->done_tail) l->done_tail->done_next = x;
  else l->done_head = x;
  l->done_tail = x;
}

/* Take the completed ops (under mu), to call back after unlocking. */
static struct xop *take_done_locked(rrpc_remote_link *l) {
  struct xop *x = l->done_head;
  l->done_head = l->done_tail = NULL;
  return x;
}

static void run_done(struct xop *x) {
  while (x != NULL) {
    struct xop *next = x->done_next;
    x->done(x->arg, x->status);
    free(x);
    x = next;
  }
}

/* ---- the accessing side: pieces as frames ----------------------------------- */

/* A posted piece's completion (status 0 or negative): the slot is freed. */
static void piece_wc_locked(rrpc_remote_link *l, struct posted *e, int status) {
  struct xop *x = e->op;
  e->op = NULL;
  if (status == 0) status = e->err;
  /* A failed piece leaves the QP in error: nothing more goes out. */
  if (status != 0) rrpc__rmt_opq_fail(&l->q, status);
  rrpc__rmt_opq_piece_done(&l->q, &x->base, status);
}

/* What a post needs, copied under mu: the op may complete (and be freed)
 * while its last piece is being posted. */
struct post_args {
  int is_write;
  void *local;
  uint32_t lkey, length, rkey;
  uint64_t raddr;
};

/* One piece as an RDMA WRITE/READ, posted outside mu by the posting
 * token's holder (pump_locked): called and returns with mu held. On
 * Soft-RoCE a post does the whole transfer inside ibv_post_send (hundreds
 * of ms for 1 MiB under QEMU TCG), and the loop thread takes mu for every
 * completion and control frame.
 * - The slot and wr_id are recorded before the post: the completion may
 *   reach rrpc__rmt_link_on_wc before this thread locks again. A post that
 *   fails undoes them (no completion comes for it).
 * - The carriage lives with the socket (the transport's state, freed when
 *   the socket is): a reference on the socket keeps it across the post, and
 *   the carriage keeps the QP valid while a post runs (carriage.c). A close
 *   meanwhile (ext_on_close, on the loop under mu) waits for nothing: it
 *   fails the link and leaves ending the posted pieces to this thread, so
 *   no op completes - and no application frees its memory - while a post
 *   still reads it.
 * - NOTIFY: its control frame goes after the op's last WRITE was posted, on
 *   the same QP, so RC delivers it after every byte of those writes was
 *   placed. Until it is sent the last piece is held: its completion does not
 *   complete the op, so the writer never hears "done" before the NOTIFY
 *   left. */
static int post_piece_unlocked(rrpc_remote_link *l, const struct rrpc__rmt_piece *p) {
  struct xop *x = (struct xop *)p->op;
  int notify = x->notify && p->last;
  struct rrpc__rmt_entry entry = x->entry;
  uint64_t roff = x->roff, oplen = x->base.length;
  uint32_t tag = x->tag;
  struct post_args a = {.is_write = x->is_write,
                        .local = x->local + p->offset,
                        .lkey = x->lkey,
                        .length = p->length,
                        .rkey = x->entry.rkey,
                        .raddr = x->entry.addr + x->roff + p->offset};
  uint64_t seq = ++l->posted_seq;
  struct posted *e = &l->posted[seq % LINK_SLOTS];
  *e = (struct posted){.op = x, .seq = seq, .hold = notify};
  struct rrpc__rmt_car *car = l->car;
  rrpc__socket *s = l->s;
  rrpc__socket_ref(s); /* alive: the link has not failed, so the socket's close has not run */
  pthread_mutex_unlock(&l->mu);
  int rc = rrpc__rmt_car_post(car, a.is_write, a.local, a.lkey, a.length, a.raddr, a.rkey, seq);
  rrpc__socket_unref(s);
  pthread_mutex_lock(&l->mu);
  /* A close meanwhile leaves the slots to the token's holder (end_due): the
   * slot is still this piece's unless its completion came. */
  int mine = e->op != NULL && e->seq == seq;
  if (rc != 0) {
    if (mine) {
      e->op = NULL;
      rrpc__rmt_opq_fail(&l->q, rc);
      rrpc__rmt_opq_unpost(&l->q, p, rc);
    }
    return rc;
  }
  if (!notify || !mine) return 0;
  int nrc = l->failed;
  if (nrc == 0) {
    uint8_t msg[RRPC_RMT_MSG_LEN];
    nrc = rrpc__rmt_tx_notify(&l->conn, &entry, roff, oplen, tag, msg);
    if (nrc == 0) nrc = send_ctl_locked(l, msg);
  }
  e->hold = 0;
  e->err = nrc;
  if (nrc != 0) rrpc__rmt_opq_fail(&l->q, nrc); /* the socket is failing: nothing more goes out */
  if (e->wc_seen) piece_wc_locked(l, e, e->wc_status);
  return nrc;
}

static int send_piece_locked(rrpc_remote_link *l, const struct rrpc__rmt_piece *p) {
  struct xop *x = (struct xop *)p->op;
  if (x->rdma) return post_piece_unlocked(l, p);
  struct rrpc__rmt_tcp_hdr h = {.type = x->is_write ? RRPC_RMT_TCP_WRITE : RRPC_RMT_TCP_READ_REQ,
                                .op = ++l->next_opno,
                                .id = x->id,
                                .generation = x->generation,
                                .offset = x->roff + p->offset,
                                .length = p->length};
  int rc = send_frame_locked(l, &h, x->is_write ? x->local + p->offset : NULL, x->is_write ? p->length : 0, 1);
  if (rc != 0) {
    /* The socket failed (its close fails the rest): this piece ends now. */
    rrpc__rmt_opq_fail(&l->q, rc);
    rrpc__rmt_opq_unpost(&l->q, p, rc);
    return rc;
  }
  struct sent *e = &l->sent[(l->sent_head + l->sent_n++) % LINK_SLOTS];
  *e = (struct sent){.op = x, .offset = p->offset, .length = p->length, .opno = h.op};
  /* The owner handles frames in stream order: this NOTIFY reaches it after
   * every WRITE of the op was applied. */
  if (x->is_write && x->notify && p->last) {
    uint8_t msg[RRPC_RMT_MSG_LEN];
    rc = rrpc__rmt_tx_notify(&l->conn, &x->entry, x->roff, x->base.length, x->tag, msg);
    if (rc == 0) rc = send_ctl_locked(l, msg);
    /* The frame is sent and will be answered: the queue fails, not it. */
    if (rc != 0) rrpc__rmt_opq_fail(&l->q, rc);
  }
  return rc;
}

/* The link closed: no completion comes any more (the socket's transport
 * lets go of them), so every transfer ends here, once. */
static void end_pieces_locked(rrpc_remote_link *l) {
  l->end_due = 0;
  memset(l->posted, 0, sizeof l->posted); /* late completions find nothing */
  rrpc__rmt_opq_abandon(&l->q);
}

static int queue_poster_locked(rrpc_remote_link *l);

/* Hand out what is due, in order. One-sided pieces are posted outside mu
 * (post_piece_unlocked), so one thread at a time holds the posting token
 * and posts them; a thread that finds it taken returns at once - a loop
 * thread never waits for a post - and what it queued or let go is the
 * holder's: the holder asks the queue again under mu before it lets go of
 * the token. A turn posts at most one window (max_inflight pieces): the
 * completions come in while it posts, so without a bound a submitter would
 * post a whole transfer itself; what is due after it goes to the poster
 * thread (which serves the links in turns the same way). Frames are
 * written under mu: rrpc__socket_write does not block. */
static void pump_locked(rrpc_remote_link *l) {
  if (l->posting) return;
  l->posting = 1;
  for (;;) {
    uint32_t budget = l->q.max_inflight;
    struct rrpc__rmt_piece p;
    while (budget > 0 && !l->failed && rrpc__rmt_opq_next(&l->q, &p) == 1) {
      budget--;
      if (send_piece_locked(l, &p) != 0) break; /* the queue failed: its close ends the rest */
    }
    if (budget > 0 || l->failed || !rrpc__rmt_opq_has_next(&l->q)) break;
    if (queue_poster_locked(l)) break; /* else no poster thread: go on here */
  }
  l->posting = 0;
  if (l->end_due) end_pieces_locked(l);
}

/* The poster: one process-wide thread that posts the one-sided pieces a
 * completion lets go. A software RDMA device (rxe) does a post's transfer
 * inside ibv_post_send - on loopback the receiver's side too: a 1 MiB WRITE
 * cost 315 - 484 ms of guest CPU under QEMU TCG - so a loop thread never
 * posts them; on a NIC a post is a doorbell and the hop costs a wake-up.
 * A queued link holds a reference; it posts outside mu holding the link's
 * posting token (pump_locked), and its close never waits for it. */
static struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rrpc_remote_link *head, *tail;
  int started; /* 1 running, -1 could not start (the loop posts then) */
} g_poster = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0};

static void *poster_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&g_poster.mu);
    while (g_poster.head == NULL) pthread_cond_wait(&g_poster.cv, &g_poster.mu);
    rrpc_remote_link *l = g_poster.head;
    g_poster.head = l->poster_next;
    if (g_poster.head == NULL) g_poster.tail = NULL;
    pthread_mutex_unlock(&g_poster.mu);
    pthread_mutex_lock(&l->mu);
    l->pump_queued = 0;
    if (!l->failed) pump_locked(l);
    struct xop *done = take_done_locked(l);
    pthread_mutex_unlock(&l->mu);
    run_done(done);
    link_unref(l);
  }
  return NULL;
}

/* Queue l for the poster thread: 1 when it is (or already was), 0 when no
 * poster thread could start. */
static int queue_poster_locked(rrpc_remote_link *l) {
  if (l->pump_queued) return 1;
  pthread_mutex_lock(&g_poster.mu);
  if (g_poster.started == 0) {
    pthread_t t;
    g_poster.started = pthread_create(&t, NULL, poster_main, NULL) == 0 ? 1 : -1;
    if (g_poster.started == 1) {
      pthread_setname_np(t, "rrpc_rmt_post"); /* its CPU shows apart in per-thread figures */
      pthread_detach(t);
    }
  }
  int ok = g_poster.started == 1;
  if (ok) {
    atomic_fetch_add(&l->refs, 1);
    l->pump_queued = 1;
    l->poster_next = NULL;
    if (g_poster.tail) g_poster.tail->poster_next = l;
    else g_poster.head = l;
    g_poster.tail = l;
    pthread_cond_signal(&g_poster.cv);
  }
  pthread_mutex_unlock(&g_poster.mu);
  return ok;
}

/* On the loop thread, after a completion: let the poster post what is due. */
static void pump_later_locked(rrpc_remote_link *l) {
  /* Nothing due (the usual case when the submitter keeps within the
   * in-flight bound and posts itself): no wake-up of the poster. */
  if (l->pump_queued || l->failed || !rrpc__rmt_opq_has_next(&l->q)) return;
  if (!queue_poster_locked(l)) pump_locked(l);
}

/* The connection's carriage, once noted (note_car). */
static struct rrpc__rmt_car *car_locked(rrpc_remote_link *l) { return l->car; }

/* A window's bind that did not complete within bind_wait_ms. */
static void count_bind_timeout(rrpc_remote_link *l) {
  pthread_mutex_lock(&l->mu);
  l->st.bind_timeouts++;
  pthread_mutex_unlock(&l->mu);
}

/* A local region used over RDMA needs an MR; one registered before the
 * connection carried RDMA gets it at its first one-sided transfer. */
static int ensure_local_mr(rrpc_remote_link *l, rrpc_remote_region *r) {
  pthread_mutex_lock(&l->mu);
  struct rrpc__rmt_car *car = r->mr == NULL ? car_locked(l) : NULL;
  pthread_mutex_unlock(&l->mu);
  if (car == NULL) return 0;
  struct rrpc__rmt_car_mr *mr;
  uint32_t rkey;
  int rc = rrpc__rmt_car_reg(car, r->buf, r->len, 0, &mr, &rkey);
  if (rc == -ETIMEDOUT) count_bind_timeout(l);
  if (rc != 0) return rc;
  pthread_mutex_lock(&l->mu);
  int mine = r->mr == NULL;
  if (mine) r->mr = mr;
  pthread_mutex_unlock(&l->mu);
  if (!mine) rrpc__rmt_car_free(mr);
  return 0;
}

static int submit(rrpc_remote_link *l, const rrpc_remote_xfer *x, int is_write) {
  if (l == NULL || x == NULL || x->local == NULL || x->done == NULL || x->local->l != l) return -EINVAL;
  if ((x->flags & ~(unsigned)RRPC_REMOTE_NOTIFY) || (!is_write && x->flags)) return -EINVAL;
  if (!rrpc__rmt_in_range(x->local->len, x->local_offset, x->length)) return -EINVAL;
  int mrc = ensure_local_mr(l, x->local);
  if (mrc != 0) return mrc;
  struct xop *op = calloc(1, sizeof *op);
  if (op == NULL) return -ENOMEM;
  uint8_t rights = is_write ? RRPC_REMOTE_WRITE : RRPC_REMOTE_READ;
  pthread_mutex_lock(&l->mu);
  int rc = link_error_locked(l);
  if (rc == 0)
    rc = x->token ? rrpc__rmt_peer_check_token(&l->conn, x->token->bytes, RRPC_REMOTE_TOKEN_LEN, x->remote_offset,
                                               x->length, rights, &op->entry)
                  : rrpc__rmt_peer_check(&l->conn, x->remote_id, x->remote_offset, x->length, rights, &op->entry);
  if (rc == 0) {
    op->base.length = x->length;
    op->base.cb = op_cb;
    op->l = l;
    op->is_write = is_write;
    op->local = x->local->buf + x->local_offset;
    op->id = op->entry.id;
    op->generation = op->entry.generation;
    op->roff = x->remote_offset;
    op->notify = (x->flags & RRPC_REMOTE_NOTIFY) != 0;
    op->tag = x->tag;
    op->done = x->done;
    op->arg = x->arg;
    /* One-sided when the connection carries RDMA and the owner gave the
     * region a window; else in frames, which the owner always serves. An
     * empty transfer moves nothing: a frame keeps its place in order (rxe
     * failed the QP on a zero-length READ). */
    op->rdma = l->car != NULL && op->entry.rkey != 0 && x->local->mr != NULL && x->length > 0;
    op->lkey = op->rdma ? rrpc__rmt_car_lkey(x->local->mr) : 0;
    rc = rrpc__rmt_opq_submit(&l->q, &op->base);
  }
  if (rc == 0) pump_locked(l);
  struct xop *done = take_done_locked(l);
  pthread_mutex_unlock(&l->mu);
  if (rc != 0) free(op);
  run_done(done);
  return rc;
}

int rrpc_remote_write(rrpc_remote_link *l, const rrpc_remote_xfer *x) { return submit(l, x, 1); }
int rrpc_remote_read(rrpc_remote_link *l, const rrpc_remote_xfer *x) { return submit(l, x, 0); }

/* An answer (DONE or READ_RESP) to the oldest frame sent. */
static int on_answer_locked(rrpc_remote_link *l, const struct rrpc__rmt_tcp_hdr *h, const rrpc_iobuf *payload) {
  if (l->sent_n == 0) return -RRPC_EPARSE;
  struct sent *e = &l->sent[l->sent_head];
  int is_write = e->op->is_write;
  if (h->op != e->opno || (h->type == RRPC_RMT_TCP_DONE) != is_write ||
      (h->type == RRPC_RMT_TCP_READ_RESP && h->status == 0 && h->length != e->length))
    return -RRPC_EPARSE;
  l->sent_head = (l->sent_head + 1) % LINK_SLOTS;
  l->sent_n--;
  if (!is_write && h->status == 0 && e->length > 0) rrpc_iobuf_copy_out(payload, 0, e->op->local + e->offset, e->length);
  rrpc__rmt_opq_piece_done(&l->q, &e->op->base, h->status);
  if (l->car != NULL) pump_later_locked(l); /* one-sided pieces may be next */
  else pump_locked(l);
  return 0;
}

void rrpc__rmt_link_on_wc(rrpc__socket *s, uint64_t wr_id, int status) {
  rrpc_remote_link *l = rrpc__socket_ext(s);
  if (l == NULL) return;
  pthread_mutex_lock(&l->mu);
  struct posted *e = &l->posted[wr_id % LINK_SLOTS];
  if (e->op != NULL && e->seq == wr_id) {
    if (e->hold) {
      e->wc_seen = 1; /* its poster completes it once the NOTIFY left */
      e->wc_status = status;
    } else {
      piece_wc_locked(l, e, status);
      pump_later_locked(l);
    }
  }
  struct xop *done = take_done_locked(l);
  pthread_mutex_unlock(&l->mu);
  run_done(done);
}

/* ---- the owner's side ----------------------------------------------------------- */

static struct rrpc_remote_region *region_by_id_locked(rrpc_remote_link *l, uint32_t id) {
  for (struct rrpc_remote_region *r = l->regions; r != NULL; r = r->next)
    if (r->id == id) return r;
  return NULL;
}

/* The owner's side of a WRITE or READ_REQ: checked against the owner
 * table before a byte moves; a WRITE's payload goes from the read buffer
 * straight into the region. */
static int on_request_locked(rrpc_remote_link *l, const struct rrpc__rmt_tcp_hdr *h, const rrpc_iobuf *payload) {
  struct rrpc__rmt_tcp_reply rep;
  if (h->type == RRPC_RMT_TCP_WRITE) {
    const struct rrpc__rmt_region *r = NULL;
    int st = rrpc__rmt_own_check(&l->conn, h->id, h->generation, h->offset, h->length, RRPC_REMOTE_WRITE, &r);
    if (st == 0 && h->length > 0) rrpc_iobuf_copy_out(payload, 0, (uint8_t *)r->ctx + h->offset, h->length);
    memset(&rep, 0, sizeof rep);
    rep.hdr = (struct rrpc__rmt_tcp_hdr){.type = RRPC_RMT_TCP_DONE, .op = h->op, .id = h->id,
                                         .generation = h->generation, .status = st, .offset = h->offset};
  } else {
    int rc = rrpc__rmt_tcp_serve(&l->conn, h, NULL, &rep);
    if (rc != 0) return rc;
  }
  if (rep.hdr.status == 0) l->st.served_bytes += h->length;
  return send_frame_locked(l, &rep.hdr, rep.payload, rep.payload ? rep.hdr.length : 0, 0);
}

/* A control message. nr and m: a NOTIFY for the application. */
static int on_ctl_locked(rrpc_remote_link *l, const uint8_t *msg, struct rrpc_remote_region **nr,
                         struct rrpc__rmt_msg *m) {
  const struct rrpc__rmt_region *reg = NULL;
  int rc = rrpc__rmt_conn_rx(&l->conn, msg, RRPC_RMT_MSG_LEN, m, &reg);
  if (rc < 0) return rc;
  if (rc == 0 && m->type == RRPC_RMT_T_NOTIFY && reg != NULL) *nr = region_by_id_locked(l, reg->id);
  return 0;
}

/* ---- the stream ----------------------------------------------------------------- */

static size_t payload_len(const struct rrpc__rmt_tcp_hdr *h) {
  switch (h->type) {
  case RRPC_RMT_TCP_WRITE: return h->length;
  case RRPC_RMT_TCP_READ_RESP: return h->status == 0 ? h->length : 0;
  case RRPC_RMT_TCP_CTL: return RRPC_RMT_MSG_LEN;
  default: return 0;
  }
}

/* One frame at the front of rbuf: 1 handled, 0 not a frame, -EAGAIN not
 * whole, or a protocol error. */
static int cut_one(rrpc_remote_link *l, rrpc_iobuf *rbuf) {
  uint8_t hb[RRPC_RMT_TCP_HDR_LEN];
  size_t have = rrpc__iobuf_length(rbuf);
  if (have < 4) return 0;
  rrpc_iobuf_copy_out(rbuf, 0, hb, 4);
  if (memcmp(hb, "RMEM", 4) != 0) return 0;
  if (have < sizeof hb) return -EAGAIN;
  rrpc_iobuf_copy_out(rbuf, 0, hb, sizeof hb);
  struct rrpc__rmt_tcp_hdr h;
  if (rrpc__rmt_tcp_decode(hb, sizeof hb, LINK_MAX_FRAME, &h) != 0) return -RRPC_EPARSE;
  size_t n = payload_len(&h);
  if (have < sizeof hb + n) return -EAGAIN;
  rrpc_iobuf_pop_front(rbuf, sizeof hb);
  uint8_t ctl[RRPC_RMT_MSG_LEN];
  if (h.type == RRPC_RMT_TCP_CTL) rrpc_iobuf_copy_out(rbuf, 0, ctl, sizeof ctl);
  struct rrpc_remote_region *nr = NULL;
  struct rrpc__rmt_msg m;
  int rc;
  /* Payloads are copied out of the read buffer where they go (the region,
   * the reader's memory): one copy, no staging. */
  pthread_mutex_lock(&l->mu);
  if (h.type == RRPC_RMT_TCP_WRITE || h.type == RRPC_RMT_TCP_READ_REQ) rc = on_request_locked(l, &h, rbuf);
  else if (h.type == RRPC_RMT_TCP_CTL) rc = on_ctl_locked(l, ctl, &nr, &m);
  else rc = on_answer_locked(l, &h, rbuf);
  rrpc_remote_notify_fn fn = l->notify;
  void *arg = l->notify_arg;
  if (nr != NULL && fn != NULL) l->st.notified++;
  struct xop *done = take_done_locked(l);
  pthread_mutex_unlock(&l->mu);
  rrpc_iobuf_pop_front(rbuf, n);
  run_done(done);
  if (nr != NULL && fn != NULL) fn(arg, nr, m.offset, m.length, m.tag);
  return rc < 0 ? rc : 1;
}

static void redeliver_task(void *arg) {
  rrpc__socket *s = arg;
  rrpc__socket_deliver(s); /* on_data again with what is left */
  rrpc__socket_unref(s);
}

int rrpc__rmt_stream_cut(rrpc__socket *s, rrpc_iobuf *rbuf) {
  rrpc__rmt_on_data(s);
  uint8_t b;
  if (rrpc__iobuf_length(rbuf) == 0 || (rrpc_iobuf_copy_out(rbuf, 0, &b, 1), b != 'R')) return 0;
  rrpc_remote_link *l = rrpc__socket_ext(s);
  if (l == NULL) {
    /* The peer speaks first: this side's link starts now. */
    int rc = rrpc__rmt_link_of(s, &l);
    if (rc != 0) return rc;
    rrpc_remote_link_release(l); /* the socket's attachment keeps it */
  }
  /* The owner copies what it serves over TCP: after a piece_size of bytes
   * the rest waits for a task of its own (eight READ_REQs in one read asked
   * for 8 MiB of copies in one callback). */
  uint64_t start = l->st.served_bytes; /* only this loop thread changes it */
  int rc;
  while ((rc = cut_one(l, rbuf)) == 1) {
    if (l->st.served_bytes - start >= l->piece && rrpc__iobuf_length(rbuf) > 0) {
      rrpc__socket_ref(s);
      if (rrpc__loop_post(rrpc__socket_loop(s), redeliver_task, s) != 0) {
        rrpc__socket_unref(s);
        continue; /* no task: go on here */
      }
      return -EAGAIN;
    }
  }
  return rc;
}

/* ---- the connection closes ------------------------------------------------------ */

static void revoked_on_close(const struct rrpc__rmt_region *r, void *arg) {
  struct rrpc_remote_region *reg = region_by_id_locked(arg, r->id);
  if (reg != NULL) reg->revoked = 1;
}

static void ext_on_close(void *ext, rrpc__socket *s, int code) {
  (void)s;
  rrpc_remote_link *l = ext;
  pthread_mutex_lock(&l->mu);
  l->failed = code < 0 ? code : -RRPC_ECLOSE;
  /* No answer comes any more: every transfer ends here, once. */
  l->sent_n = 0;
  rrpc__rmt_opq_fail(&l->q, l->failed);
  /* A post may be running outside mu (pump_locked): the close does not
   * wait for it - the token's holder ends the pieces when it returns, so
   * no op completes while the device may still read its memory. */
  l->end_due = 1;
  if (!l->posting) end_pieces_locked(l);
  rrpc__rmt_own_revoke_all(&l->conn, revoked_on_close, l);
  rrpc__rmt_peer_clear(&l->conn);
  struct xop *done = take_done_locked(l);
  pthread_mutex_unlock(&l->mu);
  run_done(done);
}

/* ---- regions -------------------------------------------------------------------- */

int rrpc_remote_region_register(rrpc_remote_link *l, void *buf, size_t len, unsigned rights,
                                rrpc_remote_region **out) {
  if (l == NULL || buf == NULL || len == 0 || out == NULL || (rights & ~(unsigned)RRPC_RMT_RIGHTS_ALL)) return -EINVAL;
  struct rrpc_remote_region *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  r->buf = buf;
  r->len = len;
  r->rights = (uint8_t)rights;
  /* Over RDMA the window is bound (and its bind completed) before the
   * peer hears of the region. */
  pthread_mutex_lock(&l->mu);
  struct rrpc__rmt_car *car = car_locked(l);
  pthread_mutex_unlock(&l->mu);
  if (car != NULL) {
    int crc = rrpc__rmt_car_reg(car, buf, len, (uint8_t)rights, &r->mr, &r->rkey);
    if (crc != 0) {
      if (crc == -ETIMEDOUT) count_bind_timeout(l);
      free(r);
      return crc;
    }
  }
  pthread_mutex_lock(&l->mu);
  int rc = link_error_locked(l);
  struct rrpc__rmt_region reg;
  if (rc == 0 && rights != 0) rc = rrpc__rmt_own_add(&l->conn, (uint8_t)rights, len, buf, &reg);
  if (rc == 0 && rights != 0) {
    uint8_t hello[RRPC_RMT_MSG_LEN], ann[RRPC_RMT_MSG_LEN];
    int n = rrpc__rmt_tx_announce(&l->conn, &reg, r->rkey, r->rkey ? (uintptr_t)buf : 0, hello, ann);
    rc = n < 0 ? n : 0;
    if (rc == 0 && n == 2) rc = send_ctl_locked(l, hello);
    if (rc == 0) rc = send_ctl_locked(l, ann);
    if (rc == 0) {
      r->id = reg.id;
      r->generation = reg.generation;
    } else {
      struct rrpc__rmt_region gone;
      rrpc__rmt_own_revoke(&l->conn, reg.id, &gone);
    }
  }
  if (rc == 0) {
    r->next = l->regions;
    l->regions = r;
    atomic_fetch_add(&l->refs, 1);
    rrpc__socket_ref(l->s);
    r->l = l;
  }
  pthread_mutex_unlock(&l->mu);
  if (rc != 0) {
    rrpc__rmt_car_free(r->mr);
    free(r);
    return rc;
  }
  *out = r;
  return 0;
}

uint32_t rrpc_remote_region_id(const rrpc_remote_region *r) { return r ? r->id : 0; }

int rrpc_remote_region_token(const rrpc_remote_region *r, rrpc_remote_token *out) {
  if (r == NULL || out == NULL || r->rights == 0) return -EINVAL;
  pthread_mutex_lock(&r->l->mu);
  int rc = rrpc__rmt_own_token(&r->l->conn, r->id, r->rkey, r->rkey ? (uintptr_t)r->buf : 0, out->bytes);
  pthread_mutex_unlock(&r->l->mu);
  return rc;
}

int rrpc_remote_region_revoke(rrpc_remote_region *r) {
  if (r == NULL || r->rights == 0) return 0;
  rrpc_remote_link *l = r->l;
  pthread_mutex_lock(&l->mu);
  struct rrpc__rmt_region gone;
  int did = !r->revoked && rrpc__rmt_own_revoke(&l->conn, r->id, &gone) == 1;
  if (did) {
    r->revoked = 1;
    /* The window's one invalidation, before the peer hears of it. */
    if (r->mr != NULL) rrpc__rmt_car_revoke(r->mr);
    uint8_t msg[RRPC_RMT_MSG_LEN];
    /* A REVOKE that cannot be sent: the connection is failing, and its
     * close revokes everything on the peer's side too. */
    if (rrpc__rmt_tx_revoke(&l->conn, &gone, msg) == 0) (void)send_ctl_locked(l, msg);
  }
  pthread_mutex_unlock(&l->mu);
  return did;
}

void rrpc_remote_region_free(rrpc_remote_region *r) {
  if (r == NULL) return;
  rrpc_remote_region_revoke(r);
  rrpc_remote_link *l = r->l;
  pthread_mutex_lock(&l->mu);
  for (struct rrpc_remote_region **p = &l->regions; *p != NULL; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  pthread_mutex_unlock(&l->mu);
  rrpc__rmt_car_free(r->mr);
  free(r);
  rrpc_remote_link_release(l);
}
