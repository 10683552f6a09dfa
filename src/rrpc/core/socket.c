/* socket.c - a connection of the rrpc core: its TCP fd, loop, read buffer
 * and ordered write path, driven through a transport ops table. Knows
 * nothing about what the transport is, nor about the protocol above it.
 *
 * Write path: one "write token" per socket. A writer that finds the token
 * free takes it and writes on its own thread (no thread hop) - except on the
 * socket's own loop thread, where it keeps the token, gathers the round's
 * messages in wpend and writes once when the round's callbacks are done
 * (rrpc__loop_defer: one sendmsg for a batch of responses); writers that
 * find it taken append to the queue, and the token holder drains the queue
 * before giving the token back, so order per socket is kept. A transport
 * that cannot take more returns -EAGAIN and keeps the token until it calls
 * rrpc__socket_resume_write. Until the transport is ready the token belongs
 * to the start-up, so early writes just queue. A server's pool thread may
 * keep the token for its run of tasks (rrpc__socket_write_response): its
 * responses gather in wpend and leave when its pool runs the deferred
 * flush (worker_pool.h bounds when).
 *
 * Limits (rrpc/limits.h): bytes left in the read buffer after the owner
 * took its whole messages count against the process's max_input_bytes;
 * bytes queued for writing count against socket_max_unwritten_bytes and the
 * process total. An owner may pause reading while its output is congested
 * (rrpc__socket_pause_if_congested); the writer that drains the queue
 * resumes it.
 *
 * Connecting (client sockets made by rrpc__socket_connect): the TCP connect
 * itself runs on the loop, non-blocking - a watcher for EPOLLOUT, a timer
 * for connect_timeout_ms, a retry with backoff after a failed attempt - so
 * no thread ever waits in connect or poll. The fd changes between attempts
 * and is touched only on the loop thread until `fd_ready` is set; writes
 * issued meanwhile queue behind the start-up's token as usual.
 *
 * Lifetime: refcounted. The fd is closed and the transport's close runs
 * only when the last reference drops (on the loop thread), so no thread can
 * be inside a transport write while its state is torn down. Failing a socket
 * only marks it, shuts the fd down and tells the owner, once.
 */
#include "rrpc/internal/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rrpc/internal/addr.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/lock.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/metrics.h"
#include "rrpc/internal/worker_pool.h"
#include "rrpc/errors.h"

/* The connect in progress (loop thread only); freed once connected. */
struct connect_plan {
  struct sockaddr_storage sa; /* AF_INET, AF_INET6 or AF_UNIX */
  socklen_t salen;
  int timeout_ms;       /* per attempt */
  int attempts_left;    /* after the current one */
  int backoff_ms;       /* before the next attempt; doubles */
  rrpc__timer_id timer; /* attempt deadline or retry; 0: none */
};

enum { CONNECT_BACKOFF_FIRST_MS = 1, CONNECT_BACKOFF_MAX_MS = 200 };

struct rrpc__socket {
  atomic_int refs;
  atomic_int failed; /* 0, or the first (negative) failure code */
  int fd;
  int is_client;
  rrpc__loop *loop;
  rrpc__watcher watcher;
  int watching;
  uint32_t want_events;
  pthread_mutex_t ev_mu; /* serializes epoll_ctl changes of want_events */
  const rrpc_transport_ops *ops;
  void *tstate;
  const rrpc__socket_handler *handler;
  void *owner;
  int owner_notified;
  int closed; /* close_task ran (loop thread only) */
  int started; /* ops->start was called (loop thread only) */
  struct connect_plan *plan; /* non-NULL while connecting (loop thread only) */
  atomic_int fd_ready;       /* 1 once fd is connected and never changes again */
  rrpc_iobuf rbuf; /* loop thread only */
  size_t in_held;  /* rbuf bytes counted in the process input total (loop thread) */
  _Atomic size_t unwritten; /* bytes in wqueue + wpend */
  size_t pend_counted;      /* wpend bytes still in `unwritten` (token holder) */
  atomic_int read_paused;   /* 1 while reading waits for the output to drain */
  atomic_int owner_hold;    /* 1 while the owner holds reading (rrpc__socket_hold_read) */
  atomic_int pending_requests; /* requests read and not yet answered (server owners) */
  _Atomic uint64_t last_active_us; /* last read or write progress */
  uint64_t read_us;                /* loop thread: the delivery on_data is handling */
  /* write side */
  rrpc__lock wmu;
  /* 1 while a writer (or the start-up) holds the token. Taken by a
   * compare-and-swap 0 -> 1 (take_token), under wmu or, by the socket's
   * loop thread, without it; given back (1 -> 0) only under wmu, by the
   * holder that found wqueue empty (drain). */
  atomic_int token;
  rrpc_iobuf wqueue; /* appended under wmu by writers without the token */
  rrpc_iobuf wpend;  /* only the token holder touches it */
  int fin_when_drained; /* under wmu: half-close once the queue is empty */
  int loop_holds; /* loop thread: it took the token for a deferred flush */
  /* A pool thread that took the token to write its run's responses later:
   * its owner is that thread while it holds the token this way (and wpend
   * is its own under its lock); the flush hands the token to drain. */
  rrpc__worker_flush wflush;
  struct sockaddr_storage peer;
  struct sockaddr_storage local;
  char peer_str[64]; /* "ip:port", formatted once: calls copy it per request */
  char local_str[64]; /* our end, the same way (Controller::local_side) */
  socklen_t peer_len;     /* client sockets made by rrpc__socket_connect: */
  int connect_timeout_ms; /* what a reconnect (rrpc__socket_reconnect) reuses */
  /* figures for the builtin pages: bytes delivered to the owner (loop
   * thread) and bytes the transport took from the write queue (the token
   * holder); one writer each, read by any thread */
  _Atomic uint64_t bytes_in, bytes_out;
  size_t rbuf_left;    /* rbuf length after the last on_data (loop thread) */
  uint64_t created_us;
  _Atomic uint32_t fallback_code; /* SMC decline code of an RDMA fallback, 0 = none */
  _Atomic(void *) ext;            /* rrpc__socket_ext_install: set once */
  const rrpc__socket_ext_ops *ext_ops;
};

