/* slots.c - connections' CDC receive slots from a slab per protection
 * domain and size (slots.h).
 *
 * Why a slab: an idle elastic connection pins one 4 KiB piece per
 * direction; its 16 + 1 slots (1,088 bytes) as an MR of their own pinned
 * a whole page more, and cost an MR and a registration each. Carved from
 * 64 KiB chunks they pin what they use, and a new connection usually
 * registers nothing for them. */
#include "transport/rdma/slots.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "transport/rdma/budget.h"
#include "transport/rdma/device.h"

enum {
  NCLASSES = 8, /* distinct (pd, size) pairs; two in practice (ring and elastic rq sizes) */
  PAGE = 4096,
  AREA_ALIGN = 64,
};

/* A free area holds its link and the MR of the chunk it was carved from. */
typedef struct free_area {
  struct free_area *next;
  struct ibv_mr *mr;
} free_area;

/* Every chunk ever registered, so its MR stays reachable (leak checkers
 * do not scan the chunks themselves, which are mmap'ed). */
typedef struct chunk_rec {
  struct chunk_rec *next;
  struct ibv_mr *mr;
} chunk_rec;

typedef struct slot_class {
  struct ibv_pd *pd; /* NULL: unused */
  size_t len;
  free_area *head;
  char *chunk; /* being carved */
  size_t chunk_len, used;
  struct ibv_mr *chunk_mr;
} slot_class;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static slot_class g_cls[NCLASSES];
static chunk_rec *g_chunks;

/* The class of (pd, len), made if new; NULL when all are taken. Under g_mu. */
static slot_class *class_for(struct ibv_pd *pd, size_t len) {
  slot_class *unused = NULL;
  for (int i = 0; i < NCLASSES; i++) {
    if (g_cls[i].pd == pd && g_cls[i].len == len) return &g_cls[i];
    if (g_cls[i].pd == NULL && unused == NULL) unused = &g_cls[i];
  }
  if (unused != NULL) {
    unused->pd = pd;
    unused->len = len;
  }
  return unused;
}

/* A fresh chunk for class k (the old one's unusable tail stays unused).
 * Under g_mu: a setup or teardown thread, never a loop. */
static int chunk_new(slot_class *k) {
  size_t len = k->len > RRPC__SLOT_CHUNK ? (k->len + PAGE - 1) / PAGE * PAGE : RRPC__SLOT_CHUNK;
  chunk_rec *rec = calloc(1, sizeof *rec);
  if (rec == NULL) return -ENOMEM;
  int rc = rrpc__rdma_budget_take(len);
  if (rc != 0) {
    free(rec);
    return rc;
  }
  void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    rrpc__rdma_budget_give(len);
    free(rec);
    return -ENOMEM;
  }
  errno = 0;
  struct ibv_mr *mr = ibv_reg_mr(k->pd, mem, len, IBV_ACCESS_LOCAL_WRITE);
  if (mr == NULL) {
    rc = errno ? -errno : -RRPC_ERDMAMEM; /* EMFILE, ENOMEM (ulimit -l): kept for the fallback's text */
    munmap(mem, len);
    rrpc__rdma_budget_give(len);
    free(rec);
    return rc;
  }
  rrpc__rdma_count(RRPC_RDMA_CNT_SLOT_BYTES, len);
  rec->mr = mr;
  rec->next = g_chunks;
  g_chunks = rec;
  k->chunk = mem;
  k->chunk_len = len;
  k->used = 0;
  k->chunk_mr = mr;
  return 0;
}

int rrpc__slots_get(struct ibv_pd *pd, size_t len, char **mem, struct ibv_mr **mr) {
  if (pd == NULL || len < sizeof(free_area) || len % AREA_ALIGN != 0) return -EINVAL;
  pthread_mutex_lock(&g_mu);
  slot_class *k = class_for(pd, len);
  if (k == NULL) {
    pthread_mutex_unlock(&g_mu);
    RRPC_LOG(ERROR, "rdma: more than %d receive slot sizes in one process", NCLASSES);
    return -ENOSPC;
  }
  free_area *f = k->head;
  if (f != NULL) {
    k->head = f->next;
    *mr = f->mr;
    pthread_mutex_unlock(&g_mu);
    /* The last owner's CDCs (and the link) must not be read as ours. */
    memset(f, 0, len);
    *mem = (char *)f;
    return 0;
  }
  int rc = 0;
  if (k->chunk == NULL || k->chunk_len - k->used < len) rc = chunk_new(k);
  if (rc == 0) {
    *mem = k->chunk + k->used; /* never handed out: still zero from mmap */
    *mr = k->chunk_mr;
    k->used += len;
  }
  pthread_mutex_unlock(&g_mu);
  return rc;
}

void rrpc__slots_put(char *mem, size_t len, struct ibv_mr *mr) {
  if (mem == NULL || mr == NULL) return;
  free_area *f = (free_area *)(void *)mem;
  pthread_mutex_lock(&g_mu);
  slot_class *k = class_for(mr->pd, len);
  if (k == NULL) { /* cannot happen: the area came from that class */
    pthread_mutex_unlock(&g_mu);
    RRPC_LOG(ERROR, "rdma: receive slots of %zu bytes returned to no class; leaked", len);
    return;
  }
  f->mr = mr;
  f->next = k->head;
  k->head = f;
  pthread_mutex_unlock(&g_mu);
}
