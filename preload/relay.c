/* relay.c - the rrpc-run relay engine (see relay.h).
 *
 * Per connection, on the one loop thread of the process:
 * - up (application -> peer): read the relay end into an iobuf, one frame
 *   per read, rrpc__socket_write. While more than UP_HIGH bytes wait in the
 *   rrpc socket's queue, the relay end is not read (the application's writes
 *   then block or EAGAIN on a full unix socket, as on a full TCP socket); a
 *   1 ms tick looks again, since the socket has no "drained" callback.
 * - down (peer -> application): on_data cuts whole frames into `down` and
 *   writes it to the relay end; while some of it cannot be written, reading
 *   from the rrpc socket is held (rrpc__socket_hold_read: an RDMA peer's
 *   window closes) and EPOLLOUT on the relay end resumes it.
 * - EOF on the relay end (the application shut down writing, or closed
 *   the socket): a FIN frame. A FIN frame from the peer: shutdown(SHUT_WR)
 *   of the relay end once `down` is written, so the application reads EOF.
 *   When both FINs went through, or the application closed its socket, the
 *   rrpc socket closes once its queue has drained; a failed rrpc socket (the
 *   peer died, a bad frame) closes the relay end, so the application reads
 *   EOF and its writes fail with EPIPE: never a hang.
 */
#include "preload/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "preload/env_num.h"
#include "preload/frame.h"
#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/loop.h"
#include "rrpc/internal/socket.h"
#include "rrpc/remote/link.h"
#include "rrpc/transport.h"

rrpc_run_libc rrpc_run_real;

enum {
  UP_READ = 64 << 10,   /* bytes per read of the relay end (one frame) */
  UP_READS_PER_EVENT = 8, /* reads per readiness event, for fairness */
  UP_HIGH = 4 << 20,    /* stop reading the app while this much is queued */
  TICK_US = 1000,
  /* A server relay whose client has sent nothing this long after the TCP
   * connection was handed over takes it for a plain client (one that waits
   * for the server to speak first): relayed untouched from then on. */
  HELLO_WAIT_US = 5000000,
  DOWN_IOV = 32,
};
/* RRPC_RUN_RDMA=auto: a process that found no usable device looks again
 * after this long (a port may come up). */
#define RDMA_RECHECK_US 1000000u

/* A server relay does not know its client until the first bytes: a client
 * relay opens with RRPC_RUN_HELLO and frames from then on; anything else is a
 * program without rrpc-run (a peer listed by mistake in RRPC_RUN_PEERS, or
 * an rrpc RPC client), whose bytes are relayed untouched. */
enum { MODE_UNKNOWN, MODE_FRAMED, MODE_RAW };

struct rrpc_run_conn {
  atomic_int refs;
  /* set at adoption, read by any thread */
  struct sockaddr_storage local, peer;
  socklen_t local_len, peer_len;
  int app_fd; /* the fd number at adoption (for lines and the stat page) */
  int is_client;
  /* under mu: what application threads may ask while the relay runs */
  pthread_mutex_t mu;
  int tcp_fd;    /* hidden TCP socket, -1 once the relay let it go */
  int state;     /* 0 connecting, 1 connected, -errno failed */
  int so_error;  /* a failed connect's errno, until taken */
  /* ERM (erm.h): 0 while undecided, 1 once the peer is a framing relay (a
   * reference on the rrpc socket in erm_s), -errno when it never will be */
  int erm_ready;
  rrpc__socket *erm_s;
  pthread_cond_t erm_cv;
  _Atomic(struct rrpc_run_erm *) erm; /* the ERM state, made on first use */
  /* loop thread only */
  rrpc__socket *s;
  /* Atomic where the stat listing (rrpc_run_conns_format, any thread, under
   * g_mu only) reads them; the loop thread writes them without g_mu. */
  atomic_int had_socket; /* the TCP connection was up and handed to an rrpc socket */
  rrpc__watcher uw; /* the relay end */
  rrpc__watcher cw; /* the TCP fd while the connect is in progress */
  rrpc__watcher rw; /* raw mode over TCP: a dup of the TCP fd, read by the relay itself */
  int rw_added;
  int ufd;
  uint32_t uw_events;
  int uw_added;
  size_t discard;  /* bytes the adoption wrote into the app end to keep it unwritable */
  rrpc_iobuf upbuf;
  rrpc_iobuf down;
  int mode;        /* MODE_*: how the bytes to and from the peer look */
  int raw_shut;    /* raw mode: the application's EOF went out as SHUT_WR */
  int up_eof;      /* EOF read from the relay end, FIN frame sent */
  int up_throttled;
  int down_fin;    /* the peer's FIN arrived */
  int down_shut;   /* ... and was passed on as SHUT_WR */
  int app_gone;    /* the application closed its end */
  atomic_int net_closed; /* on_close ran */
  int closing;     /* we asked the rrpc socket to close */
  int ended;       /* the relay end is closed */
  rrpc__timer_id tick;
  rrpc__timer_id hello_timer;
  int close_code;
  _Atomic uint64_t bytes_up, bytes_down;
  atomic_int is_rdma;
  _Atomic uint32_t fallback_code;
  rrpc_run_conn *prev, *next; /* live list, under g_mu */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc__loop *g_loop;
static const rrpc_transport_ops *g_ops;
static int g_debug;
static int (*g_peer_check)(int tcp_fd);
static atomic_int g_forked;
static rrpc_run_conn *g_live;
static _Atomic uint64_t g_relayed, g_rdma, g_fallback, g_plain, g_adopt_failed, g_bytes_up, g_bytes_down,
    g_live_n, g_handed_back;

void rrpc_run_relay_set_debug(int on) { g_debug = on; }
void rrpc_run_relay_set_peer_check(int (*check)(int tcp_fd)) { g_peer_check = check; }
int rrpc_run_relay_debug(void) { return g_debug; }
void rrpc_run_relay_after_fork(void) { atomic_store(&g_forked, 1); }
int rrpc_run_relay_forked(void) { return atomic_load(&g_forked); }
void rrpc_run_count_plain(void) { atomic_fetch_add(&g_plain, 1); }
void rrpc_run_count_handed_back(void) { atomic_fetch_add(&g_handed_back, 1); }

void rrpc_run_counters_get(rrpc_run_counters *out) {
  out->relayed = atomic_load(&g_relayed);
  out->rdma = atomic_load(&g_rdma);
  out->fallback = atomic_load(&g_fallback);
  out->plain = atomic_load(&g_plain);
  out->adopt_failed = atomic_load(&g_adopt_failed);
  out->bytes_up = atomic_load(&g_bytes_up);
  out->bytes_down = atomic_load(&g_bytes_down);
  out->live = atomic_load(&g_live_n);
  out->handed_back = atomic_load(&g_handed_back);
}

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len) {
  char ip[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (ss->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
    inet_ntop(AF_INET, &a->sin_addr, ip, sizeof ip);
    port = ntohs(a->sin_port);
    snprintf(buf, len, "%s:%d", ip, port);
  } else if (ss->ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
    inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof ip);
    port = ntohs(a->sin6_port);
    snprintf(buf, len, "[%s]:%d", ip, port);
  } else {
    snprintf(buf, len, "-");
  }
}

