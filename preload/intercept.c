/* intercept.c - the libc functions librrpc_preload.so replaces.
 *
 * Only the calls that create, name, configure or end a TCP connection are
 * intercepted: connect, accept/accept4, close, dup/dup2/dup3, fcntl's
 * F_DUPFD(_CLOEXEC), getsockname,
 * getpeername, getsockopt, setsockopt. A connection the policy selects is
 * handed to the relay (relay.h), after which the application's fd number is
 * an AF_UNIX stream socket, so read, write, recv, send, readv, writev, sendfile,
 * splice, MSG_PEEK/WAITALL/DONTWAIT, FIONREAD, select/epoll, shutdown,
 * SO_RCVTIMEO and fork need no wrapper: the kernel does them on that socket.
 * ERM's socket API (rrpc/erm.h) adds wrappers that look at a relayed fd only
 * for its own parts: SOL_SMC options, sendmsg's control messages,
 * recvmsg(MSG_ERRQUEUE), and the POLLERR of poll/ppoll, the EPOLLERR of
 * epoll_wait/epoll_pwait/epoll_pwait2 and the read and write sets of
 * select/pselect for queued completions.
 * Every other fd, and every connection the policy leaves alone, goes
 * straight to libc.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "preload/env_num.h"
#include "preload/erm.h"
#include "preload/erm_epoll.h"
#include "preload/frame.h"
#include "preload/policy.h"
#include "preload/relay.h"
#include "preload/bpf/smc_opt.h"
#include "preload/stat_page.h"

enum { FD_TABLE = RRPC_RUN_FD_TABLE }; /* relay.h: fds at or above stay plain TCP */

static _Atomic(rrpc_run_conn *) g_fds[FD_TABLE];
static rrpc_run_policy *g_policy;
static int g_enabled; /* the policy parsed: relaying may happen */
static char g_comm[32];
static int g_ebpf; /* the policy's mode is "ebpf": the TCP option decides */
/* RRPC_RUN_DECIDE_MS: how long a non-blocking connect in eBPF mode waits
 * for the SYN-ACK (a plain server's socket is then never relayed). 0: no
 * connect waits and no accept looks (such connections are relayed
 * untouched). */
static long g_decide_ms = 200;
/* RRPC_RUN_ACCEPT_WAIT_MS: how long accept waits for a selected
 * connection's first bytes (a plain client's is then never relayed). Short:
 * the accepting thread's other connections (an event loop's) and every
 * later connection wait meanwhile, and a client that speaks first does so
 * one round trip after the handshake. */
static long g_accept_wait_ms = 2;
static int (*real_accept4)(int, struct sockaddr *, socklen_t *, int);
static int (*real_dup)(int);
static int (*real_dup2)(int, int);
static int (*real_getsockname)(int, struct sockaddr *, socklen_t *);
static int (*real_getpeername)(int, struct sockaddr *, socklen_t *);

static const char *env_get(const char *name) { return getenv(name); }

static void after_fork_child(void) { rrpc_run_relay_after_fork(); }
static atomic_int g_forked_children; /* this process forked: children may share its sockets */
static void after_fork_parent(void) { atomic_store(&g_forked_children, 1); }

/* A wait in milliseconds (0..10000) from the environment, if set. */
static int env_ms(const char *name, long *out) {
  const char *v = getenv(name);
  if (rrpc_run_env_num(v, 0, 10000, out) < 0) {
    fprintf(stderr, "rrpc-run: %s=%s is not a number in 0..10000; connections stay plain TCP\n", name, v);
    return -1;
  }
  return 0;
}

/* RRPC_RUN_RDMA, RRPC_RUN_DECIDE_MS, RRPC_RUN_ACCEPT_WAIT_MS; a malformed one says so and leaves
 * the process on plain TCP. */
static int settings_from_env(void) {
  const char *v = getenv("RRPC_RUN_RDMA");
  if (v != NULL && *v != '\0') {
    if (strcmp(v, "auto") == 0) rrpc_run_relay_set_rdma_mode(RRPC_RUN_RDMA_AUTO);
    else if (strcmp(v, "on") == 0) rrpc_run_relay_set_rdma_mode(RRPC_RUN_RDMA_ON);
    else if (strcmp(v, "off") == 0) rrpc_run_relay_set_rdma_mode(RRPC_RUN_RDMA_OFF);
    else {
      fprintf(stderr, "rrpc-run: RRPC_RUN_RDMA=%s is not auto, on or off; connections stay plain TCP\n", v);
      return -1;
    }
  }
  if (env_ms("RRPC_RUN_DECIDE_MS", &g_decide_ms) != 0 || env_ms("RRPC_RUN_ACCEPT_WAIT_MS", &g_accept_wait_ms) != 0)
    return -1;
  return 0;
}

