/* erm.c - ERM's socket API on relayed connections (erm.h).
 *
 * A memid is a region of the connection's remote-memory link
 * (rrpc/remote.h): registered with the program's own pages (zero copy), and
 * for one with access bits announced to the peer, whose table then holds it
 * under the same number. A COPY is rrpc_remote_write from the source region
 * to the peer's id, with RRPC_REMOTE_NOTIFY for REMOTE_COMPL; its done
 * callback and the link's notify callback (both on the relay's loop
 * thread) queue the completions the program reads from the error queue.
 *
 * Lifetime: the connection holds one reference, the installed notify
 * callback one (dropped by a loop task after the callback is removed, so a
 * running callback finishes first), each COPY in flight one. */
#include "preload/erm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "preload/env_num.h"
#include "preload/erm_parse.h"
#include "rrpc/errors.h"
#include "rrpc/internal/loop.h"
#include "rrpc/remote.h"

/* Limits (RRPC_RUN_ERM_*, docs/remote-memory.md). */
static long g_max_mrs = 1024;     /* memids per connection */
static long g_max_compl = 4096;   /* completions queued + COPYs in flight, per connection */
static long g_max_cmsgs = 64;     /* COPYs per sendmsg */
static long g_wait_ms = 10000;    /* REG_MR waits this long for the relay to know its peer */

static _Atomic uint64_t g_regs, g_deregs, g_copies, g_copy_bytes, g_copies_failed, g_remote_compl,
    g_compl_dropped, g_refused;
static atomic_int g_any;

struct erm_mr {
  uint32_t memid;
  rrpc_remote_region *r;
  uint64_t len;
  uint32_t inflight; /* COPYs from it not completed */
};

struct rrpc_run_erm {
  atomic_int refs;
  pthread_mutex_t mu;
  rrpc_remote_link *link;
  int closed; /* the program let go of the socket */
  struct erm_mr *mrs;
  size_t n_mrs, cap_mrs;
  uint32_t next_local;
  struct smc_erm_compl *q; /* ring of qcap */
  size_t qhead, qn, qcap;
  size_t pending; /* COPYs in flight: each has a slot of q kept for it */
  uint64_t copy_seq, remote_seq;
  int efd; /* readable while qn > 0 */
};

static void env_limit(const char *name, long lo, long hi, long *v) {
  const char *s = getenv(name);
  if (rrpc_run_env_num(s, lo, hi, v) < 0)
    fprintf(stderr, "rrpc-run: %s=%s is not a number in %ld..%ld; keeping %ld\n", name, s, lo, hi, *v);
}

void rrpc_run_erm_settings_from_env(void) {
  env_limit("RRPC_RUN_ERM_MAX_MRS", 1, 1048576, &g_max_mrs);
  env_limit("RRPC_RUN_ERM_MAX_COMPL", 1, 1048576, &g_max_compl);
  env_limit("RRPC_RUN_ERM_MAX_COPY_CMSGS", 1, 1024, &g_max_cmsgs);
  env_limit("RRPC_RUN_ERM_WAIT_MS", 1, 600000, &g_wait_ms);
}

void rrpc_run_erm_counters_get(rrpc_run_erm_counters *out) {
  out->regs = atomic_load(&g_regs);
  out->deregs = atomic_load(&g_deregs);
  out->copies = atomic_load(&g_copies);
  out->copy_bytes = atomic_load(&g_copy_bytes);
  out->copies_failed = atomic_load(&g_copies_failed);
  out->remote_compl = atomic_load(&g_remote_compl);
  out->compl_dropped = atomic_load(&g_compl_dropped);
  out->refused = atomic_load(&g_refused);
}

int rrpc_run_erm_any(void) { return atomic_load_explicit(&g_any, memory_order_relaxed); }

/* rrpc's codes as the errnos a socket program expects. */
static int errno_of(int rc) {
  switch (rc) {
    case -RRPC_EREMOTENOENT: return -ENOENT;
    case -RRPC_EREMOTEREVOKED: return -ESTALE;
    case -RRPC_EREMOTERANGE: return -ERANGE;
    case -RRPC_EREMOTERIGHTS: return -EACCES;
    case -RRPC_EREMOTECONN: return -EACCES;
    case -RRPC_ECLOSE: return -ECONNRESET;
    case -RRPC_ERDMAMEM: return -EFAULT;
    default: return rc < 0 && rc > -1000 ? rc : -EIO;
  }
}