static const char *transport_word(const rrpc_run_conn *c) {
  if (c->is_rdma) return "rdma";
  if (c->had_socket) return "tcp-fallback";
  return c->net_closed ? "none" : "connecting";
}

size_t rrpc_run_conns_format(char *buf, size_t len) {
  size_t want = 0;
  pthread_mutex_lock(&g_mu);
  for (rrpc_run_conn *c = g_live; c != NULL; c = c->next) {
    char l[80], p[80];
    addr_str(&c->local, l, sizeof l);
    addr_str(&c->peer, p, sizeof p);
    char line[320];
    int n = snprintf(line, sizeof line, "fd=%d %s local=%s peer=%s transport=%s up=%llu down=%llu fallback=%s\n",
                     c->app_fd, c->is_client ? "client" : "server", l, p, transport_word(c),
                     (unsigned long long)atomic_load(&c->bytes_up),
                     (unsigned long long)atomic_load(&c->bytes_down),
                     c->fallback_code ? rrpc__transport_fallback_text(c->fallback_code) : "-");
    if (n < 0) continue;
    if (want < len) snprintf(buf + want, len - want, "%s", line);
    want += (size_t)n;
  }
  pthread_mutex_unlock(&g_mu);
  return want;
}

/* ---- lifetime --------------------------------------------------------------- */

void rrpc_run_conn_ref(rrpc_run_conn *c) { atomic_fetch_add(&c->refs, 1); }

void rrpc_run_conn_unref(rrpc_run_conn *c) {
  if (atomic_fetch_sub(&c->refs, 1) != 1) return;
  struct rrpc_run_erm *e = atomic_load(&c->erm);
  if (e != NULL) rrpc_run_erm_release(e);
  if (c->erm_s != NULL) rrpc__socket_unref(c->erm_s);
  pthread_cond_destroy(&c->erm_cv);
  rrpc__iobuf_destroy(&c->upbuf);
  rrpc__iobuf_destroy(&c->down);
  pthread_mutex_destroy(&c->mu);
  free(c);
}

static void live_add(rrpc_run_conn *c) {
  pthread_mutex_lock(&g_mu);
  c->next = g_live;
  if (g_live) g_live->prev = c;
  g_live = c;
  pthread_mutex_unlock(&g_mu);
  atomic_fetch_add(&g_live_n, 1);
}

static void live_del(rrpc_run_conn *c) {
  pthread_mutex_lock(&g_mu);
  if (c->prev) c->prev->next = c->next; else g_live = c->next;
  if (c->next) c->next->prev = c->prev;
  c->prev = c->next = NULL;
  pthread_mutex_unlock(&g_mu);
  atomic_fetch_sub(&g_live_n, 1);
}

static void set_tcp_fd(rrpc_run_conn *c, int fd) {
  pthread_mutex_lock(&c->mu);
  c->tcp_fd = fd;
  pthread_mutex_unlock(&c->mu);
}

/* ---- the relay end's watcher -------------------------------------------------- */

static void uw_cb(rrpc__watcher *w, uint32_t events);

/* Register the events the relay end needs now; none at all when nothing is
 * wanted, so a hung-up end does not report EPOLLHUP in every round. */
static void uw_update(rrpc_run_conn *c) {
  if (c->ended) return;
  uint32_t ev = 0;
  if (!c->up_eof && !c->up_throttled && !c->net_closed && c->mode != MODE_UNKNOWN) ev |= EPOLLIN;
  if (rrpc__iobuf_length(&c->down) > 0) ev |= EPOLLOUT;
  /* After EOF, stay registered (with no events) only to hear the
   * application close its end (EPOLLHUP). */
  int keep = ev != 0 || (c->up_eof && !c->app_gone && !c->net_closed);
  if (!keep) {
    if (c->uw_added) rrpc__loop_watch_del(g_loop, &c->uw);
    c->uw_added = 0;
    return;
  }
  if (!c->uw_added) {
    c->uw.fd = c->ufd;
    c->uw.cb = uw_cb;
    c->uw.arg = c;
    c->uw.events = ev;
    if (rrpc__loop_watch_add(g_loop, &c->uw) == 0) c->uw_added = 1;
  } else if (ev != c->uw.events) {
    rrpc__loop_watch_mod(g_loop, &c->uw, ev);
  }
}

static void debug_end(rrpc_run_conn *c) {
  if (!g_debug) return;
  char p[80];
  addr_str(&c->peer, p, sizeof p);
  fprintf(stderr, "rrpc-run[%d]: fd=%d %s peer=%s closed transport=%s fallback=%s up=%llu down=%llu code=%d\n",
          (int)getpid(), c->app_fd, c->is_client ? "client" : "server", p, transport_word(c),
          c->fallback_code ? rrpc__transport_fallback_text(c->fallback_code) : "-",
          (unsigned long long)atomic_load(&c->bytes_up), (unsigned long long)atomic_load(&c->bytes_down),
          c->close_code);
}

