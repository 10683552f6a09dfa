/* iobuf.c - iobuf operations (append, share, move, cut, pop, reserve/commit, views) over the blocks of block.c. */
#include "rrpc/internal/iobuf.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "rrpc/internal/dassert.h"

/* Invariants kept by every function here:
 *  - refs[start, end) are the live refs, each with len > 0 and holding one
 *    reference on its block; slots outside that range hold nothing;
 *  - len is the sum of the live refs' lengths;
 *  - an empty iobuf has start == end == 0 (so the array is reused from the
 *    front);
 *  - a block is written only through a ref that is its sole reference and
 *    ends at block->size (see tail_room), or through the iobuf's own spare. */

static void drop_refs(rrpc_iobuf *buf) {
  for (uint32_t i = buf->start; i < buf->end; i++) rrpc__block_unref(buf->refs[i].block);
  buf->start = 0;
  buf->end = 0;
  buf->len = 0;
}

static void drop_spare(rrpc_iobuf *buf) {
  if (buf->spare) {
    rrpc__block_unref(buf->spare);
    buf->spare = NULL;
  }
}

/* Leaves `buf` empty and usable again (as if just initialized). */
void rrpc__iobuf_destroy_slow(rrpc_iobuf *buf) {
  drop_refs(buf);
  drop_spare(buf);
  if (buf->refs != buf->inline_refs) free(buf->refs);
  buf->refs = buf->inline_refs;
  buf->cap = RRPC_IOBUF_INLINE_REFS;
}

int rrpc_iobuf_new(rrpc_iobuf **out) {
  rrpc_iobuf *buf = malloc(sizeof(*buf));
  if (!buf) return -ENOMEM;
  rrpc__iobuf_init(buf);
  *out = buf;
  return 0;
}

void rrpc_iobuf_free(rrpc_iobuf *buf) {
  if (!buf) return;
  rrpc__iobuf_destroy(buf);
  free(buf);
}

size_t rrpc_iobuf_length(const rrpc_iobuf *buf) { return buf->len; }

/* The refs array and the spare are kept: a cleared iobuf is usually refilled
 * (a socket's read buffer), and destroy releases them. The spare is dropped
 * too, since clear is how callers hand memory back. */
void rrpc_iobuf_clear(rrpc_iobuf *buf) {
  drop_refs(buf);
  drop_spare(buf);
}

void rrpc_iobuf_reuse(rrpc_iobuf *buf) {
  rrpc_block *keep = NULL;
  if (buf->spare == NULL && buf->start < buf->end) {
    rrpc_iobuf_ref *r = &buf->refs[buf->end - 1];
    /* Our allocator's block (not user memory) that no other iobuf shares:
     * acquire pairs with the release in unref, as in tail_room. */
    if (r->block->alloc != NULL && atomic_load_explicit(&r->block->refs, memory_order_acquire) == 1u) {
      keep = r->block;
      buf->len -= r->len;
      buf->end--; /* its reference moves to the spare */
    }
  }
  drop_refs(buf);
  if (keep != NULL) buf->spare = keep; /* its size is reset when append takes it */
}

/* ---- the refs array ---------------------------------------------------------- */

/* ensure_room - make room for `n` more refs after `end`. Slides the live refs
 * to the front when at least half the array is dead (pop_front leaves dead
 * slots before `start`), else grows it twofold; either way each slot moved is
 * paid for by an earlier pop or push, so pushes and pops stay O(1) amortized.
 * Moves refs (and so may change start/end) but never their content.
 * 0 or -ENOMEM (then nothing changed). */
static int ensure_room_slow(rrpc_iobuf *buf, size_t n) {
  uint32_t live = buf->end - buf->start;
  if (n <= (size_t)(buf->cap - live) && buf->start >= live) {
    memmove(buf->refs, buf->refs + buf->start, (size_t)live * sizeof(*buf->refs));
    buf->start = 0;
    buf->end = live;
    return 0;
  }
  if (n > UINT32_MAX - (size_t)live) return -ENOMEM;
  size_t need = (size_t)live + n;
  size_t ncap = (size_t)buf->cap * 2;
  if (ncap < 8) ncap = 8;
  while (ncap < need) ncap *= 2;
  if (ncap > UINT32_MAX) ncap = UINT32_MAX;
  rrpc_iobuf_ref *nr = malloc(ncap * sizeof(*nr));
  if (!nr) return -ENOMEM;
  memcpy(nr, buf->refs + buf->start, (size_t)live * sizeof(*nr));
  if (buf->refs != buf->inline_refs) free(buf->refs);
  buf->refs = nr;
  buf->start = 0;
  buf->end = live;
  buf->cap = (uint32_t)ncap;
  return 0;
}

