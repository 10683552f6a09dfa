/* stat_page.c - the /connections and /vars pages of a preloaded process
 * (see stat_page.h). One request per connection, answered at once and
 * closed: a page is small, so its one non-blocking send goes whole. */
#include "preload/stat_page.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "preload/env_num.h"
#include "preload/erm.h"
#include "preload/erm_epoll.h"
#include "preload/relay.h"
#include "preload/stat_route.h"
#include "rrpc/internal/loop.h"

enum { PAGE_MAX = 256 << 10, REQ_MAX = 4096 };

typedef struct page_conn {
  rrpc__watcher w;
} page_conn;

static rrpc__watcher g_listen;
static rrpc__loop *g_loop;

static size_t vars_format(char *buf, size_t len) {
  rrpc_run_counters k;
  rrpc_run_counters_get(&k);
  int n = snprintf(buf, len,
                   "rrpc_run_connections_relayed : %llu\nrrpc_run_connections_rdma : %llu\n"
                   "rrpc_run_connections_fallback : %llu\nrrpc_run_connections_plain : %llu\n"
                   "rrpc_run_adopt_failed : %llu\nrrpc_run_bytes_up : %llu\nrrpc_run_bytes_down : %llu\n"
                   "rrpc_run_connections_live : %llu\nrrpc_run_connections_handed_back : %llu\n",
                   (unsigned long long)k.relayed, (unsigned long long)k.rdma, (unsigned long long)k.fallback,
                   (unsigned long long)k.plain, (unsigned long long)k.adopt_failed,
                   (unsigned long long)k.bytes_up, (unsigned long long)k.bytes_down,
                   (unsigned long long)k.live, (unsigned long long)k.handed_back);
  if (n < 0) return 0;
  rrpc_run_erm_counters e;
  rrpc_run_erm_counters_get(&e);
  size_t at = (size_t)n;
  int m = snprintf(at < len ? buf + at : NULL, at < len ? len - at : 0,
                   "rrpc_run_erm_regs : %llu\nrrpc_run_erm_deregs : %llu\nrrpc_run_erm_copies : %llu\n"
                   "rrpc_run_erm_copy_bytes : %llu\nrrpc_run_erm_copies_failed : %llu\n"
                   "rrpc_run_erm_remote_compl : %llu\nrrpc_run_erm_compl_dropped : %llu\n"
                   "rrpc_run_erm_refused : %llu\nrrpc_run_erm_epoll_refused : %llu\n",
                   (unsigned long long)e.regs, (unsigned long long)e.deregs, (unsigned long long)e.copies,
                   (unsigned long long)e.copy_bytes, (unsigned long long)e.copies_failed,
                   (unsigned long long)e.remote_compl, (unsigned long long)e.compl_dropped,
                   (unsigned long long)e.refused, (unsigned long long)rrpc_run_erm_epoll_refused());
  return m < 0 ? at : at + (size_t)m;
}

static void answer(int fd, const char *req, size_t req_len) {
  char *body = malloc(PAGE_MAX);
  if (body == NULL) return;
  size_t n;
  int status = 200;
  rrpc_run_stat_page page = rrpc_run_stat_route(req, req_len);
  if (page == RRPC_RUN_STAT_CONNECTIONS) {
    n = rrpc_run_conns_format(body, PAGE_MAX);
  } else if (page == RRPC_RUN_STAT_VARS) {
    n = vars_format(body, PAGE_MAX);
  } else {
    status = 404;
    n = (size_t)snprintf(body, PAGE_MAX, "rrpc-run serves /connections and /vars\n");
  }
  if (n >= PAGE_MAX) n = PAGE_MAX - 1;
  char head[160];
  int h = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                   "Connection: close\r\n\r\n", status, status == 200 ? "OK" : "Not Found", n);
  struct iovec iov[2] = {{head, (size_t)h}, {body, n}};
  struct msghdr mh = {.msg_iov = iov, .msg_iovlen = 2};
  (void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
  free(body);
}

static void conn_cb(rrpc__watcher *w, uint32_t events) {
  page_conn *pc = w->arg;
  char req[REQ_MAX];
  ssize_t r = (events & EPOLLIN) ? recv(w->fd, req, sizeof req, MSG_DONTWAIT) : -1;
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r > 0) {
    answer(w->fd, req, (size_t)r);
    shutdown(w->fd, SHUT_WR);
  }
  rrpc__loop_watch_del(g_loop, w);
  rrpc_run_real.close(w->fd);
  free(pc);
}

static void listen_cb(rrpc__watcher *w, uint32_t events) {
  (void)events;
  for (int i = 0; i < 16; i++) {
    int fd = rrpc_run_real.accept4(w->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    page_conn *pc = calloc(1, sizeof *pc);
    if (pc == NULL) {
      rrpc_run_real.close(fd);
      continue;
    }
    pc->w.fd = fd;
    pc->w.events = EPOLLIN;
    pc->w.cb = conn_cb;
    pc->w.arg = pc;
    if (rrpc__loop_watch_add(g_loop, &pc->w) != 0) {
      rrpc_run_real.close(fd);
      free(pc);
    }
  }
}

void rrpc_run_stat_page_start(void) {
  const char *v = getenv("RRPC_RUN_STAT_PORT");
  if (v == NULL || *v == '\0') return;
  long port = 0;
  if (rrpc_run_env_num(v, 1, 65535, &port) != 0) {
    fprintf(stderr, "rrpc-run: RRPC_RUN_STAT_PORT=%s is not a port; no stat page\n", v);
    return;
  }
  g_loop = rrpc_run_relay_loop();
  if (g_loop == NULL) return;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || rrpc_run_real.setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 16) != 0) {
    fprintf(stderr, "rrpc-run[%d]: stat page on 127.0.0.1:%ld: %s\n", (int)getpid(), port, strerror(errno));
    if (fd >= 0) rrpc_run_real.close(fd);
    return;
  }
  g_listen.fd = fd;
  g_listen.events = EPOLLIN;
  g_listen.cb = listen_cb;
  if (rrpc__loop_watch_add(g_loop, &g_listen) != 0) rrpc_run_real.close(fd);
}
