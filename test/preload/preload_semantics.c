/* preload_semantics - socket semantics of an ordinary TCP program, run under
 * rrpc-run (test/preload/preload_test.sh runs it): both ends in this
 * process (server threads) unless a case says otherwise, so with the port
 * listed in RRPC_RUN_PEERS every connection goes through the relay.
 *
 *   preload_semantics CASE PORT      one case (names below); exit 0 = pass
 *                                    (PORT 0: a free port the kernel picks)
 *   preload_semantics serve-flood PORT   (the peer killed with -9: a server
 *                                    process that writes until killed)
 *   preload_semantics serve-echo PORT    (a plain echo server, one client)
 *   preload_semantics serve-sink PORT    (kill9-reader: a reading server
 *                                    process killed while the case writes)
 *
 *   (plain-client-listed: a plain client that the server here lists, with
 *   a half-close; the server's relay passes its bytes through untouched;
 *   hostile-garbage / hostile-stall: a listed plain client that starts an
 *   SMC-R CLC message, then sends garbage or stops inside the header: both
 *   ends see the connection closed within 10 s)
 *
 * Every wait is bounded: alarm() ends a hung case with a failure. */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "preload_test.h"

static int g_port;

/* PRELOAD_TEST_ADDR: the IPv4 address both ends use (an RDMA device's own
 * address in the VM); 127.0.0.1 by default. */
static struct sockaddr_in addr_of(int port) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  const char *ip = getenv("PRELOAD_TEST_ADDR");
  if (ip == NULL || inet_pton(AF_INET, ip, &a.sin_addr) != 1) a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/* A port nobody listens on now: the kernel's pick for a bind to port 0
 * (the cases then listen on it again with SO_REUSEADDR). */
static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = addr_of(0);
  socklen_t len = sizeof a;
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  close(fd);
  return ntohs(a.sin_port);
}

static int listen_on(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  int one = 1;
  CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  struct sockaddr_in a = addr_of(port);
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(fd, 256) == 0);
  return fd;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = addr_of(port);
  CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  return fd;
}

static void write_all(int fd, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    CHECK(w > 0);
    c += w;
    n -= (size_t)w;
  }
}

static size_t read_full(int fd, void *p, size_t n) {
  char *c = p;
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, c + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r >= 0);
    if (r == 0) break;
    got += (size_t)r;
  }
  return got;
}

static unsigned char pattern(size_t i, unsigned seed) { return (unsigned char)((i * 131u + seed) ^ (i >> 13)); }

/* ---- a server thread: accept one connection, run `fn` on it ------------------ */
typedef struct server {
  int lfd;
  void (*fn)(int fd, void *arg);
  void *arg;
  pthread_t th;
} server;

static void *server_main(void *p) {
  server *s = p;
  int fd = accept(s->lfd, NULL, NULL);
  CHECK(fd >= 0);
  s->fn(fd, s->arg);
  close(fd);
  return NULL;
}

static void server_start(server *s, void (*fn)(int, void *), void *arg) {
  s->lfd = listen_on(g_port);
  s->fn = fn;
  s->arg = arg;
  CHECK(pthread_create(&s->th, NULL, server_main, s) == 0);
}

static void server_join(server *s) {
  pthread_join(s->th, NULL);
  close(s->lfd);
}

/* ---- 16 MiB byte-exact each way, at once ------------------------------------------ */
enum { BIG = 16 << 20 };

typedef struct sender { int fd; unsigned seed; } sender;
static void *send_big(void *p) {
  sender *s = p;
  unsigned char *buf = malloc(BIG);
  CHECK(buf != NULL);
  for (size_t i = 0; i < BIG; i++) buf[i] = pattern(i, s->seed);
  write_all(s->fd, buf, BIG);
  CHECK(shutdown(s->fd, SHUT_WR) == 0);
  free(buf);
  return NULL;
}

static void check_big(int fd, unsigned seed) {
  unsigned char *buf = malloc(BIG + 1);
  CHECK(buf != NULL);
  size_t got = read_full(fd, buf, BIG + 1); /* +1: EOF must follow exactly */
  CHECK(got == BIG);
  for (size_t i = 0; i < BIG; i++) CHECK(buf[i] == pattern(i, seed));
  free(buf);
}

static void big_server(int fd, void *arg) {
  (void)arg;
  sender s = {fd, 7};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, send_big, &s) == 0);
  check_big(fd, 3);
  pthread_join(th, NULL);
}

static int case_bytes16m(void) {
  server sv;
  server_start(&sv, big_server, NULL);
  int fd = connect_to(g_port);
  sender s = {fd, 3};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, send_big, &s) == 0);
  check_big(fd, 7);
  pthread_join(th, NULL);
  close(fd);
  server_join(&sv);
  return 0;
}

/* ---- readiness ------------------------------------------------------------------------ */
/* The server writes `hello` (5 bytes), waits for one byte, then shuts down
 * writing and waits for EOF. */