static void socket_free(rrpc__socket *s) {
  void *ext = atomic_load(&s->ext);
  if (ext != NULL) s->ext_ops->release(ext);
  if (s->ops != NULL && s->ops->close != NULL && s->started) s->ops->close(s);
  free(s->plan);
  if (s->fd >= 0) close(s->fd);
  rrpc__input_account(&s->in_held, 0);
  rrpc__unwritten_release(atomic_load(&s->unwritten));
  rrpc__iobuf_destroy(&s->rbuf);
  rrpc__iobuf_destroy(&s->wqueue);
  rrpc__iobuf_destroy(&s->wpend);
  pthread_mutex_destroy(&s->ev_mu);
  free(s);
}

static void free_task(void *arg) { socket_free(arg); }

void rrpc__socket_ref(rrpc__socket *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

void rrpc__socket_unref(rrpc__socket *s) {
  if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
  /* Transport state is torn down on the loop thread, where its watchers and
   * timers live; a loop that is shutting down runs it here instead. */
  if (rrpc__loop_in_thread(s->loop) || rrpc__loop_post(s->loop, free_task, s) != 0) socket_free(s);
}

int rrpc__socket_fd(const rrpc__socket *s) { return s->fd; }
rrpc__loop *rrpc__socket_loop(const rrpc__socket *s) { return s->loop; }
rrpc_iobuf *rrpc__socket_rbuf(rrpc__socket *s) { return &s->rbuf; }
void rrpc__socket_set_tstate(rrpc__socket *s, void *state) { s->tstate = state; }
void *rrpc__socket_tstate(const rrpc__socket *s) { return s->tstate; }
const rrpc_transport_ops *rrpc__socket_ops(const rrpc__socket *s) { return s->ops; }
int rrpc__socket_is_client(const rrpc__socket *s) { return s->is_client; }
int rrpc__socket_failed(const rrpc__socket *s) { return atomic_load(&s->failed); }
int rrpc__socket_read_paused(const rrpc__socket *s) { return atomic_load(&s->read_paused); }

void rrpc__socket_switch_transport(rrpc__socket *s, const rrpc_transport_ops *ops) {
  s->ops = ops;
  s->tstate = NULL;
}

void rrpc__socket_peer_addr(const rrpc__socket *s, struct sockaddr_storage *out) { *out = s->peer; }

int rrpc__socket_local_addr(const rrpc__socket *s, struct sockaddr_storage *out) {
  *out = s->local;
  return 0;
}

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len) {
  rrpc__sockaddr_str((const struct sockaddr *)ss, sizeof *ss, buf, len);
}

void rrpc__socket_peer_str(const rrpc__socket *s, char *buf, size_t len) {
  if (len >= sizeof s->peer_str) {
    /* A controller's remote (every request): the whole array in one copy
     * of fixed size, no strnlen and no copy call. It is NUL-terminated
     * within itself (formatted at creation, zeroed before) and never
     * written after, so the bytes past the NUL are no race either. */
    memcpy(buf, s->peer_str, sizeof s->peer_str);
    return;
  }
  if (len == 0) return;
  size_t n = strnlen(s->peer_str, sizeof s->peer_str);
  if (n >= len) n = len - 1;
  memcpy(buf, s->peer_str, n);
  buf[n] = '\0';
}

void rrpc__socket_local_str(const rrpc__socket *s, char buf[64]) {
  /* Fixed size, as the peer's above: formatted when the connection came
   * up, never written after. */
  memcpy(buf, s->local_str, sizeof s->local_str);
}

int rrpc__socket_describe(const rrpc__socket *s, char *buf, size_t len) {
  if (s->ops->describe != NULL) return s->ops->describe(s, buf, len);
  snprintf(buf, len, "%s", s->ops->name);
  return 0;
}

const char *rrpc__socket_peer_cstr(const rrpc__socket *s) { return s->peer_str; }
const char *rrpc__socket_local_cstr(const rrpc__socket *s) { return s->local_str; }

int rrpc__socket_is_rdma(const rrpc__socket *s) {
  return s->ops->is_rdma != NULL && s->ops->is_rdma(s);
}

void rrpc__socket_note_fallback(rrpc__socket *s, uint32_t decline_code) {
  atomic_store_explicit(&s->fallback_code, decline_code, memory_order_relaxed);
  rrpc__metrics_note_fallback(decline_code);
}

void rrpc__socket_get_stats(const rrpc__socket *s, rrpc__socket_stats *out) {
  out->bytes_in = atomic_load_explicit(&s->bytes_in, memory_order_relaxed);
  out->bytes_out = atomic_load_explicit(&s->bytes_out, memory_order_relaxed);
  out->created_us = s->created_us;
  out->fallback_code = atomic_load_explicit(&s->fallback_code, memory_order_relaxed);
  out->is_client = s->is_client;
  out->failed = atomic_load(&s->failed);
  out->loop = s->loop;
}

/* Transport facts are read on the socket's loop thread, where the transport
 * changes its state (a fallback frees it), so no lock is needed. */
struct facts_req {
  rrpc__socket *s;
  rrpc__conn_facts *out;
  void (*done)(void *arg);
  void *arg;
};

static void facts_task(void *arg) {
  struct facts_req *r = arg;
  rrpc__socket *s = r->s;
  if (!s->closed && s->ops != NULL) {
    snprintf(r->out->transport, sizeof r->out->transport, "%s", s->ops->name);
    if (s->ops->facts != NULL) s->ops->facts(s, r->out);
  } else {
    snprintf(r->out->transport, sizeof r->out->transport, "closed");
  }
  void (*done)(void *) = r->done;
  void *done_arg = r->arg;
  free(r);
  rrpc__socket_unref(s);
  done(done_arg);
}

int rrpc__socket_facts_async(rrpc__socket *s, rrpc__conn_facts *out, void (*done)(void *arg), void *arg) {
  struct facts_req *r = calloc(1, sizeof *r);
  if (r == NULL) return -ENOMEM;
  memset(out, 0, sizeof *out);
  out->gid_index = -1;
  *r = (struct facts_req){.s = s, .out = out, .done = done, .arg = arg};
  rrpc__socket_ref(s);
  int rc = rrpc__loop_post(s->loop, facts_task, r);
  if (rc != 0) {
    rrpc__socket_unref(s);
    free(r);
  }
  return rc;
}

