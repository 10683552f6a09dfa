/* test/preload/erm_wait.c - the ways a program written against rrpc/erm.h
 * waits for completions, at their edges (erm_copy --wait= runs the plain
 * ones under a copy); tools/rrpc-run carries it.
 *
 *   erm_wait epoll-odd      epoll_ctl calls the kernel refuses, a socket
 *       added to sets before its first REG_MR in odd ways (no events, a
 *       dup, ET|ONESHOT, EXCLUSIVE), sets and the socket closed under it.
 *   erm_wait select-kernel  (no rrpc-run) the sets Linux's select puts a
 *       socket in whose error queue is not empty: read and write, not except.
 *   erm_wait select-sets    the same for a relayed socket with an ERM
 *       completion queued and no room to write; select's timeout, EBADF and
 *       EINVAL stay the kernel's.
 *
 * Both ends run in this one process (threads): rrpc-run relays both. */
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "test/preload/erm_prog.h"

/* ---- epoll-odd: odd epoll_ctl calls, fds and sets closed under it ---------------------- */

/* Accepts the writer on lfd, registers mem (remote write) on the accepted
 * socket and sends the writer its memid; the accepted fd. */
static int accept_and_offer(int lfd, uint8_t *mem, size_t len) {
  int fd = accept(lfd, NULL, NULL);
  CHECK(fd >= 0);
  uint32_t id;
  CHECK(reg_mr(fd, mem, len, SMC_ERM_ACCESS_REMOTE_WRITE, &id) == 0);
  write_all(fd, &id, sizeof id);
  return fd;
}

/* The owner: a region, its memid, then it waits for the writer's EOF. */
static void *odd_server(void *arg) {
  static uint8_t mem[4096];
  int fd = accept_and_offer(*(int *)arg, mem, sizeof mem);
  char b;
  CHECK(read(fd, &b, 1) == 0);
  CHECK(close(fd) == 0);
  return NULL;
}

/* epoll_wait(ep, timeout_ms): n events, the first one's data and events. */
static int ep_wait(int ep, int timeout_ms, uint64_t *data, uint32_t *events) {
  struct epoll_event ev[8];
  int n = epoll_wait(ep, ev, 8, timeout_ms);
  CHECK(n >= 0);
  if (n > 0) {
    *data = ev[0].data.u64;
    *events = ev[0].events;
  }
  return n;
}

/* One 64-byte COPY; returns once its completion is queued (e1 said so:
 * EPOLLERR with want's data). */
static void odd_copy(int fd, int e1, uint64_t want, uint32_t me, uint32_t dst) {
  struct smc_erm_copy cp = {.src_idx = me, .dst_idx = dst, .len = 64};
  CHECK(copy_n(fd, &cp, 1) == 0);
  uint64_t d = 0;
  uint32_t e = 0;
  CHECK(ep_wait(e1, WAIT_MS, &d, &e) == 1 && d == want && (e & EPOLLERR));
}

static void odd_drain(int fd) {
  struct smc_erm_compl c[4];
  CHECK(read_compl(fd, c, 4) == 1 && c[0].status == 0);
}