/* ---- lifetime ----------------------------------------------------------------- */

static void free_regions(struct erm_mr *mrs, size_t n) {
  for (size_t i = 0; i < n; i++) rrpc_remote_region_free(mrs[i].r);
}

static void erm_unref(struct rrpc_run_erm *e) {
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  free_regions(e->mrs, e->n_mrs);
  rrpc_remote_link_release(e->link);
  if (e->efd >= 0) close(e->efd);
  pthread_mutex_destroy(&e->mu);
  free(e->mrs);
  free(e->q);
  free(e);
}

static void notify_unref_task(void *arg) { erm_unref(arg); }

/* The program let go: no more notifications; regions no COPY uses are
 * deregistered (outside the lock: that revokes and talks to the device). */
static void erm_close(struct rrpc_run_erm *e) {
  pthread_mutex_lock(&e->mu);
  if (e->closed) {
    pthread_mutex_unlock(&e->mu);
    return;
  }
  e->closed = 1;
  if (rrpc_run_relay_debug()) {
    rrpc_remote_link_stats st;
    rrpc_remote_link_get_stats(e->link, &st);
    fprintf(stderr,
            "rrpc-run[%d]: erm closed carriage=%s copies=%llu remote_compl=%llu ops_ok=%llu ops_failed=%llu "
            "pieces=%llu notified=%llu owner_copied=%llu\n",
            (int)getpid(), st.rdma ? "rdma" : "frames", (unsigned long long)e->copy_seq,
            (unsigned long long)e->remote_seq, (unsigned long long)st.ops_ok, (unsigned long long)st.ops_failed,
            (unsigned long long)st.pieces, (unsigned long long)st.notified, (unsigned long long)st.served_bytes);
  }
  struct erm_mr *idle = malloc(e->n_mrs * sizeof *idle + 1);
  size_t n_idle = 0, keep = 0;
  for (size_t i = 0; i < e->n_mrs; i++) {
    if (e->mrs[i].inflight == 0 && idle != NULL) idle[n_idle++] = e->mrs[i];
    else e->mrs[keep++] = e->mrs[i];
  }
  e->n_mrs = keep;
  pthread_mutex_unlock(&e->mu);
  if (idle != NULL) free_regions(idle, n_idle);
  free(idle);
  rrpc_remote_link_set_notify(e->link, NULL, NULL);
  rrpc__loop *loop = rrpc_run_relay_loop();
  if (loop == NULL || rrpc__loop_post(loop, notify_unref_task, e) != 0) erm_unref(e);
}

void rrpc_run_erm_release(struct rrpc_run_erm *e) {
  erm_close(e);
  erm_unref(e);
}

void rrpc_run_erm_close(rrpc_run_conn *c) {
  struct rrpc_run_erm *e = rrpc_run_conn_erm(c);
  if (e != NULL) erm_close(e);
}

/* ---- the completion queue (under e->mu) ---------------------------------------- */

static void q_push_locked(struct rrpc_run_erm *e, const struct smc_erm_compl *c) {
  e->q[(e->qhead + e->qn) % e->qcap] = *c;
  if (e->qn++ == 0) {
    uint64_t one = 1;
    if (write(e->efd, &one, sizeof one) < 0) { /* a full counter: it is readable anyway */
    }
  }
}

static void q_pop_locked(struct rrpc_run_erm *e, size_t k) {
  e->qhead = (e->qhead + k) % e->qcap;
  e->qn -= k;
  if (e->qn == 0) {
    uint64_t v;
    if (read(e->efd, &v, sizeof v) < 0) { /* already 0 */
    }
  }
}

static void on_notify(void *arg, rrpc_remote_region *r, uint64_t offset, uint64_t length, uint32_t tag) {
  struct rrpc_run_erm *e = arg;
  pthread_mutex_lock(&e->mu);
  if (e->closed || e->qn + e->pending >= e->qcap) {
    pthread_mutex_unlock(&e->mu);
    atomic_fetch_add(&g_compl_dropped, 1);
    return;
  }
  struct smc_erm_compl c = {.kind = SMC_ERM_COMPL_REMOTE, .memid = rrpc_remote_region_id(r), .tag = tag,
                            .offset = offset, .len = length, .seq = ++e->remote_seq};
  q_push_locked(e, &c);
  pthread_mutex_unlock(&e->mu);
  atomic_fetch_add(&g_remote_compl, 1);
}

