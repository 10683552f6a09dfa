/* pool.c - the registered memory pool (pool.h): regions registered once on
 * the device's PD, carved into size classes with per-class free lists, and
 * installed as the iobuf block allocator. Owns nothing of the device but
 * its PD (borrowed).
 *
 * Size classes: 8 KiB (the iobuf default block), 64 KiB, 512 KiB, 4 MiB; a
 * request gets the smallest class that holds it (so at most 8x is wasted,
 * and only on odd sizes - the iobuf asks for 8 KiB almost always). A
 * request above 4 MiB gets a dedicated region of its own, registered for
 * it, deregistered and unmapped when it is freed; its bytes count against
 * the cap while it lives.
 *
 * Regions: the first has rdma_memory_pool_initial_size_mb; more regions
 * of rdma_memory_pool_increase_size_mb (or the class size, if larger) are
 * mapped and registered as long as the total stays within pool_max_size_mb
 * (the last region is cut to fit). Blocks are carved off a region's unused
 * tail one at a time and, once freed, go back to their class's free list;
 * memory never moves between classes (no coalescing).
 *
 * Growth ahead of need: mapping and registering a region pins every page
 * (64 MiB: 10 - 20 ms on a NIC, 0.3 - 1.8 s in rxe under TCG), and the
 * thread that runs out is usually a loop reading or copying a message.
 * So once the regions' uncarved tails fall below
 * rdma_memory_pool_low_water_mb, the carving thread hands one growth to the
 * background verbs teardown thread and goes on. Only when the tails run out before
 * that growth lands does a carver wait for it (counted: pool_grow_waits);
 * with no growth under way it grows inline as before (pool_grows_inline).
 *
 * Regions are kept until the process exits, never deregistered: a block's
 * region cookie is read by whoever holds the block (an iobuf anywhere in
 * the process, a send still in flight on a QP), so giving a region back
 * would need every one of its blocks to be free at once and its cookie to
 * be unreachable; and registering again costs a page pinning walk. The cap
 * bounds what this keeps pinned.
 *
 * Thread-safety: every entry point may be called from any thread. Each
 * class has its own mutex; the 8 KiB class also has a small per-thread
 * cache (most alloc/free pairs of message blocks never take a lock).
 * Growth is serialized by grow_mu. */
#include "transport/rdma/pool.h"
#include "transport/rdma/budget.h"
#include "transport/rdma/device.h"
#include "transport/rdma/memlock.h"
#include "transport/rdma/verbs_bg.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rrpc/errors.h"
#include "rrpc/internal/log.h"
#include "rrpc/iobuf.h"

enum {
  NCLASSES = 4,
  PAGE = 4096,
  TL_CACHE_MAX = 64,   /* 8 KiB blocks kept per thread (512 KiB) */
  TL_CACHE_MOVE = 32,  /* moved to/from the shared list at a time */
};
static const size_t class_size[NCLASSES] = {8u << 10, 64u << 10, 512u << 10, 4u << 20};

typedef struct pool_region {
  rrpc__rdma_region r; /* first: the cookie handed out is &r */
  struct pool_region *next; /* class regions only; under grow_mu */
  size_t used;              /* bytes carved off the front; under grow_mu */
  int dedicated;            /* one block, released with it */
} pool_region;

/* A free block holds its own list link and its region. */
typedef struct free_node {
  struct free_node *next;
  pool_region *region;
} free_node;

typedef struct pool_class {
  pthread_mutex_t mu;
  free_node *head;
  size_t nfree;
} pool_class;

static struct {
  atomic_int started;
  pthread_mutex_t grow_mu; /* start, regions, carving, cap accounting */
  struct ibv_pd *pd;       /* borrowed from the process-wide device */
  const char *dev_name;    /* borrowed, for logs */
  size_t increase, cap;    /* bytes */
  pool_region *regions;    /* class regions, newest first */
  size_t reserved;         /* bytes mapped+registered or being so; under grow_mu */
  size_t tail_room;        /* uncarved bytes of all class regions; under grow_mu */
  size_t low_water;        /* grow ahead below this much tail_room (bytes) */
  size_t ahead_len;        /* the growth under way, 0 = none; under grow_mu */
  pthread_cond_t grown;    /* the growth under way ended (added or failed) */
  struct rrpc__bg_job ahead_job; /* that growth, on a background verbs thread */
  _Atomic size_t bytes;    /* registered bytes, for stats */
  pool_class cls[NCLASSES];
} g_pool = {
    .grow_mu = PTHREAD_MUTEX_INITIALIZER,
    .grown = PTHREAD_COND_INITIALIZER,
    .cls = {{.mu = PTHREAD_MUTEX_INITIALIZER},
            {.mu = PTHREAD_MUTEX_INITIALIZER},
            {.mu = PTHREAD_MUTEX_INITIALIZER},
            {.mu = PTHREAD_MUTEX_INITIALIZER}},
};