static void hello_server(int fd, void *arg) {
  (void)arg;
  write_all(fd, "hello", 5);
  char b;
  CHECK(read_full(fd, &b, 1) == 1);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  CHECK(read_full(fd, &b, 1) == 0);
}

static int case_epoll(void) {
  server sv;
  server_start(&sv, hello_server, NULL);
  int fd = connect_to(g_port);
  int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd}, out[4];
  /* level-triggered: readable until all is read */
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLIN));
  char b[8];
  CHECK(recv(fd, b, 2, 0) == 2);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLIN));
  /* edge-triggered: no new event for bytes already reported */
  ev.events = EPOLLIN | EPOLLET;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1);
  CHECK(recv(fd, b, 1, 0) == 1);
  CHECK(epoll_wait(ep, out, 4, 100) == 0);
  /* oneshot: one report, then nothing until re-armed */
  ev.events = EPOLLIN | EPOLLONESHOT;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1);
  CHECK(epoll_wait(ep, out, 4, 100) == 0);
  CHECK(read_full(fd, b, 2) == 2 && memcmp(b, "lo", 2) == 0);
  /* RDHUP: the server shuts down writing after our byte */
  ev.events = EPOLLRDHUP;
  CHECK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) == 0);
  write_all(fd, "x", 1);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLRDHUP));
  CHECK(read(fd, b, 1) == 0);
  close(ep);
  close(fd);
  server_join(&sv);
  return 0;
}

static int case_poll_select(void) {
  server sv;
  server_start(&sv, hello_server, NULL);
  int fd = connect_to(g_port);
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};
  CHECK(poll(&p, 1, 5000) >= 1 && (p.revents & POLLOUT));
  p.events = POLLIN;
  CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN));
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  struct timeval tv = {5, 0};
  CHECK(select(fd + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(fd, &r));
  char b[5];
  CHECK(read_full(fd, b, 5) == 5 && memcmp(b, "hello", 5) == 0);
  p.events = POLLIN;
  CHECK(poll(&p, 1, 100) == 0); /* all read: not readable */
  write_all(fd, "x", 1);
  CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLIN)); /* EOF is readable */
  CHECK(read(fd, b, 1) == 0);
  close(fd);
  server_join(&sv);
  return 0;
}

/* ---- MSG_PEEK / MSG_WAITALL / MSG_DONTWAIT / FIONREAD, partial I/O --------------------------- */
static int case_flags(void) {
  server sv;
  server_start(&sv, hello_server, NULL);
  int fd = connect_to(g_port);
  char b[8];
  CHECK(recv(fd, b, 5, MSG_PEEK | MSG_WAITALL) == 5 && memcmp(b, "hello", 5) == 0);
  int avail = 0;
  CHECK(ioctl(fd, FIONREAD, &avail) == 0 && avail == 5);
  CHECK(recv(fd, b, 3, 0) == 3 && memcmp(b, "hel", 3) == 0); /* a partial read */
  CHECK(recv(fd, b, 8, MSG_DONTWAIT) == 2 && memcmp(b, "lo", 2) == 0);
  CHECK(recv(fd, b, 8, MSG_DONTWAIT) == -1 && (errno == EAGAIN || errno == EWOULDBLOCK));
  write_all(fd, "x", 1);
  CHECK(recv(fd, b, 8, MSG_WAITALL) == 0);
  close(fd);
  server_join(&sv);
  return 0;
}

/* Partial writes: a non-blocking writer fills the path until EAGAIN; once
 * the reader drains, POLLOUT comes back and every byte arrives in order. */
static void drain_server(int fd, void *arg) {
  size_t *total = arg;
  char go;
  CHECK(read_full(fd, &go, 1) == 1); /* the writer says when it hit EAGAIN */
  unsigned char buf[65536];
  size_t n = 0;
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    CHECK(r >= 0);
    if (r == 0) break;
    for (ssize_t i = 0; i < r; i++) CHECK(buf[i] == pattern(n + (size_t)i, 9));
    n += (size_t)r;
  }
  *total = n;
}

static int case_partial_write(void) {
  size_t total = 0;
  server sv;
  server_start(&sv, drain_server, &total);
  int fd = connect_to(g_port);
  write_all(fd, "g", 1);
  CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
  unsigned char chunk[65536];
  size_t sent = 0;
  int eagain = 0;
  /* Bounded: the server reads only after "g", which it already has, so this
   * fills until EAGAIN within a few MiB, or the case fails. */
  for (int i = 0; i < 100000 && sent < ((size_t)256 << 20); i++) {
    for (size_t k = 0; k < sizeof chunk; k++) chunk[k] = pattern(sent + k, 9);
    ssize_t w = write(fd, chunk, sizeof chunk);
    if (w < 0 && errno == EAGAIN) {
      eagain = 1;
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      CHECK(poll(&p, 1, 10000) == 1 && (p.revents & POLLOUT));
      if (sent > ((size_t)8 << 20)) break;
      continue;
    }
    CHECK(w > 0);
    sent += (size_t)w;
  }
  CHECK(eagain);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  server_join(&sv);
  CHECK(total == sent);
  close(fd);
  return 0;
}

