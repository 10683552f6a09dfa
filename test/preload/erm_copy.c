/* test/preload/erm_copy.c - a program written only against rrpc/erm.h (ERM's
 * socket API) and plain sockets; tools/rrpc-run carries it.
 *
 *   erm_copy copy [MiB] [piece_KiB]   a server thread registers MiB (64) of
 *       memory for remote writes and sends its memid over the socket; the
 *       client registers its source, COPYs it in pieces (1024 KiB) with
 *       REMOTE_COMPL, reads one local completion per COPY; the server reads
 *       one remote completion per piece, in order, checks every byte and
 *       answers. The last line is a summary.
 *   erm_copy serve PORT [MiB] [piece_KiB] / erm_copy client PORT [...]
 *       the same, each end in its own process.
 *   erm_copy serve-die PORT [MiB] / erm_copy client-die PORT [MiB]
 *       the owner is killed (by the test script, when the writer says it
 *       submitted every COPY) with COPYs in flight: each
 *       completes once, in order; later calls fail at once.
 *   erm_copy bad      malformed and refused calls, each with its errno, on a
 *       relayed connection; the owner's memory stays untouched.
 *   erm_copy limits   under RRPC_RUN_ERM_MAX_MRS=2, _MAX_COMPL=2 and
 *       _MAX_COPY_CMSGS=1: ENOSPC, ENOBUFS, EINVAL, a dropped completion.
 *   erm_copy plain    a kernel TCP socket (run it without rrpc-run, or with
 *       a policy that leaves the connection plain): ENOPROTOOPT.
 *   --wait=MODE (anywhere): how the copy cases wait (below, "waiter").
 *
 * Except for serve/client, both ends run in this one process (threads):
 * rrpc-run relays both. The
 * address is PRELOAD_TEST_ADDR (127.0.0.1 by default). Completions are
 * waited for with poll() (the writer) or epoll (copy's owner), or as
 * --wait says: POLLERR / EPOLLERR / the read set says the error queue
 * holds some. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/erm.h"
#include "test/preload/erm_prog.h"

/* How an end waits for completions (--wait=MODE, the copy cases):
 *   poll (default)  the owner with epoll_wait, its socket added after its
 *                   first REG_MR; the writer with poll
 *   epoll-early     both with epoll_wait, each socket added to its set
 *                   right after accept/connect, before any REG_MR (the
 *                   owner edge-triggered, for input too; the writer for
 *                   nothing but errors)
 *   epoll_pwait2    both with epoll_pwait2, sockets added after REG_MR
 *   select          both with select (the read and except sets): a
 *                   socket with completions queued is readable, never
 *                   exceptional, as a kernel socket with a non-empty error
 *                   queue is (fs/select.c maps POLLERR to the read and the
 *                   write set)
 * The owner's socket carries no stream bytes while it waits, so for the
 * owner (strict) every wake-up must be the error queue's; the writer's may
 * also be the owner's answer or its end of stream (the loop then reads the
 * error queue again). */
enum wait_mode { W_POLL, W_EPOLL, W_EPOLL_EARLY, W_EPOLL_PWAIT2, W_SELECT };
static enum wait_mode g_wait = W_POLL;

struct waiter {
  int fd, ep, strict;
  enum wait_mode how;
};

/* The end's waiter; stage 0 right after accept/connect, 1 after the first
 * REG_MR: the socket joins its epoll set at the stage the mode says. */
static void waiter_stage(struct waiter *w, int fd, int owner, int stage) {
  if (stage == 0) {
    *w = (struct waiter){.fd = fd, .ep = -1, .strict = owner, .how = g_wait};
    if (g_wait == W_POLL && owner) w->how = W_EPOLL;
  }
  int epoll = w->how == W_EPOLL || w->how == W_EPOLL_EARLY || w->how == W_EPOLL_PWAIT2;
  if (!epoll || (stage == 0) != (w->how == W_EPOLL_EARLY)) return;
  w->ep = epoll_create1(EPOLL_CLOEXEC);
  CHECK(w->ep >= 0);
  uint32_t events = !owner ? 0 : w->how == W_EPOLL_EARLY ? EPOLLIN | EPOLLET : EPOLLIN;
  struct epoll_event ev = {.events = events, .data.u64 = (uint64_t)fd};
  CHECK(epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) == 0);
}

static void waiter_close(struct waiter *w) {
  if (w->ep >= 0) CHECK(close(w->ep) == 0);
  w->ep = -1;
}

