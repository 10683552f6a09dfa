/* accept_guard.c - keeps an accept loop from spinning at the fd limit: the
 * reserve-descriptor trick (libuv and nginx shed connections the same way),
 * rate-limited logging and a counter. */
#include "rrpc/internal/accept_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rrpc/errors.h"
#include "rrpc/internal/limits.h"
#include "rrpc/internal/log.h"
#include "rrpc/internal/loop.h"

#define LOG_INTERVAL_US 1000000u

static int open_reserve(void) { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

void rrpc__accept_guard_init(rrpc__accept_guard *g) {
  g->reserve_fd = open_reserve();
  g->last_log_us = 0;
  g->unlogged = 0;
}

void rrpc__accept_guard_destroy(rrpc__accept_guard *g) {
  if (g->reserve_fd >= 0) close(g->reserve_fd);
  g->reserve_fd = -1;
}

static void log_limited(rrpc__accept_guard *g, int port, int err, int shed) {
  g->unlogged += (uint64_t)shed;
  uint64_t now = rrpc__now_us();
  if (g->last_log_us != 0 && now - g->last_log_us < LOG_INTERVAL_US) return;
  g->last_log_us = now;
  RRPC_LOG(WARNING, "accept on port %d: %s; %llu connection(s) closed unserved since the last "
           "report%s", port, rrpc_strerror(-err), (unsigned long long)g->unlogged,
           g->reserve_fd < 0 ? " (no reserve descriptor: pausing accepts)" : "");
  g->unlogged = 0;
}

int rrpc__accept_guard_shed(rrpc__accept_guard *g, int listen_fd, int port, int err) {
  rrpc__limit_count(RRPC__LC_ACCEPT_FD_EXHAUSTED);
  if (g->reserve_fd < 0) g->reserve_fd = open_reserve();
  if (g->reserve_fd < 0) {
    log_limited(g, port, err, 0);
    return -1;
  }
  close(g->reserve_fd);
  int shed = 0;
  int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd >= 0) {
    close(fd);
    shed = 1;
  }
  /* Another thread may take the freed number first; then there is no
   * reserve until one frees up, and the next shed asks to back off. */
  g->reserve_fd = open_reserve();
  log_limited(g, port, err, shed);
  return shed;
}