__attribute__((constructor)) static void preload_init(void) {
  rrpc_run_real.close = dlsym(RTLD_NEXT, "close");
  rrpc_run_real.dup3 = dlsym(RTLD_NEXT, "dup3");
  rrpc_run_real.connect = dlsym(RTLD_NEXT, "connect");
  rrpc_run_real.getsockopt = dlsym(RTLD_NEXT, "getsockopt");
  rrpc_run_real.setsockopt = dlsym(RTLD_NEXT, "setsockopt");
  real_accept4 = dlsym(RTLD_NEXT, "accept4");
  rrpc_run_real.accept4 = real_accept4;
  real_dup = dlsym(RTLD_NEXT, "dup");
  real_dup2 = dlsym(RTLD_NEXT, "dup2");
  real_getsockname = dlsym(RTLD_NEXT, "getsockname");
  real_getpeername = dlsym(RTLD_NEXT, "getpeername");
  FILE *f = fopen("/proc/self/comm", "re");
  if (f != NULL) {
    if (fgets(g_comm, sizeof g_comm, f) != NULL) g_comm[strcspn(g_comm, "\n")] = '\0';
    fclose(f);
  }
  const char *err = NULL;
  int rc = rrpc_run_policy_parse(env_get, &g_policy, &err);
  if (rc != 0) {
    fprintf(stderr, "rrpc-run: %s; connections stay plain TCP\n", err ? err : "bad settings");
    return;
  }
  rrpc_run_relay_set_debug(rrpc_run_policy_debug(g_policy));
  if (rrpc_run_relay_debug())
    fprintf(stderr, "rrpc-run[%d]: %s: negotiation mode %s (%s)\n", (int)getpid(), g_comm,
            rrpc_run_policy_mode(g_policy), rrpc_run_policy_note(g_policy));
  if (settings_from_env() != 0) return;
  g_ebpf = strcmp(rrpc_run_policy_mode(g_policy), "ebpf") == 0;
  if (g_ebpf) rrpc_run_relay_set_peer_check(rrpc_smcopt_peer_offered);
  pthread_atfork(NULL, after_fork_parent, after_fork_child);
  rrpc_run_erm_settings_from_env();
  rrpc_run_erm_epoll_settings_from_env();
  g_enabled = 1;
  rrpc_run_stat_page_start();
}

static rrpc_run_conn *fd_conn(int fd) {
  if (fd < 0 || fd >= FD_TABLE) return NULL;
  return atomic_load(&g_fds[fd]);
}

/* exit() with relayed sockets still open: the kernel would send what the
 * program wrote, then FIN. Shut the program's ends down for writing (its
 * relays read EOF after the last bytes and say "done writing"), then wait,
 * at most RRPC_RUN_EXIT_LINGER_MS (default 5000), until the relays handed it
 * all over. A process that forked keeps its sockets open: its children may
 * still use them; only what was already read is waited for. _exit() and
 * signals end the process without this (docs/rrpc-run.md). */
__attribute__((destructor)) static void drain_at_exit(void) {
  if (!g_enabled || rrpc_run_relay_forked()) return;
  long linger = 5000;
  const char *v = getenv("RRPC_RUN_EXIT_LINGER_MS");
  if (rrpc_run_env_num(v, 0, 600000, &linger) < 0)
    fprintf(stderr, "rrpc-run[%d]: RRPC_RUN_EXIT_LINGER_MS=%s is not a number in 0..600000; waiting %ld ms\n",
            (int)getpid(), v, linger);
  if (linger == 0) return;
  int want_eof = !atomic_load(&g_forked_children);
  if (want_eof)
    for (int fd = 0; fd < FD_TABLE; fd++)
      if (fd_conn(fd) != NULL) shutdown(fd, SHUT_WR);
  if (rrpc_run_relay_drain_at_exit(linger, want_eof) != 0)
    fprintf(stderr, "rrpc-run[%d]: exit: bytes still held after %ld ms (RRPC_RUN_EXIT_LINGER_MS): lost\n",
            (int)getpid(), linger);
}

static void fd_forget(int fd) {
  if (fd < 0 || fd >= FD_TABLE) return;
  rrpc_run_conn *c = atomic_exchange(&g_fds[fd], NULL);
  if (c != NULL) rrpc_run_conn_unref(c);
}

/* newfd now names what oldfd names: the same relay, if any. */
static void fd_copy(int oldfd, int newfd) {
  if (newfd < 0 || newfd >= FD_TABLE || oldfd == newfd) return;
  rrpc_run_conn *c = fd_conn(oldfd);
  if (c != NULL) rrpc_run_conn_ref(c);
  rrpc_run_conn *old = atomic_exchange(&g_fds[newfd], c);
  if (old != NULL) rrpc_run_conn_unref(old);
}

