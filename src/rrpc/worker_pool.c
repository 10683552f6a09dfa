/* worker_pool.c - threads that run blocking server handlers off the loops. */
#include "rrpc/internal/worker_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"

struct rrpc__worker_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  rrpc__work *head, *tail;
  int queued, max_queue;
  int idle; /* threads waiting on cv: a submit signals only when one is */
  atomic_uint_least64_t rejected;
  int stopping;
  int nthreads;
  pthread_t *threads;
};

static void *worker_main(void *arg) {
  rrpc__worker_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->head == NULL && !p->stopping) {
      p->idle++;
      pthread_cond_wait(&p->cv, &p->mu);
      p->idle--;
    }
    rrpc__work *t = p->head;
    if (t == NULL) break; /* stopping and drained */
    p->queued--;
    p->head = t->next;
    if (p->head == NULL) p->tail = NULL;
    /* More left and someone asleep: pass the wake-up on (see submit). */
    int wake = p->head != NULL && p->idle > 0;
    pthread_mutex_unlock(&p->mu);
    if (wake) pthread_cond_signal(&p->cv);
    t->fn(t->arg); /* may free t */
    pthread_mutex_lock(&p->mu);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

int rrpc__worker_pool_start(int nthreads, int max_queue, const char *name, rrpc__worker_pool **out) {
  rrpc__worker_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
  p->max_queue = max_queue > 0 ? max_queue : 1;
  atomic_init(&p->rejected, 0);
  p->threads = calloc((size_t)nthreads, sizeof *p->threads);
  if (p->threads == NULL) {
    free(p);
    return -ENOMEM;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  for (int i = 0; i < nthreads; i++) {
    int rc = pthread_create(&p->threads[i], NULL, worker_main, p);
    if (rc != 0) {
      p->nthreads = i;
      rrpc__worker_pool_stop(p);
      return -rc;
    }
    char tname[32];
    snprintf(tname, sizeof tname, "%.10s-%d", name, i);
    tname[15] = '\0'; /* the kernel's limit for thread names */
    pthread_setname_np(p->threads[i], tname);
  }
  p->nthreads = nthreads;
  *out = p;
  return 0;
}

int rrpc__worker_pool_submit(rrpc__worker_pool *p, rrpc__work *head, int n, rrpc__work **rest, int *why) {
  *rest = head;
  pthread_mutex_lock(&p->mu);
  if (p->stopping) {
    pthread_mutex_unlock(&p->mu);
    *why = -ESHUTDOWN;
    return 0;
  }
  int room = p->max_queue - p->queued;
  int take = n < room ? n : room < 0 ? 0 : room;
  if (take > 0) {
    rrpc__work *last = head;
    for (int i = 1; i < take; i++) last = last->next;
    *rest = last->next; /* the caller's again */
    last->next = NULL;
    if (p->tail) p->tail->next = head;
    else p->head = head;
    p->tail = last;
    p->queued += take;
  }
  /* One wake-up per batch; a busy thread takes tasks when it comes back for
   * more, and a woken one wakes the next while tasks remain. */
  int wake = take > 0 && p->idle > 0;
  pthread_mutex_unlock(&p->mu);
  if (take < n) {
    atomic_fetch_add_explicit(&p->rejected, (uint64_t)(n - take), memory_order_relaxed);
    *why = -RRPC_EOVERCROWDED;
  }
  if (wake) pthread_cond_signal(&p->cv);
  return take;
}

uint64_t rrpc__worker_pool_rejected(const rrpc__worker_pool *p) {
  return atomic_load_explicit(&((rrpc__worker_pool *)p)->rejected, memory_order_relaxed);
}

void rrpc__worker_pool_stop(rrpc__worker_pool *p) {
  pthread_mutex_lock(&p->mu);
  p->stopping = 1;
  pthread_cond_broadcast(&p->cv);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->threads);
  free(p);
}