/* One wait: returns once the socket reported something. */
static void wait_once(const struct waiter *w) {
  int fd = w->fd;
  if (w->how == W_POLL) {
    struct pollfd p = {.fd = fd, .events = 0};
    int n = poll(&p, 1, WAIT_MS);
    CHECK(n == 1);
    CHECK(!w->strict || (p.revents & POLLERR) != 0);
    return;
  }
  if (w->how == W_SELECT) {
    fd_set r, x;
    FD_ZERO(&r);
    FD_ZERO(&x);
    FD_SET(fd, &r);
    FD_SET(fd, &x);
    struct timeval tv = {.tv_sec = WAIT_MS / 1000};
    int n = select(fd + 1, &r, NULL, &x, &tv);
    CHECK(n >= 1);
    CHECK(!w->strict || (n == 1 && FD_ISSET(fd, &r) && !FD_ISSET(fd, &x)));
    return;
  }
  struct epoll_event ev[4];
  int n;
  if (w->how == W_EPOLL_PWAIT2) {
    struct timespec ts = {.tv_sec = WAIT_MS / 1000};
    n = epoll_pwait2(w->ep, ev, 4, &ts, NULL);
  } else {
    n = epoll_wait(w->ep, ev, 4, WAIT_MS);
  }
  CHECK(n == 1); /* one event for the socket, whatever else it has */
  CHECK(ev[0].data.u64 == (uint64_t)fd);
  CHECK(!w->strict || (ev[0].events & EPOLLERR) != 0);
}

/* Wait for completions as w says and read up to max of them. */
static int read_compl_w(const struct waiter *w, struct smc_erm_compl *out, int max) {
  for (;;) {
    int k = erm_recv_compl(w->fd, out, max);
    if (k > 0) return k;
    wait_once(w);
  }
}

static uint64_t pattern(uint64_t word) { return (word + 1) * 0x9E3779B97F4A7C15ull ^ (word >> 7); }

/* ---- copy: 64 MiB in 1 MiB pieces ------------------------------------------------ */

struct copy_args {
  int lfd;
  uint64_t size, piece;
  int failed;
};

static void *copy_server(void *arg) {
  struct copy_args *a = arg;
  int fd = accept(a->lfd, NULL, NULL);
  CHECK(fd >= 0);
  uint64_t *buf = calloc(1, a->size);
  CHECK(buf != NULL);
  struct waiter w;
  waiter_stage(&w, fd, 1, 0);
  uint32_t memid;
  CHECK(reg_mr(fd, buf, a->size, SMC_ERM_ACCESS_REMOTE_WRITE, &memid) == 0);
  CHECK((memid & SMC_ERM_MEMID_LOCAL) == 0);
  waiter_stage(&w, fd, 1, 1);
  write_all(fd, &memid, sizeof memid);
  uint64_t pieces = a->size / a->piece, got = 0;
  struct smc_erm_compl c[32];
  while (got < pieces) {
    int k = read_compl_w(&w, c, 32);
    for (int i = 0; i < k; i++, got++) {
      CHECK(c[i].kind == SMC_ERM_COMPL_REMOTE && c[i].status == 0 && c[i].memid == memid);
      CHECK(c[i].seq == got + 1 && c[i].tag == (uint32_t)got);
      CHECK(c[i].offset == got * a->piece && c[i].len == a->piece);
    }
  }
  uint64_t bad = 0;
  for (uint64_t w = 0; w < a->size / 8; w++) bad += buf[w] != pattern(w);
  char answer = bad == 0 ? 'K' : 'X';
  write_all(fd, &answer, 1);
  CHECK(dereg_mr(fd, memid) == 0);
  CHECK(close(fd) == 0);
  waiter_close(&w);
  free(buf);
  if (bad != 0) fprintf(stderr, "server: %llu words differ\n", (unsigned long long)bad);
  a->failed = bad != 0;
  return NULL;
}

/* The client's side: register the source, COPY it, read the completions
 * and the owner's answer; print the summary. 0 if every byte arrived. */
static int copy_client(int fd, const struct copy_args *a) {
  uint64_t *src = malloc(a->size);
  CHECK(src != NULL);
  for (uint64_t w = 0; w < a->size / 8; w++) src[w] = pattern(w);
  uint32_t dst, me;
  struct waiter wt;
  waiter_stage(&wt, fd, 0, 0);
  /* Registered before anything came from the server: right after connect,
   * while the handshake may still run (the region must still get the
   * transport's memory: erm_test.sh checks the COPYs went one-sided). */
  CHECK(reg_mr(fd, src, a->size, 0, &me) == 0);
  CHECK((me & SMC_ERM_MEMID_LOCAL) != 0);
  waiter_stage(&wt, fd, 0, 1);
  read_all(fd, &dst, sizeof dst);
  uint64_t pieces = a->size / a->piece, done = 0, failed = 0;
  double t0 = now_s();
  /* Up to four COPYs per sendmsg. */
  for (uint64_t i = 0; i < pieces;) {
    struct smc_erm_copy cps[4];
    int n = 0;
    for (; n < 4 && i < pieces; n++, i++)
      cps[n] = (struct smc_erm_copy){.src_idx = me, .dst_idx = dst, .src_offset = i * a->piece,
                                     .dst_offset = i * a->piece, .len = a->piece,
                                     .flags = SMC_ERM_REMOTE_COMPL, .tag = (uint32_t)i};
    CHECK(copy_n(fd, cps, n) == 0);
  }
  struct smc_erm_compl c[32];
  while (done < pieces) {
    int k = read_compl_w(&wt, c, 32);
    for (int i = 0; i < k; i++, done++) {
      CHECK(c[i].kind == SMC_ERM_COMPL_LOCAL && c[i].seq == done + 1 && c[i].tag == (uint32_t)done);
      CHECK(c[i].memid == dst && c[i].offset == done * a->piece && c[i].len == a->piece);
      failed += c[i].status != 0;
    }
  }
  double secs = now_s() - t0;
  char answer;
  read_all(fd, &answer, 1);
  double t1 = now_s() - t0;
  CHECK(dereg_mr(fd, me) == 0);
  CHECK(close(fd) == 0);
  waiter_close(&wt);
  free(src);
  uint64_t mib = a->size >> 20;
  printf("erm_copy: copied=%llu MiB pieces=%llu local_compl=%llu failed=%llu owner=%s "
         "copy_s=%.3f checked_s=%.3f throughput=%.1fMiB/s\n",
         (unsigned long long)mib, (unsigned long long)pieces, (unsigned long long)done,
         (unsigned long long)failed, answer == 'K' ? "bytes-exact" : "MISMATCH", secs, t1,
         (double)mib / (secs > 0 ? secs : 1e-9));
  return failed == 0 && answer == 'K' ? 0 : 1;
}

