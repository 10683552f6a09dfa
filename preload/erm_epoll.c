/* erm_epoll.c - ERM completions as EPOLLERR through epoll (erm_epoll.h).
 *
 * One marker per (epoll set, socket) pair: its address is the data the
 * eventfd is registered with, so epoll_wait's results name it; a result is
 * a marker only if its address is in the list (never dereferenced
 * otherwise). The list is short (sockets using ERM times their epoll sets)
 * and only walked while it is not empty. */
#include "preload/erm_epoll.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

struct marker {
  int epfd, fd, efd;
  epoll_data_t data; /* the program's, for fd */
  struct marker *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct marker *g_list;
static atomic_int g_n;

int rrpc_run_erm_epoll_active(void) { return atomic_load_explicit(&g_n, memory_order_relaxed) > 0; }

static struct marker **find_locked(int epfd, int fd) {
  struct marker **p = &g_list;
  while (*p != NULL && !((*p)->epfd == epfd && (*p)->fd == fd)) p = &(*p)->next;
  return p;
}

/* The eventfd's registration: level-triggered unless the program asked
 * for edge or one-shot on the socket. */
static uint32_t efd_events(const struct epoll_event *ev) {
  return EPOLLIN | (ev != NULL ? ev->events & (EPOLLET | EPOLLONESHOT) : 0);
}

void rrpc_run_erm_epoll_ctl(int epfd, int op, int fd, int efd, const struct epoll_event *ev,
                            rrpc_run_epoll_ctl_fn real_ctl) {
  pthread_mutex_lock(&g_mu);
  struct marker **p = find_locked(epfd, fd);
  if (op == EPOLL_CTL_ADD && *p == NULL && ev != NULL) {
    struct marker *m = calloc(1, sizeof *m);
    if (m != NULL) {
      *m = (struct marker){.epfd = epfd, .fd = fd, .efd = efd, .data = ev->data, .next = g_list};
      struct epoll_event e = {.events = efd_events(ev), .data.ptr = m};
      if (real_ctl(epfd, EPOLL_CTL_ADD, efd, &e) == 0) {
        g_list = m;
        atomic_fetch_add(&g_n, 1);
      } else {
        free(m);
      }
    }
  } else if (op == EPOLL_CTL_MOD && *p != NULL && ev != NULL) {
    (*p)->data = ev->data;
    struct epoll_event e = {.events = efd_events(ev), .data.ptr = *p};
    real_ctl(epfd, EPOLL_CTL_MOD, (*p)->efd, &e);
  } else if (op == EPOLL_CTL_DEL && *p != NULL) {
    struct marker *m = *p;
    *p = m->next;
    real_ctl(epfd, EPOLL_CTL_DEL, m->efd, NULL);
    atomic_fetch_sub(&g_n, 1);
    free(m);
  }
  pthread_mutex_unlock(&g_mu);
}

static struct marker *marker_of_locked(void *ptr) {
  for (struct marker *m = g_list; m != NULL; m = m->next)
    if ((void *)m == ptr) return m;
  return NULL;
}

int rrpc_run_erm_epoll_fix(struct epoll_event *evs, int n) {
  pthread_mutex_lock(&g_mu);
  /* A marker's event: the socket's own event in this batch takes the
   * error bit (the marker's is emptied), or it becomes the socket's. */
  for (int i = 0; i < n; i++) {
    struct marker *m = marker_of_locked(evs[i].data.ptr);
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
  pthread_mutex_lock(&g_mu);
  for (struct marker **p = &g_list; *p != NULL;) {
    struct marker *m = *p;
    if (m->fd != fd && m->epfd != fd) {
      p = &m->next;
      continue;
    }
    if (m->fd == fd) real_ctl(m->epfd, EPOLL_CTL_DEL, m->efd, NULL);
    *p = m->next;
    atomic_fetch_sub(&g_n, 1);
    free(m);
  }
  pthread_mutex_unlock(&g_mu);
}