static int run_epoll_odd(void) {
  int port = 0;
  int lfd = listen_any(&port);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, odd_server, &lfd) == 0);
  int fd = connect_to(port);
  int e1 = epoll_create1(0), e2 = epoll_create1(0), e3 = epoll_create1(0), e4 = epoll_create1(0);
  CHECK(e1 >= 0 && e2 >= 0 && e3 >= 0 && e4 >= 0);
  /* Before any REG_MR: calls the kernel refuses are refused as they are
   * without rrpc-run, and leave nothing behind. */
  struct epoll_event ev = {.events = 0, .data.u64 = 1001};
  EXPECT_ERRNO(epoll_ctl(e1, EPOLL_CTL_ADD, fd, NULL), EFAULT);
  EXPECT_ERRNO(epoll_ctl(e1, EPOLL_CTL_MOD, fd, &ev), ENOENT);
  EXPECT_ERRNO(epoll_ctl(e1, EPOLL_CTL_DEL, fd, NULL), ENOENT);
  EXPECT_ERRNO(epoll_ctl(e1, 99, fd, &ev), EINVAL);
  EXPECT_ERRNO(epoll_ctl(fd, EPOLL_CTL_ADD, e1, &ev), EINVAL); /* the socket is no set */
  EXPECT_ERRNO(epoll_ctl(e1, EPOLL_CTL_ADD, e1, &ev), EINVAL);
  EXPECT_ERRNO(epoll_ctl(-1, EPOLL_CTL_ADD, fd, &ev), EBADF);
  /* e1: no events asked (errors are reported anyway); twice is EEXIST. */
  CHECK(epoll_ctl(e1, EPOLL_CTL_ADD, fd, &ev) == 0);
  EXPECT_ERRNO(epoll_ctl(e1, EPOLL_CTL_ADD, fd, &ev), EEXIST);
  /* A dup of the socket in e1 as well. */
  int fd2 = dup(fd);
  CHECK(fd2 >= 0);
  ev.data.u64 = 1002;
  CHECK(epoll_ctl(e1, EPOLL_CTL_ADD, fd2, &ev) == 0);
  /* e2: edge-triggered one-shot, its data changed by a MOD. */
  ev = (struct epoll_event){.events = EPOLLIN | EPOLLET | EPOLLONESHOT, .data.u64 = 2001};
  CHECK(epoll_ctl(e2, EPOLL_CTL_ADD, fd, &ev) == 0);
  ev.data.u64 = 2002;
  CHECK(epoll_ctl(e2, EPOLL_CTL_MOD, fd, &ev) == 0);
  /* e3: added and taken out again. */
  ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 3001};
  CHECK(epoll_ctl(e3, EPOLL_CTL_ADD, fd, &ev) == 0);
  CHECK(epoll_ctl(e3, EPOLL_CTL_DEL, fd, NULL) == 0);
  /* e4: EPOLLEXCLUSIVE (the kernel then refuses a MOD). */
  ev = (struct epoll_event){.events = EPOLLIN | EPOLLEXCLUSIVE, .data.u64 = 4001};
  CHECK(epoll_ctl(e4, EPOLL_CTL_ADD, fd, &ev) == 0);
  EXPECT_ERRNO(epoll_ctl(e4, EPOLL_CTL_MOD, fd, &ev), EINVAL);
  /* e5: closed with the socket in it; a new set (often the same number)
   * holds a pipe only. */
  int e5 = epoll_create1(0);
  CHECK(e5 >= 0);
  ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 5001};
  CHECK(epoll_ctl(e5, EPOLL_CTL_ADD, fd, &ev) == 0);
  CHECK(close(e5) == 0);
  int e6 = epoll_create1(0), pfd[2];
  CHECK(e6 >= 0 && pipe(pfd) == 0);
  ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 6001};
  CHECK(epoll_ctl(e6, EPOLL_CTL_ADD, pfd[0], &ev) == 0);

  /* The first REG_MR: every set the socket is in now hears of its completions. */
  static uint8_t src[4096];
  uint32_t me, dst;
  CHECK(reg_mr(fd, src, sizeof src, 0, &me) == 0);
  read_all(fd, &dst, sizeof dst);
  odd_copy(fd, e1, 1001, me, dst);
  uint64_t d = 0;
  uint32_t e = 0;
  CHECK(ep_wait(e2, 0, &d, &e) == 1 && d == 2002 && (e & EPOLLERR));
  CHECK(ep_wait(e2, 0, &d, &e) == 0); /* one-shot */
  CHECK(ep_wait(e3, 0, &d, &e) == 0);
  CHECK(ep_wait(e4, 0, &d, &e) == 1 && d == 4001 && (e & EPOLLERR));
  CHECK(ep_wait(e6, 0, &d, &e) == 0);
  CHECK(write(pfd[1], "p", 1) == 1);
  CHECK(ep_wait(e6, 0, &d, &e) == 1 && d == 6001 && e == EPOLLIN);
  char pb;
  CHECK(read(pfd[0], &pb, 1) == 1);
  printf("  added before REG_MR: e1 (no events, and a dup) EPOLLERR, e2 (ET|ONESHOT, MOD) once, e3 (DEL) none,\n"
         "  e4 (EXCLUSIVE) EPOLLERR, a set reusing a closed one's number: none\n");
  odd_drain(fd);
  CHECK(ep_wait(e1, 0, &d, &e) == 0); /* level-triggered: quiet once read */

  /* The dup closed: the socket's own pair still reports. */
  CHECK(close(fd2) == 0);
  odd_copy(fd, e1, 1001, me, dst);
  /* e2 re-armed with new data. */
  ev = (struct epoll_event){.events = EPOLLIN | EPOLLET | EPOLLONESHOT, .data.u64 = 2003};
  CHECK(epoll_ctl(e2, EPOLL_CTL_MOD, fd, &ev) == 0);
  CHECK(ep_wait(e2, 0, &d, &e) == 1 && d == 2003 && (e & EPOLLERR));
  odd_drain(fd);
  /* e4 closed after it joined; a new set holds the pipe only. */
  CHECK(close(e4) == 0);
  int e7 = epoll_create1(0);
  CHECK(e7 >= 0);
  ev = (struct epoll_event){.events = EPOLLIN, .data.u64 = 7001};
  CHECK(epoll_ctl(e7, EPOLL_CTL_ADD, pfd[0], &ev) == 0);
  odd_copy(fd, e1, 1001, me, dst);
  CHECK(ep_wait(e7, 0, &d, &e) == 0);
  printf("  after a dup, a set and a re-armed one-shot closed or changed: the right sets, the right data\n");
  /* The socket closed with a completion queued: no set reports it, nor
   * anything else. */
  CHECK(close(fd) == 0);
  CHECK(ep_wait(e1, 0, &d, &e) == 0);
  CHECK(ep_wait(e2, 0, &d, &e) == 0);
  printf("  the socket closed with a completion queued: its sets stay quiet\n");
  CHECK(pthread_join(t, NULL) == 0);
  int fds[] = {e1, e2, e3, e6, e7, pfd[0], pfd[1], lfd};
  for (size_t i = 0; i < sizeof fds / sizeof *fds; i++) CHECK(close(fds[i]) == 0);
  printf("erm_wait epoll-odd: ok\n");
  return 0;
}