static struct copy_args copy_args_of(uint64_t mib, uint64_t piece_kib) {
  struct copy_args a = {.size = mib << 20, .piece = piece_kib << 10};
  CHECK(a.size > 0 && a.piece > 0 && a.size % a.piece == 0 && a.piece % 8 == 0);
  return a;
}

/* Both ends in this process. */
static int run_copy(uint64_t mib, uint64_t piece_kib) {
  struct copy_args a = copy_args_of(mib, piece_kib);
  int port = 0;
  a.lfd = listen_any(&port);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, copy_server, &a) == 0);
  int rc = copy_client(connect_to(port), &a);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(close(a.lfd) == 0);
  return rc == 0 && !a.failed ? 0 : 1;
}

/* Say "ready PID PORT" on the fd ERM_READY_FD names (if any) and close it:
 * the port it listens on, so a script can pass 0 and let the kernel choose
 * one nothing else holds. */
static void say_ready(int port) {
  const char *rfd = getenv("ERM_READY_FD");
  if (rfd == NULL || *rfd == '\0') return;
  char line[48];
  int n = snprintf(line, sizeof line, "ready %d %d\n", (int)getpid(), port);
  int fd = atoi(rfd);
  write_all(fd, line, (size_t)n);
  CHECK(close(fd) == 0);
}

/* The server alone (another process runs the client): listening on `port`
 * (0: any) before it says "ready" on the fd ERM_READY_FD names, if any. */
static int run_serve(int port, uint64_t mib, uint64_t piece_kib) {
  struct copy_args a = copy_args_of(mib, piece_kib);
  a.lfd = listen_any(&port);
  say_ready(port);
  copy_server(&a);
  CHECK(close(a.lfd) == 0);
  printf("erm_copy serve: %s\n", a.failed ? "MISMATCH" : "bytes-exact");
  return a.failed ? 1 : 0;
}

static int run_client(int port, uint64_t mib, uint64_t piece_kib) {
  struct copy_args a = copy_args_of(mib, piece_kib);
  return copy_client(connect_to(port), &a);
}

/* ---- bad: malformed and refused calls --------------------------------------------- */

enum { REG_A = 1 << 20, REG_B = 4096, REG_C = 4096 };

struct bad_args {
  int lfd;
};

static int all_zero(const uint8_t *p, size_t n, size_t skip_at, size_t skip_len) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0 && !(i >= skip_at && i < skip_at + skip_len)) return 0;
  return 1;
}

static void *bad_server(void *arg) {
  struct bad_args *a = arg;
  int fd = accept(a->lfd, NULL, NULL);
  CHECK(fd >= 0);
  uint8_t *A = calloc(1, REG_A), *B = calloc(1, REG_B), *C = calloc(1, REG_C);
  CHECK(A && B && C);
  uint32_t ids[3];
  CHECK(reg_mr(fd, A, REG_A, SMC_ERM_ACCESS_REMOTE_WRITE, &ids[0]) == 0);
  CHECK(reg_mr(fd, B, REG_B, SMC_ERM_ACCESS_REMOTE_READ, &ids[1]) == 0);
  CHECK(reg_mr(fd, C, REG_C, SMC_ERM_ACCESS_REMOTE_WRITE | SMC_ERM_ACCESS_REMOTE_READ, &ids[2]) == 0);
  write_all(fd, ids, sizeof ids);
  char cmd;
  read_all(fd, &cmd, 1); /* 'D': deregister C */
  CHECK(cmd == 'D');
  CHECK(dereg_mr(fd, ids[2]) == 0);
  errno = 0;
  CHECK(dereg_mr(fd, ids[2]) == -1 && errno == ENOENT); /* twice */
  write_all(fd, "d", 1);
  /* One good REMOTE_COMPL COPY of A's last 4096 bytes is announced by its completion. */
  struct smc_erm_compl c[4];
  CHECK(read_compl(fd, c, 4) == 1);
  CHECK(c[0].kind == SMC_ERM_COMPL_REMOTE && c[0].memid == ids[0] && c[0].offset == REG_A - 4096 &&
        c[0].len == 4096 && c[0].tag == 77 && c[0].seq == 1);
  read_all(fd, &cmd, 1); /* 'C': check */
  CHECK(cmd == 'C');
  int ok = all_zero(A, REG_A, REG_A - 4096, 4096) && all_zero(B, REG_B, 0, 0) && all_zero(C, REG_C, 0, 0);
  for (size_t i = REG_A - 4096; i < REG_A; i++) ok = ok && A[i] == (uint8_t)(i * 7);
  write_all(fd, ok ? "K" : "X", 1);
  read_all(fd, &cmd, 1); /* EOF-free: the client's last word */
  CHECK(close(fd) == 0);
  free(A);
  free(B);
  free(C);
  return NULL;
}