static void unref_socket_task(void *arg) { rrpc__socket_unref(arg); }

/* Whether ERM's socket API (erm.c) may use the connection: only between two
 * framing relays (a plain peer's byte stream must never see an RMEM
 * frame). Decided once, on the loop thread; application threads wait for
 * it in rrpc_run_conn_remote_link. */
static void erm_decide(rrpc_run_conn *c, int ready) {
  pthread_mutex_lock(&c->mu);
  if (c->erm_ready == 0) {
    if (ready == 1 && (c->s == NULL || c->net_closed)) ready = -ENOTCONN;
    c->erm_ready = ready;
    if (ready == 1) {
      rrpc__socket_ref(c->s);
      c->erm_s = c->s;
    }
    pthread_cond_broadcast(&c->erm_cv);
  }
  pthread_mutex_unlock(&c->mu);
}

/* Close the relay end and let go of the rrpc socket: the relay is over. */
static void relay_end(rrpc_run_conn *c) {
  if (c->ended) return;
  if (c->uw_added) rrpc__loop_watch_del(g_loop, &c->uw);
  c->uw_added = 0;
  c->ended = 1;
  if (c->rw_added) rrpc__loop_watch_del(g_loop, &c->rw);
  c->rw_added = 0;
  if (c->rw.fd > 0) rrpc_run_real.close(c->rw.fd);
  c->rw.fd = -1;
  rrpc_run_real.close(c->ufd);
  c->ufd = -1;
  if (c->tick) rrpc__loop_timer_cancel(g_loop, c->tick);
  c->tick = 0;
  if (c->hello_timer) rrpc__loop_timer_cancel(g_loop, c->hello_timer);
  c->hello_timer = 0;
  set_tcp_fd(c, -1);
  erm_decide(c, -ENOTCONN);
  debug_end(c);
  live_del(c);
  if (c->s != NULL) {
    /* Not inside the socket's own callback: drop it on the next round. */
    if (rrpc__loop_post(g_loop, unref_socket_task, c->s) != 0) rrpc__socket_unref(c->s);
    c->s = NULL;
  }
  rrpc_run_conn_unref(c);
}

static void tick_cb(void *arg);
static void tick_arm(rrpc_run_conn *c) {
  if (c->tick || c->ended) return;
  rrpc__loop_timer_add(g_loop, rrpc__now_us() + TICK_US, tick_cb, c, &c->tick);
}

/* Close the rrpc socket once what was written has left its queue. */
static void maybe_finish(rrpc_run_conn *c) {
  if (c->net_closed || c->closing || c->s == NULL) return;
  if (c->mode == MODE_RAW && c->up_eof && !c->raw_shut && !c->app_gone) {
    /* A plain peer hears "done writing" as TCP's FIN, once our bytes left. */
    if (rrpc__socket_unwritten(c->s) > 0) {
      tick_arm(c);
      return;
    }
    c->raw_shut = 1;
    if (!c->is_rdma) shutdown(rrpc__socket_fd(c->s), SHUT_WR);
  }
  int done = c->app_gone || (c->up_eof && c->down_shut);
  if (!done) return;
  if (rrpc__socket_unwritten(c->s) > 0) {
    tick_arm(c);
    return;
  }
  c->closing = 1;
  rrpc__socket_fail(c->s, -RRPC_ECLOSE);
}

/* The application is gone (closed its end, or writing to it failed): what
 * the peer sends from now on has no reader. */
static void app_gone(rrpc_run_conn *c) {
  c->app_gone = 1;
  rrpc_iobuf_clear(&c->down);
  if (c->net_closed) {
    relay_end(c);
    return;
  }
  uw_update(c);
  maybe_finish(c);
}

/* ---- down: peer -> application ------------------------------------------------- */

/* Raw mode over TCP (a peer without rrpc-run): the relay reads the TCP
 * socket itself, through a dup of it, while the rrpc socket's reading is
 * held for good. The rrpc TCP transport takes the peer's FIN for the end
 * of the connection (and shuts both ways); read here, it is a half-close:
 * the application reads EOF and may still write. */
static void raw_watch(rrpc_run_conn *c);

static void flush_down(rrpc_run_conn *c);

static void rw_cb(rrpc__watcher *w, uint32_t events) {
  (void)events;
  rrpc_run_conn *c = w->arg;
  rrpc_run_conn_ref(c);
  for (int i = 0; i < UP_READS_PER_EVENT && !c->ended && rrpc__iobuf_length(&c->down) == 0; i++) {
    void *p;
    size_t avail;
    if (rrpc__iobuf_reserve(&c->down, UP_READ, &p, &avail) != 0) break;
    ssize_t n = read(w->fd, p, avail);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      if (c->rw_added) rrpc__loop_watch_del(g_loop, &c->rw);
      c->rw_added = 0;
      if (n < 0 && c->s != NULL) {
        rrpc__socket_fail(c->s, -errno);
        break;
      }
      c->down_fin = 1;
      break;
    }
    rrpc__iobuf_commit(&c->down, (size_t)n);
  }
  if (!c->ended) flush_down(c);
  rrpc_run_conn_unref(c);
}

/* Watch the dup for input while `down` is empty (back-pressure: nothing is
 * read while the application's socket is full). */
static void raw_watch(rrpc_run_conn *c) {
  if (c->ended || c->down_fin || c->net_closed || c->rw.fd <= 0) return;
  int want = rrpc__iobuf_length(&c->down) == 0;
  if (want && !c->rw_added) {
    c->rw.events = EPOLLIN;
    c->rw.cb = rw_cb;
    c->rw.arg = c;
    if (rrpc__loop_watch_add(g_loop, &c->rw) == 0) c->rw_added = 1;
  } else if (!want && c->rw_added) {
    rrpc__loop_watch_del(g_loop, &c->rw);
    c->rw_added = 0;
  }
}