static pool_region *region_of_cookie(void *cookie) {
  return (pool_region *)((char *)cookie - offsetof(pool_region, r));
}

static int class_of(size_t size) {
  for (int c = 0; c < NCLASSES; c++)
    if (size <= class_size[c]) return c;
  return -1;
}

/* ---- registration ------------------------------------------------------------ */

/* Map and register `len` bytes (a multiple of PAGE). Relaxed ordering is
 * asked first (PCIe may reorder our DMA, which is faster on some hosts)
 * and dropped if the device or kernel refuses it. 0, -ENOMEM or
 * -RRPC_ERDMAMEM. */
static int region_create(size_t len, int dedicated, pool_region **out) {
  /* The pool shares the registered cap with connections' rings. */
  if (rrpc__rdma_budget_take(len) != 0) return -RRPC_EPOOL;
  pool_region *pr = calloc(1, sizeof *pr);
  if (pr == NULL) {
    rrpc__rdma_budget_give(len);
    return -ENOMEM;
  }
  void *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    RRPC_LOG(WARNING, "rdma pool: cannot map %zu bytes: %s", len, strerror(errno));
    rrpc__rdma_budget_give(len);
    free(pr);
    return -ENOMEM;
  }
  struct ibv_mr *mr = ibv_reg_mr(g_pool.pd, mem, len,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING);
  if (mr == NULL) mr = ibv_reg_mr(g_pool.pd, mem, len, IBV_ACCESS_LOCAL_WRITE);
  if (mr == NULL) {
    int err = errno;
    RRPC_LOG(WARNING, "rdma pool: registering %zu bytes on %s failed: %s%s", len, g_pool.dev_name,
             strerror(err), err == ENOMEM || err == EPERM ? " (check ulimit -l)" : "");
    munmap(mem, len);
    rrpc__rdma_budget_give(len);
    free(pr);
    return -RRPC_ERDMAMEM;
  }
  pr->r.magic = RRPC_RDMA_REGION_MAGIC;
  pr->r.lkey = mr->lkey;
  pr->r.mr = mr;
  pr->r.base = mem;
  pr->r.len = len;
  pr->dedicated = dedicated;
  atomic_fetch_add_explicit(&g_pool.bytes, len, memory_order_relaxed);
  *out = pr;
  return 0;
}

static void region_destroy(pool_region *pr) {
  int rc = ibv_dereg_mr(pr->r.mr);
  if (rc) RRPC_LOG(ERROR, "rdma pool: ibv_dereg_mr: %s", strerror(rc));
  munmap(pr->r.base, pr->r.len);
  atomic_fetch_sub_explicit(&g_pool.bytes, pr->r.len, memory_order_relaxed);
  rrpc__rdma_budget_give(pr->r.len);
  pr->r.magic = 0;
  free(pr);
}

/* ---- carving --------------------------------------------------------------------- */

/* The size of the next class region for a block of `sz` bytes, cut to the
 * cap; 0 if not even `sz` fits under it. Under grow_mu. */
static size_t next_region_len(size_t sz) {
  size_t len = g_pool.increase > sz ? g_pool.increase : sz;
  if (g_pool.reserved + len > g_pool.cap) len = g_pool.cap - g_pool.reserved;
  len -= len % PAGE;
  return len < sz ? 0 : len;
}

/* Link a new class region in. Under grow_mu. */
static void region_link(pool_region *pr, const char *how) {
  pr->next = g_pool.regions;
  g_pool.regions = pr;
  g_pool.tail_room += pr->r.len;
  RRPC_LOG(INFO, "rdma pool: grew by %zu bytes to %zu (cap %zu, %s)", pr->r.len, g_pool.reserved,
           g_pool.cap, how);
}

/* The growth ahead of need, on a background verbs thread: mapped and
 * registered without grow_mu (its bytes were reserved when it was asked
 * for), so carving from the other regions goes on meanwhile. */