/* ---- events ------------------------------------------------------------- */

static void connect_event(rrpc__socket *s, uint32_t events);

static void on_fd_event(rrpc__watcher *w, uint32_t events) {
  rrpc__socket *s = w->arg;
  if (atomic_load(&s->failed)) return;
  if (s->plan != NULL) {
    connect_event(s, events);
    return;
  }
  s->ops->on_fd_event(s, events);
}

int rrpc__socket_want_writable(rrpc__socket *s, int on) {
  int rc = 0;
  pthread_mutex_lock(&s->ev_mu);
  uint32_t ev = on ? (s->want_events | EPOLLOUT) : (s->want_events & ~(uint32_t)EPOLLOUT);
  if (ev != s->want_events && s->watching) {
    rc = rrpc__loop_watch_mod(s->loop, &s->watcher, ev);
    if (rc == 0) s->want_events = ev;
  }
  pthread_mutex_unlock(&s->ev_mu);
  return rc;
}

/* Same for EPOLLIN: back-pressure turns reading off and on. */
static int want_readable(rrpc__socket *s, int on) {
  int rc = 0;
  pthread_mutex_lock(&s->ev_mu);
  uint32_t ev = on ? (s->want_events | EPOLLIN) : (s->want_events & ~(uint32_t)EPOLLIN);
  if (ev != s->want_events && s->watching) {
    rc = rrpc__loop_watch_mod(s->loop, &s->watcher, ev);
    if (rc == 0) s->want_events = ev;
  }
  pthread_mutex_unlock(&s->ev_mu);
  return rc;
}

size_t rrpc__socket_unwritten(const rrpc__socket *s) { return atomic_load(&s->unwritten); }

uint64_t rrpc__socket_last_active_us(const rrpc__socket *s) {
  return atomic_load_explicit(&s->last_active_us, memory_order_relaxed);
}

uint64_t rrpc__socket_read_us(const rrpc__socket *s) { return s->read_us; }

/* The activity stamp serves idle sweeps of seconds: a loop round's clock
 * is fresh enough, and a write on a loop thread then reads no clock. */
static void touch(rrpc__socket *s) {
  atomic_store_explicit(&s->last_active_us, rrpc__round_now_us(), memory_order_relaxed);
}

/* ---- failing and closing -------------------------------------------------- */

/* Runs on the loop thread: stop watching, tell the owner once, drop the
 * reference that the start-up took. */
static void close_task(void *arg) {
  rrpc__socket *s = arg;
  if (s->closed) return;
  s->closed = 1;
  if (s->plan != NULL && s->plan->timer != 0) {
    rrpc__loop_timer_cancel(s->loop, s->plan->timer); /* on the loop: it cannot be running */
    s->plan->timer = 0;
  }
  /* Here the fd cannot change under us; other threads only shut it down
   * once it is final (fd_ready). */
  if (s->fd >= 0) shutdown(s->fd, SHUT_RDWR);
  /* Under ev_mu: a pool thread whose write met EAGAIN asks for EPOLLOUT
   * (rrpc__socket_want_writable) from its own thread, reading `watching`. */
  pthread_mutex_lock(&s->ev_mu);
  if (s->watching) {
    rrpc__loop_watch_del(s->loop, &s->watcher);
    s->watching = 0;
  }
  pthread_mutex_unlock(&s->ev_mu);
  if (s->started && s->ops->on_fail != NULL) s->ops->on_fail(s, atomic_load(&s->failed));
  void *ext = atomic_load(&s->ext);
  if (ext != NULL) s->ext_ops->on_close(ext, s, atomic_load(&s->failed));
  if (!s->owner_notified) {
    s->owner_notified = 1;
    s->handler->on_close(s->owner, s, atomic_load(&s->failed));
  }
  rrpc__socket_unref(s); /* the loop's reference */
}

void rrpc__socket_fail(rrpc__socket *s, int code) {
  if (code >= 0) code = -RRPC_ECLOSE;
  int expected = 0;
  if (!atomic_compare_exchange_strong(&s->failed, &expected, code)) return;
  /* Wake any thread blocked on the fd and make the peer see EOF now; the fd
   * itself stays open until the last reference, so it cannot be reused
   * under a concurrent writer. */
  if (atomic_load(&s->fd_ready)) shutdown(s->fd, SHUT_RDWR);
  if (rrpc__loop_post(s->loop, close_task, s) != 0) {
    RRPC_LOG(ERROR, "socket fd=%d: loop is gone, closing inline", s->fd);
    close_task(s);
  }
}

/* ---- write path ----------------------------------------------------------- */

static void resume_read_task(void *arg) {
  rrpc__socket *s = arg;
  if (!atomic_load(&s->failed) && want_readable(s, 1) == 0) {
    if (s->ops->on_read_resumed != NULL) s->ops->on_read_resumed(s);
    rrpc__socket_deliver(s);
  }
  rrpc__socket_unref(s);
}

static void resume_read(rrpc__socket *s) {
  if (atomic_load(&s->owner_hold)) return; /* only the owner lets go of its hold */
  if (!atomic_exchange(&s->read_paused, 0)) return;
  rrpc__socket_ref(s);
  if (rrpc__loop_post(s->loop, resume_read_task, s) != 0) rrpc__socket_unref(s);
}

/* Congestion has a gap between pause and resume (half / a quarter of the
 * queue cap, all / half of the pending requests), so the two do not
 * alternate per message. */
static int congested(rrpc__socket *s) {
  return atomic_load(&s->unwritten) > rrpc__limit_socket_max_unwritten() / 2 ||
         atomic_load(&s->pending_requests) >= rrpc__limit_socket_max_pending_requests();
}
static int relieved(rrpc__socket *s) {
  return atomic_load(&s->unwritten) <= rrpc__limit_socket_max_unwritten() / 4 &&
         atomic_load(&s->pending_requests) <= rrpc__limit_socket_max_pending_requests() / 2;
}