static void raw_direct_start(rrpc_run_conn *c) {
  if (c->is_rdma || c->s == NULL || c->net_closed) return;
  int fd = fcntl(rrpc__socket_fd(c->s), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return; /* the transport's reading stays: half-close ends the relay */
  if (rrpc__socket_hold_read(c->s, 1) != 0) {
    rrpc_run_real.close(fd);
    return;
  }
  c->rw.fd = fd;
  raw_watch(c);
}

static void flush_down(rrpc_run_conn *c) {
  while (rrpc__iobuf_length(&c->down) > 0) {
    struct iovec iov[DOWN_IOV];
    size_t bytes = 0;
    int n = rrpc__iobuf_fill_iov(&c->down, iov, DOWN_IOV, &bytes);
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sendmsg(c->ufd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      rrpc_iobuf_pop_front(&c->down, (size_t)w);
      atomic_fetch_add(&c->bytes_down, (uint64_t)w);
      atomic_fetch_add(&g_bytes_down, (uint64_t)w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    app_gone(c);
    return;
  }
  if (c->rw.fd > 0) raw_watch(c);
  if (rrpc__iobuf_length(&c->down) == 0) {
    if (c->rw.fd > 0) raw_watch(c);
    else if (c->s != NULL && !c->net_closed) rrpc__socket_hold_read(c->s, 0);
    if (c->down_fin && !c->down_shut) {
      shutdown(c->ufd, SHUT_WR);
      c->down_shut = 1;
    }
  }
  if (c->net_closed && rrpc__iobuf_length(&c->down) == 0) {
    relay_end(c);
    return;
  }
  uw_update(c);
  maybe_finish(c);
}

/* The hello check on the front of the read buffer (frame.h). */
static int rrpc_run_hello_check(const rrpc_iobuf *rbuf) {
  unsigned char h[RRPC_RUN_HELLO_LEN];
  size_t n = rrpc_iobuf_copy_out(rbuf, 0, h, sizeof h);
  return n == 0 ? 0 : rrpc_run_hello_match(h, n);
}

static void note_transport(rrpc_run_conn *c) {
  if (c->s == NULL) return;
  rrpc__socket_stats st;
  rrpc__socket_get_stats(c->s, &st);
  if (st.fallback_code != 0 && c->fallback_code == 0) {
    c->fallback_code = st.fallback_code;
    atomic_fetch_add(&g_fallback, 1);
    if (g_debug)
      fprintf(stderr, "rrpc-run[%d]: fd=%d transport=tcp-fallback fallback=%s\n", (int)getpid(), c->app_fd,
              rrpc__transport_fallback_text(c->fallback_code));
  }
  if (!c->is_rdma && rrpc__socket_is_rdma(c->s)) {
    c->is_rdma = 1;
    atomic_fetch_add(&g_rdma, 1);
    if (g_debug) fprintf(stderr, "rrpc-run[%d]: fd=%d transport=rdma\n", (int)getpid(), c->app_fd);
  }
}

static int on_data(void *owner, rrpc__socket *s, rrpc_iobuf *rbuf) {
  rrpc_run_conn *c = owner;
  if (!c->is_rdma && c->fallback_code == 0) note_transport(c);
  if (c->app_gone) {
    rrpc_iobuf_clear(rbuf);
    return 0;
  }
  if (c->mode == MODE_UNKNOWN) {
    int m = rrpc_run_hello_check(rbuf);
    if (m == 0) return 0; /* a prefix of the hello so far */
    if (m == -2) {
      if (g_debug)
        fprintf(stderr, "rrpc-run[%d]: fd=%d a CLC message after the handshake: closed\n", (int)getpid(), c->app_fd);
      return -EPROTO;
    }
    c->mode = m > 0 ? MODE_FRAMED : MODE_RAW;
    erm_decide(c, m > 0 ? 1 : -ENOPROTOOPT);
    if (m > 0) rrpc_iobuf_pop_front(rbuf, RRPC_RUN_HELLO_LEN);
    if (g_debug && m < 0)
      fprintf(stderr, "rrpc-run[%d]: fd=%d the peer is not under rrpc-run: bytes relayed untouched\n",
              (int)getpid(), c->app_fd);
    if (m < 0) raw_direct_start(c);
    uw_update(c);
  }
  if (c->mode == MODE_RAW) {
    if (rrpc_iobuf_move(&c->down, rbuf) != 0) return -ENOMEM;
  }
  for (; c->mode == MODE_FRAMED;) {
    /* Remote memory's frames (ERM's socket API, erm.c) share the stream:
     * they open with 'R', which no relay frame header does. */
    if (rrpc__rmt_stream_is_frame(rbuf)) {
      int rc = rrpc__rmt_stream_cut(s, rbuf);
      if (rc == -EAGAIN) break; /* not whole yet, or the rest comes in a task of its own */
      if (rc < 0) return rc;
      if (rrpc__rmt_stream_is_frame(rbuf)) return -EPROTO;
      continue;
    }
    unsigned char h[RRPC_RUN_FRAME_HDR];
    if (rrpc_iobuf_copy_out(rbuf, 0, h, sizeof h) < sizeof h) break;
    rrpc_run_frame f;
    if (rrpc_run_frame_decode(h, sizeof h, &f) != 0 || c->down_fin) return -EPROTO;
    if (f.fin) {
      rrpc_iobuf_pop_front(rbuf, sizeof h);
      c->down_fin = 1;
      continue;
    }
    if (rrpc__iobuf_length(rbuf) < sizeof h + f.len) break;
    rrpc_iobuf_pop_front(rbuf, sizeof h);
    if (rrpc_iobuf_cut(rbuf, f.len, &c->down) < 0) return -ENOMEM;
  }
  flush_down(c);
  if (!c->ended && rrpc__iobuf_length(&c->down) > 0) rrpc__socket_hold_read(s, 1);
  return 0;
}

static void on_close(void *owner, rrpc__socket *s, int code) {
  (void)s;
  rrpc_run_conn *c = owner;
  note_transport(c);
  c->net_closed = 1;
  c->close_code = code;
  /* What the peer sent before it went away still reaches the application;
   * then the relay end closes (EOF for it, EPIPE for its writes). */
  if (c->app_gone || rrpc__iobuf_length(&c->down) == 0) {
    relay_end(c);
    return;
  }
  uw_update(c);
}

static const rrpc__socket_handler HANDLER = {on_data, on_close};

/* ---- up: application -> peer ----------------------------------------------------- */

static int send_frame_hdr(rrpc_run_conn *c, int fin, uint32_t len, rrpc_iobuf *msg) {
  unsigned char h[RRPC_RUN_FRAME_HDR];
  rrpc_run_frame_encode(fin, len, h);
  return rrpc_iobuf_append(msg, h, sizeof h) == 0 ? 0 : ((void)c, -ENOMEM);
}

static void up_throttle_check(rrpc_run_conn *c) {
  if (c->s == NULL || c->net_closed) return;
  size_t q = rrpc__socket_unwritten(c->s);
  if (!c->up_throttled && q > UP_HIGH) {
    c->up_throttled = 1;
    tick_arm(c);
  } else if (c->up_throttled && q <= UP_HIGH / 2) {
    c->up_throttled = 0;
  }
}

static void up_eof(rrpc_run_conn *c, int hup) {
  c->up_eof = 1;
  if (c->mode == MODE_FRAMED) {
    rrpc_iobuf msg;
    rrpc__iobuf_init(&msg);
    if (send_frame_hdr(c, 1, 0, &msg) == 0) rrpc__socket_write(c->s, &msg);
    rrpc__iobuf_destroy(&msg);
  }
  if (hup) {
    app_gone(c);
    return;
  }
  uw_update(c);
  maybe_finish(c);
}

static void up_read(rrpc_run_conn *c, uint32_t events) {
  for (int i = 0; i < UP_READS_PER_EVENT && !c->up_throttled; i++) {
    void *p;
    size_t avail;
    if (rrpc__iobuf_reserve(&c->upbuf, UP_READ, &p, &avail) != 0) return;
    if (avail > UP_READ) avail = UP_READ;
    if (c->discard > 0 && avail > c->discard) avail = c->discard;
    ssize_t n = read(c->ufd, p, avail);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      up_eof(c, n < 0 || (events & EPOLLHUP));
      return;
    }
    if (c->discard > 0) {
      c->discard -= (size_t)n;
      continue;
    }
    rrpc__iobuf_commit(&c->upbuf, (size_t)n);
    rrpc_iobuf msg;
    rrpc__iobuf_init(&msg);
    if ((c->mode == MODE_FRAMED && send_frame_hdr(c, 0, (uint32_t)n, &msg) != 0) ||
        rrpc_iobuf_move(&msg, &c->upbuf) != 0) {
      rrpc__iobuf_destroy(&msg);
      rrpc__socket_fail(c->s, -ENOMEM);
      return;
    }
    atomic_fetch_add(&c->bytes_up, (uint64_t)n);
    atomic_fetch_add(&g_bytes_up, (uint64_t)n);
    int rc = rrpc__socket_write(c->s, &msg);
    rrpc__iobuf_destroy(&msg);
    if (rc != 0) return; /* failed: on_close follows */
    /* A connection that only sends never reaches on_data, and at on_close
     * the transport no longer says RDMA: note it while it is up. */
    if (!c->is_rdma && c->fallback_code == 0) note_transport(c);
    up_throttle_check(c);
  }
  uw_update(c);
}

static void uw_cb(rrpc__watcher *w, uint32_t events) {
  rrpc_run_conn *c = w->arg;
  rrpc_run_conn_ref(c);
  if ((events & EPOLLOUT) && rrpc__iobuf_length(&c->down) > 0) flush_down(c);
  if (!c->ended && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) && !c->up_eof && !c->up_throttled &&
      !c->net_closed)
    up_read(c, events);
  else if (!c->ended && (events & (EPOLLHUP | EPOLLERR)) && c->up_eof && !c->app_gone)
    app_gone(c);
  else if (!c->ended && (events & (EPOLLHUP | EPOLLERR)) && c->up_throttled)
    uw_update(c); /* heard; the tick reads the rest once unthrottled */
  rrpc_run_conn_unref(c);
}

static void tick_cb(void *arg) {
  rrpc_run_conn *c = arg;
  c->tick = 0;
  if (c->ended) return;
  int was = c->up_throttled;
  up_throttle_check(c);
  if (c->up_throttled || (c->s != NULL && !c->net_closed && !c->closing &&
                          (c->app_gone || (c->up_eof && (c->down_shut || c->mode == MODE_RAW))) &&
                          rrpc__socket_unwritten(c->s) > 0)) {
    tick_arm(c);
  }
  if (was && !c->up_throttled) uw_update(c);
  maybe_finish(c);
}

/* ---- exit ---------------------------------------------------------------------------- */

/* At exit() the kernel would still send what the program wrote to its TCP
 * sockets; the relay thread dies with the process, so the exiting thread
 * waits (bounded) until every relay has handed what it read to its rrpc
 * socket's transport. */
static pthread_mutex_t g_exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_exit_cv;
static int g_exit_done;
static int g_exit_want_eof;
static uint64_t g_exit_deadline_us;

static int handed_over(rrpc_run_conn *c) {
  if (c->ended || c->net_closed || c->closing || c->s == NULL) return 1;
  if (g_exit_want_eof && !c->up_eof) return 0;
  return rrpc__iobuf_length(&c->upbuf) == 0 && rrpc__socket_unwritten(c->s) == 0;
}

static void exit_check(void *arg) {
  (void)arg;
  int all = 1;
  pthread_mutex_lock(&g_mu);
  for (rrpc_run_conn *c = g_live; c != NULL && all; c = c->next) all = handed_over(c);
  pthread_mutex_unlock(&g_mu);
  if (!all && rrpc__now_us() < g_exit_deadline_us) {
    rrpc__timer_id id;
    if (rrpc__loop_timer_add(g_loop, rrpc__now_us() + TICK_US, exit_check, NULL, &id) == 0) return;
  }
  pthread_mutex_lock(&g_exit_mu);
  g_exit_done = all ? 1 : -1;
  pthread_cond_signal(&g_exit_cv);
  pthread_mutex_unlock(&g_exit_mu);
}

int rrpc_run_relay_drain_at_exit(long linger_ms, int want_eof) {
  if (g_loop == NULL || atomic_load(&g_live_n) == 0 || rrpc_run_relay_forked()) return 0;
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&g_exit_cv, &ca);
  pthread_condattr_destroy(&ca);
  g_exit_want_eof = want_eof;
  g_exit_deadline_us = rrpc__now_us() + (uint64_t)linger_ms * 1000;
  if (rrpc__loop_post(g_loop, exit_check, NULL) != 0) return 0;
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += linger_ms / 1000 + 1; /* the loop's own bound comes first */
  pthread_mutex_lock(&g_exit_mu);
  while (g_exit_done == 0)
    if (pthread_cond_timedwait(&g_exit_cv, &g_exit_mu, &until) == ETIMEDOUT) break;
  int done = g_exit_done;
  pthread_mutex_unlock(&g_exit_mu);
  return done == 1 ? 0 : -ETIMEDOUT;
}

