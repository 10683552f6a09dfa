/* worker_pool.c - threads that run blocking server handlers off the loops. */
#include "rrpc/internal/worker_pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct task {
  struct task *next;
  rrpc__task_fn fn;
  void *arg;
};

struct rrpc__worker_pool {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  struct task *head, *tail;
  int stopping;
  int nthreads;
  pthread_t *threads;
};

static void *worker_main(void *arg) {
  rrpc__worker_pool *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (p->head == NULL && !p->stopping) pthread_cond_wait(&p->cv, &p->mu);
    struct task *t = p->head;
    if (t == NULL) break; /* stopping and drained */
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

int rrpc__worker_pool_start(int nthreads, const char *name, rrpc__worker_pool **out) {
  rrpc__worker_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return -ENOMEM;
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
  if (p->stopping) {
    pthread_mutex_unlock(&p->mu);
    free(t);
    return -ESHUTDOWN;
  }
  if (p->tail) p->tail->next = t;
  else p->head = t;
  p->tail = t;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
  return 0;
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