/* ---- half-close ---------------------------------------------------------------------------- */
static void upcase_server(int fd, void *arg) {
  (void)arg;
  char buf[256];
  size_t n = read_full(fd, buf, sizeof buf); /* until the client's EOF */
  for (size_t i = 0; i < n; i++) buf[i] = (char)(buf[i] - 32);
  write_all(fd, buf, n);
}

static int case_halfclose(void) {
  server sv;
  server_start(&sv, upcase_server, NULL);
  int fd = connect_to(g_port);
  write_all(fd, "abcdef", 6);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  char b[16];
  CHECK(read_full(fd, b, sizeof b) == 6 && memcmp(b, "ABCDEF", 6) == 0);
  CHECK(read(fd, b, 1) == 0);
  close(fd);
  server_join(&sv);
  return 0;
}

/* ---- dup + close, getpeername/getsockname ----------------------------------------------------- */
static void echo_server(int fd, void *arg) {
  (void)arg;
  char buf[4096];
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    CHECK(r >= 0);
    if (r == 0) return;
    write_all(fd, buf, (size_t)r);
  }
}

static int case_dup(void) {
  server sv;
  server_start(&sv, echo_server, NULL);
  int fd = connect_to(g_port);
  int d = dup(fd);
  CHECK(d >= 0);
  CHECK(close(fd) == 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  CHECK(getpeername(d, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET &&
        ntohs(a.sin_port) == g_port);
  len = sizeof a;
  CHECK(getsockname(d, (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET);
  int nd = 1;
  CHECK(setsockopt(d, IPPROTO_TCP, TCP_NODELAY, &nd, sizeof nd) == 0);
  write_all(d, "dup", 3);
  char b[3];
  CHECK(read_full(d, b, 3) == 3 && memcmp(b, "dup", 3) == 0);
  int d2 = dup2(d, 100);
  CHECK(d2 == 100);
  CHECK(close(d) == 0);
  write_all(d2, "two", 3);
  CHECK(read_full(d2, b, 3) == 3 && memcmp(b, "two", 3) == 0);
  CHECK(close(d2) == 0);
  server_join(&sv); /* the echo server saw EOF once the last fd closed */
  return 0;
}

/* ---- a forked child uses the connection, then the parent ----------------------------------- */
static int case_fork(void) {
  server sv;
  server_start(&sv, echo_server, NULL);
  int fd = connect_to(g_port);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    alarm(20);
    write_all(fd, "child", 5);
    char b[5];
    _exit(read_full(fd, b, 5) == 5 && memcmp(b, "child", 5) == 0 ? 0 : 1);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  write_all(fd, "parent", 6);
  char b[6];
  CHECK(read_full(fd, b, 6) == 6 && memcmp(b, "parent", 6) == 0);
  close(fd);
  server_join(&sv);
  return 0;
}

/* ---- non-blocking connect and SO_ERROR ------------------------------------------------------ */
static int nb_connect(int port, int *err) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = addr_of(port);
  int rc = connect(fd, (struct sockaddr *)&a, sizeof a);
  CHECK(rc == 0 || errno == EINPROGRESS);
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  CHECK(poll(&p, 1, 10000) == 1);
  socklen_t len = sizeof *err;
  CHECK(getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len) == 0);
  return fd;
}

static int case_nbconnect(void) {
  server sv;
  server_start(&sv, echo_server, NULL);
  int err = -1;
  int fd = nb_connect(g_port, &err);
  CHECK(err == 0);
  struct sockaddr_in a;
  socklen_t len = sizeof a;
  CHECK(getpeername(fd, (struct sockaddr *)&a, &len) == 0 && ntohs(a.sin_port) == g_port);
  CHECK(send(fd, "nb", 2, 0) == 2);
  struct pollfd p = {.fd = fd, .events = POLLIN};
  CHECK(poll(&p, 1, 10000) == 1);
  char b[2];
  CHECK(recv(fd, b, 2, MSG_WAITALL) == 2 && memcmp(b, "nb", 2) == 0);
  close(fd);
  server_join(&sv);
  /* Nobody listens on g_port now: refused, told through SO_ERROR. */
  int fd2 = nb_connect(g_port, &err);
  CHECK(err == ECONNREFUSED);
  close(fd2);
  return 0;
}

/* ---- 200 connections at once ------------------------------------------------------------------- */
enum { CONNS = 200 };
static void *many_server(void *p) {
  int lfd = *(int *)p;
  int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, out[64];
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) == 0);
  int closed = 0;
  while (closed < CONNS) {
    int n = epoll_wait(ep, out, 64, 20000);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
      int fd = out[i].data.fd;
      if (fd == lfd) {
        int c = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        CHECK(c >= 0);
        struct epoll_event e = {.events = EPOLLIN, .data.fd = c};
        CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, c, &e) == 0);
        continue;
      }
      char buf[256];
      ssize_t r = read(fd, buf, sizeof buf);
      if (r < 0 && errno == EAGAIN) continue;
      CHECK(r >= 0);
      if (r == 0) {
        close(fd); /* also leaves the epoll set */
        closed++;
        continue;
      }
      write_all(fd, buf, (size_t)r);
    }
  }
  close(ep);
  return NULL;
}