/* ---- adoption ----------------------------------------------------------------------- */

/* One size setting from the environment: 0 and *out set, 1 if unset, -1
 * (said on stderr) if malformed. */
static int env_long(const char *name, long max, long *out) {
  const char *v = getenv(name);
  int rc = rrpc_run_env_num(v, 1, max, out);
  if (rc < 0) {
    fprintf(stderr, "rrpc-run: %s=%s is not a number in 1..%ld; rrpc's default\n", name, v, max);
    return -1;
  }
  return rc;
}

/* The RDMA settings rrpc-run takes from the environment (rrpc's defaults
 * otherwise): RRPC_RUN_RING_KB, the receive ring per connection (each ring
 * is registered memory: a process with many connections on a small host
 * wants less than the 1 MiB default), and RRPC_RUN_MAX_HANDSHAKES, how many
 * RDMA handshakes a server runs at once before it declines more ("insufficient
 * memory": those connections go on over TCP). */
static void rdma_options_from_env(void) {
  static int done; /* under g_mu */
  if (done) return;
  done = 1;
  long kb = 0, hs = 0;
  int have_kb = env_long("RRPC_RUN_RING_KB", 512L << 10, &kb) == 0;
  int have_hs = env_long("RRPC_RUN_MAX_HANDSHAKES", 1L << 20, &hs) == 0;
  if (!have_kb && !have_hs) return;
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  if (have_kb) o.ring_size = (size_t)kb << 10;
  if (have_hs) o.max_handshakes = (int)hs;
  int rc = rrpc_rdma_global_init(&o);
  if (rc != 0) fprintf(stderr, "rrpc-run: RDMA settings refused: %s\n", rrpc_strerror(rc));
}