/* `n` bytes left the queue: give them back to the limits, and let a reader
 * that paused for them go on. A reader resumed while still congested on
 * the other count pauses again in on_data. */
static void written(rrpc__socket *s, size_t n) {
  if (n == 0) return;
  size_t left = atomic_fetch_sub(&s->unwritten, n) - n;
  rrpc__unwritten_release(n);
  touch(s);
  if (atomic_load(&s->read_paused) && left <= rrpc__limit_socket_max_unwritten() / 4) resume_read(s);
}

int rrpc__socket_request_begin(rrpc__socket *s) { return atomic_fetch_add(&s->pending_requests, 1); }

int rrpc__socket_request_end(rrpc__socket *s) {
  int left = atomic_fetch_sub(&s->pending_requests, 1) - 1;
  if (atomic_load(&s->read_paused) && left <= rrpc__limit_socket_max_pending_requests() / 2)
    resume_read(s);
  return left;
}

int rrpc__socket_pause_if_congested(rrpc__socket *s) {
  if (!congested(s)) return 0;
  atomic_store(&s->read_paused, 1);
  if (want_readable(s, 0) != 0) {
    atomic_store(&s->read_paused, 0);
    return 0;
  }
  rrpc__limit_count(RRPC__LC_READ_PAUSES);
  /* A writer or an answer may have relieved it before it could see the flag. */
  if (relieved(s) && atomic_exchange(&s->read_paused, 0)) {
    want_readable(s, 1);
    return 0;
  }
  return 1;
}

int rrpc__socket_hold_read(rrpc__socket *s, int hold) {
  if (!hold) {
    if (!atomic_exchange(&s->owner_hold, 0)) return 0;
    resume_read(s);
    return 0;
  }
  atomic_store(&s->owner_hold, 1);
  atomic_store(&s->read_paused, 1);
  int rc = want_readable(s, 0);
  if (rc != 0) {
    atomic_store(&s->owner_hold, 0);
    atomic_store(&s->read_paused, 0);
  }
  return rc;
}

/* A figure with one writer at a time, read by any thread: a load and a
 * store, no locked add (the line stays the writer's). */
static void count_one_writer(_Atomic uint64_t *figure, uint64_t n) {
  atomic_store_explicit(figure, atomic_load_explicit(figure, memory_order_relaxed) + n, memory_order_relaxed);
}

/* The token holder writes until the queue is empty (token released), the
 * transport must wait (token kept), or the socket fails. */
static void drain(rrpc__socket *s) {
  for (;;) {
    /* wpend is the token holder's alone here: what left it since it was
     * last looked at went to the wire. (Never right after a write returned
     * -EAGAIN: the loop may be resuming it already.) */
    size_t pend = rrpc__iobuf_length(&s->wpend);
    size_t sent = s->pend_counted - pend;
    if (sent != 0) {
      /* Counted here, by the token's one holder (a load and a store), not
       * by each writer: a pool worker's atomic add on this line was 2 % of
       * the CPU at saturation. */
      count_one_writer(&s->bytes_out, sent);
      written(s, sent);
    }
    s->pend_counted = pend;
    if (pend == 0) {
      rrpc__lock_acquire(&s->wmu);
      if (rrpc__iobuf_length(&s->wqueue) == 0) {
        atomic_store(&s->token, 0);
        int fin = s->fin_when_drained;
        rrpc__lock_release(&s->wmu);
        if (fin) shutdown(s->fd, SHUT_RDWR); /* FIN after the data; our read side sees EOF */
        return;
      }
      int rc = rrpc__iobuf_move_trade(&s->wpend, &s->wqueue);
      rrpc__lock_release(&s->wmu);
      if (rc != 0) {
        rrpc__socket_fail(s, rc);
        return;
      }
      s->pend_counted = rrpc__iobuf_length(&s->wpend);
    }
    if (atomic_load(&s->failed)) return; /* keep the token: nothing more goes out */
    int rc = s->ops->write(s, &s->wpend);
    if (rc == -EAGAIN) return; /* the transport resumes us; we keep the token */
    if (rc < 0) {
      RRPC_LOG(WARNING, "socket fd=%d: write failed: %s", s->fd, rrpc_strerror(rc));
      rrpc__socket_fail(s, rc);
      return;
    }
  }
}

/* The deferred write of the loop thread (rrpc__socket_write). */
static void flush_task(void *arg) {
  rrpc__socket *s = arg;
  drain(s);
  rrpc__socket_unref(s);
}

/* The loop's end-of-round write: the token goes back to the drain. */
static void flush_deferred(void *arg) {
  rrpc__socket *s = arg;
  s->loop_holds = 0;
  drain(s);
  rrpc__socket_unref(s);
}

/* On the socket's loop, which holds the token for its deferred flush:
 * msg joins wpend (the holder's alone, so no lock) and leaves with it. */
static int append_deferred(rrpc__socket *s, rrpc_iobuf *msg, size_t n) {
  int rc = rrpc_iobuf_move(&s->wpend, msg);
  if (rc != 0) {
    written(s, n);
    rrpc_iobuf_clear(msg);
    return rc;
  }
  s->pend_counted += n;
  return 0;
}

/* The loop thread takes the free token: write once its round's callbacks
 * are done (every response cut from one read leaves in one sendmsg). */
static int defer_write(rrpc__socket *s, rrpc_iobuf *msg, size_t n) {
  s->loop_holds = 1;
  s->pend_counted = 0;
  int rc = append_deferred(s, msg, n);
  rrpc__socket_ref(s);
  if (rrpc__loop_defer(s->loop, flush_deferred, s) != 0) flush_deferred(s);
  return rc;
}

/* Take the free token: 1 if this thread now holds it. Sequentially
 * consistent, like the release in drain: what the last holder did to wpend
 * and pend_counted is visible to the next. */
static int take_token(rrpc__socket *s) {
  int free_token = 0;
  return atomic_compare_exchange_strong(&s->token, &free_token, 1);
}