/* sendmsg with control bytes as given. */
static int send_control(int fd, const void *ctl, size_t len) {
  union {
    char buf[256];
    struct cmsghdr align;
  } u;
  CHECK(len <= sizeof u.buf);
  memcpy(u.buf, ctl, len);
  struct msghdr mh = {.msg_control = u.buf, .msg_controllen = len};
  return (int)sendmsg(fd, &mh, 0);
}

static void bad_cmsgs(int fd, uint32_t me, uint32_t a) {
  union {
    char buf[256];
    struct cmsghdr align;
  } u;
  struct smc_erm_copy cp = {.src_idx = me, .dst_idx = a, .len = 16};
  struct cmsghdr *h = (struct cmsghdr *)u.buf;
  memset(&u, 0, sizeof u);
  /* a COPY 8 bytes short */
  h->cmsg_level = SOL_SMC;
  h->cmsg_type = SMC_ERM_CMD_COPY;
  h->cmsg_len = CMSG_LEN(sizeof cp - 8);
  memcpy(CMSG_DATA(h), &cp, sizeof cp - 8);
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp - 8)), EINVAL);
  /* a header whose length runs past the buffer */
  h->cmsg_len = CMSG_LEN(sizeof cp) + 64;
  memcpy(CMSG_DATA(h), &cp, sizeof cp);
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp)), EINVAL);
  /* a header shorter than a header */
  h->cmsg_len = 4;
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp)), EINVAL);
  /* a completion is not something to send */
  h->cmsg_len = CMSG_LEN(sizeof cp);
  h->cmsg_type = SMC_ERM_CMD_COMPL;
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp)), EINVAL);
  /* unknown flag bits */
  h->cmsg_type = SMC_ERM_CMD_COPY;
  struct smc_erm_copy f = cp;
  f.flags = 2;
  memcpy(CMSG_DATA(h), &f, sizeof f);
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp)), EINVAL);
  /* a COPY next to SCM_RIGHTS */
  memcpy(CMSG_DATA(h), &cp, sizeof cp);
  struct cmsghdr *h2 = (struct cmsghdr *)(u.buf + CMSG_SPACE(sizeof cp));
  h2->cmsg_level = SOL_SOCKET;
  h2->cmsg_type = SCM_RIGHTS;
  h2->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(h2), &fd, sizeof fd);
  EXPECT_ERRNO(send_control(fd, u.buf, CMSG_SPACE(sizeof cp) + CMSG_SPACE(sizeof(int))), EINVAL);
}

/* The preload's stat page (RRPC_RUN_STAT_PORT) over a connection rrpc-run
 * does not take (a raw connect system call): the ERM counters' values. */
static unsigned long long stat_var(const char *page, const char *name) {
  const char *p = strstr(page, name);
  CHECK(p != NULL);
  p += strlen(name);
  CHECK(strncmp(p, " : ", 3) == 0);
  return strtoull(p + 3, NULL, 10);
}

static void stat_page_get(char *page, size_t cap) {
  const char *port = getenv("RRPC_RUN_STAT_PORT");
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  CHECK(syscall(SYS_connect, fd, (struct sockaddr *)&a, sizeof a) == 0);
  const char req[] = "GET /vars HTTP/1.0\r\n\r\n";
  write_all(fd, req, sizeof req - 1);
  size_t n = 0;
  for (ssize_t r; (r = read(fd, page + n, cap - 1 - n)) > 0;) n += (size_t)r;
  page[n] = '\0';
  CHECK(close(fd) == 0);
}