static int case_many(void) {
  int lfd = listen_on(g_port);
  pthread_t th;
  CHECK(pthread_create(&th, NULL, many_server, &lfd) == 0);
  static int fds[CONNS];
  for (int i = 0; i < CONNS; i++) fds[i] = connect_to(g_port);
  for (int i = 0; i < CONNS; i++) {
    char msg[16];
    int n = snprintf(msg, sizeof msg, "conn%03d", i);
    write_all(fds[i], msg, (size_t)n);
  }
  for (int i = 0; i < CONNS; i++) {
    char want[16], got[16];
    int n = snprintf(want, sizeof want, "conn%03d", i);
    CHECK(read_full(fds[i], got, (size_t)n) == (size_t)n && memcmp(got, want, (size_t)n) == 0);
    close(fds[i]);
  }
  pthread_join(th, NULL);
  close(lfd);
  return 0;
}

/* ---- the peer killed with -9 mid-stream --------------------------------------------------------- */
static pid_t spawn_self(const char *self, const char *mode, int port, int preload) {
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (!preload) unsetenv("LD_PRELOAD");
    char p[16];
    snprintf(p, sizeof p, "%d", port);
    execl(self, self, mode, p, (char *)NULL);
    _exit(127);
  }
  return pid;
}

static int connect_retry(int port) {
  for (int i = 0; i < 500; i++) { /* the child process is starting to listen */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = addr_of(port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) return fd;
    CHECK(errno == ECONNREFUSED);
    close(fd);
    struct pollfd none;
    poll(&none, 0, 10);
  }
  CHECK(!"server did not start");
  return -1;
}

static int serve_flood(void) {
  int lfd = listen_on(g_port);
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  char buf[65536];
  memset(buf, 'f', sizeof buf);
  for (;;) write_all(fd, buf, sizeof buf); /* until killed */
}

static int case_kill9(const char *self) {
  pid_t pid = spawn_self(self, "serve-flood", g_port, 1);
  int fd = connect_retry(g_port);
  char buf[65536];
  CHECK(read_full(fd, buf, sizeof buf) == sizeof buf); /* mid-stream */
  CHECK(kill(pid, SIGKILL) == 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  /* Whatever was in flight, then EOF or ECONNRESET; alarm() catches a hang. */
  for (;;) {
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) continue;
    CHECK(r == 0 || errno == ECONNRESET);
    break;
  }
  close(fd);
  return 0;
}

/* ---- the writer closes (or exits) before the reader read anything -------------------------- */
/* What a program wrote before close() or exit() reaches its peer, as with
 * TCP, even when the peer reads only afterwards: nothing may be dropped
 * with the connection while the reader's relay holds bytes back. */
enum { UNREAD = 2 << 20 };

static void write_unread(int fd) {
  unsigned char *buf = malloc(UNREAD);
  CHECK(buf != NULL);
  for (size_t i = 0; i < UNREAD; i++) buf[i] = pattern(i, 11);
  write_all(fd, buf, UNREAD);
  free(buf);
}

static void read_unread(int fd) {
  unsigned char *buf = malloc(UNREAD + 1);
  CHECK(buf != NULL);
  size_t got = read_full(fd, buf, UNREAD + 1); /* +1: EOF must follow exactly */
  if (got != UNREAD) fprintf(stderr, "read %zu of %d bytes before EOF\n", got, (int)UNREAD);
  CHECK(got == UNREAD);
  for (size_t i = 0; i < UNREAD; i++) CHECK(buf[i] == pattern(i, 11));
  free(buf);
}

static void unread_server(int fd, void *arg) {
  (void)arg;
  write_unread(fd); /* server_main closes it */
}

static int case_close_unread(void) {
  server sv;
  server_start(&sv, unread_server, NULL);
  int fd = connect_to(g_port);
  server_join(&sv); /* written and closed before we read a byte */
  read_unread(fd);
  close(fd);
  return 0;
}

static int serve_then_exit(void) {
  int lfd = listen_on(g_port);
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  write_unread(fd);
  return 0; /* exit() with the socket still open: the kernel would send it all */
}