/* A TCP stream socket of ours to relay: AF_INET/AF_INET6, SOCK_STREAM. */
static int is_tcp_stream(int fd, const struct sockaddr *sa) {
  if (sa != NULL && sa->sa_family != AF_INET && sa->sa_family != AF_INET6) return 0;
  int type = 0;
  socklen_t len = sizeof type;
  if (rrpc_run_real.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) return 0;
  int proto = 0;
  len = sizeof proto;
  if (rrpc_run_real.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) != 0 || proto != IPPROTO_TCP)
    return 0;
  return 1;
}

static void note_plain(int fd, const char *why) {
  rrpc_run_count_plain();
  if (rrpc_run_relay_debug()) fprintf(stderr, "rrpc-run[%d]: fd=%d plain TCP: %s\n", (int)getpid(), fd, why);
}

/* A non-blocking connect in progress: 1 once connected, -1 if it failed
 * (the error stays for the application's SO_ERROR), 0 if undecided after
 * `ms`. */
static int connect_wait(int fd, long ms) {
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int n = poll(&p, 1, (int)ms);
  if (n != 1) return 0;
  if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return -1;
  return (p.revents & POLLOUT) ? 1 : 0;
}

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
  rrpc_run_conn *c = fd_conn(fd);
  if (c != NULL) {
    /* A second connect on a relayed socket answers as TCP would. */
    int st = rrpc_run_conn_connect_state(c);
    errno = st == 0 ? EALREADY : st == 1 ? EISCONN : -st;
    if (st < 0 && rrpc_run_conn_take_error(c) == 0) errno = ECONNABORTED;
    return -1;
  }
  if (!g_enabled || fd >= FD_TABLE || rrpc_run_relay_forked() || !is_tcp_stream(fd, sa))
    return rrpc_run_real.connect(fd, sa, len);
  if (!rrpc_run_policy_client_may(g_policy, sa, len, g_comm)) {
    note_plain(fd, "destination not selected");
    return rrpc_run_real.connect(fd, sa, len);
  }
  if (!rrpc_run_relay_rdma_usable()) {
    note_plain(fd, "no RDMA in this process (RRPC_RUN_RDMA)");
    return rrpc_run_real.connect(fd, sa, len);
  }
  int fl = fcntl(fd, F_GETFL);
  int fdfl = fcntl(fd, F_GETFD);
  if (g_ebpf) (void)rrpc_smcopt_mark(fd); /* our SYN offers SMC */
  int rc = rrpc_run_real.connect(fd, sa, len);
  int saved = errno;
  int connecting = rc != 0 && saved == EINPROGRESS;
  if (rc != 0 && !connecting) return rc;
  if (g_ebpf && connecting && g_decide_ms > 0) {
    /* The SYN-ACK tells whether the server runs rrpc-run: waiting one
     * round trip for it keeps a plain server's connection off the relay. */
    int st = connect_wait(fd, g_decide_ms);
    if (st < 0) {
      note_plain(fd, "connect failed");
      errno = saved;
      return rc;
    }
    if (st > 0) connecting = 0;
  }
  if (g_ebpf && !connecting && rrpc_smcopt_peer_offered(fd) != 1) {
    note_plain(fd, "the server's SYN-ACK offered no SMC");
    errno = saved;
    return rc;
  }
  int app_flags = ((fl >= 0 && (fl & O_NONBLOCK)) ? O_NONBLOCK : 0) | ((fdfl >= 0 && (fdfl & FD_CLOEXEC)) ? O_CLOEXEC : 0);
  rrpc_run_conn *nc = NULL;
  if (rrpc_run_relay_adopt(fd, 1, connecting, sa, len, app_flags, &nc) == 0) {
    rrpc_run_conn *old = atomic_exchange(&g_fds[fd], nc);
    if (old != NULL) rrpc_run_conn_unref(old);
  } else {
    note_plain(fd, "relay unavailable");
  }
  errno = saved;
  return rc;
}

/* An accepted connection's first bytes, waited for at most `ms` and
 * peeked (they stay for whoever reads): 1 if they show a client without
 * rrpc-run (neither a CLC Proposal nor the hello, or EOF), 0 if a client
 * relay (or a prefix of either), -1 if none came. Before any relay exists,
 * so the answer costs a plain client nothing but this wait. */