/* Room for n more bytes in the write queue, counted; or why not. */
static int reserve(rrpc__socket *s, size_t n) {
  int rc = atomic_load(&s->failed) ? -RRPC_ECLOSE : rrpc__unwritten_reserve(atomic_load(&s->unwritten), n);
  if (rc == 0) atomic_fetch_add(&s->unwritten, n);
  return rc;
}

/* For a holder of the token whose flush is deferred (the loop's round, a
 * pool thread's run; its own, so no wmu): msg joins wpend, counted. */
static int reserve_and_defer(rrpc__socket *s, rrpc_iobuf *msg, size_t n) {
  int rc = reserve(s, n);
  if (rc != 0) {
    rrpc_iobuf_clear(msg);
    return rc;
  }
  return append_deferred(s, msg, n);
}

/* Under wmu: room for n bytes and, when another writer holds the token, msg
 * queued behind it (the holder drains the queue before it gives the token
 * back). 1: this caller took the token, wmu is still held and msg untouched.
 * Else wmu was released and msg consumed: 0 (queued) or a negative code. */
static int reserve_or_queue(rrpc__socket *s, rrpc_iobuf *msg, size_t n) {
  rrpc__lock_acquire(&s->wmu);
  int rc = reserve(s, n);
  if (rc != 0) {
    rrpc__lock_release(&s->wmu);
    rrpc_iobuf_clear(msg);
    return rc;
  }
  if (take_token(s)) return 1;
  rc = rrpc_iobuf_move(&s->wqueue, msg);
  rrpc__lock_release(&s->wmu);
  if (rc != 0) {
    written(s, n);
    rrpc_iobuf_clear(msg);
  }
  return rc;
}

/* rrpc__socket_write, told whether this is the socket's loop thread. */
static int write_msg(rrpc__socket *s, rrpc_iobuf *msg, int on_loop) {
  size_t n = rrpc__iobuf_length(msg);
  if (on_loop && s->loop_holds) {
    /* The loop holds the token for this round's flush: wpend is its own,
     * so the round's later messages join it without the lock. */
    return reserve_and_defer(s, msg, n);
  }
  if (on_loop && take_token(s)) {
    /* The loop thread took the free token without wmu (an in-loop handler
     * answering, a completion issuing the next call: one lock pair per
     * message fewer). Why no lock is needed: the token is what owns wpend
     * and pend_counted, and the holder that gave it back found wqueue
     * empty under wmu and left wpend empty; writers under wmu that find it
     * taken now only append to wqueue, which this holder's drain takes
     * under wmu before it gives the token back. reserve is atomic. */
    int rc = reserve(s, n);
    if (rc != 0) {
      rrpc_iobuf_clear(msg);
      drain(s); /* nothing of ours to send: write what queued meanwhile, or give the token back */
      return rc;
    }
    return defer_write(s, msg, n);
  }
  int rc = reserve_or_queue(s, msg, n);
  if (rc != 1) return rc;
  if (on_loop) {
    /* An in-loop handler answering, a completion issuing the next call. */
    rrpc__lock_release(&s->wmu);
    return defer_write(s, msg, n);
  }
  if (rrpc__loop_awake(s->loop) || atomic_load_explicit(&s->pending_requests, memory_order_relaxed) > 1) {
    /* From another thread (a pool worker answering) while the loop is busy
     * anyway, or while more of this connection's requests are being
     * handled (their responses join this one in the queue meanwhile):
     * queue and let the loop write them in one sendmsg - at most one
     * wake-up for the lot instead of a sendmsg each. Only a lone response
     * to a sleeping loop is written by the worker itself (the lowest
     * latency when load is light). */
    rc = rrpc_iobuf_move(&s->wqueue, msg);
    rrpc__lock_release(&s->wmu);
    if (rc != 0) {
      written(s, n);
      rrpc_iobuf_clear(msg);
    }
    rrpc__socket_ref(s);
    if (rrpc__loop_post(s->loop, flush_task, s) != 0) flush_task(s);
    return rc;
  }
  rrpc__lock_release(&s->wmu);
  rc = rrpc_iobuf_move(&s->wpend, msg); /* wpend is empty: cannot grow */
  s->pend_counted = n;
  if (rc != 0) {
    s->pend_counted = 0;
    written(s, n);
    rrpc_iobuf_clear(msg);
    rrpc__socket_fail(s, rc);
    return rc;
  }
  drain(s);
  return 0;
}

int rrpc__socket_write(rrpc__socket *s, rrpc_iobuf *msg) {
  return write_msg(s, msg, rrpc__loop_in_thread(s->loop));
}

/* A pool thread's deferred write, run by it or by its pool's rescuer: the
 * token's holder writes its run's responses and what queued behind them. */
static void worker_flush(void *arg) {
  rrpc__socket *s = arg;
  drain(s);
  rrpc__socket_unref(s);
}

/* A response from a pool thread that does not hold the socket's token for
 * its run (rrpc__socket_write_response, having looked). */
static int write_response_unheld(rrpc__socket *s, rrpc__worker *w, rrpc_iobuf *msg) {
  size_t n = rrpc__iobuf_length(msg);
  /* A lone response is written at once: nothing to gather it with, and
   * the lowest latency at light load. */
  if (atomic_load_explicit(&s->pending_requests, memory_order_relaxed) <= 1)
    return write_msg(s, msg, 0); /* a pool thread is no loop's */
  int rc = reserve_or_queue(s, msg, n);
  if (rc != 1) return rc;
  rrpc__lock_release(&s->wmu);
  /* The token was free, so wpend is empty and wqueue too: keep the token
   * for this run's flush. Writers meanwhile queue behind it. */
  s->pend_counted = 0;
  rc = append_deferred(s, msg, n);
  rrpc__socket_ref(s); /* the flush's */
  rrpc__worker_lock(w);
  rrpc__worker_defer_locked(w, &s->wflush);
  rrpc__worker_unlock(w);
  return rc;
}