/* ---- select's sets: what a kernel socket does, and a relayed one ------------------------- */

/* select(fd) over the sets asked (timeout 0): the sets that came back, as
 * bits 1 read, 2 write, 4 except; poll's revents in *revents (the same
 * before and after the select, else -1: a relay moved bytes meanwhile). */
static int sel_sets(int fd, int asked, short *revents) {
  struct pollfd p0 = {.fd = fd, .events = POLLIN | POLLOUT | POLLPRI};
  CHECK(poll(&p0, 1, 0) >= 0);
  fd_set r, w, x;
  FD_ZERO(&r);
  FD_ZERO(&w);
  FD_ZERO(&x);
  if (asked & 1) FD_SET(fd, &r);
  if (asked & 2) FD_SET(fd, &w);
  if (asked & 4) FD_SET(fd, &x);
  struct timeval tv = {0, 0};
  int n = select(fd + 1, &r, &w, &x, &tv);
  CHECK(n >= 0);
  int got = (FD_ISSET(fd, &r) ? 1 : 0) | (FD_ISSET(fd, &w) ? 2 : 0) | (FD_ISSET(fd, &x) ? 4 : 0);
  CHECK(n == __builtin_popcount((unsigned)got));
  struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLPRI};
  CHECK(poll(&p, 1, 0) >= 0);
  *revents = p.revents;
  return p.revents == p0.revents ? got : -1;
}

/* Send until the socket takes no more (the peer reads nothing). */
static uint64_t stuff(int fd, int flags) {
  static char junk[65536];
  uint64_t sent = 0;
  double t0 = now_s();
  for (;;) {
    ssize_t k = send(fd, junk, sizeof junk, MSG_DONTWAIT | flags);
    if (k < 0 && (errno == EAGAIN || errno == ENOBUFS)) {
      /* a relay or the kernel may take more once it moved what it holds */
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      if (poll(&p, 1, 200) == 0 || !(p.revents & POLLOUT)) return sent;
      CHECK(now_s() - t0 < 30);
      continue;
    }
    CHECK(k > 0);
    sent += (uint64_t)k;
    CHECK(sent < (1ull << 30));
  }
}