static int first_bytes_plain(int fd, long ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, (int)ms) != 1) return -1;
  unsigned char b[RRPC_RUN_HELLO_LEN];
  ssize_t n = recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT);
  if (n < 0) return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? -1 : 1;
  if (n == 0) return 1;
  return rrpc_run_hello_match(b, (size_t)n) == -1 ? 1 : 0;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *alen, int flags) {
  struct sockaddr_storage peer;
  socklen_t plen = sizeof peer;
  int nfd = real_accept4(fd, (struct sockaddr *)&peer, &plen, flags);
  if (nfd < 0) return nfd;
  if (addr != NULL && alen != NULL) {
    memcpy(addr, &peer, plen < *alen ? plen : *alen);
    *alen = plen;
  }
  if (!g_enabled || nfd >= FD_TABLE || rrpc_run_relay_forked() ||
      !is_tcp_stream(nfd, (struct sockaddr *)&peer))
    return nfd;
  fd_forget(nfd); /* a number reused behind our back (closed by a raw syscall) */
  struct sockaddr_storage local;
  socklen_t llen = sizeof local;
  if (g_ebpf && rrpc_smcopt_peer_offered(nfd) != 1) {
    note_plain(nfd, "the client's SYN offered no SMC");
    return nfd;
  }
  if (g_ebpf && !rrpc_run_relay_rdma_usable()) {
    /* Our SYN-ACK offered no SMC (listen): the client stays plain too. */
    note_plain(nfd, "no RDMA in this process (RRPC_RUN_RDMA)");
    return nfd;
  }
  if (real_getsockname(nfd, (struct sockaddr *)&local, &llen) != 0 ||
      !rrpc_run_policy_server_may(g_policy, (struct sockaddr *)&local, (struct sockaddr *)&peer, plen, g_comm)) {
    note_plain(nfd, "peer not selected");
    return nfd;
  }
  int saved = errno;
  if (g_decide_ms > 0 && first_bytes_plain(nfd, g_accept_wait_ms) == 1) {
    rrpc_run_count_handed_back();
    if (rrpc_run_relay_debug())
      fprintf(stderr, "rrpc-run[%d]: fd=%d the client is not under rrpc-run: handed back, plain TCP\n",
              (int)getpid(), nfd);
    errno = saved;
    return nfd;
  }
  int app_flags = ((flags & SOCK_NONBLOCK) ? O_NONBLOCK : 0) | ((flags & SOCK_CLOEXEC) ? O_CLOEXEC : 0);
  rrpc_run_conn *nc = NULL;
  if (rrpc_run_relay_adopt(nfd, 0, 0, (struct sockaddr *)&peer, plen, app_flags, &nc) == 0) {
    rrpc_run_conn *old = atomic_exchange(&g_fds[nfd], nc);
    if (old != NULL) rrpc_run_conn_unref(old);
  } else {
    note_plain(nfd, "relay unavailable");
  }
  errno = saved;
  return nfd;
}

int accept(int fd, struct sockaddr *addr, socklen_t *alen) { return accept4(fd, addr, alen, 0); }

/* eBPF mode: a listening socket is marked so that its SYN-ACKs answer an
 * SMC offer with one (the kernel's rule: only if the SYN had it). */
int listen(int fd, int backlog) {
  static int (*real_listen)(int, int);
  if (real_listen == NULL) real_listen = dlsym(RTLD_NEXT, "listen");
  if (g_enabled && g_ebpf && is_tcp_stream(fd, NULL) && rrpc_run_relay_rdma_usable()) (void)rrpc_smcopt_mark(fd);
  return real_listen(fd, backlog);
}

/* ERM's state goes with the program's last fd of a connection (dups share
 * it); only connections that used ERM pay for the look. */
static int fd_last(int fd, rrpc_run_conn *c) {
  for (int i = 0; i < FD_TABLE; i++)
    if (i != fd && atomic_load_explicit(&g_fds[i], memory_order_relaxed) == c) return 0;
  return 1;
}

static int epoll_ctl_real(int epfd, int op, int fd, struct epoll_event *ev);

int close(int fd) {
  if (rrpc_run_erm_epoll_following()) rrpc_run_erm_epoll_forget(fd, epoll_ctl_real);
  rrpc_run_conn *c = fd_conn(fd);
  if (c != NULL && rrpc_run_conn_erm(c) != NULL && fd_last(fd, c)) rrpc_run_erm_close(c);
  fd_forget(fd);
  return rrpc_run_real.close(fd);
}

int dup(int fd) {
  int n = real_dup(fd);
  if (n >= 0) fd_copy(fd, n);
  return n;
}

/* dup2/dup3 close what newfd named (when oldfd is open): its epoll pairs
 * go as close's do. */