int rrpc__socket_write_response(rrpc__socket *s, rrpc_iobuf *msg) {
  rrpc__worker *w = rrpc__worker_self();
  if (w == NULL) return rrpc__socket_write(s, msg);
  rrpc__worker_lock(w);
  if (__atomic_load_n(&s->wflush.owner, __ATOMIC_RELAXED) == w) {
    /* This thread's run already holds the token: no write mutex. */
    int rc = reserve_and_defer(s, msg, rrpc__iobuf_length(msg));
    rrpc__worker_unlock(w);
    return rc;
  }
  rrpc__worker_unlock(w);
  return write_response_unheld(s, w, msg);
}

/* The holder of the deferred flush packs straight into wpend (its own: no
 * lock); the bytes are counted after, and taken back if the limits refuse
 * them. */
static __attribute__((noinline)) int pack_deferred(rrpc__socket *s, rrpc__socket_pack_fn pack, void *ctx) {
  size_t before = rrpc__iobuf_length(&s->wpend);
  int rc = pack(ctx, &s->wpend);
  if (rc < 0) return rc;
  size_t n = rrpc__iobuf_length(&s->wpend) - before;
  rc = reserve(s, n);
  if (rc != 0) {
    rrpc__iobuf_truncate(&s->wpend, before);
    return rc;
  }
  s->pend_counted += n;
  return 0;
}

/* The loop thread took the free token (see write_msg): wpend is empty and
 * its own, so the message is packed straight into it and the flush
 * deferred to the round's end, as defer_write does for a made message. */
static __attribute__((noinline)) int pack_first_deferred(rrpc__socket *s, rrpc__socket_pack_fn pack,
                                                         void *ctx) {
  s->loop_holds = 1;
  s->pend_counted = 0;
  int rc = pack_deferred(s, pack, ctx);
  if (rc != 0) {
    s->loop_holds = 0;
    drain(s); /* nothing of ours to send: write what queued meanwhile, or give the token back */
    return rc;
  }
  rrpc__socket_ref(s);
  if (rrpc__loop_defer(s->loop, flush_deferred, s) != 0) flush_deferred(s);
  return 0;
}

/* Not the loop's own flush: a pool thread's response goes into its run's
 * pending bytes when the run holds the socket's token; anything else is
 * packed into an iobuf of its own and written as any other message. */
static __attribute__((noinline)) int pack_elsewhere(rrpc__socket *s, int on_loop, int response,
                                                    rrpc__socket_pack_fn pack, void *ctx) {
  rrpc__worker *w = !on_loop && response ? rrpc__worker_self() : NULL;
  int rc;
  if (w != NULL) {
    rrpc__worker_lock(w);
    if (__atomic_load_n(&s->wflush.owner, __ATOMIC_RELAXED) == w) {
      rc = pack_deferred(s, pack, ctx);
      rrpc__worker_unlock(w);
      return rc;
    }
    rrpc__worker_unlock(w);
  }
  rrpc_iobuf msg;
  rrpc__iobuf_init(&msg);
  rc = pack(ctx, &msg);
  if (rc == 0) rc = w != NULL ? write_response_unheld(s, w, &msg) : write_msg(s, &msg, on_loop);
  rrpc__iobuf_destroy(&msg);
  return rc;
}

int rrpc__socket_write_packed(rrpc__socket *s, int response, rrpc__socket_pack_fn pack, void *ctx) {
  int on_loop = rrpc__loop_in_thread(s->loop);
  if (on_loop) {
    /* The loop's round holds the token, or takes it now (no lock: see
     * write_msg): the message goes straight into wpend. */
    if (s->loop_holds) return pack_deferred(s, pack, ctx);
    if (take_token(s)) return pack_first_deferred(s, pack, ctx);
  }
  return pack_elsewhere(s, on_loop, response, pack, ctx);
}

int rrpc__socket_pack_held(rrpc__socket *s, rrpc__socket_pack_fn pack, void *ctx, size_t *mark) {
  /* Tail calls only, so no frame: off the loop (a synchronous caller, a
   * pool thread) the answer costs a few instructions. */
  if (!rrpc__loop_in_thread(s->loop)) return 1;
  *mark = rrpc__iobuf_length(&s->wpend);
  if (s->loop_holds) return pack_deferred(s, pack, ctx);
  /* The free token taken: wpend is empty (mark 0) and the flush deferred
   * to the round's end, as for a response. */
  if (take_token(s)) return pack_first_deferred(s, pack, ctx);
  return 1;
}

void rrpc__socket_unpack(rrpc__socket *s, size_t mark) {
  size_t n = rrpc__iobuf_length(&s->wpend) - mark;
  rrpc__iobuf_truncate(&s->wpend, mark);
  s->pend_counted -= n;
  written(s, n); /* the count pack_deferred made, given back */
}

void rrpc__socket_resume_write(rrpc__socket *s) { drain(s); }

void rrpc__socket_finish_writes(rrpc__socket *s) {
  rrpc__lock_acquire(&s->wmu);
  s->fin_when_drained = 1;
  int idle = !atomic_load(&s->token);
  rrpc__lock_release(&s->wmu);
  if (idle) shutdown(s->fd, SHUT_RDWR);
}

void rrpc__socket_ready(rrpc__socket *s, int code) {
  if (code < 0) {
    rrpc__socket_fail(s, code);
    return;
  }
  drain(s); /* the start-up held the token; now writes flow */
}

void rrpc__socket_deliver(rrpc__socket *s) {
  if (atomic_load(&s->failed) || s->owner_notified) return;
  /* One stamp for the activity and the owner's arrival time
   * (rrpc__socket_read_us): a server's requests and a client's responses
   * arrived by the time this round's wait returned (on a loop thread, its
   * clock: no read here). */
  s->read_us = rrpc__round_now_us();
  atomic_store_explicit(&s->last_active_us, s->read_us, memory_order_relaxed);
  size_t len = rrpc__iobuf_length(&s->rbuf);
  if (len > s->rbuf_left) {
    count_one_writer(&s->bytes_in, len - s->rbuf_left);
    rrpc__loop_note(RRPC__WORK_BYTES_IN, len - s->rbuf_left);
  }
  int rc = s->handler->on_data(s->owner, s, &s->rbuf);
  s->rbuf_left = rrpc__iobuf_length(&s->rbuf);
  if (rc < 0) {
    rrpc__socket_fail(s, rc);
    return;
  }
  /* What the owner left is a frame still arriving: it counts against the
   * process, and the connection that takes the total past the limit goes. */
  if (rrpc__input_account(&s->in_held, rrpc__iobuf_length(&s->rbuf))) {
    rrpc__limit_count(RRPC__LC_INPUT_LIMIT_CLOSES);
    RRPC_LOG(WARNING, "closing connection with %s: %zu bytes of an unfinished message pass the "
             "process's max_input_bytes (%zu)", s->peer_str, rrpc__iobuf_length(&s->rbuf),
             rrpc__limit_max_input());
    rrpc__socket_fail(s, -ENOBUFS);
  }
}