/* A kernel socket (no rrpc-run): POLLERR alone - an error queue not empty,
 * nothing to read, no room to write - is in select's read and write sets,
 * not the except set (fs/select.c). The preload answers the same for ERM
 * completions; this is the reference it follows. A UDP socket with an ICMP
 * error queued (IP_RECVERR), and a TCP socket with its send queue full and
 * MSG_ZEROCOPY completions queued. */
static int run_select_kernel(void) {
  int one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  int gone = socket(AF_INET, SOCK_DGRAM, 0), u = socket(AF_INET, SOCK_DGRAM, 0);
  CHECK(gone >= 0 && u >= 0 && bind(gone, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(getsockname(gone, (struct sockaddr *)&a, &l) == 0 && close(gone) == 0);
  CHECK(setsockopt(u, IPPROTO_IP, IP_RECVERR, &one, sizeof one) == 0);
  CHECK(connect(u, (struct sockaddr *)&a, sizeof a) == 0 && send(u, "x", 1, 0) == 1);
  struct pollfd p = {.fd = u, .events = 0};
  CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLERR)); /* the ICMP error came back */
  short re;
  CHECK(sel_sets(u, 1 | 4, &re) == 1 && !(re & POLLIN));
  printf("  udp, an ICMP error queued (poll %#x): read set yes, except set no\n", (unsigned)re);
  CHECK(close(u) == 0);

  int lfd = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0), sz = 65536;
  a.sin_port = 0;
  l = sizeof a;
  CHECK(bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 1) == 0);
  CHECK(getsockname(lfd, (struct sockaddr *)&a, &l) == 0);
  CHECK(setsockopt(c, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz) == 0);
  if (setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof one) != 0) {
    printf("  tcp: no SO_ZEROCOPY here (%s): the write set's case is not shown\n", strerror(errno));
    printf("erm_wait select-kernel: ok\n");
    return 0;
  }
  CHECK(connect(c, (struct sockaddr *)&a, sizeof a) == 0);
  int s = accept(lfd, NULL, NULL);
  CHECK(s >= 0 && setsockopt(s, SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz) == 0);
  /* Zero-copy sends until the peer's window closes (their completions
   * queue as the acks come), then plain ones into what the acks freed. */
  uint64_t sent = stuff(c, MSG_ZEROCOPY);
  sent += stuff(c, 0);
  CHECK(sel_sets(c, 2, &re) == 2);
  CHECK((re & POLLERR) && !(re & (POLLOUT | POLLIN)));
  CHECK(sel_sets(c, 1 | 2 | 4, &re) == 3);
  printf("  tcp, %llu bytes unacked and zero-copy completions queued (poll %#x): read and write set, "
         "not except\n", (unsigned long long)sent, (unsigned)re);
  char cb[512];
  for (;;) {
    struct msghdr m = {.msg_control = cb, .msg_controllen = sizeof cb};
    if (recvmsg(c, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) break;
  }
  CHECK(sel_sets(c, 1 | 2 | 4, &re) == 0 && re == 0);
  printf("  the same, its error queue read: in no set\n");
  CHECK(close(c) == 0 && close(s) == 0 && close(lfd) == 0);
  printf("erm_wait select-kernel: ok\n");
  return 0;
}

struct sets_args {
  int lfd, go[2];
};

/* The owner reads nothing until told, then everything up to EOF. */
static void *sets_server(void *arg) {
  struct sets_args *a = arg;
  static uint8_t mem[4096];
  int fd = accept_and_offer(a->lfd, mem, sizeof mem);
  char b;
  CHECK(read(a->go[0], &b, 1) == 1);
  static char sink[65536];
  for (ssize_t r; (r = read(fd, sink, sizeof sink)) != 0;) CHECK(r > 0 || errno == EINTR);
  CHECK(close(fd) == 0);
  return NULL;
}

/* A relayed socket with a completion queued and no room to write (the
 * owner reads nothing): select puts it in the read and the write set, not
 * the except set, as the kernel does above; its completion read, in none. */