/* ---- the state of a connection ---------------------------------------------------- */

static struct rrpc_run_erm *erm_make(rrpc_remote_link *l) {
  struct rrpc_run_erm *e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->qcap = (size_t)g_max_compl;
  e->q = calloc(e->qcap, sizeof *e->q);
  e->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (e->q == NULL || e->efd < 0) {
    if (e->efd >= 0) close(e->efd);
    free(e->q);
    free(e);
    return NULL;
  }
  atomic_init(&e->refs, 2); /* the connection's, the notify callback's */
  pthread_mutex_init(&e->mu, NULL);
  e->link = l;
  e->next_local = 1;
  return e;
}

/* c's state, made (with its link) on first use. */
static int erm_get(rrpc_run_conn *c, struct rrpc_run_erm **out) {
  struct rrpc_run_erm *e = rrpc_run_conn_erm(c);
  if (e == NULL) {
    rrpc_remote_link *l;
    int rc = rrpc_run_conn_remote_link(c, g_wait_ms, &l);
    if (rc != 0) return rc == -ETIMEDOUT ? -ENOTCONN : rc;
    struct rrpc_run_erm *n = erm_make(l);
    if (n == NULL) {
      rrpc_remote_link_release(l);
      return -ENOMEM;
    }
    e = rrpc_run_conn_erm_install(c, n);
    if (e != n) {
      rrpc_remote_link_release(l);
      pthread_mutex_destroy(&n->mu);
      close(n->efd);
      free(n->q);
      free(n);
    } else {
      rrpc_remote_link_set_notify(l, on_notify, e);
      atomic_store(&g_any, 1);
    }
  }
  *out = e;
  return 0;
}

int rrpc_run_erm_event_fd(rrpc_run_conn *c) {
  struct rrpc_run_erm *e = rrpc_run_conn_erm(c);
  return e != NULL ? e->efd : -1;
}

static struct erm_mr *mr_find_locked(struct rrpc_run_erm *e, uint32_t memid) {
  for (size_t i = 0; i < e->n_mrs; i++)
    if (e->mrs[i].memid == memid) return &e->mrs[i];
  return NULL;
}

/* ---- REG_MR / DEREG_MR ------------------------------------------------------------------ */

static int reg_mr(struct rrpc_run_erm *e, struct smc_erm_mr *m) {
  pthread_mutex_lock(&e->mu);
  int full = e->closed || e->n_mrs >= (size_t)g_max_mrs;
  if (!full && e->n_mrs == e->cap_mrs) {
    size_t cap = e->cap_mrs ? e->cap_mrs * 2 : 8;
    struct erm_mr *n = realloc(e->mrs, cap * sizeof *n);
    if (n == NULL) {
      pthread_mutex_unlock(&e->mu);
      return -ENOMEM;
    }
    e->mrs = n;
    e->cap_mrs = cap;
  }
  pthread_mutex_unlock(&e->mu);
  if (full) return -ENOSPC;
  unsigned rights = ((m->access & SMC_ERM_ACCESS_REMOTE_READ) ? RRPC_REMOTE_READ : 0) |
                    ((m->access & SMC_ERM_ACCESS_REMOTE_WRITE) ? RRPC_REMOTE_WRITE : 0);
  rrpc_remote_region *r;
  int rc = rrpc_remote_region_register(e->link, (void *)(uintptr_t)m->addr, (size_t)m->len, rights, &r);
  if (rc != 0) return errno_of(rc);
  pthread_mutex_lock(&e->mu);
  uint32_t memid = rights ? rrpc_remote_region_id(r) : (SMC_ERM_MEMID_LOCAL | e->next_local++);
  /* Registrations may race: the table's room is checked again here. */
  if (e->closed || e->n_mrs >= (size_t)g_max_mrs || e->n_mrs == e->cap_mrs || memid == 0 ||
      (rights && (memid & SMC_ERM_MEMID_LOCAL))) {
    pthread_mutex_unlock(&e->mu);
    rrpc_remote_region_free(r);
    return -ENOSPC;
  }
  e->mrs[e->n_mrs++] = (struct erm_mr){.memid = memid, .r = r, .len = m->len};
  pthread_mutex_unlock(&e->mu);
  m->memid = memid;
  atomic_fetch_add(&g_regs, 1);
  return 0;
}