/* The usual answer (room is there) inline: a move, cut or share asks on
 * every call, and a call into ensure_room cost more than the test. */
static inline int ensure_room(rrpc_iobuf *buf, size_t n) {
  if (n <= (size_t)(buf->cap - buf->end)) return 0;
  return ensure_room_slow(buf, n);
}

/* push - append a ref that already owns its reference; room must exist. */
static void push(rrpc_iobuf *buf, rrpc_block *b, uint32_t off, uint32_t len) {
  RRPC__DASSERT(buf->end < buf->cap && len > 0);
  rrpc_iobuf_ref *r = &buf->refs[buf->end++];
  r->block = b;
  r->off = off;
  r->len = len;
  buf->len += len;
}

/* tail_room - bytes that may be written right after the last ref: only when
 * its block is referenced by that ref alone and the ref ends where the
 * block's content ends, so no other iobuf can see the bytes written. */
static uint32_t tail_room(const rrpc_iobuf *buf) {
  if (buf->start == buf->end) return 0;
  const rrpc_iobuf_ref *r = &buf->refs[buf->end - 1];
  rrpc_block *b = r->block;
  if (r->off + r->len != b->size || b->size >= b->cap) return 0;
  /* Acquire pairs with the release in unref: whoever shared the block is
   * done with it once we see the count back at 1. */
  if (atomic_load_explicit(&b->refs, memory_order_acquire) != 1u) return 0;
  return b->cap - b->size;
}

/* ---- appending --------------------------------------------------------------- */

/* new_block - a block for append: the spare kept by reuse when the current
 * allocator made it (it is solely ours: reuse checked, and nobody saw it
 * since), else a new one of the default size. */
static int new_block(rrpc_iobuf *buf, rrpc_block **out) {
  rrpc_block *b = buf->spare;
  if (b != NULL && b->alloc == rrpc_block_allocator_get()) {
    buf->spare = NULL;
    b->size = 0;
    *out = b;
    return 0;
  }
  return rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, out);
}

int rrpc_iobuf_append(rrpc_iobuf *buf, const void *data, size_t len) {
  if (len == 0) return 0;
  /* An empty iobuf whose spare (kept by rrpc_iobuf_reuse) holds it all: a
   * scratch iobuf refilled per call with one small message (the C++ face
   * serializes each request and response so). What new_block and push do
   * below, without the tail and room checks, the block count and the loop:
   * an empty iobuf has no tail, and its array has room for one ref. */
  rrpc_block *spare = buf->spare;
  if (buf->end == 0 && spare != NULL && len <= spare->cap && spare->alloc == rrpc_block_allocator_get()) {
    buf->spare = NULL;
    memcpy(spare->data, data, len);
    spare->size = (uint32_t)len;
    push(buf, spare, 0, (uint32_t)len);
    return 0;
  }
  const char *src = data;
  size_t room = tail_room(buf);
  size_t head = len < room ? len : room; /* bytes for the tail of the last block */
  size_t rest = len - head;

  /* Fresh blocks are asked for at the default size: every allocator (the
   * RDMA pool included) can give that, and bigger pieces would not help
   * writev or a scatter list much. An allocator that gives more is used to
   * its full cap, so this count is an upper bound. */
  if (rest) {
    size_t nblocks = rest / RRPC_IOBUF_DEFAULT_BLOCK_SIZE + (rest % RRPC_IOBUF_DEFAULT_BLOCK_SIZE != 0);
    int rc = ensure_room(buf, nblocks);
    if (rc < 0) return rc;
  }

  /* New blocks first, the tail last: on an allocation failure only the new
   * blocks need undoing. Indices, since ensure_room was the last move. */
  uint32_t first_new = buf->end;
  size_t old_len = buf->len;
  const char *p = src + head;
  while (rest) {
    rrpc_block *b;
    int rc = new_block(buf, &b);
    if (rc < 0) {
      while (buf->end > first_new) rrpc__block_unref(buf->refs[--buf->end].block);
      buf->len = old_len;
      return rc;
    }
    uint32_t m = rest < b->cap ? (uint32_t)rest : b->cap;
    memcpy(b->data, p, m);
    b->size = m;
    push(buf, b, 0, m);
    p += m;
    rest -= m;
  }

  if (head) {
    rrpc_iobuf_ref *r = &buf->refs[first_new - 1];
    memcpy(r->block->data + r->block->size, src, head);
    r->block->size += (uint32_t)head;
    r->len += (uint32_t)head;
    buf->len += head;
  }
  return 0;
}