static void check_stat_page(void) {
  const char *port = getenv("RRPC_RUN_STAT_PORT");
  if (port == NULL || *port == '\0') return;
  static char page[64 << 10];
  stat_page_get(page, sizeof page);
  /* This process: the server's three regions and the client's source; C
   * and the source deregistered; the 0-byte and the 4 KiB COPY; one
   * remote completion; every refused call above that reached ERM: 11
   * option values, 6 control buffers, 7 COPYs, 2 second DEREG_MRs (the
   * unknown option name and the empty error queue are not refusals). */
  CHECK(stat_var(page, "rrpc_run_erm_regs") == 4);
  CHECK(stat_var(page, "rrpc_run_erm_deregs") == 2);
  CHECK(stat_var(page, "rrpc_run_erm_copies") == 2);
  CHECK(stat_var(page, "rrpc_run_erm_copy_bytes") == 4096);
  CHECK(stat_var(page, "rrpc_run_erm_copies_failed") == 0);
  CHECK(stat_var(page, "rrpc_run_erm_remote_compl") == 1);
  CHECK(stat_var(page, "rrpc_run_erm_compl_dropped") == 0);
  unsigned long long refused = stat_var(page, "rrpc_run_erm_refused");
  if (refused != 26) fprintf(stderr, "refused=%llu\n", refused);
  CHECK(refused == 26);
  printf("  stat page: regs=4 deregs=2 copies=2 copy_bytes=4096 remote_compl=1 refused=%llu\n", refused);
}

static int run_bad(void) {
  struct bad_args a;
  int port = 0;
  a.lfd = listen_any(&port);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, bad_server, &a) == 0);
  int fd = connect_to(port);
  uint32_t ids[3];
  read_all(fd, ids, sizeof ids);
  static uint8_t src[8192];
  for (size_t i = 0; i < sizeof src; i++) src[i] = (uint8_t)((REG_A - 4096 + i) * 7);
  struct smc_erm_compl c[4];

  /* The option's value. */
  struct smc_erm_mr m = {.cmd = SMC_ERM_REG_MR, .addr = (uint64_t)(uintptr_t)src, .len = sizeof src};
  socklen_t l = sizeof m - 8;
  EXPECT_ERRNO(getsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, &l), EINVAL);
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, sizeof m + 8), EINVAL);
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, NULL, sizeof m), EFAULT);
  struct smc_erm_mr v = m;
  v.access = 4;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = m;
  v.addr = 0;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = m;
  v.len = 0;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = m;
  v.addr = UINT64_MAX - 100;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = m;
  v.cmd = 9;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = m;
  v.reserved = 1;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v = (struct smc_erm_mr){.cmd = SMC_ERM_DEREG_MR, .memid = 0};
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), EINVAL);
  v.memid = 12345;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &v, sizeof v), ENOENT);
  int one = 1;
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD + 1, &one, sizeof one), ENOPROTOOPT);
  /* Nothing queued yet. */
  struct msghdr empty = {0};
  EXPECT_ERRNO(recvmsg(fd, &empty, MSG_ERRQUEUE), EAGAIN);

  /* setsockopt's REG_MR writes the memid back, as ERM's does. */
  m.memid = 0;
  CHECK(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, sizeof m) == 0);
  uint32_t me = m.memid;
  CHECK(me != 0 && (me & SMC_ERM_MEMID_LOCAL));
  struct smc_erm_copy cp = {.src_idx = me, .dst_idx = ids[0], .len = 4096};

  /* A forked child shares the socket's bytes, not ERM. */
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    struct smc_erm_mr cm = m;
    int ok = setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &cm, sizeof cm) == -1 && errno == ENOPROTOOPT;
    ok = ok && copy_n(fd, &cp, 1) == -1 && errno == ENOPROTOOPT;
    _exit(ok ? 0 : 1);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  printf("  a forked child's REG_MR and COPY                           -> %s\n", strerror(ENOPROTOOPT));

  bad_cmsgs(fd, me, ids[0]);
  struct smc_erm_copy x = cp;
  x.src_idx = me + 1;
  EXPECT_ERRNO(copy_n(fd, &x, 1), ENOENT); /* unknown source */
  x = cp;
  x.src_offset = sizeof src - 4095;
  EXPECT_ERRNO(copy_n(fd, &x, 1), ERANGE); /* past the source's end */
  x = cp;
  x.dst_idx = 999;
  EXPECT_ERRNO(copy_n(fd, &x, 1), ENOENT); /* the peer never registered it */
  x = cp;
  x.dst_offset = REG_A - 4095;
  EXPECT_ERRNO(copy_n(fd, &x, 1), ERANGE); /* past the peer region's end */
  x = cp;
  x.dst_offset = UINT64_MAX - 10;
  EXPECT_ERRNO(copy_n(fd, &x, 1), ERANGE);
  x = cp;
  x.dst_idx = ids[1];
  EXPECT_ERRNO(copy_n(fd, &x, 1), EACCES); /* read-only for the peer */
  write_all(fd, "D", 1);
  char r;
  read_all(fd, &r, 1); /* C is gone: its revoke came before this byte */
  x = cp;
  x.dst_idx = ids[2];
  EXPECT_ERRNO(copy_n(fd, &x, 1), ESTALE);
  /* Deregistering the source of a COPY in flight: refused until it completed. */
  struct smc_erm_copy good[2] = {
      {.src_idx = me, .dst_idx = ids[0], .src_offset = 0, .dst_offset = REG_A, .len = 0, .tag = 5},
      {.src_idx = me, .dst_idx = ids[0], .src_offset = 0, .dst_offset = REG_A - 4096, .len = 4096,
       .flags = SMC_ERM_REMOTE_COMPL, .tag = 77}};
  CHECK(copy_n(fd, good, 2) == 0);
  int got = 0;
  while (got < 2) {
    int k = read_compl(fd, c + got, 4 - got);
    got += k;
  }
  CHECK(got == 2);
  CHECK(c[0].kind == SMC_ERM_COMPL_LOCAL && c[0].status == 0 && c[0].seq == 1 && c[0].tag == 5 && c[0].len == 0);
  CHECK(c[1].kind == SMC_ERM_COMPL_LOCAL && c[1].status == 0 && c[1].seq == 2 && c[1].tag == 77);
  printf("  a 0-byte COPY at the region's end and a 4 KiB one at its last bytes: both completed\n");
  write_all(fd, "C", 1);
  read_all(fd, &r, 1);
  CHECK(r == 'K');
  printf("  the owner's regions hold exactly the good COPY's bytes\n");
  CHECK(dereg_mr(fd, me) == 0);
  EXPECT_ERRNO(dereg_mr(fd, me), ENOENT);
  write_all(fd, "E", 1);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(close(fd) == 0);
  CHECK(close(a.lfd) == 0);
  check_stat_page();
  printf("erm_copy bad: ok\n");
  return 0;
}