static void dup_onto(int oldfd, int newfd) {
  if (oldfd != newfd && rrpc_run_erm_epoll_following() && fcntl(oldfd, F_GETFD) >= 0)
    rrpc_run_erm_epoll_forget(newfd, epoll_ctl_real);
}

int dup2(int oldfd, int newfd) {
  dup_onto(oldfd, newfd);
  int n = real_dup2(oldfd, newfd);
  if (n >= 0) fd_copy(oldfd, n);
  return n;
}

int dup3(int oldfd, int newfd, int flags) {
  dup_onto(oldfd, newfd);
  int n = rrpc_run_real.dup3(oldfd, newfd, flags);
  if (n >= 0) fd_copy(oldfd, n);
  return n;
}

/* fcntl's F_DUPFD / F_DUPFD_CLOEXEC are dups too: the copy names the same
 * relay. Programs built with _FILE_OFFSET_BITS=64 call fcntl64. The third
 * argument is passed on as the word it was (an int or a pointer). */
static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg) {
  int n = real(fd, cmd, arg);
  if (n >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)) fd_copy(fd, n);
  return n;
}

int fcntl(int fd, int cmd, ...) {
  static int (*real)(int, int, ...);
  if (real == NULL) real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  return fcntl_common(real, fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...) {
  static int (*real)(int, int, ...);
  if (real == NULL) real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl64");
  if (real == NULL) real = (int (*)(int, int, ...))dlsym(RTLD_NEXT, "fcntl");
  va_list ap;
  va_start(ap, cmd);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  return fcntl_common(real, fd, cmd, arg);
}

static int answer_addr(int fd, int peer, struct sockaddr *sa, socklen_t *len) {
  rrpc_run_conn *c = fd_conn(fd);
  if (c == NULL || sa == NULL || len == NULL)
    return peer ? real_getpeername(fd, sa, len) : real_getsockname(fd, sa, len);
  int rc = rrpc_run_conn_addr(c, peer, sa, len);
  if (rc != 0) {
    errno = -rc;
    return -1;
  }
  return 0;
}

int getsockname(int fd, struct sockaddr *sa, socklen_t *len) { return answer_addr(fd, 0, sa, len); }
int getpeername(int fd, struct sockaddr *sa, socklen_t *len) { return answer_addr(fd, 1, sa, len); }

static int erm_opt(rrpc_run_conn *c, int set, int name, void *val, socklen_t *len);

/* Options of the TCP connection itself go to the hidden TCP socket; those
 * that shape what the application's calls do (timeouts, buffer sizes, low
 * water marks) stay on its own socket. */
static int tcp_level(int level, int name) {
  if (level == IPPROTO_TCP || level == IPPROTO_IP || level == IPPROTO_IPV6) return 1;
  if (level != SOL_SOCKET) return 0;
  switch (name) {
    case SO_KEEPALIVE: case SO_REUSEADDR: case SO_REUSEPORT: case SO_LINGER: case SO_PRIORITY:
    case SO_BINDTODEVICE: case SO_MARK: case SO_DOMAIN: case SO_PROTOCOL: case SO_ACCEPTCONN:
      return 1;
    default:
      return 0;
  }
}

int getsockopt(int fd, int level, int name, void *val, socklen_t *len) {
  rrpc_run_conn *c = fd_conn(fd);
  if (c == NULL) return rrpc_run_real.getsockopt(fd, level, name, val, len);
  if (level == SOL_SMC) return erm_opt(c, 0, name, val, len);
  if (level == SOL_SOCKET && name == SO_ERROR && val != NULL && len != NULL && *len >= sizeof(int)) {
    int e = rrpc_run_conn_take_error(c);
    if (e == 0) return rrpc_run_real.getsockopt(fd, level, name, val, len);
    *(int *)val = e;
    *len = sizeof(int);
    return 0;
  }
  if (tcp_level(level, name)) {
    int rc = rrpc_run_conn_tcp_opt(c, 0, level, name, val, len);
    if (rc == 0 || errno != ENOTCONN) return rc;
  }
  return rrpc_run_real.getsockopt(fd, level, name, val, len);
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
  rrpc_run_conn *c = fd_conn(fd);
  if (c != NULL && level == SOL_SMC) return erm_opt(c, 1, name, (void *)val, &len);
  if (c == NULL || !tcp_level(level, name)) return rrpc_run_real.setsockopt(fd, level, name, val, len);
  int rc = rrpc_run_conn_tcp_opt(c, 1, level, name, (void *)val, &len);
  if (rc != 0 && errno == ENOTCONN) return 0; /* the connection is over: nothing to tune */
  return rc;
}

/* ---- ERM's socket API (rrpc/erm.h, preload/erm.c) -------------------------------- */

/* The libc function behind a wrapper, looked up on first use by whichever
 * thread gets there (they may race: each stores the same address). */
static void *real_fn(_Atomic(void *) *slot, const char *name) {
  void *f = atomic_load_explicit(slot, memory_order_acquire);
  if (f == NULL) {
    f = dlsym(RTLD_NEXT, name);
    atomic_store_explicit(slot, f, memory_order_release);
  }
  return f;
}
static _Atomic(void *) g_real_sendmsg, g_real_recvmsg, g_real_poll, g_real_ppoll, g_real_epoll_ctl,
    g_real_epoll_wait, g_real_epoll_pwait, g_real_epoll_pwait2, g_real_select, g_real_pselect;

/* The ERM eventfd of relayed socket fd, or -1. */
static int efd_of_fd(int fd) {
  rrpc_run_conn *c = fd_conn(fd);
  return c != NULL ? rrpc_run_erm_event_fd(c) : -1;
}

/* SOL_SMC at a relayed fd: ERM's command, or nothing (the kernel's TCP
 * socket answers ENOPROTOOPT there, and so does this). The first command
 * makes the socket's eventfd: it joins the epoll sets the socket is in. */
static int erm_opt(rrpc_run_conn *c, int set, int name, void *val, socklen_t *len) {
  int rc = name == SMC_ERM_CMD ? rrpc_run_erm_sockopt(c, set, val, len) : -ENOPROTOOPT;
  if (rrpc_run_erm_event_fd(c) >= 0) rrpc_run_erm_epoll_join(efd_of_fd, epoll_ctl_real);
  if (rc == 0) return 0;
  errno = -rc;
  return -1;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags) {
  ssize_t (*real)(int, const struct msghdr *, int) =
      (ssize_t(*)(int, const struct msghdr *, int))real_fn(&g_real_sendmsg, "sendmsg");
  rrpc_run_conn *c = fd_conn(fd);
  ssize_t ret;
  if (c != NULL && m != NULL && m->msg_controllen > 0 && rrpc_run_erm_sendmsg(c, fd, m, flags, real, &ret) == 1)
    return ret;
  return real(fd, m, flags);
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags) {
  ssize_t (*real)(int, struct msghdr *, int) =
      (ssize_t(*)(int, struct msghdr *, int))real_fn(&g_real_recvmsg, "recvmsg");
  rrpc_run_conn *c = (flags & MSG_ERRQUEUE) ? fd_conn(fd) : NULL;
  if (c == NULL || m == NULL) return real(fd, m, flags);
  ssize_t rc = rrpc_run_erm_recv_errqueue(c, m, flags);
  if (rc >= 0) return rc;
  errno = (int)-rc;
  return -1;
}

/* poll/ppoll: a relayed fd with ERM completions queued reports POLLERR, as
 * a kernel socket with a non-empty error queue does. Each such fd's
 * eventfd (readable while its queue is not empty) is polled beside it. */
enum { POLL_STACK = 64 };

static int erm_poll(struct pollfd *fds, nfds_t n, int timeout_ms, const struct timespec *ts,
                    const sigset_t *mask, int use_ppoll) {
  int (*real_poll)(struct pollfd *, nfds_t, int) =
      (int (*)(struct pollfd *, nfds_t, int))real_fn(&g_real_poll, "poll");
  int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *) =
      (int (*)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *))real_fn(&g_real_ppoll, "ppoll");
  nfds_t extra = 0;
  if (rrpc_run_erm_any() && fds != NULL)
    for (nfds_t i = 0; i < n; i++) {
      rrpc_run_conn *c = fd_conn(fds[i].fd);
      if (c != NULL && rrpc_run_erm_event_fd(c) >= 0) extra++;
    }
  if (extra == 0) return use_ppoll ? real_ppoll(fds, n, ts, mask) : real_poll(fds, n, timeout_ms);
  struct pollfd stack[POLL_STACK];
  nfds_t owner_stack[POLL_STACK];
  struct pollfd *all = n + extra <= POLL_STACK ? stack : malloc((n + extra) * sizeof *all);
  nfds_t *owner = extra <= POLL_STACK ? owner_stack : malloc(extra * sizeof *owner);
  if (all == NULL || owner == NULL) {
    if (all != stack) free(all);
    if (owner != owner_stack) free(owner);
    errno = ENOMEM;
    return -1;
  }
  memcpy(all, fds, n * sizeof *all);
  nfds_t k = 0;
  for (nfds_t i = 0; i < n && k < extra; i++) {
    rrpc_run_conn *c = fd_conn(fds[i].fd);
    int efd = c != NULL ? rrpc_run_erm_event_fd(c) : -1;
    if (efd < 0) continue;
    all[n + k] = (struct pollfd){.fd = efd, .events = POLLIN};
    owner[k++] = i;
  }
  int rc = use_ppoll ? real_ppoll(all, n + k, ts, mask) : real_poll(all, n + k, timeout_ms);
  if (rc >= 0) {
    for (nfds_t i = 0; i < n; i++) fds[i].revents = all[i].revents;
    for (nfds_t j = 0; j < k; j++)
      if (all[n + j].revents & POLLIN) fds[owner[j]].revents |= POLLERR;
    rc = 0;
    for (nfds_t i = 0; i < n; i++) rc += fds[i].revents != 0;
  }
  int saved = errno;
  if (all != stack) free(all);
  if (owner != owner_stack) free(owner);
  errno = saved;
  return rc;
}