/* append_iobuf of n > 1 pieces. */
static __attribute__((noinline)) int append_refs(rrpc_iobuf *buf, const rrpc_iobuf *src, uint32_t n) {
  /* When buf == src this may move src's refs too; read them after it. */
  int rc = ensure_room(buf, n);
  if (rc < 0) return rc;
  for (uint32_t i = 0; i < n; i++) {
    const rrpc_iobuf_ref *r = &src->refs[src->start + i];
    rrpc__block_ref(r->block);
    push(buf, r->block, r->off, r->len);
  }
  return 0;
}

int rrpc_iobuf_append_iobuf(rrpc_iobuf *buf, const rrpc_iobuf *src) {
  uint32_t n = src->end - src->start;
  if (n == 0) return 0;
  if (n > 1) return append_refs(buf, src, n);
  /* One piece (an attachment, a small message: the usual case) without a
   * loop or a call: its reference is taken here as rrpc__block_ref takes it
   * (relaxed: src holds one), so nothing is saved around a call (the
   * general path cost ~45 instructions for one piece). */
  int rc = ensure_room(buf, 1);
  if (rc < 0) return rc;
  const rrpc_iobuf_ref *r = &src->refs[src->start];
  atomic_fetch_add_explicit(&r->block->refs, 1u, memory_order_relaxed);
  push(buf, r->block, r->off, r->len);
  return 0;
}

/* rrpc_iobuf_move for several pieces, or one into a full array. */
static __attribute__((noinline)) int move_slow(rrpc_iobuf *buf, rrpc_iobuf *src, uint32_t n) {
  if (buf->start == buf->end && src->refs != src->inline_refs) {
    /* buf is empty: take src's heap array whole instead of copying. */
    if (buf->refs != buf->inline_refs) free(buf->refs);
    buf->refs = src->refs;
    buf->start = src->start;
    buf->end = src->end;
    buf->cap = src->cap;
    buf->len = src->len;
    src->refs = src->inline_refs;
    src->cap = RRPC_IOBUF_INLINE_REFS;
  } else {
    int rc = ensure_room(buf, n);
    if (rc < 0) return rc;
    if (n == 1) /* a message in one piece, the usual case: no memcpy call */
      buf->refs[buf->end] = src->refs[src->start];
    else
      memcpy(buf->refs + buf->end, src->refs + src->start, (size_t)n * sizeof(*buf->refs));
    buf->end += n;
    buf->len += src->len;
  }
  src->start = 0;
  src->end = 0;
  src->len = 0;
  return 0;
}

int rrpc__iobuf_move_trade(rrpc_iobuf *buf, rrpc_iobuf *src) {
  if (buf == src || buf->start != buf->end || src->start == src->end || src->refs == src->inline_refs ||
      buf->refs == buf->inline_refs)
    return rrpc_iobuf_move(buf, src);
  rrpc_iobuf_ref *old = buf->refs;
  uint32_t old_cap = buf->cap;
  buf->refs = src->refs;
  buf->start = src->start;
  buf->end = src->end;
  buf->cap = src->cap;
  buf->len = src->len;
  src->refs = old;
  src->cap = old_cap;
  src->start = 0;
  src->end = 0;
  src->len = 0;
  return 0;
}