static void grow_ahead_run(struct rrpc__bg_job *job) {
  (void)job;
  pthread_mutex_lock(&g_pool.grow_mu);
  size_t len = g_pool.ahead_len;
  pthread_mutex_unlock(&g_pool.grow_mu);
  pool_region *pr = NULL;
  int rc = region_create(len, 0, &pr);
  pthread_mutex_lock(&g_pool.grow_mu);
  if (rc == 0) {
    region_link(pr, "ahead of need");
    rrpc__rdma_count(RRPC_RDMA_CNT_POOL_GROWS_AHEAD, 1);
  } else {
    g_pool.reserved -= len; /* region_create logged why */
  }
  g_pool.ahead_len = 0;
  pthread_cond_broadcast(&g_pool.grown);
  pthread_mutex_unlock(&g_pool.grow_mu);
}

/* After a carve: ask for one growth ahead of need if the tails ran low and
 * none is under way. Under grow_mu; returns 1 if the caller must submit
 * g_pool.ahead_job once it has dropped grow_mu (a full queue runs the job
 * on the caller, which takes grow_mu). */
static int grow_ahead_wanted(void) {
  if (g_pool.ahead_len != 0 || g_pool.tail_room >= g_pool.low_water) return 0;
  size_t len = next_region_len(class_size[0]);
  if (len == 0) return 0; /* at the cap */
  g_pool.reserved += len;
  g_pool.ahead_len = len;
  return 1;
}

/* No region has room for `sz`: wait for the growth under way, or grow
 * here if none is. Under grow_mu (released while waiting). 0 or an error. */
static int grow_for(size_t sz) {
  if (g_pool.ahead_len != 0) {
    rrpc__rdma_count(RRPC_RDMA_CNT_POOL_GROW_WAITS, 1);
    while (g_pool.ahead_len != 0) pthread_cond_wait(&g_pool.grown, &g_pool.grow_mu);
    return 0; /* the caller looks for room again */
  }
  size_t len = next_region_len(sz);
  if (len == 0) return -RRPC_EPOOL;
  pool_region *pr;
  int rc = region_create(len, 0, &pr);
  if (rc) return rc;
  g_pool.reserved += len;
  region_link(pr, "inline");
  rrpc__rdma_count(RRPC_RDMA_CNT_POOL_GROWS_INLINE, 1);
  return 0;
}

/* One new block of class c off some region's tail, growing the pool if no
 * region has room. 0, -RRPC_EPOOL (the cap), -RRPC_ERDMAMEM or -ENOMEM. */
static int carve(int c, void **data, pool_region **region) {
  const size_t sz = class_size[c];
  int rc = 0, submit = 0;
  pthread_mutex_lock(&g_pool.grow_mu);
  for (;;) {
    pool_region *pr = g_pool.regions;
    while (pr && pr->r.len - pr->used < sz) pr = pr->next;
    if (pr != NULL) {
      *data = pr->r.base + pr->used;
      *region = pr;
      pr->used += sz;
      g_pool.tail_room -= sz;
      submit = grow_ahead_wanted();
      break;
    }
    rc = grow_for(sz);
    if (rc) break;
  }
  pthread_mutex_unlock(&g_pool.grow_mu);
  /* The teardown lane: a new connection's setup (under a handshake
   * deadline) never waits behind a registration of seconds under TCG. */
  if (submit) rrpc__verbs_bg_submit_lane(RRPC_BG_TEARDOWN, &g_pool.ahead_job);
  return rc;
}

/* A dedicated region for one large block. The bytes are reserved against
 * the cap first, so registration runs without grow_mu. */
static int dedicated_alloc(size_t size, void **data, size_t *cap, void **region) {
  if (size > SIZE_MAX - PAGE) return -RRPC_EPOOL;
  size_t len = (size + PAGE - 1) / PAGE * PAGE;
  pthread_mutex_lock(&g_pool.grow_mu);
  int over = len > g_pool.cap - g_pool.reserved;
  if (!over) g_pool.reserved += len;
  pthread_mutex_unlock(&g_pool.grow_mu);
  if (over) return -RRPC_EPOOL;
  pool_region *pr;
  int rc = region_create(len, 1, &pr);
  if (rc) {
    pthread_mutex_lock(&g_pool.grow_mu);
    g_pool.reserved -= len;
    pthread_mutex_unlock(&g_pool.grow_mu);
    return rc;
  }
  *data = pr->r.base;
  *cap = len;
  *region = &pr->r;
  return 0;
}

static void dedicated_free(pool_region *pr) {
  size_t len = pr->r.len;
  region_destroy(pr);
  pthread_mutex_lock(&g_pool.grow_mu);
  g_pool.reserved -= len;
  pthread_mutex_unlock(&g_pool.grow_mu);
}