/* ---- die: the owner is killed with COPYs in flight ------------------------------------ */

/* The owner: registers, sends its memid, and waits to be killed (the test
 * script kills it with SIGKILL once the writer submitted every COPY). */
static int run_serve_die(int port, uint64_t mib) {
  struct copy_args a = copy_args_of(mib, 1024);
  a.lfd = listen_any(&port);
  say_ready(port);
  int fd = accept(a.lfd, NULL, NULL);
  CHECK(fd >= 0);
  void *buf = calloc(1, a.size);
  CHECK(buf != NULL);
  uint32_t memid;
  CHECK(reg_mr(fd, buf, a.size, SMC_ERM_ACCESS_REMOTE_WRITE, &memid) == 0);
  write_all(fd, &memid, sizeof memid);
  char b;
  CHECK(read(fd, &b, 1) >= 0); /* the writer never sends: this waits for the kill */
  fprintf(stderr, "serve-die: still alive\n");
  return 1;
}

/* The writer: every COPY completes exactly once, in order, failures only
 * after the last success; once the stream says the peer is gone, a new
 * COPY and a new REG_MR fail with an errno at once. */
static int run_client_die(int port, uint64_t mib) {
  struct copy_args a = copy_args_of(mib, 1024);
  int fd = connect_to(port);
  uint8_t *src = calloc(1, a.size);
  CHECK(src != NULL);
  uint32_t me, dst;
  CHECK(reg_mr(fd, src, a.size, 0, &me) == 0);
  read_all(fd, &dst, sizeof dst);
  uint64_t pieces = a.size / a.piece;
  for (uint64_t i = 0; i < pieces; i++) {
    struct smc_erm_copy cp = {.src_idx = me, .dst_idx = dst, .src_offset = i * a.piece, .dst_offset = i * a.piece,
                              .len = a.piece, .flags = SMC_ERM_REMOTE_COMPL, .tag = (uint32_t)i};
    CHECK(copy_n(fd, &cp, 1) == 0);
  }
  /* "submitted" on ERM_SUBMITTED_FD: the script kills the owner now. */
  const char *sfd = getenv("ERM_SUBMITTED_FD");
  if (sfd != NULL && *sfd != '\0') {
    write_all(atoi(sfd), "submitted\n", 10);
    CHECK(close(atoi(sfd)) == 0);
  }
  uint64_t done = 0, ok = 0, failed = 0;
  int first_err = 0;
  struct smc_erm_compl c[32];
  while (done < pieces) {
    int k = read_compl(fd, c, 32);
    for (int i = 0; i < k; i++, done++) {
      CHECK(c[i].kind == SMC_ERM_COMPL_LOCAL && c[i].seq == done + 1 && c[i].tag == (uint32_t)done);
      if (c[i].status == 0) {
        CHECK(failed == 0); /* no success after a failure */
        ok++;
      } else {
        int e = -c[i].status;
        CHECK(e == ECONNRESET || e == ECONNABORTED || e == ETIMEDOUT || e == EPIPE || e == EIO || e == EACCES);
        if (failed++ == 0) first_err = e;
      }
    }
  }
  struct msghdr mh = {0};
  EXPECT_ERRNO(recvmsg(fd, &mh, MSG_ERRQUEUE), EAGAIN); /* no second completion for any */
  char b;
  CHECK(read(fd, &b, 1) == 0); /* EOF: the connection is gone */
  struct smc_erm_copy cp = {.src_idx = me, .dst_idx = dst, .len = 16};
  errno = 0;
  CHECK(copy_n(fd, &cp, 1) == -1 && errno != 0);
  printf("  a COPY after the peer died                                -> %s\n", strerror(errno));
  uint32_t again;
  errno = 0;
  CHECK(reg_mr(fd, src, 4096, SMC_ERM_ACCESS_REMOTE_WRITE, &again) == -1 && errno != 0);
  printf("  a REG_MR after the peer died                              -> %s\n", strerror(errno));
  CHECK(close(fd) == 0);
  free(src);
  printf("erm_copy die: completions=%llu ok=%llu failed=%llu first_error=%s\n", (unsigned long long)done,
         (unsigned long long)ok, (unsigned long long)failed, first_err ? strerror(first_err) : "-");
  return 0;
}

