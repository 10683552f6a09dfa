/* rrpc/iobuf.h - non-contiguous byte buffers made of refcounted blocks.
 *
 * An iobuf is a short list of (block, offset, length) references. Blocks are
 * refcounted and their header lives outside the data, so any memory can be a
 * block: allocator memory (malloc by default, the RDMA-registered pool when
 * RDMA is on), user memory with a deleter, or a slice of a receive ring.
 *
 * Each function says whether it COPIES bytes or SHARES blocks.
 * [thread-compatible]: one iobuf must not be used by two threads at once;
 * different iobufs sharing blocks may be used concurrently (refcounts are
 * atomic, and a shared block is never written through an iobuf).
 */
#ifndef RRPC_IOBUF_H
#define RRPC_IOBUF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc_iobuf rrpc_iobuf;

/* Default data size of allocator blocks (8 KiB). */
#define RRPC_IOBUF_DEFAULT_BLOCK_SIZE 8192u

/* ---- block allocator ------------------------------------------------------
 * The allocator hands out data areas for blocks. `region` is an opaque cookie
 * the allocator returns with each area (the RDMA pool returns its registered
 * memory region, so a block's lkey is one pointer away). */
typedef struct rrpc_block_allocator {
  const char *name;
  /* alloc - give at least `size` bytes. On success set *data, *cap (>= size)
   * and *region (may be NULL), return 0; else a negative code (-ENOMEM,
   * -RRPC_EPOOL). Called from any thread. */
  int (*alloc)(void *ctx, size_t size, void **data, size_t *cap, void **region);
  /* free - return an area given by alloc. Called from any thread. */
  void (*free)(void *ctx, void *data, size_t cap, void *region);
  void *ctx;
} rrpc_block_allocator;

/* rrpc_block_allocator_set - make `a` the allocator for new blocks (NULL
 * restores malloc). `a` is borrowed and must outlive every block it made.
 * Blocks already allocated keep the allocator they came from. Thread-safe. */
void rrpc_block_allocator_set(const rrpc_block_allocator *a);
/* rrpc_block_allocator_get - the allocator new blocks come from. */
const rrpc_block_allocator *rrpc_block_allocator_get(void);

/* ---- block cache -------------------------------------------------------------
 * Default-size blocks of the malloc allocator (header and 8 KiB in one
 * allocation) are kept for reuse instead of going back to free(): each
 * thread keeps a list of its own (no lock), and a shared list takes a
 * thread's overflow in batches and refills threads that run dry (one lock
 * per batch). A block may be freed on any thread; a thread's list never
 * holds more than `per_thread`, the shared list never more than `shared`,
 * and blocks past both go to free(). A thread's list is freed when the
 * thread exits. Under AddressSanitizer nothing is cached, nor the separate
 * headers of other blocks (so that a use after free is still caught). */
#define RRPC_IOBUF_BLOCK_CACHE_PER_THREAD 32u
#define RRPC_IOBUF_BLOCK_CACHE_SHARED 256u
#define RRPC_IOBUF_BLOCK_CACHE_MAX 65536u

/* rrpc_iobuf_set_block_cache - blocks kept per thread and in the shared
 * list (0 = none; flags rrpc_iobuf_block_cache_per_thread and
 * rrpc_iobuf_block_cache_shared). Defaults RRPC_IOBUF_BLOCK_CACHE_PER_THREAD
 * and RRPC_IOBUF_BLOCK_CACHE_SHARED. Returns 0, or -EINVAL (then nothing
 * changes) if either is above RRPC_IOBUF_BLOCK_CACHE_MAX. A lower bound is
 * met as the lists are used: blocks already kept past it are handed out
 * before new ones are kept. Any thread. */
int rrpc_iobuf_set_block_cache(unsigned per_thread, unsigned shared);

/* Counters of the block cache, process-wide. */
typedef struct rrpc_iobuf_block_cache_stats {
  uint64_t hits;      /* default-size blocks handed out from a cache */
  uint64_t misses;    /* default-size blocks that had to be malloc'ed */
  uint64_t overflows; /* blocks freed to malloc because the lists were full */
  uint64_t cached;    /* now: blocks kept in threads' lists and the shared one */
} rrpc_iobuf_block_cache_stats;

/* rrpc_iobuf_block_cache_stats_get - a snapshot of the counters (each one
 * read on its own, not all at one instant). Any thread; takes a lock. */
void rrpc_iobuf_block_cache_stats_get(rrpc_iobuf_block_cache_stats *out);