int poll(struct pollfd *fds, nfds_t n, int timeout_ms) { return erm_poll(fds, n, timeout_ms, NULL, NULL, 0); }

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask) {
  return erm_poll(fds, n, 0, ts, mask, 1);
}

/* epoll: a relayed socket reports EPOLLERR while completions are queued,
 * whether it joined the set before or after its first REG_MR (erm_epoll.h). */
static int epoll_ctl_real(int epfd, int op, int fd, struct epoll_event *ev) {
  int (*real)(int, int, int, struct epoll_event *) =
      (int (*)(int, int, int, struct epoll_event *))real_fn(&g_real_epoll_ctl, "epoll_ctl");
  return real(epfd, op, fd, ev);
}

int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  int rc = epoll_ctl_real(epfd, op, fd, ev);
  if (rc != 0 || fd_conn(fd) == NULL) return rc;
  int saved = errno;
  int f = rrpc_run_erm_epoll_ctl(epfd, op, fd, ev, efd_of_fd, epoll_ctl_real);
  if (f < 0) {
    /* Not followed, so its completions could never wake this set: the ADD
     * is undone and refused, as the kernel refuses one past its watch limit. */
    epoll_ctl_real(epfd, EPOLL_CTL_DEL, fd, NULL);
    errno = -f;
    return -1;
  }
  errno = saved;
  return rc;
}