/* ---- limits: RRPC_RUN_ERM_MAX_MRS=2, _MAX_COMPL=2, _MAX_COPY_CMSGS=1 -------------------- */

static void *limits_server(void *arg) {
  int fd = accept(*(int *)arg, NULL, NULL);
  CHECK(fd >= 0);
  static uint8_t a[4096], b[4096], c[4096];
  uint32_t ida, idb, idc;
  CHECK(reg_mr(fd, a, sizeof a, SMC_ERM_ACCESS_REMOTE_WRITE, &ida) == 0);
  CHECK(reg_mr(fd, b, sizeof b, 0, &idb) == 0);
  EXPECT_ERRNO(reg_mr(fd, c, sizeof c, 0, &idc), ENOSPC);
  write_all(fd, &ida, sizeof ida);
  char w;
  read_all(fd, &w, 1); /* the client's three REMOTE_COMPL COPYs completed */
  CHECK(w == 'W');
  /* Their NOTIFYs came before that byte: two fit the queue, the third was dropped. */
  struct smc_erm_compl cs[4];
  CHECK(read_compl(fd, cs, 4) == 2);
  CHECK(cs[0].seq == 1 && cs[1].seq == 2 && cs[0].tag == 0 && cs[1].tag == 1);
  struct msghdr mh = {0};
  EXPECT_ERRNO(recvmsg(fd, &mh, MSG_ERRQUEUE), EAGAIN);
  write_all(fd, "K", 1);
  read_all(fd, &w, 1);
  CHECK(close(fd) == 0);
  return NULL;
}

static int run_limits(void) {
  int port = 0;
  int lfd = listen_any(&port);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, limits_server, &lfd) == 0);
  int fd = connect_to(port);
  /* RRPC_RUN_ERM_EPOLL_MAX=2: a third set is refused (and the kernel's
   * ADD undone); the room of a set closed, or replaced by dup2, is given
   * back. */
  int sets[4], nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
  struct epoll_event sev = {.events = EPOLLIN, .data.u64 = 7};
  CHECK(nul >= 0);
  for (int i = 0; i < 4; i++) CHECK((sets[i] = epoll_create1(EPOLL_CLOEXEC)) >= 0);
  CHECK(epoll_ctl(sets[0], EPOLL_CTL_ADD, fd, &sev) == 0);
  CHECK(epoll_ctl(sets[1], EPOLL_CTL_ADD, fd, &sev) == 0);
  EXPECT_ERRNO(epoll_ctl(sets[2], EPOLL_CTL_ADD, fd, &sev), ENOSPC);
  EXPECT_ERRNO(epoll_ctl(sets[2], EPOLL_CTL_DEL, fd, NULL), ENOENT);
  CHECK(close(sets[0]) == 0);
  CHECK(epoll_ctl(sets[2], EPOLL_CTL_ADD, fd, &sev) == 0);
  EXPECT_ERRNO(epoll_ctl(sets[3], EPOLL_CTL_ADD, fd, &sev), ENOSPC);
  CHECK(dup2(nul, sets[1]) == sets[1]);
  CHECK(epoll_ctl(sets[3], EPOLL_CTL_ADD, fd, &sev) == 0);
  CHECK(close(sets[1]) == 0 && close(sets[2]) == 0 && close(sets[3]) == 0 && close(nul) == 0);
  uint32_t dst, me;
  read_all(fd, &dst, sizeof dst);
  static uint8_t src[4096];
  CHECK(reg_mr(fd, src, sizeof src, 0, &me) == 0);
  struct smc_erm_copy cp[3];
  for (int i = 0; i < 3; i++)
    cp[i] = (struct smc_erm_copy){.src_idx = me, .dst_idx = dst, .len = 64, .flags = SMC_ERM_REMOTE_COMPL,
                                  .tag = (uint32_t)i};
  EXPECT_ERRNO(copy_n(fd, cp, 2), EINVAL); /* two COPYs in one sendmsg */
  CHECK(copy_n(fd, &cp[0], 1) == 0);
  CHECK(copy_n(fd, &cp[1], 1) == 0);
  EXPECT_ERRNO(copy_n(fd, &cp[2], 1), ENOBUFS); /* two completions owed already */
  struct smc_erm_compl cs[4];
  int got = 0;
  while (got < 2) got += read_compl(fd, cs + got, 4 - got);
  CHECK(got == 2 && cs[0].status == 0 && cs[1].status == 0);
  CHECK(copy_n(fd, &cp[2], 1) == 0);
  CHECK(read_compl(fd, cs, 4) == 1 && cs[0].status == 0 && cs[0].tag == 2 && cs[0].seq == 3);
  write_all(fd, "W", 1);
  char k;
  read_all(fd, &k, 1);
  CHECK(k == 'K');
  write_all(fd, "E", 1);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(close(fd) == 0);
  CHECK(close(lfd) == 0);
  const char *port_s = getenv("RRPC_RUN_STAT_PORT");
  if (port_s != NULL && *port_s != '\0') {
    char page[64 << 10];
    stat_page_get(page, sizeof page);
    CHECK(stat_var(page, "rrpc_run_erm_compl_dropped") == 1);
    CHECK(stat_var(page, "rrpc_run_erm_epoll_refused") == 2);
    printf("  stat page: compl_dropped=1 epoll_refused=2\n");
  }
  printf("erm_copy limits: ok\n");
  return 0;
}

