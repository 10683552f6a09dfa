/* block.c - refcounted iobuf blocks and the process-wide block allocator (malloc by default); knows nothing of iobufs. */
#include "rrpc/internal/iobuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "rrpc/internal/log.h"

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

enum { HDR_CACHE_MAX = 64 };

/* AddressSanitizer finds a use after free only in memory that went back to
 * free(): a cached block or header would hide it, so neither is cached. */
#if defined(__SANITIZE_ADDRESS__)
#define CACHE_OFF 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CACHE_OFF 1
#endif
#endif
#ifndef CACHE_OFF
#define CACHE_OFF 0
#endif

/* The same list also keeps whole default-size malloc blocks (header and
 * 8 KiB of data in one allocation): every RPC frame starts with one, and
 * malloc serves that size from its slower bins, not its per-thread cache.
 * blk_n and hits are written by the owner only; they are atomics (relaxed
 * plain loads and stores, no locked instruction) so that the stats reader
 * may read them from another thread. */
typedef struct hdr_cache {
  rrpc_block *head; /* linked through deleter_arg */
  unsigned n;
  rrpc_block *blk_head; /* default-size malloc blocks, same linking */
  atomic_uint blk_n;
  atomic_uint_fast64_t hits;
  struct hdr_cache *prev, *next; /* in `caches`, under stats_mu */
  int registered;                /* the key destructor will run for this thread */
  int dead;                      /* the destructor ran: cache nothing more */
} hdr_cache;

static _Thread_local hdr_cache tl_hdr_cache;
static pthread_key_t hdr_cache_key;
static pthread_once_t hdr_cache_once = PTHREAD_ONCE_INIT;
static int hdr_cache_key_ok;

/* The bounds (rrpc_iobuf_set_block_cache), read relaxed on every free. */
static atomic_uint blk_cache_max = RRPC_IOBUF_BLOCK_CACHE_PER_THREAD;
static atomic_uint depot_max = RRPC_IOBUF_BLOCK_CACHE_SHARED;

/* Counters: the living threads' hits are in their caches (listed in
 * `caches`); an exited thread's are added to dead_hits. Misses and
 * overflows go with a malloc or a free, so one atomic add is noise there. */
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;
static hdr_cache *caches;   /* under stats_mu */
static uint64_t dead_hits;  /* under stats_mu */
static atomic_uint_fast64_t blk_misses, blk_overflows;

static unsigned load_u(atomic_uint *v) { return atomic_load_explicit(v, memory_order_relaxed); }
static void store_u(atomic_uint *v, unsigned x) { atomic_store_explicit(v, x, memory_order_relaxed); }

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
  c->dead = 1;
  pthread_mutex_lock(&stats_mu);
  store_u(&c->blk_n, 0);
  dead_hits += atomic_load_explicit(&c->hits, memory_order_relaxed);
  if (c->prev) c->prev->next = c->next;
  else caches = c->next;
  if (c->next) c->next->prev = c->prev;
  pthread_mutex_unlock(&stats_mu);
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

/* First use on this thread: register the drain (without a working key the
 * cache would leak at thread exit) and join the stats list. Out of line,
 * like the other rare paths below (noinline): the common paths then run
 * without saving and restoring registers around a call. */
static __attribute__((noinline)) int cache_register(hdr_cache *c) {
  pthread_once(&hdr_cache_once, hdr_cache_key_init);
  if (!hdr_cache_key_ok || pthread_setspecific(hdr_cache_key, c) != 0) return 0;
  c->registered = 1;
  pthread_mutex_lock(&stats_mu);
  c->prev = NULL;
  c->next = caches;
  if (caches) caches->prev = c;
  caches = c;
  pthread_mutex_unlock(&stats_mu);
  return 1;
}

/* Whether this thread may cache (registers at first use). */
static inline int cache_usable(hdr_cache *c) {
  if (c->dead) return 0;
  return c->registered || cache_register(c);
}