/* ---- per-thread cache of 8 KiB blocks ----------------------------------------------
 * Emptied into the shared list by a pthread key destructor at thread exit;
 * after that (later destructors may still free blocks) frees go straight
 * to the shared list. */

typedef struct tl_cache {
  free_node *head;
  unsigned n;
  int registered; /* the key destructor will run for this thread */
  int dead;       /* it ran: cache nothing more */
} tl_cache;

static _Thread_local tl_cache tl_small;
static pthread_key_t tl_key;
static pthread_once_t tl_once = PTHREAD_ONCE_INIT;
static int tl_key_ok;

/* Push a chain [first..last] of n nodes onto class c's shared list. */
static void class_push_chain(int c, free_node *first, free_node *last, size_t n) {
  pool_class *k = &g_pool.cls[c];
  pthread_mutex_lock(&k->mu);
  last->next = k->head;
  k->head = first;
  k->nfree += n;
  pthread_mutex_unlock(&k->mu);
}

static void tl_drain(void *p) {
  tl_cache *t = p;
  if (t->head) {
    free_node *last = t->head;
    while (last->next) last = last->next;
    class_push_chain(0, t->head, last, t->n);
  }
  t->head = NULL;
  t->n = 0;
  t->dead = 1;
}

static void tl_key_init(void) { tl_key_ok = pthread_key_create(&tl_key, tl_drain) == 0; }

/* Take up to `want` nodes off class c's shared list. */
static free_node *class_pop(int c, unsigned want, unsigned *got) {
  pool_class *k = &g_pool.cls[c];
  pthread_mutex_lock(&k->mu);
  free_node *first = k->head, *last = NULL;
  unsigned n = 0;
  for (free_node *f = first; f && n < want; f = f->next) {
    last = f;
    n++;
  }
  if (last) {
    k->head = last->next;
    last->next = NULL;
    k->nfree -= n;
  }
  pthread_mutex_unlock(&k->mu);
  *got = n;
  return n ? first : NULL;
}

static int tl_usable(tl_cache *t) {
  if (t->dead) return 0;
  if (!t->registered) {
    /* Without a working key the cache would leak at thread exit. */
    pthread_once(&tl_once, tl_key_init);
    if (tl_key_ok && pthread_setspecific(tl_key, t) == 0) t->registered = 1;
  }
  return t->registered;
}

/* ---- the allocator ------------------------------------------------------------------ */

int rrpc__rdma_pool_alloc(size_t size, void **data, size_t *cap, void **region) {
  if (!atomic_load_explicit(&g_pool.started, memory_order_acquire)) return -RRPC_ENOTREADY;
  int c = class_of(size);
  if (c < 0) return dedicated_alloc(size, data, cap, region);

  free_node *f = NULL;
  if (c == 0) {
    tl_cache *t = &tl_small;
    if (t->head == NULL && tl_usable(t)) {
      unsigned got;
      t->head = class_pop(0, TL_CACHE_MOVE, &got);
      t->n = got;
    }
    if (t->head) {
      f = t->head;
      t->head = f->next;
      t->n--;
    }
  }
  if (f == NULL) {
    unsigned got;
    f = class_pop(c, 1, &got);
  }
  if (f) {
    *region = &f->region->r;
    *data = f;
    *cap = class_size[c];
    return 0;
  }
  pool_region *pr;
  void *p;
  int rc = carve(c, &p, &pr);
  if (rc) return rc;
  *data = p;
  *cap = class_size[c];
  *region = &pr->r;
  return 0;
}

void rrpc__rdma_pool_free(void *data, size_t cap, void *region) {
  if (data == NULL) return;
  const rrpc__rdma_region *r = rrpc__rdma_region_of(region, data, cap);
  if (r == NULL) {
    RRPC_LOG(ERROR, "rdma pool: free of %p (%zu bytes) that is not pool memory; leaked", data, cap);
    return;
  }
  pool_region *pr = region_of_cookie(region);
  if (pr->dedicated) {
    dedicated_free(pr);
    return;
  }
  int c = class_of(cap);
  if (c < 0 || class_size[c] != cap) {
    RRPC_LOG(ERROR, "rdma pool: free of %p with size %zu, which is no class; leaked", data, cap);
    return;
  }
  free_node *f = data;
  f->region = pr;
  if (c == 0) {
    tl_cache *t = &tl_small;
    if (tl_usable(t)) {
      if (t->n >= TL_CACHE_MAX) {
        /* Hand the older half back so other threads can use it. */
        free_node *first = t->head, *last = first;
        for (unsigned i = 1; i < TL_CACHE_MOVE; i++) last = last->next;
        t->head = last->next;
        t->n -= TL_CACHE_MOVE;
        class_push_chain(0, first, last, TL_CACHE_MOVE);
      }
      f->next = t->head;
      t->head = f;
      t->n++;
      return;
    }
  }
  class_push_chain(c, f, f, 1);
}