/* ---- plain: a kernel socket refuses the option ---------------------------------------- */

static void *plain_accept(void *arg) {
  int fd = accept(*(int *)arg, NULL, NULL);
  CHECK(fd >= 0);
  char b;
  CHECK(read(fd, &b, 1) == 0);
  CHECK(close(fd) == 0);
  return NULL;
}

static int run_plain(void) {
  int port = 0;
  int lfd = listen_any(&port);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, plain_accept, &lfd) == 0);
  int fd = connect_to(port);
  char mem[64];
  struct smc_erm_mr m = {.cmd = SMC_ERM_REG_MR, .access = SMC_ERM_ACCESS_REMOTE_WRITE,
                         .addr = (uint64_t)(uintptr_t)mem, .len = sizeof mem};
  EXPECT_ERRNO(setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, sizeof m), ENOPROTOOPT);
  socklen_t l = sizeof m;
  int rc = getsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, &l);
  CHECK(rc == -1 && (errno == ENOPROTOOPT || errno == EOPNOTSUPP));
  CHECK(close(fd) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  CHECK(close(lfd) == 0);
  printf("erm_copy plain: ok\n");
  return 0;
}

/* Takes --wait=MODE out of argv (anywhere); 0, or -1 for an unknown mode. */
static int wait_arg(int *argc, char **argv) {
  static const char *const names[] = {"poll", NULL, "epoll-early", "epoll_pwait2", "select"};
  int out = 0;
  for (int i = 0; i < *argc; i++) {
    if (strncmp(argv[i], "--wait=", 7) != 0) {
      argv[out++] = argv[i];
      continue;
    }
    int found = 0;
    for (int m = 0; m < (int)(sizeof names / sizeof *names); m++)
      if (names[m] != NULL && strcmp(argv[i] + 7, names[m]) == 0) {
        g_wait = (enum wait_mode)m;
        found = 1;
      }
    if (!found) return -1;
  }
  *argc = out;
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (wait_arg(&argc, argv) != 0) {
    fprintf(stderr, "erm_copy: --wait= takes poll, epoll-early, epoll_pwait2 or select\n");
    return 2;
  }
  const char *what = argc > 1 ? argv[1] : "copy";
  if (strcmp(what, "copy") == 0)
    return run_copy(argc > 2 ? strtoull(argv[2], NULL, 10) : 64, argc > 3 ? strtoull(argv[3], NULL, 10) : 1024);
  if (strcmp(what, "bad") == 0) return run_bad();
  if (strcmp(what, "plain") == 0) return run_plain();
  if (strcmp(what, "limits") == 0) return run_limits();
  uint64_t mib = argc > 3 ? strtoull(argv[3], NULL, 10) : 64, kib = argc > 4 ? strtoull(argv[4], NULL, 10) : 1024;
  if (strcmp(what, "serve") == 0 && argc > 2) return run_serve(atoi(argv[2]), mib, kib);
  if (strcmp(what, "client") == 0 && argc > 2) return run_client(atoi(argv[2]), mib, kib);
  if (strcmp(what, "serve-die") == 0 && argc > 2) return run_serve_die(atoi(argv[2]), mib);
  if (strcmp(what, "client-die") == 0 && argc > 2) return run_client_die(atoi(argv[2]), mib);
  fprintf(stderr, "usage: erm_copy copy [MiB] [piece_KiB] | serve PORT [MiB] [piece_KiB] | "
                  "client PORT [MiB] [piece_KiB] | serve-die PORT [MiB] | client-die PORT [MiB] | bad | limits | plain; "
                  "--wait=poll|epoll-early|epoll_pwait2|select\n");
  return 2;
}
