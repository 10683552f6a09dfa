/* block.c - refcounted iobuf blocks and the process-wide block allocator (malloc by default); knows nothing of iobufs. */
#include "internal/iobuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "internal/log.h"

/* ---- the default allocator ------------------------------------------------
 * Its alloc/free are plain malloc/free so that anyone calling them through
 * rrpc_block_allocator_get() gets what the table promises. rrpc__block_alloc
 * does not call them, though: for this allocator it puts the header and the
 * data in one malloc (the data starts at HDR_SPAN past the header), so a
 * default block costs one malloc, not two. */

static int malloc_alloc(void *ctx, size_t size, void **data, size_t *cap, void **region) {
  (void)ctx;
  void *p = malloc(size);
  if (!p) return -ENOMEM;
  *data = p;
  *cap = size;
  *region = NULL;
  return 0;
}

static void malloc_free(void *ctx, void *data, size_t cap, void *region) {
  (void)ctx;
  (void)cap;
  (void)region;
  free(data);
}

static const rrpc_block_allocator malloc_allocator = {
    .name = "malloc",
    .alloc = malloc_alloc,
    .free = malloc_free,
    .ctx = NULL,
};

/* Header span in a combined allocation: rounded up to 64 so the data is
 * cache-line aligned relative to the (16-aligned) malloc result. */
enum { HDR_SPAN = (sizeof(rrpc_block) + 63) / 64 * 64 };

static _Atomic(const rrpc_block_allocator *) current_allocator = &malloc_allocator;

void rrpc_block_allocator_set(const rrpc_block_allocator *a) {
  atomic_store_explicit(&current_allocator, a ? a : &malloc_allocator, memory_order_release);
}

const rrpc_block_allocator *rrpc_block_allocator_get(void) {
  return atomic_load_explicit(&current_allocator, memory_order_acquire);
}

int rrpc__block_allocator_is_default(void) { return rrpc_block_allocator_get() == &malloc_allocator; }

/* ---- header cache -----------------------------------------------------------
 * Blocks whose data is not ours to malloc (custom allocators, user memory,
 * receive-ring slices) need a separate header. A small per-thread free list
 * saves a malloc/free pair per block on those hot paths. A header freed on
 * another thread simply joins that thread's list. The list is emptied by a
 * pthread key destructor at thread exit; after that (other destructors may
 * still drop blocks) headers go straight back to free(). */

enum { HDR_CACHE_MAX = 64, BLK_CACHE_MAX = 32 };

/* The same list also keeps whole default-size malloc blocks (header and
 * 8 KiB of data in one allocation): every RPC frame starts with one, and
 * malloc serves that size from its slower bins, not its per-thread cache. */
typedef struct hdr_cache {
  rrpc_block *head; /* linked through deleter_arg */
  unsigned n;
  rrpc_block *blk_head; /* default-size malloc blocks, same linking */
  unsigned blk_n;
  int registered; /* the key destructor will run for this thread */
  int dead;       /* the destructor ran: cache nothing more */
} hdr_cache;

static _Thread_local hdr_cache tl_hdr_cache;
static pthread_key_t hdr_cache_key;
static pthread_once_t hdr_cache_once = PTHREAD_ONCE_INIT;
static int hdr_cache_key_ok;

static void free_list(rrpc_block **head) {
  while (*head) {
    rrpc_block *b = *head;
    *head = b->deleter_arg;
    free(b);
  }
}

static void hdr_cache_drain(void *p) {
  hdr_cache *c = p;
  free_list(&c->head);
  free_list(&c->blk_head);
  c->n = 0;
  c->blk_n = 0;
  c->dead = 1;
}

static void hdr_cache_key_init(void) {
  hdr_cache_key_ok = pthread_key_create(&hdr_cache_key, hdr_cache_drain) == 0;
}

static rrpc_block *hdr_get(void) {
  hdr_cache *c = &tl_hdr_cache;
  rrpc_block *b = c->head;
  if (b) {
    c->head = b->deleter_arg;
    c->n--;
    return b;
  }
  return malloc(sizeof(rrpc_block));
}