/* One piece into room, the usual case (a message, a response's body, a
 * request queued for writing; ~3 a call), touches only the two refs and
 * saves no registers: the general path's prologue and tests were ~55
 * instructions a move. */
int rrpc_iobuf_move(rrpc_iobuf *buf, rrpc_iobuf *src) {
  if (buf == src) return 0;
  uint32_t n = src->end - src->start;
  if (n != 1 || buf->end == buf->cap) return n == 0 ? 0 : move_slow(buf, src, n);
  buf->refs[buf->end++] = src->refs[src->start];
  buf->len += src->len;
  src->start = 0;
  src->end = 0;
  src->len = 0;
  return 0;
}

int rrpc_iobuf_append_user(rrpc_iobuf *buf, void *data, size_t len, void *region,
                           rrpc_iobuf_deleter deleter, void *arg) {
  if (len == 0 || len > UINT32_MAX) return -EINVAL;
  /* Room first: once the block exists, nothing may fail (the deleter must
   * not run on an error path, and the caller keeps the memory). */
  int rc = ensure_room(buf, 1);
  if (rc < 0) return rc;
  rrpc_block *b;
  rc = rrpc__block_new_user(data, len, region, deleter, arg, &b);
  if (rc < 0) return rc;
  push(buf, b, 0, (uint32_t)len);
  return 0;
}

int rrpc__iobuf_append_block(rrpc_iobuf *buf, rrpc_block *b, uint32_t off, uint32_t len) {
  if (len == 0) return 0;
  if (off > b->size || len > b->size - off) return -EINVAL;
  int rc = ensure_room(buf, 1);
  if (rc < 0) return rc;
  rrpc__block_ref(b);
  push(buf, b, off, len);
  return 0;
}

int rrpc__iobuf_append_new(rrpc_iobuf *buf, rrpc_block *b, uint32_t n) {
  RRPC__DASSERT(n > 0 && n <= b->cap);
  int rc = ensure_room(buf, 1);
  if (rc < 0) return rc;
  b->size = n;
  push(buf, b, 0, n);
  return 0;
}

/* ---- taking bytes out -------------------------------------------------------- */

long rrpc_iobuf_cut(rrpc_iobuf *buf, size_t n, rrpc_iobuf *dst) {
  if (n > buf->len) n = buf->len;
  if (n > LONG_MAX) n = LONG_MAX;
  if (n == 0) return 0;
  if (n == buf->len && buf != dst) {
    int rc = rrpc_iobuf_move(dst, buf);
    return rc < 0 ? rc : (long)n;
  }

  /* k whole refs move; `part` bytes of the next one are shared. */
  uint32_t live = buf->end - buf->start;
  uint32_t k = 0;
  size_t whole = 0;
  while (k < live && whole + buf->refs[buf->start + k].len <= n) whole += buf->refs[buf->start + k++].len;
  uint32_t part = (uint32_t)(n - whole);

  /* When dst == buf (a rotation) this may move buf's refs: index after it. */
  int rc = ensure_room(dst, (size_t)k + (part != 0));
  if (rc < 0) return rc;
  /* Source [start, start+k) and target [end, end+k) never overlap, even
   * when dst == buf. */
  memcpy(dst->refs + dst->end, buf->refs + buf->start, (size_t)k * sizeof(*dst->refs));
  dst->end += k;
  dst->len += whole;
  if (part) {
    rrpc_iobuf_ref *r = &buf->refs[buf->start + k];
    rrpc__block_ref(r->block);
    push(dst, r->block, r->off, part);
    r->off += part;
    r->len -= part;
  }
  buf->start += k;
  buf->len -= n;
  if (buf->start == buf->end) buf->start = buf->end = 0;
  return (long)n;
}

void rrpc__iobuf_truncate(rrpc_iobuf *buf, size_t n) {
  if (n >= buf->len) return;
  size_t drop = buf->len - n;
  while (drop > 0) {
    rrpc_iobuf_ref *r = &buf->refs[buf->end - 1];
    rrpc_block *b = r->block;
    uint32_t d = r->len <= drop ? r->len : (uint32_t)drop;
    if (r->off + r->len == b->size && atomic_load_explicit(&b->refs, memory_order_acquire) == 1u)
      b->size -= d; /* the tail this ref wrote last: free for the next reserve */
    if (d == r->len) {
      rrpc__block_unref(b);
      buf->end--;
    } else {
      r->len -= d;
    }
    drop -= d;
  }
  buf->len = n;
  if (buf->start == buf->end) buf->start = buf->end = 0;
}

