/* preload_erm_epoll_fuzzer - what a program's epoll calls do to the
 * preload's (epoll set, relayed socket) pairs (preload/erm_epoll.h), under
 * any order of epoll_ctl (any op, any fds, odd flags), a socket's first
 * REG_MR, and closes of sockets and sets.
 *
 * The kernel is a model here: 4 epoll sets (fds 0..3), 4 relayed sockets
 * (4..7) whose ERM eventfds are 100 + fd once "registered", registrations
 * keyed by (set, fd) as the kernel's are. Each input byte is one call, made
 * the way intercept.c makes it (the model's epoll_ctl first, then the
 * preload's follow, undone when that refuses). After every call:
 *   - every set a socket with an eventfd is in holds that eventfd too
 *     (the completions wake every set), unless the eventfd is held there
 *     for another pair already;
 *   - every eventfd registration names a live pair: rewritten by
 *     rrpc_run_erm_epoll_fix into EPOLLERR with the socket's data in that
 *     set; a socket's closed, its eventfd is in no set.
 * Each input ends by closing everything, which must leave no pair. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "preload/erm_epoll.h"

enum { SETS = 4, SOCKS = 4, FDS = SETS + SOCKS, EFD0 = 100, KEYS = 128 };

struct reg {
  int used;
  uint32_t events;
  epoll_data_t data;
};

static struct reg g_reg[SETS][KEYS]; /* the model kernel's sets */
static int g_erm[FDS];               /* the socket's eventfd exists */
static int g_open[FDS];              /* the fd is open */

static int is_set(int fd) { return fd >= 0 && fd < SETS && g_open[fd]; }
static int is_sock(int fd) { return fd >= SETS && fd < FDS && g_open[fd]; }
static int is_efd(int fd) { return fd >= EFD0 + SETS && fd < EFD0 + FDS && g_erm[fd - EFD0]; }

static int model_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  if (!is_set(epfd) || !(is_sock(fd) || is_efd(fd) || is_set(fd))) {
    errno = EBADF;
    return -1;
  }
  if (fd == epfd || (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD && op != EPOLL_CTL_DEL)) {
    errno = EINVAL;
    return -1;
  }
  struct reg *r = &g_reg[epfd][fd];
  if (op != EPOLL_CTL_DEL && ev == NULL) {
    errno = EFAULT;
    return -1;
  }
  if (op == EPOLL_CTL_ADD && r->used) {
    errno = EEXIST;
    return -1;
  }
  if (op != EPOLL_CTL_ADD && !r->used) {
    errno = ENOENT;
    return -1;
  }
  if (op == EPOLL_CTL_MOD && ((r->events | ev->events) & EPOLLEXCLUSIVE)) {
    errno = EINVAL;
    return -1;
  }
  if (op == EPOLL_CTL_DEL) {
    memset(r, 0, sizeof *r);
  } else {
    r->used = 1;
    r->events = ev->events;
    r->data = ev->data;
  }
  return 0;
}

static int efd_of(int fd) { return fd >= 0 && fd < FDS && is_sock(fd) && g_erm[fd] ? EFD0 + fd : -1; }

/* The program's epoll_ctl through the preload, as intercept.c does it. */
static void program_ctl(int epfd, int op, int fd, struct epoll_event *ev) {
  if (model_ctl(epfd, op, fd, ev) != 0 || !is_sock(fd)) return;
  int f = rrpc_run_erm_epoll_ctl(epfd, op, fd, ev, efd_of, model_ctl);
  if (f < 0) {
    if (f != -ENOSPC && f != -ENOMEM) abort();
    if (model_ctl(epfd, EPOLL_CTL_DEL, fd, NULL) != 0) abort();
  }
}

