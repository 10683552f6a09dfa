/* internal/iobuf.h - private to rrpc and its transports: the iobuf layout
 * (so the core can embed iobufs without a heap allocation each) and the
 * operations the I/O paths need (read into a tail block, slice blocks).
 * Applications use rrpc/iobuf.h only. */
#ifndef RRPC_INTERNAL_IOBUF_H
#define RRPC_INTERNAL_IOBUF_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/iobuf.h"

/* C++ tests include this header too; C11's atomic_uint is not a C++17 type,
 * so C++ sees the layout-compatible std::atomic<unsigned> (read it with
 * .load()). Only the C library code changes refcounts. */
#ifdef __cplusplus
#include <atomic>
typedef std::atomic<unsigned> rrpc__atomic_uint;
extern "C" {
#else
#include <stdatomic.h>
typedef atomic_uint rrpc__atomic_uint;
#endif

/* A block: header outside the data. Refcounted; freed by its allocator or by
 * the user deleter when the count drops to zero. */
typedef struct rrpc_block {
  rrpc__atomic_uint refs;
  uint32_t cap;  /* usable bytes at data */
  uint32_t size; /* bytes written so far (only the sole owner appends) */
  char *data;
  void *region;                         /* allocator/transport cookie */
  const rrpc_block_allocator *alloc;    /* NULL for user blocks */
  rrpc_iobuf_deleter deleter;           /* user blocks only */
  void *deleter_arg;
} rrpc_block;

typedef struct rrpc_iobuf_ref {
  rrpc_block *block; /* one reference counted per ref */
  uint32_t off;
  uint32_t len;
} rrpc_iobuf_ref;

/* 4: a request frame (header+meta, payload, attachment) fits without a
 * heap array, so a call neither mallocs one nor frees the write queue's. */
#define RRPC_IOBUF_INLINE_REFS 4

struct rrpc_iobuf {
  rrpc_iobuf_ref *refs; /* points at inline_refs until it grows */
  uint32_t start;       /* first live ref (refs before it were popped) */
  uint32_t end;         /* one past the last live ref */
  uint32_t cap;
  size_t len;
  rrpc_iobuf_ref inline_refs[RRPC_IOBUF_INLINE_REFS];
  rrpc_block *spare; /* owned ref: block handed out by reserve, not yet
                        committed (kept for the next reserve), or NULL */
};

/* Embedded iobufs: init makes an empty one; destroy drops its references
 * and leaves it empty and usable. Neither allocates nor fails. Inline: a
 * call embeds several iobufs that are usually empty at the end (their
 * contents moved on), so the common case is a few loads, not a call. */
static inline void rrpc__iobuf_init(rrpc_iobuf *buf) {
  buf->refs = buf->inline_refs;
  buf->start = 0;
  buf->end = 0;
  buf->cap = RRPC_IOBUF_INLINE_REFS;
  buf->len = 0;
  buf->spare = NULL;
}
void rrpc__iobuf_destroy_slow(rrpc_iobuf *buf);

/* rrpc_iobuf_length for the core, inline: the call path asks about ten
 * times a call, and the exported function is a call each. */
static inline size_t rrpc__iobuf_length(const rrpc_iobuf *buf) { return buf->len; }
static inline void rrpc__iobuf_destroy(rrpc_iobuf *buf) {
  /* Empty (start == end == 0), no spare, no heap array: nothing to do. */
  if (buf->end == 0 && buf->spare == NULL && buf->refs == buf->inline_refs) return;
  rrpc__iobuf_destroy_slow(buf);
}

/* rrpc__iobuf_move_trade - rrpc_iobuf_move for two iobufs that live as long
 * as each other (a socket's write queue and its pending writes): when buf
 * is empty and src's refs are a heap array, buf takes that array and src
 * gets buf's own heap array, if it had one, instead of buf freeing it - the
 * queue then refills without growing its array again (a malloc and a free
 * per batch of queued responses). Otherwise as rrpc_iobuf_move. */
int rrpc__iobuf_move_trade(rrpc_iobuf *buf, rrpc_iobuf *src);

/* Blocks. alloc makes a block with refs = 1 and size = 0 from the current
 * allocator (cap >= size; size 0 or less than the default block size gets
 * the default). 0, -EINVAL (size > UINT32_MAX) or the allocator's error.
 * ref/unref are atomic and callable from any thread. */
int rrpc__block_alloc(size_t size, rrpc_block **out);
/* rrpc__block_allocator_is_default - 1 while new blocks come from malloc
 * (nobody called rrpc_block_allocator_set with an allocator). */
int rrpc__block_allocator_is_default(void);
/* rrpc__block_alloc_from - the same from allocator `a`.
 * rrpc__block_host_allocator - plain malloc, whatever the current allocator
 * is: for memory no device needs to see (TCP read buffers), so that a peer
 * cannot spend registered (pinned) memory by sending over TCP. */
int rrpc__block_alloc_from(const rrpc_block_allocator *a, size_t size, rrpc_block **out);
const rrpc_block_allocator *rrpc__block_host_allocator(void);
/* rrpc__block_new_user - wrap user memory as a block with refs = 1 (no
 * copy). On error the deleter does not run. */
int rrpc__block_new_user(void *data, size_t len, void *region, rrpc_iobuf_deleter deleter,
                         void *arg, rrpc_block **out);
/* rrpc__block_cache_thread_count - default-size blocks in the calling
 * thread's own cache list (tests check the per-thread bound with it). */
unsigned rrpc__block_cache_thread_count(void);
void rrpc__block_ref(rrpc_block *b);
void rrpc__block_unref(rrpc_block *b);

/* rrpc__iobuf_append_block - SHARES [off, off+len) of `b`: takes one new
 * reference on success (the caller keeps its own). len == 0 appends nothing.
 * 0, -EINVAL if the range passes b->size, or -ENOMEM (then unchanged). */
int rrpc__iobuf_append_block(rrpc_iobuf *buf, rrpc_block *b, uint32_t off, uint32_t len);

/* rrpc__iobuf_append_new - append [0, n) of `b`, a block the caller made
 * (refs = 1, n <= b->cap) and wrote, taking over its reference: b->size
 * becomes n, and nothing else may write the block after. For a frame built
 * straight into a fresh block (no reserve and commit). 0, or -ENOMEM (the
 * reference stays the caller's). */
int rrpc__iobuf_append_new(rrpc_iobuf *buf, rrpc_block *b, uint32_t n);

/* Reading into an iobuf without an extra copy:
 * rrpc__iobuf_reserve gives writable space at the end of the last block if it
 * is solely owned and has room, else in a new block (>= min_size bytes, at
 * least the default block size). Nothing is appended until commit.
 * 0, -EINVAL (min_size > UINT32_MAX), -ENOMEM or the allocator's error.
 * rrpc__iobuf_commit appends `n` (<= *avail) bytes that were written there.
 * `buf` must not change between the two; a reserve not followed by commit
 * (or commit(0)) appends nothing, and its block is kept for the next reserve
 * (released by clear/destroy). */
int rrpc__iobuf_reserve(rrpc_iobuf *buf, size_t min_size, void **ptr, size_t *avail);
/* rrpc__iobuf_reserve_from - the same, a new block (if one is needed) coming
 * from allocator `a` (a spare from another allocator is not reused). */
int rrpc__iobuf_reserve_from(rrpc_iobuf *buf, size_t min_size, const rrpc_block_allocator *a,
                             void **ptr, size_t *avail);
void rrpc__iobuf_commit(rrpc_iobuf *buf, size_t n);
/* rrpc__iobuf_tail - the free tail of the last block when it is solely
 * owned, has at least min_size bytes and `buf` keeps no spare block (then
 * rrpc__iobuf_commit appends what was written there), else NULL: reserve's
 * first case alone, for a writer that makes its own block otherwise. */
void *rrpc__iobuf_tail(rrpc_iobuf *buf, size_t min_size);

/* rrpc__iobuf_truncate - keep the first n bytes, drop the rest (nothing when
 * n >= the length): a writer that appended a message and must take it back
 * (a socket whose limit refused it). Bytes dropped from the end of a block
 * this iobuf owns alone are given back to the block, so the next reserve
 * reuses them. */
void rrpc__iobuf_truncate(rrpc_iobuf *buf, size_t n);

/* rrpc__iobuf_fill_iov - fill up to `max` iovecs from the front of `buf`
 * (borrowed pointers). Returns how many were filled; *bytes gets their sum. */
struct iovec;
int rrpc__iobuf_fill_iov(const rrpc_iobuf *buf, struct iovec *iov, int max, size_t *bytes);

/* rrpc__iobuf_cut_frame - a framed read's message in one call: drop `skip`
 * bytes off the front of `buf` (a header), then cut the next `n1` bytes to
 * the end of `d1` and the `n2` after them to the end of `d2` (d2 may be
 * NULL when n2 is 0), as rrpc_iobuf_pop_front and two rrpc_iobuf_cut
 * would; neither destination may be `buf`, nor d2 be d1. All of it must be there
 * (skip + n1 + n2 <= length). 0, or -ENOMEM with part of it gone. When it
 * all lies in the first piece (a read brings a small message whole) the
 * pieces are made at once and the last takes over `buf`'s reference. */
int rrpc__iobuf_cut_frame(rrpc_iobuf *buf, size_t skip, size_t n1, rrpc_iobuf *d1, size_t n2,
                          rrpc_iobuf *d2);

/* rrpc__iobuf_ref_at - the i-th live ref (borrowed), or NULL past the end. */
static inline const rrpc_iobuf_ref *rrpc__iobuf_ref_at(const rrpc_iobuf *buf, size_t i) {
  return (buf->start + i < buf->end) ? &buf->refs[buf->start + i] : NULL;
}

/* rrpc__iobuf_first_byte - the first byte, or -1 when the iobuf is empty.
 * Inline: a read callback asks it of every read (is the next frame a
 * remote-memory one?), and copy_out's general walk cost ~70 instructions
 * for the one byte. */
static inline int rrpc__iobuf_first_byte(const rrpc_iobuf *buf) {
  for (uint32_t i = buf->start; i < buf->end; i++)
    if (buf->refs[i].len > 0) return (uint8_t)buf->refs[i].block->data[buf->refs[i].off];
  return -1;
}

/* rrpc__iobuf_contiguous - if the first `n` bytes lie in one piece, return a
 * borrowed pointer to them; else copy them into `scratch` (>= n bytes) and
 * return scratch. NULL if the iobuf holds fewer than n bytes. */
const void *rrpc__iobuf_contiguous(const rrpc_iobuf *buf, size_t n, void *scratch);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_IOBUF_H */
