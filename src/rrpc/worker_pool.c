/* worker_pool.c - threads that run blocking server handlers off the loops. */
#include "rrpc/internal/worker_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"

struct task {
  struct task *next;
  rrpc__task_fn fn;
  void *arg;
};

struct rrpc__worker_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct task *head, *tail;
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
    struct task *t = p->head;
    if (t == NULL) break; /* stopping and drained */
    p->queued--;
    p->head = t->next;
    if (p->head == NULL) p->tail = NULL;
    pthread_mutex_unlock(&p->mu);
    t->fn(t->arg);
    free(t);
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

int rrpc__worker_pool_submit(rrpc__worker_pool *p, rrpc__task_fn fn, void *arg) {
  struct task *t = malloc(sizeof *t);
  if (t == NULL) return -ENOMEM;
  t->next = NULL;
  t->fn = fn;
  t->arg = arg;
  pthread_mutex_lock(&p->mu);
  int rc = 0;
  if (p->stopping) {
    rc = -ESHUTDOWN;
  } else if (p->queued >= p->max_queue) {
    atomic_fetch_add_explicit(&p->rejected, 1, memory_order_relaxed);
    rc = -RRPC_EOVERCROWDED;
  }
  if (rc != 0) {
    pthread_mutex_unlock(&p->mu);
    free(t);
    return rc;
  }
  if (p->tail) p->tail->next = t;
  else p->head = t;
  p->tail = t;
  p->queued++;
  /* A busy thread takes the task when it comes back for more: no wake-up
   * (and no futex call) unless someone is asleep. */
  int wake = p->idle > 0;
  pthread_mutex_unlock(&p->mu);
  if (wake) pthread_cond_signal(&p->cv);
  return 0;
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