static int dereg_mr(struct rrpc_run_erm *e, uint32_t memid) {
  pthread_mutex_lock(&e->mu);
  struct erm_mr *mr = mr_find_locked(e, memid);
  if (mr == NULL || mr->inflight > 0) {
    pthread_mutex_unlock(&e->mu);
    return mr == NULL ? -ENOENT : -EBUSY;
  }
  rrpc_remote_region *r = mr->r;
  *mr = e->mrs[--e->n_mrs];
  pthread_mutex_unlock(&e->mu);
  rrpc_remote_region_free(r); /* revokes: the peer's table drops it */
  atomic_fetch_add(&g_deregs, 1);
  return 0;
}

int rrpc_run_erm_sockopt(rrpc_run_conn *c, int set, void *val, socklen_t *len) {
  struct smc_erm_mr m;
  int rc = len == NULL ? -EFAULT : rrpc_run_erm_mr_parse(val, *len, &m);
  /* A forked child has no relay thread: its inherited sockets carry bytes
   * (the parent's relay serves them), not ERM. */
  if (rc == 0 && rrpc_run_relay_forked()) rc = -ENOPROTOOPT;
  struct rrpc_run_erm *e = NULL;
  if (rc == 0) rc = erm_get(c, &e);
  if (rc == 0) rc = m.cmd == SMC_ERM_REG_MR ? reg_mr(e, &m) : dereg_mr(e, m.memid);
  if (rc == 0 && m.cmd == SMC_ERM_REG_MR) {
    memcpy(val, &m, sizeof m); /* the memid, back in the caller's struct */
    if (!set) *len = sizeof m;
  }
  if (rc != 0) atomic_fetch_add(&g_refused, 1);
  return rc;
}

/* ---- COPY ----------------------------------------------------------------------------- */

struct copy_op {
  struct rrpc_run_erm *e;
  uint32_t src, dst, tag;
  uint64_t offset, len, seq;
};

static void copy_done(void *arg, int status) {
  struct copy_op *op = arg;
  struct rrpc_run_erm *e = op->e;
  struct smc_erm_compl c = {.kind = SMC_ERM_COMPL_LOCAL, .status = status == 0 ? 0 : errno_of(status),
                            .memid = op->dst, .tag = op->tag, .offset = op->offset, .len = op->len,
                            .seq = op->seq};
  pthread_mutex_lock(&e->mu);
  struct erm_mr *mr = mr_find_locked(e, op->src);
  if (mr != NULL) mr->inflight--;
  e->pending--;
  if (!e->closed) q_push_locked(e, &c);
  pthread_mutex_unlock(&e->mu);
  if (status != 0) atomic_fetch_add(&g_copies_failed, 1);
  free(op);
  erm_unref(e);
}

/* Check the local side and keep a completion slot; then start the write
 * outside the lock (its callback takes it). */