size_t rrpc_iobuf_pop_front(rrpc_iobuf *buf, size_t n) {
  if (n > buf->len) n = buf->len;
  size_t left = n;
  while (left) {
    rrpc_iobuf_ref *r = &buf->refs[buf->start];
    if (r->len <= left) {
      left -= r->len;
      rrpc__block_unref(r->block);
      buf->start++;
    } else {
      r->off += (uint32_t)left;
      r->len -= (uint32_t)left;
      left = 0;
    }
  }
  buf->len -= n;
  if (buf->start == buf->end) buf->start = buf->end = 0;
  return n;
}

/* The whole frame in buf's first piece: no walk over refs, no pop. The
 * piece that ends where the frame ends hands its reference to the last
 * destination (no ref/unref pair); pieces left before it get one each. */
static int cut_frame_in_piece(rrpc_iobuf *buf, size_t skip, size_t n1, rrpc_iobuf *d1, size_t n2,
                              rrpc_iobuf *d2) {
  rrpc_iobuf_ref *r = &buf->refs[buf->start];
  rrpc_block *b = r->block;
  size_t total = skip + n1 + n2;
  int steal = r->len == total;
  if ((n1 && ensure_room(d1, 1) < 0) || (n2 && ensure_room(d2, 1) < 0)) return -ENOMEM;
  uint32_t off = r->off + (uint32_t)skip;
  if (n1) {
    if (!steal || n2) rrpc__block_ref(b);
    push(d1, b, off, (uint32_t)n1);
  }
  if (n2) {
    if (!steal) rrpc__block_ref(b);
    push(d2, b, off + (uint32_t)n1, (uint32_t)n2);
  }
  if (steal) {
    if (!n1 && !n2) rrpc__block_unref(b);
    buf->start++;
  } else {
    r->off += (uint32_t)total;
    r->len -= (uint32_t)total;
  }
  buf->len -= total;
  if (buf->start == buf->end) buf->start = buf->end = 0;
  return 0;
}

int rrpc__iobuf_cut_frame(rrpc_iobuf *buf, size_t skip, size_t n1, rrpc_iobuf *d1, size_t n2,
                          rrpc_iobuf *d2) {
  RRPC__DASSERT(d1 != buf && d2 != buf && (d1 != d2 || n2 == 0) && skip + n1 + n2 <= buf->len);
  if (buf->start != buf->end && buf->refs[buf->start].len >= skip + n1 + n2)
    return cut_frame_in_piece(buf, skip, n1, d1, n2, d2);
  rrpc_iobuf_pop_front(buf, skip);
  long moved = rrpc_iobuf_cut(buf, n1, d1);
  if (moved >= 0 && n2) moved = rrpc_iobuf_cut(buf, n2, d2);
  return moved < 0 ? (int)moved : 0;
}

size_t rrpc_iobuf_copy_out(const rrpc_iobuf *buf, size_t offset, void *dst, size_t n) {
  if (offset >= buf->len) return 0;
  if (n > buf->len - offset) n = buf->len - offset;
  char *out = dst;
  size_t done = 0;
  for (uint32_t i = buf->start; i < buf->end && done < n; i++) {
    const rrpc_iobuf_ref *r = &buf->refs[i];
    if (offset >= r->len) {
      offset -= r->len;
      continue;
    }
    size_t m = r->len - offset;
    if (m > n - done) m = n - done;
    memcpy(out + done, r->block->data + r->off + offset, m);
    done += m;
    offset = 0;
  }
  return done;
}

/* ---- reading into the tail -------------------------------------------------- */

int rrpc__iobuf_reserve(rrpc_iobuf *buf, size_t min_size, void **ptr, size_t *avail) {
  return rrpc__iobuf_reserve_from(buf, min_size, rrpc_block_allocator_get(), ptr, avail);
}