static int pool_block_alloc(void *ctx, size_t size, void **data, size_t *cap, void **region) {
  (void)ctx;
  return rrpc__rdma_pool_alloc(size, data, cap, region);
}

static void pool_block_free(void *ctx, void *data, size_t cap, void *region) {
  (void)ctx;
  rrpc__rdma_pool_free(data, cap, region);
}

static const rrpc_block_allocator pool_allocator = {
    .name = "rdma-pool",
    .alloc = pool_block_alloc,
    .free = pool_block_free,
    .ctx = NULL,
};

size_t rrpc__rdma_pool_bytes(void) {
  return atomic_load_explicit(&g_pool.bytes, memory_order_relaxed);
}

const rrpc__rdma_region *rrpc__rdma_block_region(const rrpc_block *b, const void *p, size_t len) {
  if (b->alloc != NULL && b->alloc != &pool_allocator) return NULL;
  return rrpc__rdma_region_of(b->region, p, len);
}

/* A fork's child has no background threads: a growth the parent had under
 * way never lands there, so nothing may wait for it. (The parent held
 * grow_mu only around short bookkeeping, never across the registration.) */
static void pool_after_fork_child(void) {
  pthread_cond_init(&g_pool.grown, NULL);
  if (g_pool.ahead_len != 0) g_pool.reserved -= g_pool.ahead_len;
  g_pool.ahead_len = 0;
}

int rrpc__rdma_pool_start(rrpc__rdma_dev *d) {
  if (atomic_load_explicit(&g_pool.started, memory_order_acquire)) return 0;
  const rrpc_rdma_options *o = rrpc__rdma_options();
  int rc = 0;
  pthread_mutex_lock(&g_pool.grow_mu);
  if (atomic_load_explicit(&g_pool.started, memory_order_relaxed)) goto out;
  /* The pool works by being the block allocator; replacing one the
   * application installed would silently change where its blocks come
   * from. Say so once and leave RDMA off (connections fall back). */
  if (!rrpc__block_allocator_is_default()) {
    static atomic_int said;
    if (!atomic_exchange(&said, 1))
      RRPC_LOG(ERROR, "rdma: the application installed its own block allocator (%s); the registered pool "
               "would replace it, so RDMA stays off in this process",
               rrpc_block_allocator_get()->name ? rrpc_block_allocator_get()->name : "?");
    rc = -EBUSY;
    goto out;
  }
  if (o->pool_max_size_mb > SIZE_MAX >> 20 || o->pool_increase_size_mb > SIZE_MAX >> 20 ||
      o->pool_low_water_mb > SIZE_MAX >> 20) {
    rc = -EINVAL;
    goto out;
  }
  g_pool.pd = d->pd;
  g_pool.dev_name = d->name;
  g_pool.cap = o->pool_max_size_mb << 20;
  g_pool.increase = o->pool_increase_size_mb << 20;
  size_t initial = o->pool_initial_size_mb << 20;
  if (initial > g_pool.cap) initial = g_pool.cap;
  /* Before the first registration, so the reason comes first in the log. */
  rrpc__rdma_memlock_check(initial + o->ring_size + (size_t)(o->rq_size + 1) * 64);
  /* Half a step by default: the background growth of the next region has
   * the other half's worth of carving to land in. */
  g_pool.low_water = o->pool_low_water_mb ? o->pool_low_water_mb << 20 : g_pool.increase / 2;
  g_pool.ahead_job.fn = grow_ahead_run;
  pthread_atfork(NULL, NULL, pool_after_fork_child);
  pool_region *pr;
  rc = region_create(initial, 0, &pr);
  if (rc) goto out;
  g_pool.reserved = initial;
  pr->next = NULL;
  g_pool.regions = pr;
  g_pool.tail_room = initial;
  atomic_store_explicit(&g_pool.started, 1, memory_order_release);
  RRPC_LOG(INFO, "rdma pool: %zu bytes registered on %s (grows by %zu up to %zu)", initial, d->name,
           g_pool.increase, g_pool.cap);
out:
  pthread_mutex_unlock(&g_pool.grow_mu);
  /* Outside grow_mu: blocks allocated from now on are registered memory. */
  if (rc == 0) rrpc_block_allocator_set(&pool_allocator);
  return rc;
}