static int ensure_loop(void) {
  pthread_mutex_lock(&g_mu);
  int rc = 0;
  if (g_loop == NULL) {
    rdma_options_from_env();
    rc = rrpc__transport_pick(1, &g_ops);
    if (rc == 0) {
      /* The relay thread takes no signals: they belong to the program. */
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old);
      rc = rrpc__loop_start("rrpc-run", &g_loop);
      pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

static void hello_timeout(void *arg) {
  rrpc_run_conn *c = arg;
  c->hello_timer = 0;
  if (c->ended || c->mode != MODE_UNKNOWN) return;
  c->mode = MODE_RAW;
  erm_decide(c, -ENOPROTOOPT);
  if (g_debug)
    fprintf(stderr, "rrpc-run[%d]: fd=%d no hello from the client: bytes relayed untouched\n", (int)getpid(),
            c->app_fd);
  raw_direct_start(c);
  uw_update(c);
}

static int g_rdma_mode = RRPC_RUN_RDMA_AUTO;
static atomic_int g_rdma_have;
static _Atomic uint64_t g_rdma_recheck_us;

void rrpc_run_relay_set_rdma_mode(int mode) { g_rdma_mode = mode; }

int rrpc_run_relay_rdma_usable(void) {
  if (g_rdma_mode != RRPC_RUN_RDMA_AUTO) return g_rdma_mode == RRPC_RUN_RDMA_ON;
  if (atomic_load(&g_rdma_have)) return 1;
  uint64_t now = rrpc__now_us();
  if (now < atomic_load(&g_rdma_recheck_us)) return 0;
  pthread_mutex_lock(&g_mu);
  rdma_options_from_env(); /* before the device opens: they apply to it */
  pthread_mutex_unlock(&g_mu);
  int ok = rrpc_rdma_available();
  if (ok) atomic_store(&g_rdma_have, 1);
  else atomic_store(&g_rdma_recheck_us, now + RDMA_RECHECK_US);
  return ok;
}

rrpc__loop *rrpc_run_relay_loop(void) { return ensure_loop() == 0 ? g_loop : NULL; }

static void raw_start_task(void *arg) {
  rrpc_run_conn *c = arg;
  if (!c->ended) raw_direct_start(c);
  rrpc_run_conn_unref(c);
}

/* plain: the peer did not offer RDMA (eBPF mode): plain TCP through the
 * relay, no handshake, no hello, bytes untouched. */
static void start_socket(rrpc_run_conn *c, int tcp_fd, int plain) {
  if (plain) c->mode = MODE_RAW;
  int rc = rrpc__socket_create(g_loop, tcp_fd, c->is_client, plain ? rrpc__transport_tcp() : g_ops, &HANDLER, c,
                               &c->s);
  if (rc != 0) {
    c->s = NULL;
    c->net_closed = 1;
    set_tcp_fd(c, -1);
    relay_end(c);
    return;
  }
  c->had_socket = 1;
  if (plain) erm_decide(c, -ENOPROTOOPT);
  if (plain) {
    if (g_debug)
      fprintf(stderr, "rrpc-run[%d]: fd=%d %s\n", (int)getpid(), c->app_fd,
              c->is_client ? "the peer offered no SMC: plain TCP"
                           : "the client is not under rrpc-run: bytes relayed untouched");
    /* After the socket's own start-up (posted before this): held before
     * it watches the fd, reading would start anyway, and the transport
     * would take a FIN that came with the first bytes for the end. */
    rrpc_run_conn_ref(c);
    if (rrpc__loop_post(g_loop, raw_start_task, c) != 0) {
      raw_direct_start(c);
      rrpc_run_conn_unref(c);
    }
  } else if (c->is_client) {
    rrpc_iobuf hello;
    rrpc__iobuf_init(&hello);
    if (rrpc_iobuf_append(&hello, RRPC_RUN_HELLO, RRPC_RUN_HELLO_LEN) == 0) rrpc__socket_write(c->s, &hello);
    rrpc__iobuf_destroy(&hello);
    c->mode = MODE_FRAMED;
    erm_decide(c, 1);
  } else {
    rrpc__loop_timer_add(g_loop, rrpc__now_us() + HELLO_WAIT_US, hello_timeout, c, &c->hello_timer);
  }
  uw_update(c);
}

static void cw_cb(rrpc__watcher *w, uint32_t events) {
  (void)events;
  rrpc_run_conn *c = w->arg;
  int err = 0;
  socklen_t len = sizeof err;
  int fd = c->cw.fd;
  if (rrpc_run_real.getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err == 0 && !(events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
  rrpc__loop_watch_del(g_loop, &c->cw);
  if (err == 0 && (events & (EPOLLERR | EPOLLHUP))) err = ECONNREFUSED;
  pthread_mutex_lock(&c->mu);
  if (err != 0) {
    c->state = -err;
    c->so_error = err;
    c->tcp_fd = -1;
  } else {
    c->state = 1;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
      c->local = ss;
      c->local_len = sl;
    }
  }
  pthread_mutex_unlock(&c->mu);
  if (err != 0) {
    if (g_debug) fprintf(stderr, "rrpc-run[%d]: fd=%d connect failed: %s\n", (int)getpid(), c->app_fd, strerror(err));
    rrpc_run_real.close(fd);
    c->net_closed = 1;
    relay_end(c);
    return;
  }
  start_socket(c, fd, g_peer_check != NULL && g_peer_check(fd) != 1);
}

static void start_task(void *arg) {
  rrpc_run_conn *c = arg;
  if (c->state == 0) {
    c->cw.fd = c->tcp_fd;
    c->cw.events = EPOLLOUT;
    c->cw.cb = cw_cb;
    c->cw.arg = c;
    if (rrpc__loop_watch_add(g_loop, &c->cw) != 0) {
      pthread_mutex_lock(&c->mu);
      c->state = -EIO;
      c->so_error = EIO;
      pthread_mutex_unlock(&c->mu);
      rrpc_run_real.close(c->tcp_fd);
      set_tcp_fd(c, -1);
      c->net_closed = 1;
      relay_end(c);
    }
    return;
  }
  start_socket(c, c->tcp_fd, 0);
}

/* Make the app end unwritable until the connect is decided: fill its send
 * buffer (the relay discards these bytes before relaying any). */
static size_t prefill(int fd) {
  static const char zeros[16384];
  size_t total = 0;
  for (;;) {
    ssize_t n = send(fd, zeros, sizeof zeros, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n > 0) {
      total += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return total;
  }
}

int rrpc_run_relay_adopt(int fd, int is_client, int connecting, const struct sockaddr *peer, socklen_t peer_len,
                         int app_flags, rrpc_run_conn **out) {
  if (atomic_load(&g_forked)) return -ECHILD;
  int rc = ensure_loop();
  if (rc != 0) return rc;
  rrpc_run_conn *c = calloc(1, sizeof *c);
  if (c == NULL) return -ENOMEM;
  atomic_init(&c->refs, 2); /* the relay and the caller's fd table */
  pthread_mutex_init(&c->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&c->erm_cv, &ca);
  pthread_condattr_destroy(&ca);
  rrpc__iobuf_init(&c->upbuf);
  rrpc__iobuf_init(&c->down);
  c->is_client = is_client;
  c->app_fd = fd;
  c->rw.fd = -1;
  c->local_len = sizeof c->local;
  if (getsockname(fd, (struct sockaddr *)&c->local, &c->local_len) != 0) c->local_len = 0;
  if (peer != NULL && peer_len <= sizeof c->peer) {
    memcpy(&c->peer, peer, peer_len);
    c->peer_len = peer_len;
  } else {
    c->peer_len = sizeof c->peer;
    if (getpeername(fd, (struct sockaddr *)&c->peer, &c->peer_len) != 0) c->peer_len = 0;
  }
  c->state = connecting ? 0 : 1;
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) != 0) {
    rc = -errno;
    goto fail;
  }
  int hidden = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (hidden < 0) {
    rc = -errno;
    rrpc_run_real.close(sv[0]);
    rrpc_run_real.close(sv[1]);
    goto fail;
  }
  if (connecting) c->discard = prefill(sv[0]);
  if (!(app_flags & O_NONBLOCK)) fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) & ~O_NONBLOCK);
  if (rrpc_run_real.dup3(sv[0], fd, (app_flags & O_CLOEXEC) ? O_CLOEXEC : 0) < 0) {
    rc = -errno;
    rrpc_run_real.close(hidden);
    rrpc_run_real.close(sv[0]);
    rrpc_run_real.close(sv[1]);
    goto fail;
  }
  rrpc_run_real.close(sv[0]);
  c->ufd = sv[1];
  c->tcp_fd = hidden;
  atomic_fetch_add(&g_relayed, 1);
  live_add(c);
  if (g_debug) {
    char p[80];
    addr_str(&c->peer, p, sizeof p);
    fprintf(stderr, "rrpc-run[%d]: fd=%d %s peer=%s relayed, trying RDMA%s\n", (int)getpid(), fd,
            is_client ? "client" : "server", p, connecting ? " (connect in progress)" : "");
  }
  *out = c;
  if (rrpc__loop_post(g_loop, start_task, c) != 0) {
    /* The loop is gone (process exit): the fd stays a closed relay. */
    rrpc_run_real.close(c->ufd);
    rrpc_run_real.close(hidden);
    live_del(c);
    rrpc_run_conn_unref(c);
  }
  return 0;
fail:
  atomic_fetch_add(&g_adopt_failed, 1);
  rrpc__iobuf_destroy(&c->upbuf);
  rrpc__iobuf_destroy(&c->down);
  pthread_cond_destroy(&c->erm_cv);
  pthread_mutex_destroy(&c->mu);
  free(c);
  return rc;
}