int rrpc__iobuf_reserve_from(rrpc_iobuf *buf, size_t min_size, const rrpc_block_allocator *a,
                             void **ptr, size_t *avail) {
  if (min_size > UINT32_MAX) return -EINVAL;
  uint32_t room = tail_room(buf);
  if (room > 0 && room >= min_size) {
    /* commit tells the two cases apart by the spare: none means the tail. */
    drop_spare(buf);
    rrpc_block *b = buf->refs[buf->end - 1].block;
    *ptr = b->data + b->size;
    *avail = room;
    return 0;
  }
  /* commit cannot fail, so the ref slot it will fill is made now. */
  int rc = ensure_room(buf, 1);
  if (rc < 0) return rc;
  if (!buf->spare || buf->spare->cap < min_size || buf->spare->alloc != a) {
    rrpc_block *b;
    rc = rrpc__block_alloc_from(a, min_size, &b);
    if (rc < 0) return rc;
    drop_spare(buf);
    buf->spare = b;
  }
  *ptr = buf->spare->data;
  *avail = buf->spare->cap;
  return 0;
}

void *rrpc__iobuf_tail(rrpc_iobuf *buf, size_t min_size) {
  if (buf->spare != NULL) return NULL;
  uint32_t room = tail_room(buf);
  if (room == 0 || room < min_size) return NULL;
  rrpc_block *b = buf->refs[buf->end - 1].block;
  return b->data + b->size;
}

void rrpc__iobuf_commit(rrpc_iobuf *buf, size_t n) {
  if (n == 0) return;
  rrpc_block *b = buf->spare;
  if (b) {
    RRPC__DASSERT(n <= b->cap);
    buf->spare = NULL;
    b->size = (uint32_t)n;
    push(buf, b, 0, (uint32_t)n);
    return;
  }
  RRPC__DASSERT(buf->start < buf->end);
  rrpc_iobuf_ref *r = &buf->refs[buf->end - 1];
  b = r->block;
  RRPC__DASSERT(r->off + r->len == b->size && n <= (size_t)(b->cap - b->size));
  b->size += (uint32_t)n;
  r->len += (uint32_t)n;
  buf->len += n;
}

/* ---- looking at the pieces --------------------------------------------------- */

size_t rrpc_iobuf_piece_count(const rrpc_iobuf *buf) { return buf->end - buf->start; }

int rrpc_iobuf_piece(const rrpc_iobuf *buf, size_t i, const void **data, size_t *len,
                     void **region) {
  const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(buf, i);
  if (!r) return -ERANGE;
  if (data) *data = r->block->data + r->off;
  if (len) *len = r->len;
  if (region) *region = r->block->region;
  return 0;
}

int rrpc_iobuf_equals(const rrpc_iobuf *buf, const void *data, size_t len) {
  if (len != buf->len) return 0;
  const char *p = data;
  for (uint32_t i = buf->start; i < buf->end; i++) {
    const rrpc_iobuf_ref *r = &buf->refs[i];
    if (memcmp(r->block->data + r->off, p, r->len) != 0) return 0;
    p += r->len;
  }
  return 1;
}

int rrpc__iobuf_fill_iov(const rrpc_iobuf *buf, struct iovec *iov, int max, size_t *bytes) {
  int n = 0;
  size_t sum = 0;
  for (uint32_t i = buf->start; i < buf->end && n < max; i++, n++) {
    const rrpc_iobuf_ref *r = &buf->refs[i];
    iov[n].iov_base = r->block->data + r->off;
    iov[n].iov_len = r->len;
    sum += r->len;
  }
  if (bytes) *bytes = sum;
  return n;
}

const void *rrpc__iobuf_contiguous(const rrpc_iobuf *buf, size_t n, void *scratch) {
  if (buf->len < n) return NULL;
  if (buf->start == buf->end) return scratch; /* n == 0 and nothing to borrow */
  const rrpc_iobuf_ref *r = &buf->refs[buf->start];
  if (r->len >= n) return r->block->data + r->off;
  rrpc_iobuf_copy_out(buf, 0, scratch, n);
  return scratch;
}