/* ---- creation ------------------------------------------------------------- */

static void connect_attempt(rrpc__socket *s);

static void start_task(void *arg) {
  rrpc__socket *s = arg;
  if (atomic_load(&s->failed)) return; /* its close_task is queued behind us */
  if (s->plan != NULL) {
    connect_attempt(s);
    return;
  }
  int rc = rrpc__loop_watch_add(s->loop, &s->watcher);
  if (rc == 0) {
    s->watching = 1;
    s->started = 1;
    rc = s->ops->start(s, s->is_client);
  }
  if (rc < 0) {
    RRPC_LOG(WARNING, "socket fd=%d: %s start failed: %s", s->fd, s->ops->name, rrpc_strerror(rc));
    rrpc__socket_fail(s, rc);
  }
  /* The loop's reference is dropped by close_task once the socket fails. */
}

/* ---- connecting (loop thread) ---------------------------------------------- */

static void fill_addrs(rrpc__socket *s) {
  socklen_t len = sizeof s->peer;
  getpeername(s->fd, (struct sockaddr *)&s->peer, &len);
  len = sizeof s->local;
  getsockname(s->fd, (struct sockaddr *)&s->local, &len);
}

static void tune_fd(int fd);

/* The TCP connection is up: from here the socket is what
 * rrpc__socket_create would have made, and the transport starts. */
static void connect_done(rrpc__socket *s) {
  free(s->plan);
  s->plan = NULL;
  fill_addrs(s);
  addr_str(&s->local, s->local_str, sizeof s->local_str);
  tune_fd(s->fd);
  atomic_store(&s->fd_ready, 1);
  int rc = rrpc__loop_watch_mod(s->loop, &s->watcher, EPOLLIN);
  if (rc == 0) {
    s->want_events = EPOLLIN;
    s->started = 1;
    rc = s->ops->start(s, s->is_client);
  }
  if (rc < 0) {
    RRPC_LOG(WARNING, "socket fd=%d: %s start failed: %s", s->fd, s->ops->name, rrpc_strerror(rc));
    rrpc__socket_fail(s, rc);
  }
}

static void retry_task(void *arg) {
  rrpc__socket *s = arg;
  s->plan->timer = 0;
  if (atomic_load(&s->failed)) return;
  connect_attempt(s);
}

/* One attempt failed with `code`: drop its fd, then try again after the
 * backoff or, with no attempts left, fail the socket (its calls hear why). */
static void attempt_failed(rrpc__socket *s, int code) {
  struct connect_plan *p = s->plan;
  if (p->timer != 0) {
    rrpc__loop_timer_cancel(s->loop, p->timer);
    p->timer = 0;
  }
  if (s->watching) {
    rrpc__loop_watch_del(s->loop, &s->watcher);
    s->watching = 0;
  }
  if (s->fd >= 0) close(s->fd);
  s->fd = -1;
  s->watcher.fd = -1;
  if (p->attempts_left <= 0 ||
      rrpc__loop_timer_add(s->loop, rrpc__now_us() + (uint64_t)p->backoff_ms * 1000u, retry_task, s,
                           &p->timer) != 0) {
    rrpc__socket_fail(s, code);
    return;
  }
  p->attempts_left--;
  p->backoff_ms = p->backoff_ms * 2 > CONNECT_BACKOFF_MAX_MS ? CONNECT_BACKOFF_MAX_MS : p->backoff_ms * 2;
}

static void attempt_timeout(void *arg) {
  rrpc__socket *s = arg;
  s->plan->timer = 0;
  if (atomic_load(&s->failed)) return;
  attempt_failed(s, -ETIMEDOUT);
}

static void connect_fd(rrpc__socket *s);

static void connect_attempt(rrpc__socket *s) {
  struct connect_plan *p = s->plan;
  int fd = socket(p->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    attempt_failed(s, -errno);
    return;
  }
  s->fd = fd;
  s->watcher.fd = fd;
  connect_fd(s);
}

/* Connect s->fd (a fresh non-blocking socket) as s->plan says. */
static void connect_fd(rrpc__socket *s) {
  struct connect_plan *p = s->plan;
  int fd = s->fd;
  if (connect(fd, (const struct sockaddr *)&p->sa, p->salen) == 0) {
    int rc = rrpc__loop_watch_add(s->loop, &s->watcher);
    if (rc != 0) {
      attempt_failed(s, rc);
      return;
    }
    s->watching = 1;
    connect_done(s);
    return;
  }
  if (errno != EINPROGRESS) {
    attempt_failed(s, -errno);
    return;
  }
  s->watcher.events = EPOLLOUT;
  int rc = rrpc__loop_watch_add(s->loop, &s->watcher);
  if (rc == 0) {
    s->watching = 1;
    rc = rrpc__loop_timer_add(s->loop, rrpc__now_us() + (uint64_t)p->timeout_ms * 1000u, attempt_timeout,
                              s, &p->timer);
  }
  if (rc != 0) attempt_failed(s, rc);
}

/* The fd became writable (connected) or reported an error. */
static void connect_event(rrpc__socket *s, uint32_t events) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0 && (events & (EPOLLERR | EPOLLHUP))) err = ECONNREFUSED;
  if (err != 0) {
    attempt_failed(s, -err);
    return;
  }
  if (!(events & EPOLLOUT)) return;
  if (s->plan->timer != 0) {
    rrpc__loop_timer_cancel(s->loop, s->plan->timer);
    s->plan->timer = 0;
  }
  connect_done(s);
}

