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
 *   erm_copy epoll-odd  epoll_ctl calls the kernel refuses, sockets added
 *       to sets before their first REG_MR in odd ways (no events, a dup,
 *       ET|ONESHOT, EXCLUSIVE), sets and the socket closed under it.
 *   erm_copy select-kernel  (no rrpc-run) the sets Linux's select puts a
 *       socket in whose error queue is not empty: read and write, not except.
 *   erm_copy select-sets  the same for a relayed socket with an ERM
 *       completion queued and no room to write; select's timeout, EBADF and
 *       EINVAL stay the kernel's.
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
#include "test/preload/preload_test.h"

/* Below the script's 120 s: a wake-up that never comes fails a CHECK. */
enum { WAIT_MS = 60000 };

static const char *test_addr(void) {
  const char *ip = getenv("PRELOAD_TEST_ADDR");
  return ip != NULL && *ip != '\0' ? ip : "127.0.0.1";
}

/* *port: the port to listen on (0: any), then the one it got. */
static int listen_any(int *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  int one = 1;
  CHECK(setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)*port)};
  CHECK(inet_pton(AF_INET, test_addr(), &a.sin_addr) == 1);
  CHECK(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  CHECK(listen(fd, 4) == 0);
  socklen_t len = sizeof a;
  CHECK(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

static int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  CHECK(inet_pton(AF_INET, test_addr(), &a.sin_addr) == 1);
  CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  return fd;
}

static void write_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    CHECK(w > 0);
    b += w;
    n -= (size_t)w;
  }
}

static void read_all(int fd, void *p, size_t n) {
  char *b = p;
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r > 0);
    b += r;
    n -= (size_t)r;
  }
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the API, as a program uses it ------------------------------------------ */

static int reg_mr(int fd, void *buf, uint64_t len, uint32_t access, uint32_t *memid) {
  struct smc_erm_mr m = {.cmd = SMC_ERM_REG_MR, .access = access, .addr = (uint64_t)(uintptr_t)buf, .len = len};
  socklen_t l = sizeof m;
  if (getsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, &l) != 0) return -1;
  CHECK(l == sizeof m && m.memid != 0);
  *memid = m.memid;
  return 0;
}

static int dereg_mr(int fd, uint32_t memid) {
  struct smc_erm_mr m = {.cmd = SMC_ERM_DEREG_MR, .memid = memid};
  return setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, sizeof m);
}

/* sendmsg with n COPY control messages and no bytes. */
static int copy_n(int fd, const struct smc_erm_copy *cps, int n) {
  union {
    char buf[16 * CMSG_SPACE(sizeof(struct smc_erm_copy))];
    struct cmsghdr align;
  } u;
  CHECK(n >= 1 && n <= 16);
  memset(&u, 0, sizeof u);
  struct msghdr mh = {.msg_control = u.buf, .msg_controllen = (size_t)n * CMSG_SPACE(sizeof *cps)};
  struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
  for (int i = 0; i < n; i++, h = CMSG_NXTHDR(&mh, h)) {
    h->cmsg_level = SOL_SMC;
    h->cmsg_type = SMC_ERM_CMD_COPY;
    h->cmsg_len = CMSG_LEN(sizeof *cps);
    memcpy(CMSG_DATA(h), &cps[i], sizeof *cps);
  }
  return (int)sendmsg(fd, &mh, 0);
}

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
    union {
      char buf[32 * CMSG_SPACE(sizeof(struct smc_erm_compl))];
      struct cmsghdr align;
    } u;
    struct msghdr mh = {.msg_control = u.buf, .msg_controllen = sizeof u.buf};
    ssize_t r = recvmsg(w->fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
    if (r < 0 && errno == EAGAIN) {
      wait_once(w);
      continue;
    }
    CHECK(r == 0);
    CHECK((mh.msg_flags & MSG_ERRQUEUE) && !(mh.msg_flags & MSG_CTRUNC));
    int k = 0;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h != NULL; h = CMSG_NXTHDR(&mh, h)) {
      CHECK(h->cmsg_level == SOL_SMC && h->cmsg_type == SMC_ERM_CMD_COMPL);
      CHECK(h->cmsg_len == CMSG_LEN(sizeof *out));
      CHECK(k < max);
      memcpy(&out[k++], CMSG_DATA(h), sizeof *out);
    }
    CHECK(k > 0);
    return k;
  }
}

