/* tcp.c - the TCP transport: writev straight from iobuf blocks, reads into
 * iobuf blocks. Stateless beyond the socket itself. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/loop.h"
#include "rrpc/transport.h"
#include "transport/tcp/tcp_internal.h"

#define TCP_IOV_MAX 64
/* Reads per readiness event before yielding to other sockets of the loop. */
#define TCP_READ_BUDGET 16
#define TCP_READ_MIN 8192
#define TCP_READ_MAX (256 * 1024)
/* Bytes per readiness event before yielding (epoll is level-triggered:
 * the rest is read on the next round). The 16 growing reads above reach
 * 3 MiB; copying that and faulting in its fresh blocks held a loop for
 * 56-75 ms under TSan (6,900 page faults; the loop watchdog's bound there
 * is 50 ms, CI failed on it), so other connections waited that long.
 * 1 MiB per round kept a round near 1 ms of copying on the host, but on a
 * VM host whose page faults cost ~30 us it still took 52 ms under TSan
 * (1.24 MiB, 1,525 faults; CI failed on it again): 512 KiB per round. A
 * large message costs a few more epoll_waits, not more copies. */
#define TCP_READ_ROUND_BYTES (512 * 1024)
/* Bytes one write call on a loop thread sends before it yields, as if the
 * socket were full (EPOLLOUT armed, -EAGAIN; the socket is still writable,
 * so the level-triggered loop resumes the write next round). Without it a
 * multi-MB message to a peer that keeps reading went out in one copy after
 * another in a single loop callback: 10.5 ms of system time for an 8 MiB
 * attachment on a VM host (the loop watchdog's bound is 10 ms; CI failed on
 * it), while the loop's other connections waited.
 * Other threads (a worker writing a response, a caller) write on: their
 * time holds up no other connection, and handing the rest to the loop
 * would serialize large messages on it. */
#define TCP_WRITE_ROUND_BYTES (1024 * 1024)

/* read and sendmsg as plain system calls: glibc's wrappers are cancellation
 * points, and turning asynchronous cancellation on and off around each
 * call cost ~30 instructions a call, twice an RPC per side. rrpc's calls
 * are not cancellation points (its loop threads are never cancelled, and
 * a caller's thread cancelled inside rrpc would leave its state half
 * changed anyway). Sanitizer builds keep the wrappers: their interceptors
 * check the buffers (ASan) and order the fd's writes before its reads for
 * the race detector (TSan). */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
static ssize_t sys_read(int fd, void *p, size_t n) { return read(fd, p, n); }
static ssize_t sys_sendmsg(int fd, const struct msghdr *mh, int flags) { return sendmsg(fd, mh, flags); }
#else
static ssize_t sys_read(int fd, void *p, size_t n) { return syscall(SYS_read, fd, p, n); }
static ssize_t sys_sendmsg(int fd, const struct msghdr *mh, int flags) {
  return syscall(SYS_sendmsg, fd, mh, flags);
}
#endif

static int tcp_start(rrpc__socket *s, int is_client) {
  (void)is_client;
  rrpc__socket_ready(s, 0);
  return 0;
}

/* The server-side default: look at the first bytes for an SMC-R Proposal. */
static int sniff_and_start(rrpc__socket *s, int is_client, int offers_rdma) {
  if (!is_client) {
    int rc = rrpc__tcp_sniff_begin(s, offers_rdma);
    if (rc != 0) return rc;
  }
  return tcp_start(s, is_client);
}

static int tcp_start_sniffing(rrpc__socket *s, int is_client) { return sniff_and_start(s, is_client, 0); }

/* A use_rdma server's connection that goes on over TCP (no device, a client
 * without CLC, a hello it cannot serve): the same sniff, and a peer's refused
 * RDMA request counts as a fallback. */
static int tcp_start_sniffing_rdma(rrpc__socket *s, int is_client) { return sniff_and_start(s, is_client, 1); }

/* Keep the first iovecs of `iov` that hold at most `cap` bytes (the last
 * one cut short); how many are left. */
static int iov_cap(struct iovec *iov, int n, size_t cap) {
  size_t sum = 0;
  for (int i = 0; i < n; i++) {
    if (iov[i].iov_len >= cap - sum) {
      iov[i].iov_len = cap - sum;
      return i + 1;
    }
    sum += iov[i].iov_len;
  }
  return n;
}

static int tcp_write(rrpc__socket *s, rrpc_iobuf *data) {
  int fd = rrpc__socket_fd(s);
  size_t sent = 0;
  size_t budget = rrpc__loop_current() != NULL ? TCP_WRITE_ROUND_BYTES : SIZE_MAX;
  while (rrpc_iobuf_length(data) > 0) {
    if (sent >= budget) {
      /* Yield: the loop's other sockets go first, the rest next round. */
      int rc = rrpc__socket_want_writable(s, 1);
      return rc < 0 ? rc : -EAGAIN;
    }
    struct iovec iov[TCP_IOV_MAX];
    size_t bytes = 0;
    int n = rrpc__iobuf_fill_iov(data, iov, TCP_IOV_MAX, &bytes);
    if (bytes > budget - sent) n = iov_cap(iov, n, budget - sent);
    /* sendmsg rather than writev: MSG_NOSIGNAL keeps a dead peer from
     * raising SIGPIPE in the application. */
    struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
    ssize_t w = sys_sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        /* Armed last: once EPOLLOUT can fire, the loop may resume the
         * write, and we must no longer touch `data`. */
        int rc = rrpc__socket_want_writable(s, 1);
        return rc < 0 ? rc : -EAGAIN;
      }
      return -errno;
    }
    rrpc_iobuf_pop_front(data, (size_t)w);
    sent += (size_t)w;
  }
  return 0;
}