static int copy_one(struct rrpc_run_erm *e, const struct smc_erm_copy *cp) {
  struct copy_op *op = malloc(sizeof *op);
  if (op == NULL) return -ENOMEM;
  pthread_mutex_lock(&e->mu);
  struct erm_mr *mr = mr_find_locked(e, cp->src_idx);
  int rc = 0;
  if (mr == NULL) rc = -ENOENT;
  else if (cp->src_offset > mr->len || cp->len > mr->len - cp->src_offset) rc = -ERANGE;
  else if (e->qn + e->pending >= e->qcap) rc = -ENOBUFS;
  if (rc != 0) {
    pthread_mutex_unlock(&e->mu);
    free(op);
    return rc;
  }
  mr->inflight++;
  e->pending++;
  *op = (struct copy_op){.e = e, .src = cp->src_idx, .dst = cp->dst_idx, .tag = cp->tag,
                         .offset = cp->dst_offset, .len = cp->len, .seq = ++e->copy_seq};
  rrpc_remote_region *r = mr->r;
  pthread_mutex_unlock(&e->mu);
  atomic_fetch_add(&e->refs, 1);
  rrpc_remote_xfer x = {.local = r, .local_offset = cp->src_offset, .remote_id = cp->dst_idx,
                        .remote_offset = cp->dst_offset, .length = cp->len,
                        .flags = (cp->flags & SMC_ERM_REMOTE_COMPL) ? RRPC_REMOTE_NOTIFY : 0, .tag = cp->tag,
                        .done = copy_done, .arg = op};
  rc = rrpc_remote_write(e->link, &x);
  if (rc == 0) {
    atomic_fetch_add(&g_copies, 1);
    atomic_fetch_add(&g_copy_bytes, cp->len);
    return 0;
  }
  pthread_mutex_lock(&e->mu);
  mr = mr_find_locked(e, cp->src_idx);
  if (mr != NULL) mr->inflight--;
  e->pending--;
  e->copy_seq--; /* never seen: the next COPY takes its number */
  pthread_mutex_unlock(&e->mu);
  free(op);
  erm_unref(e);
  return errno_of(rc);
}

int rrpc_run_erm_sendmsg(rrpc_run_conn *c, int fd, const struct msghdr *m, int flags,
                         ssize_t (*real)(int, const struct msghdr *, int), ssize_t *ret) {
  if (m == NULL || m->msg_controllen == 0) return 0;
  struct smc_erm_copy *cps = malloc((size_t)g_max_cmsgs * sizeof *cps);
  if (cps == NULL) {
    errno = ENOMEM;
    *ret = -1;
    return 1;
  }
  int n = rrpc_run_erm_copies_parse(m->msg_control, m->msg_controllen, cps, (int)g_max_cmsgs);
  if (n == 0) {
    free(cps);
    return 0;
  }
  struct rrpc_run_erm *e = rrpc_run_conn_erm(c);
  int rc = n < 0 ? n : rrpc_run_relay_forked() ? -ENOPROTOOPT : e == NULL ? -ENOENT : 0; /* no REG_MR: no source */
  for (int i = 0; i < n && rc == 0; i++) rc = copy_one(e, &cps[i]);
  free(cps);
  if (rc != 0) {
    atomic_fetch_add(&g_refused, 1);
    errno = -rc;
    *ret = -1;
    return 1;
  }
  size_t bytes = 0;
  for (size_t i = 0; i < m->msg_iovlen; i++) bytes += m->msg_iov[i].iov_len;
  if (bytes == 0) {
    *ret = 0;
    return 1;
  }
  struct msghdr plain = *m;
  plain.msg_control = NULL;
  plain.msg_controllen = 0;
  *ret = real(fd, &plain, flags);
  return 1;
}

/* ---- completions ------------------------------------------------------------------------ */

enum { COMPL_BATCH = 64 };

ssize_t rrpc_run_erm_recv_errqueue(rrpc_run_conn *c, struct msghdr *m, int flags) {
  struct rrpc_run_erm *e = rrpc_run_conn_erm(c);
  if (e == NULL) return -EAGAIN;
  struct smc_erm_compl batch[COMPL_BATCH];
  pthread_mutex_lock(&e->mu);
  size_t n = e->qn < COMPL_BATCH ? e->qn : COMPL_BATCH;
  if (n == 0) {
    pthread_mutex_unlock(&e->mu);
    return -EAGAIN;
  }
  for (size_t i = 0; i < n; i++) batch[i] = e->q[(e->qhead + i) % e->qcap];
  size_t used = 0;
  size_t k = rrpc_run_erm_compl_put(m->msg_control, m->msg_controllen, batch, n, &used);
  int trunc = k == 0; /* no room for one: it is consumed, as the kernel's error queue does */
  if (!(flags & MSG_PEEK)) q_pop_locked(e, trunc ? 1 : k);
  pthread_mutex_unlock(&e->mu);
  m->msg_controllen = used;
  m->msg_flags = MSG_ERRQUEUE | (trunc ? MSG_CTRUNC : 0);
  m->msg_namelen = 0;
  return 0;
}
