/* test/preload/erm_prog.h - what the ERM test programs (erm_copy, erm_wait)
 * share: plain sockets on PRELOAD_TEST_ADDR (127.0.0.1 by default) and
 * rrpc/erm.h's calls as a program makes them. Plain C; rrpc-run puts
 * rrpc under the programs. */
#ifndef RRPC_TEST_PRELOAD_ERM_PROG_H
#define RRPC_TEST_PRELOAD_ERM_PROG_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rrpc/erm.h"
#include "test/preload/preload_test.h"

/* Below the script's 120 s: a wake-up that never comes fails a CHECK. */
enum { WAIT_MS = 60000 };

static inline const char *test_addr(void) {
  const char *ip = getenv("PRELOAD_TEST_ADDR");
  return ip != NULL && *ip != '\0' ? ip : "127.0.0.1";
}

/* *port: the port to listen on (0: any), then the one it got. */
static inline int listen_any(int *port) {
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

static inline int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  CHECK(inet_pton(AF_INET, test_addr(), &a.sin_addr) == 1);
  CHECK(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  return fd;
}

static inline void write_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    CHECK(w > 0);
    b += w;
    n -= (size_t)w;
  }
}

static inline void read_all(int fd, void *p, size_t n) {
  char *b = p;
  while (n > 0) {
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    CHECK(r > 0);
    b += r;
    n -= (size_t)r;
  }
}

static inline double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the API, as a program uses it ------------------------------------------ */

static inline int reg_mr(int fd, void *buf, uint64_t len, uint32_t access, uint32_t *memid) {
  struct smc_erm_mr m = {.cmd = SMC_ERM_REG_MR, .access = access, .addr = (uint64_t)(uintptr_t)buf, .len = len};
  socklen_t l = sizeof m;
  if (getsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, &l) != 0) return -1;
  CHECK(l == sizeof m && m.memid != 0);
  *memid = m.memid;
  return 0;
}

static inline int dereg_mr(int fd, uint32_t memid) {
  struct smc_erm_mr m = {.cmd = SMC_ERM_DEREG_MR, .memid = memid};
  return setsockopt(fd, SOL_SMC, SMC_ERM_CMD, &m, sizeof m);
}

/* sendmsg with n COPY control messages and no bytes. */
static inline int copy_n(int fd, const struct smc_erm_copy *cps, int n) {
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

/* One recvmsg(MSG_ERRQUEUE) that does not wait: the completions it read
 * (up to max; each checked to be one whole SMC_ERM_CMD_COMPL), or 0 when
 * none is queued. */
static inline int erm_recv_compl(int fd, struct smc_erm_compl *out, int max) {
  union {
    char buf[32 * CMSG_SPACE(sizeof(struct smc_erm_compl))];
    struct cmsghdr align;
  } u;
  struct msghdr mh = {.msg_control = u.buf, .msg_controllen = sizeof u.buf};
  ssize_t r = recvmsg(fd, &mh, MSG_ERRQUEUE | MSG_DONTWAIT);
  if (r < 0 && errno == EAGAIN) return 0;
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

/* Completions, waiting with poll: POLLERR says the error queue holds some. */
static inline int read_compl(int fd, struct smc_erm_compl *out, int max) {
  for (;;) {
    int k = erm_recv_compl(fd, out, max);
    if (k > 0) return k;
    struct pollfd p = {.fd = fd, .events = 0};
    CHECK(poll(&p, 1, WAIT_MS) == 1);
    CHECK((p.revents & POLLERR) != 0);
  }
}

#endif /* RRPC_TEST_PRELOAD_ERM_PROG_H */