/* ---- what application threads ask ------------------------------------------------------ */

int rrpc_run_conn_addr(rrpc_run_conn *c, int peer, struct sockaddr *out, socklen_t *len) {
  pthread_mutex_lock(&c->mu);
  const struct sockaddr_storage *ss = peer ? &c->peer : &c->local;
  socklen_t have = peer ? c->peer_len : c->local_len;
  int rc = 0;
  if (peer && c->state != 1) rc = -ENOTCONN;
  else if (have == 0) rc = -ENOTCONN;
  else {
    memcpy(out, ss, have < *len ? have : *len);
    *len = have;
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

int rrpc_run_conn_take_error(rrpc_run_conn *c) {
  pthread_mutex_lock(&c->mu);
  int e = c->so_error;
  c->so_error = 0;
  pthread_mutex_unlock(&c->mu);
  return e;
}

int rrpc_run_conn_connect_state(rrpc_run_conn *c) {
  pthread_mutex_lock(&c->mu);
  int st = c->state;
  pthread_mutex_unlock(&c->mu);
  return st;
}

int rrpc_run_conn_tcp_opt(rrpc_run_conn *c, int set, int level, int name, void *val, socklen_t *len) {
  pthread_mutex_lock(&c->mu);
  int rc;
  if (c->tcp_fd < 0) {
    errno = ENOTCONN;
    rc = -1;
  } else if (set) {
    rc = rrpc_run_real.setsockopt(c->tcp_fd, level, name, val, *len);
  } else {
    rc = rrpc_run_real.getsockopt(c->tcp_fd, level, name, val, len);
  }
  pthread_mutex_unlock(&c->mu);
  return rc;
}

/* ---- ERM's socket API (erm.c) ----------------------------------------------------------- */

struct rrpc_run_erm *rrpc_run_conn_erm(rrpc_run_conn *c) { return atomic_load(&c->erm); }

struct rrpc_run_erm *rrpc_run_conn_erm_install(rrpc_run_conn *c, struct rrpc_run_erm *e) {
  struct rrpc_run_erm *cur = NULL;
  return atomic_compare_exchange_strong(&c->erm, &cur, e) ? e : cur;
}

/* The handshake is over (RDMA, its fallback, or a failure): regions
 * registered from now on get the transport they will be used on. Loop
 * thread; the answer is handed over under c->mu. */
struct erm_probe {
  rrpc_run_conn *c;
  rrpc__socket *s;
  int done, decided;
};

static void erm_probe_task(void *arg) {
  struct erm_probe *p = arg;
  rrpc__socket_stats st;
  rrpc__socket_get_stats(p->s, &st);
  int d = st.failed != 0 || st.fallback_code != 0 || rrpc__socket_is_rdma(p->s);
  pthread_mutex_lock(&p->c->mu);
  p->decided = d;
  p->done = 1;
  pthread_cond_broadcast(&p->c->erm_cv);
  pthread_mutex_unlock(&p->c->mu);
}

static int erm_wait(rrpc_run_conn *c, const struct timespec *until) {
  return pthread_cond_timedwait(&c->erm_cv, &c->mu, until) == ETIMEDOUT ? -ETIMEDOUT : 0;
}

static struct timespec ms_from_now(long ms) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += ms / 1000;
  t.tv_nsec += (ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec++;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

/* A client's handshake runs after connect returned: wait (checking every
 * millisecond on the loop, at most until `until`) for it to end, so that
 * the region is registered with the transport's memory. Past the bound the
 * region goes on without (its bytes then travel in frames). */
static void erm_wait_handshake(rrpc_run_conn *c, rrpc__socket *s, const struct timespec *until) {
  if (g_ops == rrpc__transport_tcp()) return;
  for (;;) {
    struct erm_probe p = {.c = c, .s = s};
    if (rrpc__loop_post(g_loop, erm_probe_task, &p) != 0) return;
    pthread_mutex_lock(&c->mu);
    while (!p.done) pthread_cond_wait(&c->erm_cv, &c->mu);
    int timed_out = 0;
    if (!p.decided) {
      struct timespec tick = ms_from_now(1);
      const struct timespec *w = (tick.tv_sec > until->tv_sec ||
                                  (tick.tv_sec == until->tv_sec && tick.tv_nsec > until->tv_nsec))
                                     ? until
                                     : &tick;
      timed_out = erm_wait(c, w) != 0 && w == until;
    }
    pthread_mutex_unlock(&c->mu);
    if (p.decided || timed_out) return;
  }
}

int rrpc_run_conn_remote_link(rrpc_run_conn *c, long wait_ms, rrpc_remote_link **out) {
  struct timespec until = ms_from_now(wait_ms);
  pthread_mutex_lock(&c->mu);
  int rc = 0;
  while (c->erm_ready == 0 && rc == 0) rc = erm_wait(c, &until);
  if (c->erm_ready < 0) rc = c->erm_ready;
  rrpc__socket *s = rc == 0 ? c->erm_s : NULL;
  if (s != NULL) rrpc__socket_ref(s);
  pthread_mutex_unlock(&c->mu);
  if (s == NULL) return rc != 0 ? rc : -ENOTCONN;
  if (c->is_client) erm_wait_handshake(c, s, &until);
  rc = rrpc__rmt_link_of(s, out);
  rrpc__socket_unref(s);
  return rc;
}