static int case_exit_unread(const char *self) {
  pid_t pid = spawn_self(self, "serve-then-exit", g_port, 1);
  int fd = connect_retry(g_port);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  read_unread(fd);
  close(fd);
  return 0;
}

/* ---- the peer closed while this end held received bytes back ---------------------------------------- */
/* 512 KiB fit this end (the unix socket's buffer, the relay's queue and the
 * 1 MiB receive ring), so the server's relay posts all of it and closes
 * while this end's relay, its application not reading, holds the ring's
 * part back. The close must come after those bytes. */
enum { HELD = 512 << 10 };

static void held_server(int fd, void *arg) {
  (void)arg;
  unsigned char *buf = malloc(HELD);
  CHECK(buf != NULL);
  for (size_t i = 0; i < HELD; i++) buf[i] = pattern(i, 13);
  write_all(fd, buf, HELD);
  free(buf);
}

/* Whether the preload (looked up at run time: the program runs without it
 * too) still lists a server end. */
static int server_end_listed(void) {
  size_t (*fmt)(char *, size_t) = (size_t(*)(char *, size_t))dlsym(RTLD_DEFAULT, "rrpc_run_conns_format");
  if (fmt == NULL) return 0;
  char buf[4096];
  size_t n = fmt(buf, sizeof buf);
  buf[n < sizeof buf ? n : sizeof buf - 1] = 0;
  return strstr(buf, " server ") != NULL;
}

static int case_close_held(void) {
  server sv;
  server_start(&sv, held_server, NULL);
  int fd = connect_to(g_port);
  server_join(&sv);
  /* Until the server's relay ended: its close went out (bounded, 20 s). */
  for (int i = 0; i < 2000 && server_end_listed(); i++) {
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  CHECK(!server_end_listed());
  unsigned char *buf = malloc(HELD + 1);
  CHECK(buf != NULL);
  size_t got = read_full(fd, buf, HELD + 1);
  if (got != HELD) fprintf(stderr, "read %zu of %d bytes before EOF\n", got, (int)HELD);
  CHECK(got == HELD);
  for (size_t i = 0; i < HELD; i++) CHECK(buf[i] == pattern(i, 13));
  free(buf);
  close(fd);
  return 0;
}

/* ---- a plain peer (no rrpc-run) on the other end: byte-exact TCP ----------------------------------- */
static int serve_echo(void) {
  int lfd = listen_on(g_port);
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  echo_server(fd, NULL);
  close(fd);
  return 0;
}

/* The client here (under rrpc-run) talks to a server process started
 * without it; the bytes must come back exactly. */
static int case_plain_server(const char *self) {
  pid_t pid = spawn_self(self, "serve-echo", g_port, 0);
  int fd = connect_retry(g_port);
  unsigned char out[100000], in[100000];
  for (size_t i = 0; i < sizeof out; i++) out[i] = pattern(i, 5);
  write_all(fd, out, sizeof out);
  CHECK(read_full(fd, in, sizeof in) == sizeof in && memcmp(in, out, sizeof in) == 0);
  close(fd);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return 0;
}

/* A plain client process (no rrpc-run) talks to the server here. */
static int case_plain_client(const char *self) {
  server sv;
  server_start(&sv, echo_server, NULL);
  pid_t pid = spawn_self(self, "client-plain", g_port, 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  server_join(&sv);
  return 0;
}

/* A plain client process half-closes towards the server here, which lists
 * it (so its relay finds no hello and relays raw bytes): the answer written
 * after the client's FIN must still arrive, then EOF. */
static int case_plain_client_halfclose(const char *self) {
  server sv;
  server_start(&sv, upcase_server, NULL);
  pid_t pid = spawn_self(self, "client-plain-halfclose", g_port, 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  server_join(&sv);
  return 0;
}

static int client_plain_halfclose(void) {
  int fd = connect_retry(g_port);
  write_all(fd, "abcdef", 6);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  char b[16];
  CHECK(read_full(fd, b, sizeof b) == 6 && memcmp(b, "ABCDEF", 6) == 0);
  close(fd);
  return 0;
}

/* ---- hostile handshakes: a plain client that starts an SMC-R CLC message
 * and then speaks garbage, or stops half-way through the header ---------- */
static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The server side: whatever the relay delivers, then EOF, within 10 s. */
static void eof_server(int fd, void *arg) {
  (void)arg;
  uint64_t t0 = now_ms();
  char buf[256];
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 10000) == 1);
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) continue;
    CHECK(r == 0 || errno == ECONNRESET);
    break;
  }
  CHECK(now_ms() - t0 < 10000);
}