/* Waiting with poll, strictly: POLLERR says the error queue holds some. */
static int read_compl(int fd, struct smc_erm_compl *out, int max) {
  struct waiter w = {.fd = fd, .ep = -1, .strict = 1, .how = W_POLL};
  return read_compl_w(&w, out, max);
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

#define EXPECT_ERRNO(call, e)                                                             \
  do {                                                                                    \
    errno = 0;                                                                            \
    int rc_ = (int)(call);                                                                \
    if (rc_ != -1 || errno != (e)) {                                                      \
      fprintf(stderr, "%s:%d: %s: rc %d errno %d (%s), want errno %d (%s)\n", __FILE__, __LINE__, #call, rc_, \
              errno, strerror(errno), (e), strerror(e));                                   \
      exit(1);                                                                            \
    }                                                                                     \
    printf("  %-60s -> %s\n", #call, strerror(e));                                        \
  } while (0)

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
   * ADD undone); a closed set's room is given back. */
  int sets[3];
  struct epoll_event sev = {.events = EPOLLIN, .data.u64 = 7};
  for (int i = 0; i < 3; i++) CHECK((sets[i] = epoll_create1(EPOLL_CLOEXEC)) >= 0);
  CHECK(epoll_ctl(sets[0], EPOLL_CTL_ADD, fd, &sev) == 0);
  CHECK(epoll_ctl(sets[1], EPOLL_CTL_ADD, fd, &sev) == 0);
  EXPECT_ERRNO(epoll_ctl(sets[2], EPOLL_CTL_ADD, fd, &sev), ENOSPC);
  EXPECT_ERRNO(epoll_ctl(sets[2], EPOLL_CTL_DEL, fd, NULL), ENOENT);
  CHECK(close(sets[0]) == 0);
  CHECK(epoll_ctl(sets[2], EPOLL_CTL_ADD, fd, &sev) == 0);
  CHECK(close(sets[1]) == 0 && close(sets[2]) == 0);
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
    CHECK(stat_var(page, "rrpc_run_erm_epoll_refused") == 1);
    printf("  stat page: compl_dropped=1 epoll_refused=1\n");
  }
  printf("erm_copy limits: ok\n");
  return 0;
}

/* ---- epoll-odd: odd epoll_ctl calls, fds and sets closed under it ---------------------- */

/* The owner: a region, its memid, then it waits for the writer's EOF. */
static void *odd_server(void *arg) {
  int fd = accept(*(int *)arg, NULL, NULL);
  CHECK(fd >= 0);
  static uint8_t mem[4096];
  uint32_t id;
  CHECK(reg_mr(fd, mem, sizeof mem, SMC_ERM_ACCESS_REMOTE_WRITE, &id) == 0);
  write_all(fd, &id, sizeof id);
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
  printf("erm_copy epoll-odd: ok\n");
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
    printf("erm_copy select-kernel: ok\n");
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
  printf("erm_copy select-kernel: ok\n");
  return 0;
}

struct sets_args {
  int lfd, go[2];
};

/* The owner reads nothing until told, then everything up to EOF. */
static void *sets_server(void *arg) {
  struct sets_args *a = arg;
  int fd = accept(a->lfd, NULL, NULL);
  CHECK(fd >= 0);
  static uint8_t mem[4096];
  uint32_t id;
  CHECK(reg_mr(fd, mem, sizeof mem, SMC_ERM_ACCESS_REMOTE_WRITE, &id) == 0);
  write_all(fd, &id, sizeof id);
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
  printf("erm_copy select-sets: ok\n");
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
  if (strcmp(what, "epoll-odd") == 0) return run_epoll_odd();
  if (strcmp(what, "select-kernel") == 0) return run_select_kernel();
  if (strcmp(what, "select-sets") == 0) return run_select_sets();
  uint64_t mib = argc > 3 ? strtoull(argv[3], NULL, 10) : 64, kib = argc > 4 ? strtoull(argv[4], NULL, 10) : 1024;
  if (strcmp(what, "serve") == 0 && argc > 2) return run_serve(atoi(argv[2]), mib, kib);
  if (strcmp(what, "client") == 0 && argc > 2) return run_client(atoi(argv[2]), mib, kib);
  if (strcmp(what, "serve-die") == 0 && argc > 2) return run_serve_die(atoi(argv[2]), mib);
  if (strcmp(what, "client-die") == 0 && argc > 2) return run_client_die(atoi(argv[2]), mib);
  fprintf(stderr, "usage: erm_copy copy [MiB] [piece_KiB] | serve PORT [MiB] [piece_KiB] | "
                  "client PORT [MiB] [piece_KiB] | serve-die PORT [MiB] | client-die PORT [MiB] | bad | limits | epoll-odd | "
                  "select-kernel | select-sets | "
                  "plain; --wait=poll|epoll-early|epoll_pwait2|select\n");
  return 2;
}