static void hdr_put(rrpc_block *b) {
  hdr_cache *c = &tl_hdr_cache;
  if (!CACHE_OFF && c->n < HDR_CACHE_MAX && cache_usable(c)) {
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
 * lock per batch. A batch is a thread's whole list, moved as it is: its
 * head block carries the batch's length (`size`) and the next batch
 * (`region`; both are set again when the block is taken), so giving and
 * taking touch one block, never walk a list (walking one whose blocks
 * another core freed last cost a cache miss a block: 3 - 5 % of the
 * CPU per call in the pool mode at saturation). At most depot_max blocks
 * wait here. */
static pthread_mutex_t depot_mu = PTHREAD_MUTEX_INITIALIZER;
static rrpc_block *depot_head; /* under depot_mu: the first batch's head */
static atomic_uint depot_n; /* blocks; changed under depot_mu; read without it as a hint */

/* The thread's list is full: move all of it to the depot; 0 if the depot
 * has no room for it, or the list is empty (a bound of 0). */
static __attribute__((noinline)) int depot_give(hdr_cache *c) {
  unsigned blk_n = load_u(&c->blk_n);
  rrpc_block *first = c->blk_head;
  if (blk_n == 0 || first == NULL) return 0;
  pthread_mutex_lock(&depot_mu);
  unsigned have = load_u(&depot_n);
  int room = have + blk_n <= load_u(&depot_max);
  if (room) {
    first->size = blk_n;
    first->region = depot_head;
    depot_head = first;
    store_u(&depot_n, have + blk_n);
  }
  pthread_mutex_unlock(&depot_mu);
  if (room) {
    c->blk_head = NULL;
    store_u(&c->blk_n, 0);
  }
  return room;
}

/* The thread's list is empty: take the depot's first batch. */
static __attribute__((noinline)) void depot_take(hdr_cache *c) {
  pthread_mutex_lock(&depot_mu);
  rrpc_block *first = depot_head;
  unsigned n = 0;
  if (first != NULL) {
    n = first->size;
    depot_head = first->region;
    store_u(&depot_n, load_u(&depot_n) - n);
  }
  pthread_mutex_unlock(&depot_mu);
  if (first == NULL) return;
  c->blk_head = first; /* its last block ends the list (deleter_arg NULL) */
  store_u(&c->blk_n, n);
}

/* Takes the head of the thread's list (the caller saw it is not empty). */
static inline rrpc_block *blk_pop(hdr_cache *c) {
  rrpc_block *b = c->blk_head;
  c->blk_head = b->deleter_arg;
  /* The next one's header, ahead of its use: blocks from the depot were
   * last written on another core, and reading the link of each on its pop
   * was a cache miss a block (94 % of block_alloc's samples at saturation).
   * For writing: block_init writes the header. */
  if (c->blk_head != NULL) __builtin_prefetch(c->blk_head, 1);
  store_u(&c->blk_n, load_u(&c->blk_n) - 1);
  atomic_store_explicit(&c->hits, atomic_load_explicit(&c->hits, memory_order_relaxed) + 1,
                        memory_order_relaxed);
  return b;
}

static __attribute__((noinline)) void blk_overflow(rrpc_block *b) {
  atomic_fetch_add_explicit(&blk_overflows, 1, memory_order_relaxed);
  free(b);
}

static void blk_put(rrpc_block *b) {
  hdr_cache *c = &tl_hdr_cache;
  unsigned blk_n = load_u(&c->blk_n);
  if (!CACHE_OFF && cache_usable(c) && (blk_n < load_u(&blk_cache_max) || depot_give(c))) {
    b->deleter_arg = c->blk_head;
    c->blk_head = b;
    store_u(&c->blk_n, load_u(&c->blk_n) + 1);
    return;
  }
  blk_overflow(b);
}

int rrpc_iobuf_set_block_cache(unsigned per_thread, unsigned shared) {
  if (per_thread > RRPC_IOBUF_BLOCK_CACHE_MAX || shared > RRPC_IOBUF_BLOCK_CACHE_MAX) return -EINVAL;
  store_u(&blk_cache_max, per_thread);
  store_u(&depot_max, shared);
  return 0;
}

void rrpc_iobuf_block_cache_stats_get(rrpc_iobuf_block_cache_stats *out) {
  uint64_t hits = 0, cached = 0;
  pthread_mutex_lock(&stats_mu);
  hits = dead_hits;
  for (hdr_cache *c = caches; c; c = c->next) {
    hits += atomic_load_explicit(&c->hits, memory_order_relaxed);
    cached += load_u(&c->blk_n);
  }
  pthread_mutex_unlock(&stats_mu);
  out->hits = hits;
  out->misses = atomic_load_explicit(&blk_misses, memory_order_relaxed);
  out->overflows = atomic_load_explicit(&blk_overflows, memory_order_relaxed);
  out->cached = cached + load_u(&depot_n);
}

unsigned rrpc__block_cache_thread_count(void) { return load_u(&tl_hdr_cache.blk_n); }

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

static int alloc_from(const rrpc_block_allocator *a, size_t size, rrpc_block **out);

/* Through the static alloc_from, not the exported rrpc__block_alloc_from:
 * a -fPIC build may not inline an exported function (it could be
 * interposed), and the extra call was ~10 instructions a frame. */
int rrpc__block_alloc(size_t size, rrpc_block **out) {
  return alloc_from(atomic_load_explicit(&current_allocator, memory_order_acquire), size, out);
}

/* A malloc block the thread's list could not give: a default-size one from
 * the depot if it has some, else (or a bigger one) from malloc. */
static __attribute__((noinline)) int block_alloc_refill(size_t size, rrpc_block **out) {
  hdr_cache *c = &tl_hdr_cache;
  rrpc_block *b = NULL;
  if (size == RRPC_IOBUF_DEFAULT_BLOCK_SIZE) {
    if (c->blk_head == NULL && load_u(&depot_n) > 0 && cache_usable(c)) depot_take(c);
    if (c->blk_head != NULL) b = blk_pop(c);
    else atomic_fetch_add_explicit(&blk_misses, 1, memory_order_relaxed);
  }
  if (b == NULL) {
    b = malloc(HDR_SPAN + size);
    if (!b) return -ENOMEM;
  }
  block_init(b, (char *)b + HDR_SPAN, (uint32_t)size, NULL, &malloc_allocator);
  *out = b;
  return 0;
}

/* A block from an allocator other than malloc: a separate header. */
static __attribute__((noinline)) int block_alloc_other(const rrpc_block_allocator *a, size_t size,
                                                       rrpc_block **out) {
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

int rrpc__block_alloc_from(const rrpc_block_allocator *a, size_t size, rrpc_block **out) {
  return alloc_from(a, size, out);
}

static inline int alloc_from(const rrpc_block_allocator *a, size_t size, rrpc_block **out) {
  if (size > UINT32_MAX) return -EINVAL;
  if (size < RRPC_IOBUF_DEFAULT_BLOCK_SIZE) size = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;
  if (a != &malloc_allocator) return block_alloc_other(a, size, out);
  /* The common case inline: a default block from the thread's own list. */
  hdr_cache *c = &tl_hdr_cache;
  if (size != RRPC_IOBUF_DEFAULT_BLOCK_SIZE || c->blk_head == NULL) return block_alloc_refill(size, out);
  rrpc_block *b = blk_pop(c);
  block_init(b, (char *)b + HDR_SPAN, (uint32_t)size, NULL, a);
  *out = b;
  return 0;
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

/* A block of another allocator or of user memory: its data goes back to
 * its owner, the separate header to the header cache. */
static __attribute__((noinline)) void block_free_other(rrpc_block *b) {
  const rrpc_block_allocator *a = b->alloc;
  if (a) {
    a->free(a->ctx, b->data, b->cap, b->region);
  } else if (b->deleter) {
    b->deleter(b->data, b->deleter_arg);
  }
  hdr_put(b);
}

static void block_free(rrpc_block *b) {
  if (b->alloc != &malloc_allocator) block_free_other(b);
  else if (b->cap == RRPC_IOBUF_DEFAULT_BLOCK_SIZE) blk_put(b); /* header and data: one allocation */
  else free(b);
}

void rrpc__block_unref(rrpc_block *b) {
  /* Release so this thread's use of the data happens before the free;
   * acquire so the last one sees every other thread's use. acq_rel on the
   * RMW rather than a separate acquire fence: the same instruction on x86
   * and ARMv8, and ThreadSanitizer does not model stand-alone fences. */
  if (atomic_fetch_sub_explicit(&b->refs, 1u, memory_order_acq_rel) == 1u) block_free(b);
}