static int case_hostile(const char *self, const char *mode) {
  server sv;
  server_start(&sv, eof_server, NULL);
  pid_t pid = spawn_self(self, mode, g_port, 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  server_join(&sv);
  return 0;
}

/* The client side: the connection must be closed on it within 10 s. */
static int client_hostile(int garbage) {
  int fd = connect_retry(g_port);
  static const unsigned char eyecatcher[4] = {0xe2, 0xd4, 0xc3, 0xd9};
  if (garbage) {
    unsigned char msg[64];
    memcpy(msg, eyecatcher, 4);
    for (size_t i = 4; i < sizeof msg; i++) msg[i] = (unsigned char)(i * 37);
    write_all(fd, msg, sizeof msg);
  } else {
    write_all(fd, eyecatcher, 2); /* stops inside the header */
  }
  uint64_t t0 = now_ms();
  char buf[256];
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    CHECK(poll(&p, 1, 10000) == 1);
    ssize_t r = read(fd, buf, sizeof buf);
    if (r > 0) continue; /* a CLC Decline may come first */
    CHECK(r == 0 || errno == ECONNRESET);
    break;
  }
  CHECK(now_ms() - t0 < 10000);
  close(fd);
  return 0;
}

static int client_plain(void) {
  int fd = connect_retry(g_port);
  unsigned char out[100000], in[100000];
  for (size_t i = 0; i < sizeof out; i++) out[i] = pattern(i, 6);
  write_all(fd, out, sizeof out);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  CHECK(read_full(fd, in, sizeof in) == sizeof in && memcmp(in, out, sizeof in) == 0);
  CHECK(read(fd, in, 1) == 0);
  close(fd);
  return 0;
}

/* ==== readiness edges; a writer whose reading peer is killed ================================== */
/* The server sends "a", then "b" after our first byte, then shuts down
 * writing after our second byte, and waits for EOF. */
static void stepper_server(int fd, void *arg) {
  (void)arg;
  char b;
  write_all(fd, "a", 1);
  CHECK(read_full(fd, &b, 1) == 1);
  write_all(fd, "b", 1);
  CHECK(read_full(fd, &b, 1) == 1);
  CHECK(shutdown(fd, SHUT_WR) == 0);
  CHECK(read_full(fd, &b, 1) == 0);
}

static int ppoll_in(int fd, int ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  int n = ppoll(&p, 1, &ts, NULL);
  CHECK(n >= 0);
  return n == 1 && (p.revents & POLLIN);
}

static int pselect_in(int fd, int ms) {
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  int n = pselect(fd + 1, &r, NULL, NULL, &ts, NULL);
  CHECK(n >= 0);
  return n == 1 && FD_ISSET(fd, &r);
}

/* Edge-triggered epoll reports each new arrival once (not bytes already
 * reported, even unread), and EOF as a new edge with EPOLLRDHUP; ppoll and
 * pselect see the same readiness level-triggered; a connected socket is
 * writable for epoll, poll and select. */
static int case_edges(void) {
  server sv;
  server_start(&sv, stepper_server, NULL);
  int fd = connect_to(g_port);
  CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
  int ep = epoll_create1(0);
  CHECK(ep >= 0);
  struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd}, out[4];
  CHECK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) == 0);
  char b[4];
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLIN));
  CHECK(read(fd, b, sizeof b) == 1 && b[0] == 'a');
  CHECK(read(fd, b, sizeof b) == -1 && errno == EAGAIN);
  CHECK(epoll_wait(ep, out, 4, 100) == 0);
  CHECK(!ppoll_in(fd, 100) && !pselect_in(fd, 100)); /* drained: not readable */
  /* writable, however asked */
  int epw = epoll_create1(0);
  CHECK(epw >= 0);
  struct epoll_event evw = {.events = EPOLLOUT, .data.fd = fd};
  CHECK(epoll_ctl(epw, EPOLL_CTL_ADD, fd, &evw) == 0);
  CHECK(epoll_wait(epw, out, 4, 5000) == 1 && (out[0].events & EPOLLOUT));
  close(epw);
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  CHECK(poll(&p, 1, 5000) == 1 && (p.revents & POLLOUT));
  fd_set w;
  FD_ZERO(&w);
  FD_SET(fd, &w);
  struct timespec ts = {5, 0};
  CHECK(pselect(fd + 1, NULL, &w, NULL, &ts, NULL) == 1 && FD_ISSET(fd, &w));
  /* a new arrival: one new edge; level-triggered waits see it until read */
  write_all(fd, "x", 1);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLIN));
  CHECK(ppoll_in(fd, 5000) && pselect_in(fd, 5000));
  CHECK(epoll_wait(ep, out, 4, 100) == 0); /* reported, unread: no new edge */
  CHECK(read(fd, b, sizeof b) == 1 && b[0] == 'b');
  CHECK(read(fd, b, sizeof b) == -1 && errno == EAGAIN);
  /* EOF: a new edge, with RDHUP */
  write_all(fd, "y", 1);
  CHECK(epoll_wait(ep, out, 4, 5000) == 1 && (out[0].events & EPOLLIN) && (out[0].events & EPOLLRDHUP));
  CHECK(read(fd, b, sizeof b) == 0);
  close(ep);
  close(fd);
  server_join(&sv);
  return 0;
}