static int run_select_sets(void) {
  struct sets_args a;
  int port = 0;
  a.lfd = listen_any(&port);
  CHECK(pipe(a.go) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, sets_server, &a) == 0);
  int fd = connect_to(port);
  static uint8_t src[4096];
  uint32_t me, dst;
  CHECK(reg_mr(fd, src, sizeof src, 0, &me) == 0);
  read_all(fd, &dst, sizeof dst);
  struct smc_erm_copy cp = {.src_idx = me, .dst_idx = dst, .len = 64, .tag = 9};
  CHECK(copy_n(fd, &cp, 1) == 0);
  struct pollfd p = {.fd = fd, .events = 0};
  CHECK(poll(&p, 1, WAIT_MS) == 1 && (p.revents & POLLERR)); /* its completion is queued */
  /* Stuffed until no room is left; again while a relay still takes some. */
  uint64_t sent = 0;
  short re = 0;
  int got = -1;
  for (int tries = 0; tries < 50 && (got < 0 || (re & POLLOUT)); tries++) {
    sent += stuff(fd, 0);
    got = sel_sets(fd, 2, &re);
  }
  CHECK(got == 2 && (re & POLLERR) && !(re & (POLLOUT | POLLIN)));
  for (int tries = 0; tries < 50 && (got = sel_sets(fd, 1 | 2 | 4, &re)) < 0; tries++) {
  }
  CHECK(got == 3 && (re & POLLERR) && !(re & POLLIN));
  printf("  relayed, %llu bytes unread by the owner and a completion queued (poll %#x): read and write set, "
         "not except\n", (unsigned long long)sent, (unsigned)re);
  /* pselect too, with a mask */
  fd_set w;
  FD_ZERO(&w);
  FD_SET(fd, &w);
  struct timespec ts = {0, 0};
  sigset_t mask;
  sigemptyset(&mask);
  CHECK(pselect(fd + 1, NULL, &w, NULL, &ts, &mask) == 1 && FD_ISSET(fd, &w));
  struct smc_erm_compl c[2];
  CHECK(read_compl(fd, c, 2) == 1 && c[0].tag == 9 && c[0].status == 0);
  /* Now what the kernel says of the socket itself: nothing to read, and
   * writable only where a relay took more meanwhile. */
  for (int tries = 0; tries < 50 && (got = sel_sets(fd, 1 | 2 | 4, &re)) < 0; tries++) {
  }
  CHECK(!(re & (POLLERR | POLLIN)) && got == ((re & POLLOUT) ? 2 : 0));
  printf("  the same, its completion read (poll %#x): read set no, except set no\n", (unsigned)re);
  /* select's other answers stay the kernel's: a timeout, EBADF, EINVAL. */
  fd_set r;
  FD_ZERO(&r);
  FD_SET(fd, &r);
  struct timeval tv = {0, 20000};
  double t0 = now_s();
  CHECK(select(fd + 1, &r, NULL, NULL, &tv) == 0 && !FD_ISSET(fd, &r));
  CHECK(now_s() - t0 >= 0.015 && tv.tv_sec == 0 && tv.tv_usec < 20000);
  int closed = dup(a.lfd);
  CHECK(closed >= 0 && close(closed) == 0);
  FD_ZERO(&r);
  FD_SET(fd, &r);
  FD_SET(closed, &r);
  int hi = (fd > closed ? fd : closed) + 1;
  tv = (struct timeval){0, 0};
  EXPECT_ERRNO(select(hi, &r, NULL, NULL, &tv), EBADF);
  FD_ZERO(&r);
  FD_SET(fd, &r);
  tv = (struct timeval){0, -1};
  EXPECT_ERRNO(select(fd + 1, &r, NULL, NULL, &tv), EINVAL);
  CHECK(write(a.go[1], "g", 1) == 1);
  CHECK(close(fd) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(close(a.lfd) == 0 && close(a.go[0]) == 0 && close(a.go[1]) == 0);
  printf("erm_wait select-sets: ok\n");
  return 0;
}
int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *what = argc > 1 ? argv[1] : "";
  if (strcmp(what, "epoll-odd") == 0) return run_epoll_odd();
  if (strcmp(what, "select-kernel") == 0) return run_select_kernel();
  if (strcmp(what, "select-sets") == 0) return run_select_sets();
  fprintf(stderr, "usage: erm_wait epoll-odd | select-kernel | select-sets\n");
  return 2;
}