/* Hand what was read to the protocol, unless the first bytes are still
 * being looked at for an SMC-R CLC message (then they wait in the buffer). */
static void tcp_deliver(rrpc__socket *s) {
  if (rrpc__socket_tstate(s) != NULL) {
    int rc = rrpc__tcp_sniff_check(s);
    if (rc == 0) return;
    rrpc__tcp_sniff_end(s);
    if (rc < 0) {
      rrpc__socket_fail(s, rc);
      return;
    }
  }
  rrpc__socket_deliver(s);
}

/* Read what is there, growing the read size while reads fill it. The first
 * read of each wake-up goes into the room left in the last block: a peer
 * that trickles bytes then costs the bytes it sent, not a block per read. */
static void tcp_read(rrpc__socket *s) {
  rrpc_iobuf *rbuf = rrpc__socket_rbuf(s);
  int fd = rrpc__socket_fd(s);
  size_t want = TCP_READ_MIN, total = 0;
  int eof = 0;
  for (int i = 0; i < TCP_READ_BUDGET && total < TCP_READ_ROUND_BYTES; i++) {
    void *p;
    size_t avail;
    /* Host memory, never the registered pool: a TCP peer must not be able
     * to pin memory by parking partial frames (docs/security.md). */
    int rc = rrpc__iobuf_reserve_from(rbuf, i == 0 ? 1 : want, rrpc__block_host_allocator(), &p, &avail);
    if (rc != 0) {
      rrpc__socket_fail(s, rc);
      return;
    }
    ssize_t r = sys_read(fd, p, avail);
    if (r < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      tcp_deliver(s); /* what arrived before the error still counts */
      rrpc__socket_fail(s, -errno);
      return;
    }
    if (r == 0) {
      eof = 1;
      break;
    }
    rrpc__iobuf_commit(rbuf, (size_t)r);
    total += (size_t)r;
    if ((size_t)r < avail) break;
    if (want < TCP_READ_MAX) want *= 2;
  }
  tcp_deliver(s);
  if (eof) rrpc__socket_fail(s, -RRPC_ECLOSE);
}

static void tcp_on_fd_event(rrpc__socket *s, uint32_t events) {
  if (events & EPOLLOUT) {
    rrpc__socket_want_writable(s, 0);
    rrpc__socket_resume_write(s);
  }
  if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP))) return;
  tcp_read(s);
}

/* A failed socket stops sniffing at once, so a sniff deadline's reference
 * does not keep the fd open until the deadline. */
static void tcp_on_fail(rrpc__socket *s, int code) {
  (void)code;
  rrpc__tcp_sniff_end(s);
}

static void tcp_close(rrpc__socket *s) { rrpc__tcp_sniff_end(s); }

static int tcp_describe(const rrpc__socket *s, char *buf, size_t len) {
  (void)s;
  snprintf(buf, len, "tcp");
  return 0;
}

static int tcp_is_rdma(const rrpc__socket *s) {
  (void)s;
  return 0;
}

static const rrpc_transport_ops tcp_ops = {
    .name = "tcp",
    .start = tcp_start,
    .write = tcp_write,
    .on_fd_event = tcp_on_fd_event,
    .on_fail = tcp_on_fail,
    .close = tcp_close,
    .describe = tcp_describe,
    .is_rdma = tcp_is_rdma,
};

/* The same, but a server socket first declines an SMC-R Proposal. */
static const rrpc_transport_ops tcp_sniffing_ops = {
    .name = "tcp",
    .start = tcp_start_sniffing,
    .write = tcp_write,
    .on_fd_event = tcp_on_fd_event,
    .on_fail = tcp_on_fail,
    .close = tcp_close,
    .describe = tcp_describe,
    .is_rdma = tcp_is_rdma,
};

/* The same for a server that offers RDMA: its peers' refused RDMA requests
 * count as fallbacks. */
static const rrpc_transport_ops tcp_sniffing_rdma_ops = {
    .name = "tcp",
    .start = tcp_start_sniffing_rdma,
    .write = tcp_write,
    .on_fd_event = tcp_on_fd_event,
    .on_fail = tcp_on_fail,
    .close = tcp_close,
    .describe = tcp_describe,
    .is_rdma = tcp_is_rdma,
};

const rrpc_transport_ops *rrpc__transport_tcp(void) { return &tcp_ops; }
const rrpc_transport_ops *rrpc__transport_tcp_default(void) { return &tcp_sniffing_ops; }
const rrpc_transport_ops *rrpc__transport_tcp_rdma_server(void) { return &tcp_sniffing_rdma_ops; }