enum { SINK_FIRST = 4 << 20 };

/* serve-sink: answers a first byte (the connection is then set up, so the
 * bulk below does not race the relays' handshake), reads SINK_FIRST bytes,
 * says so with one byte, then reads until killed. */
static int serve_sink(void) {
  int lfd = listen_on(g_port);
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  static char buf[1 << 20];
  CHECK(read_full(fd, buf, 1) == 1);
  write_all(fd, "k", 1);
  for (int i = 0; i < SINK_FIRST / (int)sizeof buf; i++) CHECK(read_full(fd, buf, sizeof buf) == sizeof buf);
  write_all(fd, "k", 1);
  while (read(fd, buf, sizeof buf) > 0) {
  }
  return 0;
}

/* The reading peer killed with -9 while this end writes: a write fails
 * with EPIPE or ECONNRESET (SIGPIPE is ignored) within a bounded number of
 * bytes after the kill - it never blocks for good. */
static int case_kill9_reader(const char *self) {
  pid_t pid = spawn_self(self, "serve-sink", g_port, 1);
  int fd = connect_retry(g_port);
  static char buf[1 << 20];
  memset(buf, 's', sizeof buf);
  char k;
  write_all(fd, "p", 1);
  CHECK(read_full(fd, &k, 1) == 1 && k == 'k');
  for (int i = 0; i < SINK_FIRST / (int)sizeof buf; i++) write_all(fd, buf, sizeof buf);
  CHECK(read_full(fd, &k, 1) == 1 && k == 'k'); /* the sink has read them all */
  write_all(fd, buf, sizeof buf);               /* mid-stream */
  CHECK(kill(pid, SIGKILL) == 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid);
  /* Whatever the paths still buffer is accepted first; 1 GiB is far more. */
  ssize_t w = 0;
  for (int i = 0; i < 1024; i++) {
    w = write(fd, buf, sizeof buf);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) break;
  }
  CHECK(w < 0 && (errno == EPIPE || errno == ECONNRESET));
  close(fd);
  return 0;
}

/* ---- preload-fast: a connection that does not go RDMA ends on the real TCP socket ----------------
 * The fd's socket domain is asked with a raw system call, past the
 * preload: AF_UNIX means the relay still carries the connection. */
static int sock_domain(int fd) {
  int d = -1;
  socklen_t len = sizeof d;
  if (syscall(SYS_getsockopt, fd, SOL_SOCKET, SO_DOMAIN, &d, &len) != 0) return -1;
  return d;
}

static void domain_echo_server(int fd, void *arg) {
  *(int *)arg = sock_domain(fd);
  echo_server(fd, NULL);
}

/* Both ends here, in a process without an RDMA device (RRPC_RUN_RDMA=auto):
 * neither end's socket is relayed. */
static int case_fallback_plain(void) {
  server sv;
  int server_domain = -1;
  server_start(&sv, domain_echo_server, &server_domain);
  int fd = connect_to(g_port);
  CHECK(sock_domain(fd) == AF_INET);
  write_all(fd, "fallback", 8);
  char b[8];
  CHECK(read_full(fd, b, 8) == 8 && memcmp(b, "fallback", 8) == 0);
  close(fd);
  server_join(&sv);
  CHECK(server_domain == AF_INET);
  return 0;
}

/* A plain client process that the server here lists: its first bytes
 * show it is plain before the accept returns, which then hands over the
 * TCP socket itself (and the half-close is TCP's own). */
static void domain_upcase_server(int fd, void *arg) {
  *(int *)arg = sock_domain(fd);
  upcase_server(fd, NULL);
}

static int case_plain_client_handback(const char *self) {
  server sv;
  int server_domain = -1;
  server_start(&sv, domain_upcase_server, &server_domain);
  pid_t pid = spawn_self(self, "client-plain-halfclose", g_port, 0);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  server_join(&sv);
  CHECK(server_domain == AF_INET);
  return 0;
}

/* A non-blocking connect here to a plain server process (eBPF mode: the
 * SYN-ACK carries no SMC option): the socket is never relayed. */
static int case_plain_server_nb(const char *self) {
  pid_t pid = spawn_self(self, "serve-echo", g_port, 0);
  int fd = -1;
  for (int i = 0; i < 500 && fd < 0; i++) {
    int err = -1;
    fd = nb_connect(g_port, &err);
    if (err == 0) break;
    CHECK(err == ECONNREFUSED); /* the server process is starting */
    close(fd);
    fd = -1;
    struct pollfd none;
    poll(&none, 0, 10);
  }
  CHECK(fd >= 0);
  CHECK(sock_domain(fd) == AF_INET);
  CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0);
  write_all(fd, "nonblock", 8);
  char b[8];
  CHECK(read_full(fd, b, 8) == 8 && memcmp(b, "nonblock", 8) == 0);
  close(fd);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return 0;
}
/* fcntl(F_DUPFD / F_DUPFD_CLOEXEC) copies of a relayed socket are dups:
 * they answer getpeername / getsockname with the TCP connection's
 * addresses (the relay's AF_UNIX socket is not the application's business)
 * and keep working after the original is closed. */