static void program_close(int fd) {
  rrpc_run_erm_epoll_forget(fd, model_ctl);
  g_open[fd] = 0;
  if (fd < SETS) {
    memset(g_reg[fd], 0, sizeof g_reg[fd]); /* the set goes with its fd */
  } else {
    for (int s = 0; s < SETS; s++) memset(&g_reg[s][fd], 0, sizeof g_reg[s][fd]);
    if (g_erm[fd]) /* the eventfd lives on with the ERM state; not in any set */
      for (int s = 0; s < SETS; s++)
        if (g_reg[s][EFD0 + fd].used) abort();
    g_erm[fd] = 0;
  }
}

static void check(void) {
  for (int s = 0; s < SETS; s++) {
    if (!g_open[s]) continue;
    for (int fd = SETS; fd < FDS; fd++) {
      struct reg *e = &g_reg[s][EFD0 + fd];
      if (e->used) {
        /* a live pair: EPOLLERR with the program's data for the socket here */
        if (!g_erm[fd] || !g_reg[s][fd].used) abort();
        struct epoll_event ev = {.events = EPOLLIN, .data = e->data};
        if (rrpc_run_erm_epoll_fix(&ev, 1) != 1) abort();
        if (ev.events != EPOLLERR || ev.data.u64 != g_reg[s][fd].data.u64) abort();
        uint32_t want = EPOLLIN | (g_reg[s][fd].events & (EPOLLET | EPOLLONESHOT));
        if (e->events != want) abort();
      } else if (is_sock(fd) && g_erm[fd] && g_reg[s][fd].used) {
        abort(); /* a set the socket is in that its completions would not wake */
      }
    }
  }
  /* a program's own event is never taken for a marker */
  struct epoll_event mine = {.events = EPOLLIN, .data.u64 = 4};
  if (rrpc_run_erm_epoll_fix(&mine, 1) != 1 || mine.events != EPOLLIN || mine.data.u64 != 4) abort();
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("RRPC_RUN_ERM_EPOLL_MAX", "6", 1); /* so that the limit bites */
  rrpc_run_erm_epoll_settings_from_env();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  memset(g_reg, 0, sizeof g_reg);
  memset(g_erm, 0, sizeof g_erm);
  for (int fd = 0; fd < FDS; fd++) g_open[fd] = 1;
  for (size_t i = 0; i + 1 < size; i += 2) {
    uint8_t a = data[i], b = data[i + 1];
    int x = a & 7, y = (a >> 3) & 7;
    switch (b & 7) {
      case 0: case 1: case 2: { /* epoll_ctl(x, op, y, ev) with odd flags */
        static const int ops[] = {EPOLL_CTL_ADD, EPOLL_CTL_MOD, EPOLL_CTL_DEL, 0};
        uint32_t flags[] = {0, EPOLLIN, EPOLLIN | EPOLLET, EPOLLIN | EPOLLONESHOT, EPOLLEXCLUSIVE | EPOLLIN,
                            EPOLLET | EPOLLONESHOT | EPOLLRDHUP, EPOLLOUT, 0xffffffffu};
        struct epoll_event ev = {.events = flags[(b >> 3) & 7], .data.u64 = (uint64_t)a << 8 | b};
        program_ctl(x, ops[(a >> 6) & 3], y, (b & 0x40) && (b & 0x80) ? NULL : &ev);
        break;
      }
      case 3: /* the socket's first REG_MR makes its eventfd */
        if (is_sock(y) && !g_erm[y]) {
          g_erm[y] = 1;
          rrpc_run_erm_epoll_join(efd_of, model_ctl);
        }
        break;
      case 4: /* close */
        if (g_open[x % FDS]) program_close(x % FDS);
        break;
      case 5: /* reopen (the same number, a fresh file) */
        g_open[y] = 1;
        break;
      default: /* a join with nothing new */
        rrpc_run_erm_epoll_join(efd_of, model_ctl);
        break;
    }
    check();
  }
  for (int fd = 0; fd < FDS; fd++) {
    if (!g_open[fd]) g_open[fd] = 1; /* forget looks at every number */
    program_close(fd);
  }
  if (rrpc_run_erm_epoll_following() || rrpc_run_erm_epoll_active()) abort();
  return 0;
}