/* Whether this thread may cache (registers the drain at first use). */
static int cache_usable(hdr_cache *c) {
  if (c->dead) return 0;
  if (!c->registered) {
    /* Without a working key the cache would leak at thread exit. */
    pthread_once(&hdr_cache_once, hdr_cache_key_init);
    if (hdr_cache_key_ok && pthread_setspecific(hdr_cache_key, c) == 0) c->registered = 1;
  }
  return c->registered;
}

static void hdr_put(rrpc_block *b) {
  hdr_cache *c = &tl_hdr_cache;
  if (c->n < HDR_CACHE_MAX && cache_usable(c)) {
    b->deleter_arg = c->head;
    c->head = b;
    c->n++;
    return;
  }
  free(b);
}

/* The depot: default blocks moved between threads' lists in batches. A
 * block is often allocated on one thread and freed on another (a request
 * read on a loop and released by a pool worker; a response packed on a
 * worker and written by the loop), so one thread's list runs dry while the
 * other's overflows into free(); the depot hands the overflow over, one
 * lock per DEPOT_BATCH blocks. At most DEPOT_MAX blocks (2 MiB) wait here. */
enum { DEPOT_BATCH = BLK_CACHE_MAX / 2, DEPOT_MAX = 256 };
static pthread_mutex_t depot_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc_block *depot_head; /* under depot_mu, linked through deleter_arg */
static atomic_uint depot_n; /* changed under depot_mu; read without it as a hint */

/* The thread's list is full: move DEPOT_BATCH of it to the depot; 0 if
 * the depot is full too. */
static int depot_give(hdr_cache *c) {
  rrpc_block *first = c->blk_head, *last = first;
  for (unsigned i = 1; i < DEPOT_BATCH; i++) last = last->deleter_arg;
  pthread_mutex_lock(&depot_mu);
  unsigned have = atomic_load_explicit(&depot_n, memory_order_relaxed);
  int room = have + DEPOT_BATCH <= DEPOT_MAX;
  if (room) {
    c->blk_head = last->deleter_arg;
    c->blk_n -= DEPOT_BATCH;
    last->deleter_arg = depot_head;
    depot_head = first;
    atomic_store_explicit(&depot_n, have + DEPOT_BATCH, memory_order_relaxed);
  }
  pthread_mutex_unlock(&depot_mu);
  return room;
}

/* The thread's list is empty: take up to DEPOT_BATCH from the depot. */
static void depot_take(hdr_cache *c) {
  pthread_mutex_lock(&depot_mu);
  rrpc_block *first = depot_head, *last = first;
  unsigned n = first != NULL;
  for (; n > 0 && n < DEPOT_BATCH && last->deleter_arg != NULL; n++) last = last->deleter_arg;
  if (n > 0) {
    depot_head = last->deleter_arg;
    atomic_fetch_sub_explicit(&depot_n, n, memory_order_relaxed);
  }
  pthread_mutex_unlock(&depot_mu);
  if (n == 0) return;
  last->deleter_arg = NULL;
  c->blk_head = first;
  c->blk_n = n;
}

static rrpc_block *blk_get(void) {
  hdr_cache *c = &tl_hdr_cache;
  if (c->blk_head == NULL && atomic_load_explicit(&depot_n, memory_order_relaxed) > 0 && cache_usable(c))
    depot_take(c);
  rrpc_block *b = c->blk_head;
  if (b) {
    c->blk_head = b->deleter_arg;
    c->blk_n--;
  }
  return b;
}

static void blk_put(rrpc_block *b) {
  hdr_cache *c = &tl_hdr_cache;
  if (cache_usable(c) && (c->blk_n < BLK_CACHE_MAX || depot_give(c))) {
    b->deleter_arg = c->blk_head;
    c->blk_head = b;
    c->blk_n++;
    return;
  }
  free(b);
}

/* ---- blocks ----------------------------------------------------------------- */