static void tune_fd(int fd) {
  int one = 1;
  /* On a unix socket this fails with EOPNOTSUPP, harmlessly. */
  /* RPC messages are latency-bound: never let Nagle hold a small frame. */
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void worker_flush(void *arg);

static rrpc__socket *socket_alloc(rrpc__loop *loop, int fd, int is_client, const rrpc_transport_ops *ops,
                                  const rrpc__socket_handler *h, void *owner) {
  rrpc__socket *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  atomic_init(&s->refs, 2); /* the caller's and the loop's */
  atomic_init(&s->failed, 0);
  s->fd = fd;
  s->is_client = is_client;
  s->loop = loop;
  s->ops = ops;
  s->handler = h;
  s->owner = owner;
  atomic_init(&s->token, 1); /* held by the start-up until the transport is ready */
  s->want_events = EPOLLIN;
  atomic_init(&s->unwritten, 0);
  atomic_init(&s->read_paused, 0);
  atomic_init(&s->owner_hold, 0);
  atomic_init(&s->pending_requests, 0);
  atomic_init(&s->last_active_us, rrpc__now_us());
  s->watcher = (rrpc__watcher){.fd = fd, .events = EPOLLIN, .cb = on_fd_event, .arg = s};
  rrpc__iobuf_init(&s->rbuf);
  rrpc__iobuf_init(&s->wqueue);
  rrpc__iobuf_init(&s->wpend);
  rrpc__lock_init(&s->wmu);
  s->wflush.fn = worker_flush;
  s->wflush.arg = s;
  pthread_mutex_init(&s->ev_mu, NULL);
  s->created_us = rrpc__now_us();
  return s;
}

/* Hand the new socket to its loop, which starts it. */
static int socket_post_start(rrpc__socket *s, rrpc__socket **out) {
  int rc = rrpc__loop_post(s->loop, start_task, s);
  if (rc != 0) {
    s->ops = NULL; /* never started: nothing for the transport to close */
    socket_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

int rrpc__socket_create(rrpc__loop *loop, int fd, int is_client, const rrpc_transport_ops *ops,
                        const rrpc__socket_handler *h, void *owner, rrpc__socket **out) {
  rrpc__socket *s = socket_alloc(loop, fd, is_client, ops, h, owner);
  if (s == NULL) {
    close(fd);
    return -ENOMEM;
  }
  atomic_init(&s->fd_ready, 1);
  fill_addrs(s);
  addr_str(&s->peer, s->peer_str, sizeof s->peer_str);
  addr_str(&s->local, s->local_str, sizeof s->local_str);
  tune_fd(fd);
  return socket_post_start(s, out);
}

int rrpc__socket_connect(rrpc__loop *loop, const struct sockaddr *sa, socklen_t salen, int timeout_ms, int attempts,
                         const rrpc_transport_ops *ops, const rrpc__socket_handler *h, void *owner,
                         rrpc__socket **out) {
  rrpc__socket *s = socket_alloc(loop, -1, 1, ops, h, owner);
  if (s == NULL) return -ENOMEM;
  s->plan = calloc(1, sizeof *s->plan);
  if (s->plan == NULL) {
    s->ops = NULL;
    socket_free(s);
    return -ENOMEM;
  }
  if (salen > sizeof s->plan->sa) salen = sizeof s->plan->sa;
  memcpy(&s->plan->sa, sa, salen);
  s->plan->salen = salen;
  s->plan->timeout_ms = timeout_ms > 0 ? timeout_ms : 1;
  s->plan->attempts_left = attempts > 1 ? attempts - 1 : 0;
  s->plan->backoff_ms = CONNECT_BACKOFF_FIRST_MS;
  atomic_init(&s->fd_ready, 0);
  memcpy(&s->peer, sa, salen);
  s->peer_len = salen;
  s->connect_timeout_ms = s->plan->timeout_ms;
  addr_str(&s->peer, s->peer_str, sizeof s->peer_str);
  return socket_post_start(s, out);
}

/* The new TCP socket takes the old one's descriptor number (dup3), so
 * s->fd never changes under a thread that reads it (rrpc__socket_fail
 * shuts it down from any thread): the old connection is closed by that
 * very call, and no other file can ever get its number meanwhile. */
int rrpc__socket_reconnect(rrpc__socket *s, const rrpc_transport_ops *ops) {
  if (!s->is_client || s->peer_len == 0 || s->plan != NULL || s->fd < 0) return -EINVAL;
  struct connect_plan *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  int fd = socket(s->peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    free(p);
    return -errno;
  }
  if (s->watching) {
    rrpc__loop_watch_del(s->loop, &s->watcher);
    s->watching = 0;
  }
  int rc = dup3(fd, s->fd, O_CLOEXEC) < 0 ? -errno : 0;
  close(fd);
  if (rc != 0) {
    free(p);
    return rc;
  }
  memcpy(&p->sa, &s->peer, s->peer_len);
  p->salen = s->peer_len;
  p->timeout_ms = s->connect_timeout_ms;
  p->backoff_ms = CONNECT_BACKOFF_FIRST_MS;
  s->plan = p;
  s->ops = ops;
  s->tstate = NULL;
  s->started = 0;
  rrpc_iobuf_clear(&s->rbuf);
  connect_fd(s);
  return 0;
}

int rrpc__socket_connected(const rrpc__socket *s) { return atomic_load(&s->fd_ready); }

void *rrpc__socket_ext(const rrpc__socket *s) { return atomic_load(&((rrpc__socket *)s)->ext); }

void *rrpc__socket_ext_install(rrpc__socket *s, void *ext, const rrpc__socket_ext_ops *ops) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  /* ops are written before the pointer is published: readers load ext
   * (seq_cst) and then ops. Installs are rare (once per connection). */
  pthread_mutex_lock(&mu);
  void *cur = atomic_load(&s->ext);
  if (cur == NULL) {
    s->ext_ops = ops;
    atomic_store(&s->ext, ext);
    cur = ext;
  }
  pthread_mutex_unlock(&mu);
  return cur;
}