int epoll_wait(int epfd, struct epoll_event *evs, int max, int timeout_ms) {
  int (*real)(int, struct epoll_event *, int, int) =
      (int (*)(int, struct epoll_event *, int, int))real_fn(&g_real_epoll_wait, "epoll_wait");
  int n = real(epfd, evs, max, timeout_ms);
  return n > 0 && rrpc_run_erm_epoll_active() ? rrpc_run_erm_epoll_fix(evs, n) : n;
}

int epoll_pwait(int epfd, struct epoll_event *evs, int max, int timeout_ms, const sigset_t *mask) {
  int (*real)(int, struct epoll_event *, int, int, const sigset_t *) =
      (int (*)(int, struct epoll_event *, int, int, const sigset_t *))real_fn(&g_real_epoll_pwait, "epoll_pwait");
  int n = real(epfd, evs, max, timeout_ms, mask);
  return n > 0 && rrpc_run_erm_epoll_active() ? rrpc_run_erm_epoll_fix(evs, n) : n;
}

/* epoll_pwait2 (glibc 2.35, Linux 5.11): epoll_pwait's with a timespec.
 * A libc without it has nothing to call: ENOSYS, as its stub would say. */
int epoll_pwait2(int epfd, struct epoll_event *evs, int max, const struct timespec *ts, const sigset_t *mask) {
  int (*real)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *) =
      (int (*)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *))real_fn(&g_real_epoll_pwait2,
                                                                                                  "epoll_pwait2");
  if (real == NULL) {
    errno = ENOSYS;
    return -1;
  }
  int n = real(epfd, evs, max, ts, mask);
  return n > 0 && rrpc_run_erm_epoll_active() ? rrpc_run_erm_epoll_fix(evs, n) : n;
}

/* ---- select/pselect --------------------------------------------------------------- */

/* Linux's select (fs/select.c) reports an fd in the read set for POLLIN,
 * POLLRDNORM, POLLRDBAND, POLLHUP or POLLERR, in the write set for POLLOUT,
 * POLLWRNORM, POLLWRBAND or POLLERR, in the except set for POLLPRI; an fd
 * closed while it waits in all three. So a socket with a non-empty error
 * queue is readable and writable. With a relayed ERM socket in the sets
 * the wait is a ppoll through erm_poll (each eventfd beside its socket)
 * and the sets are written back by that mapping. */
enum { SEL_IN = POLLIN | POLLRDNORM | POLLRDBAND | POLLHUP | POLLERR | POLLNVAL,
       SEL_OUT = POLLOUT | POLLWRNORM | POLLWRBAND | POLLERR | POLLNVAL,
       SEL_EX = POLLPRI | POLLNVAL };