/* ---- lifetime ------------------------------------------------------------ */

/* rrpc_iobuf_new - allocate an empty iobuf. 0 or -ENOMEM. */
int rrpc_iobuf_new(rrpc_iobuf **out);
/* rrpc_iobuf_free - drop all references and free the iobuf. NULL is a no-op. */
void rrpc_iobuf_free(rrpc_iobuf *buf);

size_t rrpc_iobuf_length(const rrpc_iobuf *buf);
/* rrpc_iobuf_clear - drop all references; the iobuf stays usable. */
void rrpc_iobuf_clear(rrpc_iobuf *buf);
/* rrpc_iobuf_reuse - empty `buf` like clear, but keep its last block for
 * the next append when nothing else references it any more (else it is
 * dropped as by clear): a scratch iobuf refilled per call (a serialized
 * message whose bytes were copied on) then costs no malloc/free per fill.
 * The kept block (at most one) is released by clear, destroy and free. */
void rrpc_iobuf_reuse(rrpc_iobuf *buf);

/* ---- appending ----------------------------------------------------------- */

/* rrpc_iobuf_append - COPIES `len` bytes at the end. 0, -ENOMEM or the
 * allocator's error; on error nothing was appended. */
int rrpc_iobuf_append(rrpc_iobuf *buf, const void *data, size_t len);

/* rrpc_iobuf_append_iobuf - SHARES every block of `src` at the end of `buf`;
 * `src` is unchanged (buf == src doubles it). 0 or -ENOMEM (then `buf` is
 * unchanged). */
int rrpc_iobuf_append_iobuf(rrpc_iobuf *buf, const rrpc_iobuf *src);

/* rrpc_iobuf_move - MOVES all of `src` to the end of `buf` (no refcount
 * traffic); `src` becomes empty (buf == src: a no-op). 0 or -ENOMEM (then
 * both are unchanged). */
int rrpc_iobuf_move(rrpc_iobuf *buf, rrpc_iobuf *src);

/* A user deleter: runs exactly once, when the last reference to the user
 * block drops, on whichever thread drops it. */
typedef void (*rrpc_iobuf_deleter)(void *data, void *arg);

/* rrpc_iobuf_append_user - SHARES user memory [data, data+len) as one block
 * without copying. `region` is the allocator/transport cookie for that memory
 * (e.g. from rrpc_rdma_register_memory) or NULL. On success the iobuf owns the
 * memory until the deleter runs. On error (-ENOMEM, -EINVAL for len == 0 or
 * len > UINT32_MAX) nothing is appended and the deleter does NOT run: the
 * caller still owns the memory. */
int rrpc_iobuf_append_user(rrpc_iobuf *buf, void *data, size_t len, void *region,
                           rrpc_iobuf_deleter deleter, void *arg);

/* ---- taking bytes out ---------------------------------------------------- */

/* rrpc_iobuf_cut - MOVES the first min(n, length) bytes of `buf` to the end of
 * `dst` (a block split at the edge is SHARED by both; dst == buf rotates).
 * Returns the bytes moved (>= 0) or -ENOMEM (then nothing moved). */
long rrpc_iobuf_cut(rrpc_iobuf *buf, size_t n, rrpc_iobuf *dst);

/* rrpc_iobuf_pop_front - drop the first min(n, length) bytes; returns them. */
size_t rrpc_iobuf_pop_front(rrpc_iobuf *buf, size_t n);

/* rrpc_iobuf_copy_out - COPIES up to `n` bytes starting at `offset` into
 * `dst` without consuming them. Returns the bytes copied. */
size_t rrpc_iobuf_copy_out(const rrpc_iobuf *buf, size_t offset, void *dst, size_t n);

/* ---- looking at the pieces ----------------------------------------------- */

/* rrpc_iobuf_piece_count - number of (block, offset, length) references. */
size_t rrpc_iobuf_piece_count(const rrpc_iobuf *buf);

/* rrpc_iobuf_piece - the i-th piece: borrowed pointer and length, and the
 * region cookie of its block (NULL for plain malloc). Valid until `buf`
 * changes. 0, or -ERANGE if i >= piece_count. */
int rrpc_iobuf_piece(const rrpc_iobuf *buf, size_t i, const void **data, size_t *len,
                     void **region);

/* rrpc_iobuf_equals - 1 if the bytes of `buf` equal [data, data+len). */
int rrpc_iobuf_equals(const rrpc_iobuf *buf, const void *data, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_IOBUF_H */