static int case_dupfd(void) {
  server sv;
  server_start(&sv, echo_server, NULL);
  int fd = connect_to(g_port);
  int d1 = fcntl(fd, F_DUPFD, 100);
  int d2 = fcntl(fd, F_DUPFD_CLOEXEC, 200);
  CHECK(d1 >= 100 && d2 >= 200);
  CHECK((fcntl(d2, F_GETFD) & FD_CLOEXEC) && !(fcntl(d1, F_GETFD) & FD_CLOEXEC));
  close(fd);
  int copies[2] = {d1, d2};
  for (int i = 0; i < 2; i++) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    CHECK(getpeername(copies[i], (struct sockaddr *)&a, &len) == 0);
    CHECK(a.sin_family == AF_INET && ntohs(a.sin_port) == g_port);
    len = sizeof a;
    CHECK(getsockname(copies[i], (struct sockaddr *)&a, &len) == 0 && a.sin_family == AF_INET);
    int nodelay = 1;
    CHECK(setsockopt(copies[i], IPPROTO_TCP, TCP_NODELAY, &nodelay, sizeof nodelay) == 0);
  }
  write_all(d1, "dupfd", 5);
  char b[5];
  CHECK(read_full(d2, b, 5) == 5 && memcmp(b, "dupfd", 5) == 0);
  close(d1);
  close(d2);
  server_join(&sv);
  return 0;
}
/* ---- end of preload-fast's block ------------------------------------------------------------------ */

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s CASE PORT\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  g_port = atoi(argv[2]);
  if (g_port == 0) g_port = free_port();
  const char *c = argv[1];
  if (strcmp(c, "serve-flood") == 0) return serve_flood();
  if (strcmp(c, "serve-sink") == 0) return serve_sink();
  if (strcmp(c, "serve-echo") == 0) return serve_echo();
  if (strcmp(c, "serve-then-exit") == 0) return serve_then_exit();
  if (strcmp(c, "client-plain") == 0) return client_plain();
  if (strcmp(c, "client-garbage-clc") == 0 || strcmp(c, "client-stall-clc") == 0) {
    alarm(30);
    return client_hostile(strcmp(c, "client-garbage-clc") == 0);
  }
  if (strcmp(c, "client-plain-halfclose") == 0) {
    alarm(30);
    return client_plain_halfclose();
  }
  alarm(60);
  if (strcmp(c, "bytes16m") == 0) return case_bytes16m();
  if (strcmp(c, "epoll") == 0) return case_epoll();
  if (strcmp(c, "poll-select") == 0) return case_poll_select();
  if (strcmp(c, "flags") == 0) return case_flags();
  if (strcmp(c, "partial-write") == 0) return case_partial_write();
  if (strcmp(c, "halfclose") == 0) return case_halfclose();
  if (strcmp(c, "dup") == 0) return case_dup();
  if (strcmp(c, "fork") == 0) return case_fork();
  if (strcmp(c, "nbconnect") == 0) return case_nbconnect();
  if (strcmp(c, "many") == 0) return case_many();
  if (strcmp(c, "kill9") == 0) return case_kill9(argv[0]);
  if (strcmp(c, "edges") == 0) return case_edges();
  if (strcmp(c, "kill9-reader") == 0) return case_kill9_reader(argv[0]);
  if (strcmp(c, "close-unread") == 0) return case_close_unread();
  if (strcmp(c, "close-held") == 0) return case_close_held();
  if (strcmp(c, "exit-unread") == 0) return case_exit_unread(argv[0]);
  if (strcmp(c, "plain-server") == 0) return case_plain_server(argv[0]);
  if (strcmp(c, "plain-client") == 0) return case_plain_client(argv[0]);
  if (strcmp(c, "plain-client-listed") == 0) return case_plain_client_halfclose(argv[0]);
  if (strcmp(c, "hostile-garbage") == 0) return case_hostile(argv[0], "client-garbage-clc");
  if (strcmp(c, "hostile-stall") == 0) return case_hostile(argv[0], "client-stall-clc");
  if (strcmp(c, "fallback-plain") == 0) return case_fallback_plain();
  if (strcmp(c, "plain-client-handback") == 0) return case_plain_client_handback(argv[0]);
  if (strcmp(c, "plain-server-nb") == 0) return case_plain_server_nb(argv[0]);
  if (strcmp(c, "dupfd") == 0) return case_dupfd();
  fprintf(stderr, "unknown case %s\n", c);
  return 2;
}