static void block_init(rrpc_block *b, char *data, uint32_t cap, void *region,
                       const rrpc_block_allocator *a) {
  atomic_init(&b->refs, 1u);
  b->cap = cap;
  b->size = 0;
  b->data = data;
  b->region = region;
  b->alloc = a;
  b->deleter = NULL;
  b->deleter_arg = NULL;
}

const rrpc_block_allocator *rrpc__block_host_allocator(void) { return &malloc_allocator; }

int rrpc__block_alloc(size_t size, rrpc_block **out) {
  return rrpc__block_alloc_from(rrpc_block_allocator_get(), size, out);
}

int rrpc__block_alloc_from(const rrpc_block_allocator *a, size_t size, rrpc_block **out) {
  if (size > UINT32_MAX) return -EINVAL;
  if (size < RRPC_IOBUF_DEFAULT_BLOCK_SIZE) size = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;

  if (a == &malloc_allocator) {
    rrpc_block *cached = size == RRPC_IOBUF_DEFAULT_BLOCK_SIZE ? blk_get() : NULL;
    if (cached) {
      block_init(cached, (char *)cached + HDR_SPAN, (uint32_t)size, NULL, a);
      *out = cached;
      return 0;
    }
    char *mem = malloc(HDR_SPAN + size);
    if (!mem) return -ENOMEM;
    rrpc_block *b = (rrpc_block *)mem;
    block_init(b, mem + HDR_SPAN, (uint32_t)size, NULL, a);
    *out = b;
    return 0;
  }

  rrpc_block *b = hdr_get();
  if (!b) return -ENOMEM;
  void *data = NULL, *region = NULL;
  size_t cap = 0;
  int rc = a->alloc(a->ctx, size, &data, &cap, &region);
  if (rc < 0) goto fail_hdr;
  if (!data || cap < size || cap > UINT32_MAX) {
    /* A broken allocator (or an area the 32-bit cap cannot describe): refuse
     * the area rather than overrun it or hand free() a wrong cap. */
    RRPC_LOG(ERROR, "block allocator '%s' returned %zu bytes for %zu", a->name ? a->name : "?",
             data ? cap : (size_t)0, size);
    if (data) a->free(a->ctx, data, cap, region);
    rc = -EINVAL;
    goto fail_hdr;
  }
  block_init(b, data, (uint32_t)cap, region, a);
  *out = b;
  return 0;

fail_hdr:
  hdr_put(b);
  return rc;
}

int rrpc__block_new_user(void *data, size_t len, void *region, rrpc_iobuf_deleter deleter,
                         void *arg, rrpc_block **out) {
  if (!data || len == 0 || len > UINT32_MAX) return -EINVAL;
  rrpc_block *b = hdr_get();
  if (!b) return -ENOMEM;
  block_init(b, data, (uint32_t)len, region, NULL);
  /* All of user memory is content: size == cap, so nothing ever appends
   * into it. */
  b->size = (uint32_t)len;
  b->deleter = deleter;
  b->deleter_arg = arg;
  *out = b;
  return 0;
}

void rrpc__block_ref(rrpc_block *b) {
  /* Relaxed is enough: the caller already holds a reference. */
  atomic_fetch_add_explicit(&b->refs, 1u, memory_order_relaxed);
}

static void block_free(rrpc_block *b) {
  const rrpc_block_allocator *a = b->alloc;
  if (a == &malloc_allocator) {
    /* header and data are one allocation */
    if (b->cap == RRPC_IOBUF_DEFAULT_BLOCK_SIZE) blk_put(b);
    else free(b);
    return;
  }
  if (a) {
    a->free(a->ctx, b->data, b->cap, b->region);
  } else if (b->deleter) {
    b->deleter(b->data, b->deleter_arg);
  }
  hdr_put(b);
}

void rrpc__block_unref(rrpc_block *b) {
  /* Release so this thread's use of the data happens before the free;
   * acquire so the last one sees every other thread's use. acq_rel on the
   * RMW rather than a separate acquire fence: the same instruction on x86
   * and ARMv8, and ThreadSanitizer does not model stand-alone fences. */
  if (atomic_fetch_sub_explicit(&b->refs, 1u, memory_order_acq_rel) == 1u) block_free(b);
}