/* The sets as the kernel reads them: n bits, however many that is (the
 * FD_ macros stop at FD_SETSIZE, and fortified ones abort past it). */
enum { SEL_BITS = 8 * sizeof(unsigned long) };
static int sel_has(const fd_set *s, int fd) {
  return s != NULL && (((const unsigned long *)(const void *)s)[fd / SEL_BITS] >> (fd % SEL_BITS) & 1) != 0;
}
static void sel_clr(fd_set *s, int fd) { ((unsigned long *)(void *)s)[fd / SEL_BITS] &= ~(1ul << (fd % SEL_BITS)); }

/* 1 if some fd below n in the sets is a relayed socket with ERM state. */
static int sel_erm(int n, const fd_set *r, const fd_set *w, const fd_set *x) {
  if (!rrpc_run_erm_any() || n <= 0) return 0;
  for (int fd = 0; fd < n && fd < FD_TABLE; fd++)
    if ((sel_has(r, fd) || sel_has(w, fd) || sel_has(x, fd)) && efd_of_fd(fd) >= 0) return 1;
  return 0;
}

static int sel_poll(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts, const sigset_t *mask) {
  long open_max = sysconf(_SC_OPEN_MAX); /* the kernel, too, looks no further than the fd table */
  if (open_max > 0 && n > open_max) n = (int)open_max;
  struct pollfd *p = malloc((size_t)n * sizeof *p);
  if (p == NULL) {
    errno = ENOMEM;
    return -1;
  }
  nfds_t k = 0;
  for (int fd = 0; fd < n; fd++) {
    short ev = (short)((sel_has(r, fd) ? POLLIN | POLLRDNORM | POLLRDBAND : 0) |
                       (sel_has(w, fd) ? POLLOUT | POLLWRNORM | POLLWRBAND : 0) | (sel_has(x, fd) ? POLLPRI : 0));
    if (ev != 0) p[k++] = (struct pollfd){.fd = fd, .events = ev};
  }
  int rc = erm_poll(p, k, 0, ts, mask, 1);
  for (nfds_t i = 0; rc >= 0 && i < k; i++)
    if (p[i].revents & POLLNVAL) { /* select refuses a set naming a closed fd */
      errno = EBADF;
      rc = -1;
    }
  if (rc >= 0) {
    rc = 0;
    for (nfds_t i = 0; i < k; i++) {
      int fd = p[i].fd;
      short re = p[i].revents;
      int in = sel_has(r, fd) && (re & SEL_IN), out = sel_has(w, fd) && (re & SEL_OUT),
          ex = sel_has(x, fd) && (re & SEL_EX);
      if (r != NULL && !in) sel_clr(r, fd);
      if (w != NULL && !out) sel_clr(w, fd);
      if (x != NULL && !ex) sel_clr(x, fd);
      rc += in + out + ex;
    }
  }
  int saved = errno;
  free(p);
  errno = saved;
  return rc;
}

static struct timespec ts_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t;
}

int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv) {
  int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *) =
      (int (*)(int, fd_set *, fd_set *, fd_set *, struct timeval *))real_fn(&g_real_select, "select");
  if (!sel_erm(n, r, w, x)) return real(n, r, w, x, tv);
  if (tv != NULL && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000)) {
    errno = EINVAL;
    return -1;
  }
  struct timespec ts, t0 = ts_now();
  if (tv != NULL) ts = (struct timespec){.tv_sec = tv->tv_sec, .tv_nsec = tv->tv_usec * 1000};
  int rc = sel_poll(n, r, w, x, tv != NULL ? &ts : NULL, NULL);
  if (tv != NULL) {
    /* Linux's select leaves the time not slept in *tv. */
    struct timespec t1 = ts_now();
    long long left = ((long long)ts.tv_sec * 1000000000 + ts.tv_nsec) -
                     ((long long)(t1.tv_sec - t0.tv_sec) * 1000000000 + (t1.tv_nsec - t0.tv_nsec));
    if (left < 0) left = 0;
    tv->tv_sec = (time_t)(left / 1000000000);
    tv->tv_usec = (suseconds_t)(left % 1000000000 / 1000);
  }
  return rc;
}

int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts, const sigset_t *mask) {
  int (*real)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *) =
      (int (*)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *))real_fn(&g_real_pselect,
                                                                                                       "pselect");
  if (!sel_erm(n, r, w, x)) return real(n, r, w, x, ts, mask);
  if (ts != NULL && (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000)) {
    errno = EINVAL;
    return -1;
  }
  return sel_poll(n, r, w, x, ts, mask);
}
