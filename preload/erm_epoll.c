/* erm_epoll.c - ERM completions as EPOLLERR through epoll (erm_epoll.h).
 *
 * One pair per (epoll set, relayed socket) the program made with
 * epoll_ctl, listed under the socket's fd: a socket is in few sets, so
 * ADD/MOD/DEL and a socket's close look at a short list. The pair keeps
 * what the program asked for, so that the socket's eventfd can join the
 * set later, when the socket's first REG_MR makes it: a program may add
 * its socket before it registers anything. A joined pair's address is the
 * data its eventfd is registered with, so epoll_wait's results name it;
 * a result is a marker only if its address is in the joined list (never
 * dereferenced otherwise). That list is short (sockets using ERM times
 * their sets) and only walked while it is not empty. */
#include "preload/erm_epoll.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "preload/env_num.h"
#include "preload/relay.h"

enum { FD_MAX = RRPC_RUN_FD_TABLE }; /* relay.h: relayed sockets' fds are below */

enum pair_state { WAITING, JOINED, NOJOIN };

struct pair {
  int epfd, fd, efd;
  enum pair_state state; /* NOJOIN: the set refused the eventfd (a dup of the socket joined it) */
  uint32_t events;       /* the program's, for fd */
  epoll_data_t data;
  struct pair *next;        /* the socket's other sets */
  struct pair *next_joined; /* while JOINED */
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pair *g_by_fd[FD_MAX];
static uint32_t g_in_ep[FD_MAX]; /* pairs per epoll fd below FD_MAX */
static size_t g_ep_high;         /* pairs whose epoll fd is FD_MAX or above */
static int g_fd_hi = -1;         /* the highest socket fd that ever had a pair */
static struct pair *g_joined;
static long g_max = 65536; /* RRPC_RUN_ERM_EPOLL_MAX: pairs followed */
static atomic_long g_pairs, g_waiting, g_n_joined;
static _Atomic uint64_t g_refused;

void rrpc_run_erm_epoll_settings_from_env(void) {
  const char *s = getenv("RRPC_RUN_ERM_EPOLL_MAX");
  if (rrpc_run_env_num(s, 1, 1048576, &g_max) < 0)
    fprintf(stderr, "rrpc-run: RRPC_RUN_ERM_EPOLL_MAX=%s is not a number in 1..1048576; keeping %ld\n", s, g_max);
}

int rrpc_run_erm_epoll_active(void) { return atomic_load_explicit(&g_n_joined, memory_order_relaxed) > 0; }
int rrpc_run_erm_epoll_following(void) { return atomic_load_explicit(&g_pairs, memory_order_relaxed) > 0; }
uint64_t rrpc_run_erm_epoll_refused(void) { return atomic_load(&g_refused); }

static struct pair **find_locked(int epfd, int fd) {
  struct pair **p = &g_by_fd[fd];
  while (*p != NULL && (*p)->epfd != epfd) p = &(*p)->next;
  return p;
}

/* The eventfd's registration: level-triggered unless the program asked
 * for edge or one-shot on the socket. */
static uint32_t efd_events(uint32_t events) { return EPOLLIN | (events & (EPOLLET | EPOLLONESHOT)); }

static void join_locked(struct pair *p, int efd, rrpc_run_epoll_ctl_fn real_ctl) {
  struct epoll_event e = {.events = efd_events(p->events), .data.ptr = p};
  atomic_fetch_sub(&g_waiting, 1);
  if (real_ctl(p->epfd, EPOLL_CTL_ADD, efd, &e) != 0) {
    p->state = NOJOIN;
    return;
  }
  p->efd = efd;
  p->state = JOINED;
  p->next_joined = g_joined;
  g_joined = p;
  atomic_fetch_add(&g_n_joined, 1);
}

/* Unlink *pp and free it; its eventfd leaves the set (forget runs before
 * the close, and a set whose fd was dup'd outlives this fd). */
static void drop_locked(struct pair **pp, rrpc_run_epoll_ctl_fn real_ctl) {
  struct pair *p = *pp;
  *pp = p->next;
  if (p->state == JOINED) {
    real_ctl(p->epfd, EPOLL_CTL_DEL, p->efd, NULL);
    struct pair **j = &g_joined;
    while (*j != p) j = &(*j)->next_joined;
    *j = p->next_joined;
    atomic_fetch_sub(&g_n_joined, 1);
  } else if (p->state == WAITING) {
    atomic_fetch_sub(&g_waiting, 1);
  }
  if (p->epfd < FD_MAX) g_in_ep[p->epfd]--;
  else g_ep_high--;
  atomic_fetch_sub(&g_pairs, 1);
  free(p);
}

static int add_locked(int epfd, int fd, const struct epoll_event *ev, rrpc_run_efd_of_fn efd_of,
                      rrpc_run_epoll_ctl_fn real_ctl) {
  if (atomic_load(&g_pairs) >= g_max) {
    atomic_fetch_add(&g_refused, 1);
    return -ENOSPC;
  }
  struct pair *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  *p = (struct pair){.epfd = epfd, .fd = fd, .efd = -1, .state = WAITING, .events = ev->events,
                     .data = ev->data, .next = g_by_fd[fd]};
  g_by_fd[fd] = p;
  if (fd > g_fd_hi) g_fd_hi = fd;
  if (epfd < FD_MAX) g_in_ep[epfd]++;
  else g_ep_high++;
  atomic_fetch_add(&g_pairs, 1);
  atomic_fetch_add(&g_waiting, 1);
  int efd = efd_of(fd);
  if (efd >= 0) join_locked(p, efd, real_ctl);
  return 0;
}

int rrpc_run_erm_epoll_ctl(int epfd, int op, int fd, const struct epoll_event *ev, rrpc_run_efd_of_fn efd_of,
                           rrpc_run_epoll_ctl_fn real_ctl) {
  if (fd < 0 || fd >= FD_MAX || epfd < 0) return 0;
  int rc = 0;
  pthread_mutex_lock(&g_mu);
  struct pair **pp = find_locked(epfd, fd);
  if (op == EPOLL_CTL_ADD && ev != NULL) {
    /* The kernel took the ADD, so a pair still here is stale: the socket's
     * fd was closed behind the preload's back and the number reused. */
    if (*pp != NULL) drop_locked(pp, real_ctl);
    rc = add_locked(epfd, fd, ev, efd_of, real_ctl);
  } else if (op == EPOLL_CTL_MOD && ev != NULL && *pp != NULL) {
    struct pair *p = *pp;
    p->events = ev->events;
    p->data = ev->data;
    if (p->state == JOINED) {
      struct epoll_event e = {.events = efd_events(p->events), .data.ptr = p};
      real_ctl(epfd, EPOLL_CTL_MOD, p->efd, &e);
    }
  } else if (op == EPOLL_CTL_DEL && *pp != NULL) {
    drop_locked(pp, real_ctl);
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void rrpc_run_erm_epoll_join(rrpc_run_efd_of_fn efd_of, rrpc_run_epoll_ctl_fn real_ctl) {
  if (atomic_load(&g_waiting) == 0) return;
  pthread_mutex_lock(&g_mu);
  for (int fd = 0; fd <= g_fd_hi; fd++)
    for (struct pair *p = g_by_fd[fd]; p != NULL; p = p->next) {
      if (p->state != WAITING) continue;
      int efd = efd_of(fd);
      if (efd >= 0) join_locked(p, efd, real_ctl);
    }
  pthread_mutex_unlock(&g_mu);
}

static struct pair *marker_of_locked(void *ptr) {
  for (struct pair *p = g_joined; p != NULL; p = p->next_joined)
    if ((void *)p == ptr) return p;
  return NULL;
}

int rrpc_run_erm_epoll_fix(struct epoll_event *evs, int n) {
  pthread_mutex_lock(&g_mu);
  /* A marker's event: the socket's own event in this batch takes the
   * error bit (the marker's is emptied), or it becomes the socket's. */
  for (int i = 0; i < n; i++) {
    struct pair *m = marker_of_locked(evs[i].data.ptr);
    if (m == NULL) continue;
    int merged = 0;
    for (int j = 0; j < n && !merged; j++)
      if (j != i && evs[j].events != 0 && marker_of_locked(evs[j].data.ptr) == NULL &&
          evs[j].data.u64 == m->data.u64) {
        evs[j].events |= EPOLLERR;
        merged = 1;
      }
    evs[i] = merged ? (struct epoll_event){.events = 0} : (struct epoll_event){.events = EPOLLERR, .data = m->data};
  }
  pthread_mutex_unlock(&g_mu);
  int out = 0;
  for (int i = 0; i < n; i++)
    if (evs[i].events != 0) evs[out++] = evs[i];
  return out;
}

void rrpc_run_erm_epoll_forget(int fd, rrpc_run_epoll_ctl_fn real_ctl) {
  if (fd < 0) return;
  pthread_mutex_lock(&g_mu);
  /* A socket: its eventfd leaves every set it joined. */
  if (fd < FD_MAX)
    while (g_by_fd[fd] != NULL) drop_locked(&g_by_fd[fd], real_ctl);
  /* An epoll set: its pairs go with its fd. */
  if (fd < FD_MAX ? g_in_ep[fd] > 0 : g_ep_high > 0)
    for (int s = 0; s <= g_fd_hi; s++)
      for (struct pair **pp = &g_by_fd[s]; *pp != NULL;) {
        if ((*pp)->epfd == fd) drop_locked(pp, real_ctl);
        else pp = &(*pp)->next;
      }
  pthread_mutex_unlock(&g_mu);
}
