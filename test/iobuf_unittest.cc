// iobuf_unittest.cc - tests of the iobuf and its blocks/allocator (src/rrpc/core/iobuf.c, block.c).
#include <gtest/gtest.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/errors.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/iobuf.h"
#include "rrpc/log.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#include <sanitizer/asan_interface.h>
#endif
#endif

namespace {

struct BufFree {
  void operator()(rrpc_iobuf *b) const { rrpc_iobuf_free(b); }
};
using Buf = std::unique_ptr<rrpc_iobuf, BufFree>;

Buf NewBuf() {
  rrpc_iobuf *b = nullptr;
  EXPECT_EQ(0, rrpc_iobuf_new(&b));
  return Buf(b);
}

std::string Content(const rrpc_iobuf *b) {
  std::string s(rrpc_iobuf_length(b), '\0');
  EXPECT_EQ(s.size(), rrpc_iobuf_copy_out(b, 0, &s[0], s.size()));
  return s;
}

// Checks the piece view agrees with the length and the bytes.
void ExpectConsistent(const rrpc_iobuf *b, const std::string &want) {
  ASSERT_EQ(want.size(), rrpc_iobuf_length(b));
  std::string via_pieces;
  for (size_t i = 0; i < rrpc_iobuf_piece_count(b); i++) {
    const void *d;
    size_t n;
    void *region;
    ASSERT_EQ(0, rrpc_iobuf_piece(b, i, &d, &n, &region));
    ASSERT_GT(n, 0u);
    via_pieces.append(static_cast<const char *>(d), n);
  }
  ASSERT_EQ(want, via_pieces);
  ASSERT_TRUE(rrpc_iobuf_equals(b, want.data(), want.size()));
}

std::string RandomBytes(std::mt19937 &rng, size_t n) {
  std::string s(n, '\0');
  for (auto &c : s) c = static_cast<char>(rng());
  return s;
}

unsigned Refs(const rrpc_iobuf *b, size_t i) {
  const rrpc_iobuf_ref *r = rrpc__iobuf_ref_at(b, i);
  EXPECT_NE(nullptr, r);
  return r ? r->block->refs.load() : 0;
}

rrpc_block *BlockOf(const rrpc_iobuf *b, size_t i) { return rrpc__iobuf_ref_at(b, i)->block; }

// ---- a counting allocator that can be told to fail ---------------------------

struct CountingAlloc {
  std::atomic<long> allocs{0};
  std::atomic<long> frees{0};
  std::atomic<long> live_bytes{0};
  std::atomic<long> fail_after{-1};  // allocations left before failing; -1 never
  int fail_code = -ENOMEM;
  char cookie = 0;  // &cookie is the region
  rrpc_block_allocator table{};

  CountingAlloc() {
    table.name = "counting";
    table.alloc = &CountingAlloc::Alloc;
    table.free = &CountingAlloc::Free;
    table.ctx = this;
  }
  static int Alloc(void *ctx, size_t size, void **data, size_t *cap, void **region) {
    auto *self = static_cast<CountingAlloc *>(ctx);
    long left = self->fail_after.load();
    if (left == 0) return self->fail_code;
    if (left > 0) self->fail_after.fetch_sub(1);
    // Hand out a little more than asked, as pools that round up do.
    size_t c = size + 100;
    *data = malloc(c);
    if (!*data) return -ENOMEM;
    *cap = c;
    *region = &self->cookie;
    self->allocs++;
    self->live_bytes += static_cast<long>(c);
    return 0;
  }
  static void Free(void *ctx, void *data, size_t cap, void *region) {
    auto *self = static_cast<CountingAlloc *>(ctx);
    EXPECT_EQ(&self->cookie, region);
    self->frees++;
    self->live_bytes -= static_cast<long>(cap);
    free(data);
  }
};

// Installs an allocator for one test and restores malloc after.
struct AllocScope {
  explicit AllocScope(const rrpc_block_allocator *a) { rrpc_block_allocator_set(a); }
  ~AllocScope() { rrpc_block_allocator_set(nullptr); }
};

// ---- user blocks ------------------------------------------------------------------

struct UserMem {
  std::string bytes;
  std::atomic<int> deleted{0};
  static void Deleter(void *data, void *arg) {
    auto *self = static_cast<UserMem *>(arg);
    EXPECT_EQ(static_cast<void *>(&self->bytes[0]), data);
    self->deleted++;
  }
};

// ---- basics ------------------------------------------------------------------------

TEST(IobufTest, EmptyAndBasics) {
  Buf b = NewBuf();
  EXPECT_EQ(0u, rrpc_iobuf_length(b.get()));
  EXPECT_EQ(0u, rrpc_iobuf_piece_count(b.get()));
  EXPECT_TRUE(rrpc_iobuf_equals(b.get(), nullptr, 0));
  EXPECT_FALSE(rrpc_iobuf_equals(b.get(), "x", 1));
  const void *d;
  size_t n;
  void *region;
  EXPECT_EQ(-ERANGE, rrpc_iobuf_piece(b.get(), 0, &d, &n, &region));
  EXPECT_EQ(0, rrpc_iobuf_append(b.get(), "hello", 0));
  EXPECT_EQ(0u, rrpc_iobuf_piece_count(b.get()));

  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "hello ", 6));
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "world", 5));
  ExpectConsistent(b.get(), "hello world");
  // Both appends landed in one malloc block (the tail was free and ours).
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(b.get()));
  ASSERT_EQ(0, rrpc_iobuf_piece(b.get(), 0, &d, &n, &region));
  EXPECT_EQ(nullptr, region);
  EXPECT_EQ(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, BlockOf(b.get(), 0)->cap);
  EXPECT_FALSE(rrpc_iobuf_equals(b.get(), "hello worle", 11));
  EXPECT_FALSE(rrpc_iobuf_equals(b.get(), "hello worl", 10));

  char out[16] = {};
  EXPECT_EQ(5u, rrpc_iobuf_copy_out(b.get(), 6, out, sizeof(out)));
  EXPECT_EQ(0, memcmp(out, "world", 5));
  EXPECT_EQ(0u, rrpc_iobuf_copy_out(b.get(), 11, out, 4));
  EXPECT_EQ(0u, rrpc_iobuf_copy_out(b.get(), 100, out, 4));
  EXPECT_EQ(11u, rrpc_iobuf_length(b.get()));  // copy_out consumes nothing

  EXPECT_EQ(6u, rrpc_iobuf_pop_front(b.get(), 6));
  ExpectConsistent(b.get(), "world");
  EXPECT_EQ(5u, rrpc_iobuf_pop_front(b.get(), 100));
  ExpectConsistent(b.get(), "");

  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "again", 5));
  rrpc_iobuf_clear(b.get());
  ExpectConsistent(b.get(), "");
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "still usable", 12));
  ExpectConsistent(b.get(), "still usable");
  rrpc_iobuf_free(nullptr);  // a no-op
}

TEST(IobufTest, EmbeddedInitDestroy) {
  rrpc_iobuf b;
  rrpc__iobuf_init(&b);
  EXPECT_EQ(0u, rrpc_iobuf_length(&b));
  std::string big(3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 17, 'e');
  ASSERT_EQ(0, rrpc_iobuf_append(&b, big.data(), big.size()));
  ExpectConsistent(&b, big);
  EXPECT_EQ(4u, rrpc_iobuf_piece_count(&b));  // the refs array grew past the inline two
  rrpc__iobuf_destroy(&b);                    // ASan reports anything left behind
  EXPECT_EQ(0u, rrpc_iobuf_length(&b));
}

// ---- sharing ---------------------------------------------------------------------------

TEST(IobufTest, AppendIobufSharesBlocksAndMutationsStayApart) {
  Buf a = NewBuf(), b = NewBuf();
  std::mt19937 rng(1);
  std::string s = RandomBytes(rng, 2 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 100);
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
  ASSERT_EQ(3u, rrpc_iobuf_piece_count(a.get()));
  for (size_t i = 0; i < 3; i++) EXPECT_EQ(1u, Refs(a.get(), i));

  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(b.get(), a.get()));
  ExpectConsistent(a.get(), s);
  ExpectConsistent(b.get(), s);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(BlockOf(a.get(), i), BlockOf(b.get(), i));  // shared, not copied
    EXPECT_EQ(2u, Refs(a.get(), i));
  }

  // The last block has free room, but it is shared: appending to either side
  // must not write into it.
  rrpc_block *last = BlockOf(a.get(), 2);
  uint32_t size_before = last->size;
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "AAAA", 4));
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "BBBBBB", 6));
  EXPECT_EQ(size_before, last->size);
  EXPECT_EQ(4u, rrpc_iobuf_piece_count(a.get()));
  EXPECT_EQ(4u, rrpc_iobuf_piece_count(b.get()));
  ExpectConsistent(a.get(), s + "AAAA");
  ExpectConsistent(b.get(), s + "BBBBBB");

  // Popping from one side drops only its references.
  EXPECT_EQ(RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 1, rrpc_iobuf_pop_front(a.get(), RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 1));
  EXPECT_EQ(1u, Refs(b.get(), 0));
  EXPECT_EQ(2u, Refs(b.get(), 1));
  ExpectConsistent(a.get(), s.substr(RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 1) + "AAAA");
  ExpectConsistent(b.get(), s + "BBBBBB");

  rrpc_iobuf_clear(a.get());
  for (size_t i = 0; i < 4; i++) EXPECT_EQ(1u, Refs(b.get(), i));
  ExpectConsistent(b.get(), s + "BBBBBB");

  // b now solely owns its last block again and its ref ends at its size: the
  // tail is reused.
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "CC", 2));
  EXPECT_EQ(4u, rrpc_iobuf_piece_count(b.get()));
  ExpectConsistent(b.get(), s + "BBBBBBCC");
}

TEST(IobufTest, TailIsNotReusedWhenLastRefDoesNotEndAtBlockSize) {
  Buf a = NewBuf(), b = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "0123456789", 10));
  // b shares bytes 0..4 of the block; a keeps the whole.
  ASSERT_EQ(0, rrpc__iobuf_append_block(b.get(), BlockOf(a.get(), 0), 0, 5));
  rrpc_iobuf_clear(a.get());
  ASSERT_EQ(1u, Refs(b.get(), 0));  // solely owned, but ends before size
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "xy", 2));
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(b.get()));
  EXPECT_EQ(10u, BlockOf(b.get(), 0)->size);
  ExpectConsistent(b.get(), "01234xy");
}

// Truncate keeps the first n bytes: within the last piece, across pieces,
// to nothing, and n at or past the length is a no-op. Bytes dropped from the
// end of a block the iobuf owns alone go back to the block (the next append
// reuses them); from a shared block they do not (the other holder's bytes
// stay as they were).
TEST(IobufTest, TruncateKeepsTheFrontAndGivesAnOwnedTailBack) {
  Buf a = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "0123456789", 10));
  rrpc__iobuf_truncate(a.get(), 10);
  rrpc__iobuf_truncate(a.get(), 99);
  ExpectConsistent(a.get(), "0123456789");
  rrpc__iobuf_truncate(a.get(), 6);
  ExpectConsistent(a.get(), "012345");
  EXPECT_EQ(6u, BlockOf(a.get(), 0)->size);  // given back
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "ab", 2));
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(a.get()));  // into the same block
  ExpectConsistent(a.get(), "012345ab");

  // Across pieces: a shared piece in the middle, an owned one at the end.
  Buf other = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(other.get(), "SHARED", 6));
  ASSERT_EQ(0, rrpc__iobuf_append_block(a.get(), BlockOf(other.get(), 0), 0, 6));
  static char user[] = "uvw";
  ASSERT_EQ(0, rrpc_iobuf_append_user(a.get(), user, 3, nullptr, nullptr, nullptr));
  ExpectConsistent(a.get(), "012345abSHAREDuvw");
  rrpc__iobuf_truncate(a.get(), 10);  // drops "uvw" and "ARED"
  ExpectConsistent(a.get(), "012345abSH");
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(a.get()));
  EXPECT_EQ(6u, BlockOf(other.get(), 0)->size);  // shared: not given back
  ExpectConsistent(other.get(), "SHARED");
  rrpc__iobuf_truncate(a.get(), 0);
  EXPECT_EQ(0u, rrpc_iobuf_length(a.get()));
  EXPECT_EQ(0u, rrpc_iobuf_piece_count(a.get()));
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "z", 1));
  ExpectConsistent(a.get(), "z");
}

TEST(IobufTest, AppendBlockChecksRange) {
  Buf a = NewBuf(), b = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "0123456789", 10));
  rrpc_block *blk = BlockOf(a.get(), 0);
  EXPECT_EQ(-EINVAL, rrpc__iobuf_append_block(b.get(), blk, 5, 6));
  EXPECT_EQ(-EINVAL, rrpc__iobuf_append_block(b.get(), blk, 11, 0 + 1));
  EXPECT_EQ(0, rrpc__iobuf_append_block(b.get(), blk, 3, 0));  // nothing
  EXPECT_EQ(0u, rrpc_iobuf_piece_count(b.get()));
  EXPECT_EQ(1u, blk->refs.load());
  ASSERT_EQ(0, rrpc__iobuf_append_block(b.get(), blk, 2, 3));
  ASSERT_EQ(0, rrpc__iobuf_append_block(b.get(), blk, 7, 3));
  EXPECT_EQ(3u, blk->refs.load());
  ExpectConsistent(b.get(), "234789");
}

TEST(IobufTest, AppendIobufToItselfDoubles) {
  Buf a = NewBuf();
  std::string s;
  for (int i = 0; i < 5; i++) {
    std::string part(1000 + i, static_cast<char>('a' + i));
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), part.data(), part.size()));
    s += part;
  }
  rrpc_iobuf_pop_front(a.get(), 3);  // start > 0
  s.erase(0, 3);
  for (int round = 0; round < 4; round++) {
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(a.get(), a.get()));
    s += s;
    ExpectConsistent(a.get(), s);
  }
}

TEST(IobufTest, MoveHasNoRefcountTraffic) {
  Buf a = NewBuf(), b = NewBuf(), c = NewBuf();
  std::string s(5 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE, 'm');
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(c.get(), a.get()));  // every block at refs 2
  std::vector<rrpc_block *> blocks;
  for (size_t i = 0; i < rrpc_iobuf_piece_count(a.get()); i++) blocks.push_back(BlockOf(a.get(), i));

  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "head", 4));
  ASSERT_EQ(0, rrpc_iobuf_move(b.get(), a.get()));
  ExpectConsistent(a.get(), "");
  ExpectConsistent(b.get(), "head" + s);
  for (rrpc_block *blk : blocks) EXPECT_EQ(2u, blk->refs.load());

  // Into an empty iobuf: the refs array itself is handed over.
  Buf d = NewBuf();
  const rrpc_iobuf_ref *arr = b->refs;
  ASSERT_EQ(0, rrpc_iobuf_move(d.get(), b.get()));
  EXPECT_EQ(arr, d->refs);
  ExpectConsistent(d.get(), "head" + s);
  ExpectConsistent(b.get(), "");
  for (rrpc_block *blk : blocks) EXPECT_EQ(2u, blk->refs.load());

  EXPECT_EQ(0, rrpc_iobuf_move(d.get(), d.get()));  // no-op
  EXPECT_EQ(0, rrpc_iobuf_move(d.get(), b.get()));  // empty source
  ExpectConsistent(d.get(), "head" + s);
  // The emptied iobufs are still usable.
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "b", 1));
  ExpectConsistent(b.get(), "b");
}

// One piece at a time into an iobuf whose array is full: with dead slots
// before start it slides them out, with none it grows; each piece arrives
// once, in order, its block's reference moved (not taken), the source empty.
TEST(IobufTest, MoveOnePieceIntoAFullArray) {
  Buf dst = NewBuf();
  std::string want;
  std::vector<rrpc_block *> blocks;
  for (int i = 0; i < 3 * RRPC_IOBUF_INLINE_REFS + 1; i++) {
    Buf one = NewBuf();
    std::string piece(1 + i, (char)('a' + i));
    ASSERT_EQ(0, rrpc_iobuf_append(one.get(), piece.data(), piece.size()));
    ASSERT_EQ(1u, rrpc_iobuf_piece_count(one.get()));
    blocks.push_back(BlockOf(one.get(), 0));
    ASSERT_EQ(0, rrpc_iobuf_move(dst.get(), one.get()));
    ExpectConsistent(one.get(), "");
    want += piece;
    if (i == RRPC_IOBUF_INLINE_REFS) {  // a dead slot before start: the next full move slides
      rrpc_iobuf_pop_front(dst.get(), 1);
      want.erase(0, 1);
      blocks.erase(blocks.begin());
    }
    ExpectConsistent(dst.get(), want);
  }
  for (rrpc_block *blk : blocks) EXPECT_EQ(1u, blk->refs.load());
}

// A socket's pending writes take its queue's array whole and give the
// queue their own emptied array back (no free now, no growth on refill);
// with either side on its inline refs it is a plain move.
TEST(IobufTest, MoveTradeSwapsHeapArrays) {
  Buf pend = NewBuf(), queue = NewBuf();
  auto pieces = [](rrpc_iobuf *b, int n, char c) {
    std::string all;
    for (int i = 0; i < n; i++) {
      Buf one = NewBuf();
      std::string p(2, (char)(c + i));
      EXPECT_EQ(0, rrpc_iobuf_append(one.get(), p.data(), p.size()));
      EXPECT_EQ(0, rrpc_iobuf_move(b, one.get()));
      all += p;
    }
    return all;
  };
  // pend's array on the heap, then emptied as a write does.
  std::string first = pieces(pend.get(), 2 * RRPC_IOBUF_INLINE_REFS, 'a');
  rrpc_iobuf_pop_front(pend.get(), first.size());
  ASSERT_NE(pend->inline_refs, pend->refs);
  const rrpc_iobuf_ref *pend_arr = pend->refs;
  std::string queued = pieces(queue.get(), 2 * RRPC_IOBUF_INLINE_REFS, 'A');
  const rrpc_iobuf_ref *queue_arr = queue->refs;
  ASSERT_NE(queue->inline_refs, queue_arr);

  ASSERT_EQ(0, rrpc__iobuf_move_trade(pend.get(), queue.get()));
  EXPECT_EQ(queue_arr, pend->refs);
  EXPECT_EQ(pend_arr, queue->refs);
  ExpectConsistent(pend.get(), queued);
  ExpectConsistent(queue.get(), "");
  // The traded array refills in place.
  std::string more = pieces(queue.get(), RRPC_IOBUF_INLINE_REFS + 1, 'k');
  EXPECT_EQ(pend_arr, queue->refs);
  ExpectConsistent(queue.get(), more);

  // pend not empty: a plain move appends.
  ASSERT_EQ(0, rrpc__iobuf_move_trade(pend.get(), queue.get()));
  ExpectConsistent(pend.get(), queued + more);
  ExpectConsistent(queue.get(), "");
  // Into an empty iobuf on its inline refs: the array is handed over, as move does.
  Buf fresh = NewBuf();
  const rrpc_iobuf_ref *arr = pend->refs;
  ASSERT_EQ(0, rrpc__iobuf_move_trade(fresh.get(), pend.get()));
  EXPECT_EQ(arr, fresh->refs);
  EXPECT_EQ(pend->inline_refs, pend->refs);
  ExpectConsistent(fresh.get(), queued + more);
}

// ---- cutting ---------------------------------------------------------------------------

TEST(IobufTest, CutAcrossBlockBoundaries) {
  const size_t B = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;
  std::mt19937 rng(2);
  std::string s = RandomBytes(rng, 4 * B + 123);
  const size_t sizes[] = {0, 1, 2, B - 1, B, B + 1, 2 * B - 1, 2 * B, 2 * B + 1, 3 * B + 5,
                          4 * B, 4 * B + 122, 4 * B + 123, 4 * B + 124, 100 * B};
  for (size_t first : sizes) {
    for (size_t second : {size_t{1}, B - 3, B, 3 * B + 1}) {
      Buf src = NewBuf(), dst = NewBuf();
      ASSERT_EQ(0, rrpc_iobuf_append(dst.get(), "pre", 3));
      ASSERT_EQ(0, rrpc_iobuf_append(src.get(), s.data(), s.size()));
      size_t n1 = std::min(first, s.size());
      EXPECT_EQ(static_cast<long>(n1), rrpc_iobuf_cut(src.get(), first, dst.get()));
      ExpectConsistent(src.get(), s.substr(n1));
      ExpectConsistent(dst.get(), "pre" + s.substr(0, n1));
      size_t n2 = std::min(second, s.size() - n1);
      Buf dst2 = NewBuf();
      EXPECT_EQ(static_cast<long>(n2), rrpc_iobuf_cut(src.get(), second, dst2.get()));
      ExpectConsistent(src.get(), s.substr(n1 + n2));
      ExpectConsistent(dst2.get(), s.substr(n1, n2));
      // A block split at the edge is shared, never copied.
      if (n1 % B != 0 && n1 < s.size()) {
        size_t last = rrpc_iobuf_piece_count(dst.get()) - 1;
        EXPECT_EQ(BlockOf(dst.get(), last), BlockOf(n2 ? dst2.get() : src.get(), 0));
      }
    }
  }
}

// rrpc__iobuf_cut_frame: every split of a buffer made of one small piece
// (the fast path, with and without a tail left behind) and of pieces that
// the frame crosses (the general path) gives what pop + two cuts give, and
// every block ends with exactly the references its pieces hold.
TEST(IobufTest, CutFrameMatchesPopAndCuts) {
  const size_t B = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;
  std::mt19937 rng(7);
  for (size_t len : {size_t{40}, size_t{3 * B + 17}}) {
    std::string s = RandomBytes(rng, len);
    const size_t cuts[] = {0, 1, 7, 12, B - 1, B + 3};
    for (size_t skip : cuts)
      for (size_t n1 : cuts)
        for (size_t n2 : cuts) {
          for (size_t tail : {size_t{0}, size_t{5}}) {
            if (skip + n1 + n2 + tail > len) continue;
            size_t total = skip + n1 + n2 + tail;
            Buf src = NewBuf(), d1 = NewBuf(), d2 = NewBuf();
            ASSERT_EQ(0, rrpc_iobuf_append(src.get(), s.data(), total));
            ASSERT_EQ(0, rrpc__iobuf_cut_frame(src.get(), skip, n1, d1.get(), n2, d2.get()));
            ExpectConsistent(d1.get(), s.substr(skip, n1));
            ExpectConsistent(d2.get(), s.substr(skip + n1, n2));
            ExpectConsistent(src.get(), s.substr(skip + n1 + n2, tail));
            // What the three hold is all the references there are: dropping
            // two of them leaves the third readable and consistent.
            rrpc_iobuf_clear(src.get());
            rrpc_iobuf_clear(d1.get());
            ExpectConsistent(d2.get(), s.substr(skip + n1, n2));
          }
        }
  }
  // n2 == 0 needs no second destination.
  Buf src = NewBuf(), d1 = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(src.get(), "hdrbody", 7));
  ASSERT_EQ(0, rrpc__iobuf_cut_frame(src.get(), 3, 4, d1.get(), 0, nullptr));
  ExpectConsistent(d1.get(), "body");
  ExpectConsistent(src.get(), "");
}

TEST(IobufTest, CutToItselfRotates) {
  Buf a = NewBuf();
  std::mt19937 rng(3);
  std::string s = RandomBytes(rng, 3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 7);
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
  for (size_t n : {size_t{5}, size_t{RRPC_IOBUF_DEFAULT_BLOCK_SIZE}, size_t{10000}, s.size(), size_t{1}}) {
    EXPECT_EQ(static_cast<long>(n), rrpc_iobuf_cut(a.get(), n, a.get()));
    s = s.substr(n) + s.substr(0, n);
    ExpectConsistent(a.get(), s);
  }
}

// Random operations on a few iobufs, checked after each against std::string.
TEST(IobufTest, RandomizedAgainstStringModel) {
  for (unsigned seed = 10; seed < 18; seed++) {
    std::mt19937 rng(seed);
    const int kBufs = 4;
    Buf bufs[kBufs];
    std::string model[kBufs];
    for (auto &b : bufs) b = NewBuf();
    std::vector<std::unique_ptr<UserMem>> users;
    auto size = [&]() -> size_t {
      switch (rng() % 4) {
        case 0: return rng() % 16;
        case 1: return rng() % 300;
        case 2: return rng() % (3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE);
        default: return RRPC_IOBUF_DEFAULT_BLOCK_SIZE - 2 + rng() % 5;
      }
    };
    for (int step = 0; step < 1500; step++) {
      int i = rng() % kBufs, j = rng() % kBufs;
      rrpc_iobuf *b = bufs[i].get();
      switch (rng() % 9) {
        case 0: {
          std::string s = RandomBytes(rng, size());
          ASSERT_EQ(0, rrpc_iobuf_append(b, s.data(), s.size()));
          model[i] += s;
          break;
        }
        case 1: {
          size_t n = size();
          long got = rrpc_iobuf_cut(b, n, bufs[j].get());
          size_t want = std::min(n, model[i].size());
          ASSERT_EQ(static_cast<long>(want), got);
          std::string moved = model[i].substr(0, want);
          model[i].erase(0, want);
          model[j] += moved;
          break;
        }
        case 2: {
          size_t n = size();
          size_t want = std::min(n, model[i].size());
          ASSERT_EQ(want, rrpc_iobuf_pop_front(b, n));
          model[i].erase(0, want);
          break;
        }
        case 3: {
          if (model[j].size() + model[i].size() > (1u << 20)) break;
          ASSERT_EQ(0, rrpc_iobuf_append_iobuf(b, bufs[j].get()));
          model[i] += model[j];
          break;
        }
        case 4: {
          ASSERT_EQ(0, rrpc_iobuf_move(b, bufs[j].get()));
          if (i != j) {
            model[i] += model[j];
            model[j].clear();
          }
          break;
        }
        case 5: {
          size_t off = model[i].empty() ? 0 : rng() % (model[i].size() + 2);
          size_t n = size();
          std::string out(n, '\0');
          size_t got = rrpc_iobuf_copy_out(b, off, &out[0], n);
          size_t want = off >= model[i].size() ? 0 : std::min(n, model[i].size() - off);
          ASSERT_EQ(want, got);
          ASSERT_EQ(model[i].substr(off < model[i].size() ? off : 0, want), out.substr(0, got));
          break;
        }
        case 6: {
          size_t n = 1 + size();
          users.push_back(std::make_unique<UserMem>());
          UserMem *u = users.back().get();
          u->bytes = RandomBytes(rng, n);
          ASSERT_EQ(0, rrpc_iobuf_append_user(b, &u->bytes[0], n, nullptr, &UserMem::Deleter, u));
          model[i] += u->bytes;
          break;
        }
        case 7: {
          // read-style: reserve, write some, commit
          void *p;
          size_t avail;
          size_t want = rng() % 2 ? 0 : size();
          ASSERT_EQ(0, rrpc__iobuf_reserve(b, want, &p, &avail));
          ASSERT_GE(avail, std::max<size_t>(want, 1));
          size_t n = rng() % (avail + 1);
          std::string s = RandomBytes(rng, n);
          memcpy(p, s.data(), n);
          rrpc__iobuf_commit(b, n);
          model[i] += s;
          break;
        }
        default:
          if (rng() % 8 == 0) {
            rrpc_iobuf_clear(b);
            model[i].clear();
          }
          break;
      }
      for (int k = 0; k < kBufs; k++) {
        ASSERT_EQ(model[k].size(), rrpc_iobuf_length(bufs[k].get())) << "seed " << seed << " step " << step;
        ASSERT_TRUE(rrpc_iobuf_equals(bufs[k].get(), model[k].data(), model[k].size()))
            << "seed " << seed << " step " << step;
      }
    }
    for (int k = 0; k < kBufs; k++) ExpectConsistent(bufs[k].get(), model[k]);
    for (auto &b : bufs) b.reset();
    for (auto &u : users) EXPECT_EQ(1, u->deleted.load());
  }
}

// Many small refs popped one by one while more arrive: the start index moves
// and the array is compacted; the content must never be disturbed.
TEST(IobufTest, PopFrontWithManyRefs) {
  std::vector<std::unique_ptr<UserMem>> users;  // outlives `a`
  Buf a = NewBuf();
  std::string model;
  size_t max_cap = 0;
  auto add = [&](int i) {
    users.push_back(std::make_unique<UserMem>());
    UserMem *u = users.back().get();
    u->bytes = std::to_string(i) + ";";
    ASSERT_EQ(0, rrpc_iobuf_append_user(a.get(), &u->bytes[0], u->bytes.size(), nullptr,
                                        &UserMem::Deleter, u));
    model += u->bytes;
  };
  for (int i = 0; i < 1000; i++) add(i);
  EXPECT_EQ(1000u, rrpc_iobuf_piece_count(a.get()));
  for (int i = 1000; i < 20000; i++) {
    size_t first = users[i - 1000]->bytes.size();
    ASSERT_EQ(first, rrpc_iobuf_pop_front(a.get(), first));
    model.erase(0, first);
    EXPECT_EQ(1, users[i - 1000]->deleted.load());
    add(i);
    max_cap = std::max<size_t>(max_cap, a->cap);
    if (i % 997 == 0) ExpectConsistent(a.get(), model);
  }
  ExpectConsistent(a.get(), model);
  // A steady 1000 live refs must not make the array grow without bound.
  EXPECT_LE(max_cap, 4096u);
}

// ---- user blocks ---------------------------------------------------------------------

TEST(IobufTest, UserBlockDeleterRunsOnceWhenLastRefDrops) {
  auto u = std::make_unique<UserMem>();
  u->bytes = "user-owned memory, shared and cut into pieces";
  const std::string s = u->bytes;
  int token;
  {
    Buf a = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append_user(a.get(), &u->bytes[0], s.size(), &token, &UserMem::Deleter, u.get()));
    const void *d;
    size_t n;
    void *region;
    ASSERT_EQ(0, rrpc_iobuf_piece(a.get(), 0, &d, &n, &region));
    EXPECT_EQ(static_cast<const void *>(&u->bytes[0]), d);  // not copied
    EXPECT_EQ(&token, region);
    // Appending after a user block never writes into it.
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "!", 1));
    EXPECT_EQ(s, u->bytes);

    Buf b = NewBuf(), c = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(b.get(), a.get()));
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(c.get(), a.get()));
    Buf p1 = NewBuf(), p2 = NewBuf(), p3 = NewBuf();
    ASSERT_EQ(5, rrpc_iobuf_cut(b.get(), 5, p1.get()));
    ASSERT_EQ(7, rrpc_iobuf_cut(b.get(), 7, p2.get()));
    ASSERT_EQ(9, rrpc_iobuf_cut(c.get(), 9, p3.get()));
    EXPECT_EQ(6u, Refs(p1.get(), 0));  // a, b, c, p1, p2, p3
    ExpectConsistent(p2.get(), s.substr(5, 7));

    a.reset();
    c.reset();
    p1.reset();
    EXPECT_EQ(0, u->deleted.load());
    rrpc_iobuf_pop_front(b.get(), rrpc_iobuf_length(b.get()));
    p2.reset();
    EXPECT_EQ(0, u->deleted.load());
    ExpectConsistent(p3.get(), s.substr(0, 9));
  }  // p3 (the last reference) goes here
  EXPECT_EQ(1, u->deleted.load());
}

TEST(IobufTest, UserBlockErrorPathKeepsOwnership) {
  auto u = std::make_unique<UserMem>();
  u->bytes = "abc";
  Buf a = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "x", 1));
  EXPECT_EQ(-EINVAL, rrpc_iobuf_append_user(a.get(), &u->bytes[0], 0, nullptr, &UserMem::Deleter, u.get()));
  EXPECT_EQ(-EINVAL, rrpc_iobuf_append_user(a.get(), &u->bytes[0], size_t{UINT32_MAX} + 1, nullptr,
                                            &UserMem::Deleter, u.get()));
  ExpectConsistent(a.get(), "x");
  a.reset();
  EXPECT_EQ(0, u->deleted.load());
  // A NULL deleter is allowed: the memory is simply not freed.
  Buf b = NewBuf();
  static const char kStatic[] = "static";
  ASSERT_EQ(0, rrpc_iobuf_append_user(b.get(), const_cast<char *>(kStatic), 6, nullptr, nullptr, nullptr));
  ExpectConsistent(b.get(), "static");
}

// Many threads drop references to the same user blocks at once; each deleter
// runs exactly once, after every reader is done.
TEST(IobufTest, SharedAcrossThreads) {
  const int kThreads = 8, kBlocks = 50;
  std::vector<std::unique_ptr<UserMem>> users;
  Buf src = NewBuf();
  std::string model;
  for (int i = 0; i < kBlocks; i++) {
    users.push_back(std::make_unique<UserMem>());
    users.back()->bytes = std::string(100 + i, static_cast<char>('A' + i % 26));
    ASSERT_EQ(0, rrpc_iobuf_append_user(src.get(), &users.back()->bytes[0], users.back()->bytes.size(),
                                        nullptr, &UserMem::Deleter, users.back().get()));
    model += users.back()->bytes;
  }
  std::vector<Buf> copies;
  for (int t = 0; t < kThreads; t++) {
    copies.push_back(NewBuf());
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(copies.back().get(), src.get()));
  }
  src.reset();
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; t++) {
    threads.emplace_back([&, t] {
      rrpc_iobuf *b = copies[t].get();
      std::string seen;
      Buf piece = NewBuf();
      while (rrpc_iobuf_length(b) > 0) {
        rrpc_iobuf_cut(b, 37 + t, piece.get());
        seen += Content(piece.get());
        rrpc_iobuf_clear(piece.get());
        // Copy-appends into fresh malloc blocks on this thread, too.
        ASSERT_EQ(0, rrpc_iobuf_append(piece.get(), "z", 1));
        rrpc_iobuf_clear(piece.get());
      }
      if (seen != model) mismatches++;
      copies[t].reset();
    });
  }
  for (auto &th : threads) th.join();
  EXPECT_EQ(0, mismatches.load());
  for (auto &u : users) EXPECT_EQ(1, u->deleted.load());
}

// ---- allocators ------------------------------------------------------------------------

TEST(IobufTest, DefaultAllocatorIsMalloc) {
  const rrpc_block_allocator *def = rrpc_block_allocator_get();
  ASSERT_NE(nullptr, def);
  EXPECT_STREQ("malloc", def->name);
  // Its table works when called directly.
  void *data, *region = &data;
  size_t cap = 0;
  ASSERT_EQ(0, def->alloc(def->ctx, 100, &data, &cap, &region));
  EXPECT_GE(cap, 100u);
  EXPECT_EQ(nullptr, region);
  def->free(def->ctx, data, cap, region);

  CountingAlloc ca;
  rrpc_block_allocator_set(&ca.table);
  EXPECT_EQ(&ca.table, rrpc_block_allocator_get());
  rrpc_block_allocator_set(nullptr);
  EXPECT_EQ(def, rrpc_block_allocator_get());
}

TEST(IobufTest, CustomAllocatorCountsAndRegion) {
  CountingAlloc ca;
  std::string s(3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 500, 'q');
  Buf a = NewBuf(), b = NewBuf();
  {
    AllocScope scope(&ca.table);
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
    // cap = size + 100 here: 3 blocks hold 24876 bytes, the rest needs a 4th.
    EXPECT_EQ(4, ca.allocs.load());
    EXPECT_EQ(4u, rrpc_iobuf_piece_count(a.get()));
    for (size_t i = 0; i < rrpc_iobuf_piece_count(a.get()); i++) {
      const void *d;
      size_t n;
      void *region = nullptr;
      ASSERT_EQ(0, rrpc_iobuf_piece(a.get(), i, &d, &n, &region));
      EXPECT_EQ(&ca.cookie, region);
      EXPECT_EQ(&ca.table, BlockOf(a.get(), i)->alloc);
    }
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(b.get(), a.get()));
    void *p;
    size_t avail;
    ASSERT_EQ(0, rrpc__iobuf_reserve(b.get(), 2 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &p, &avail));
    EXPECT_EQ(2 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 100, avail);
    EXPECT_EQ(5, ca.allocs.load());
    memset(p, 'r', 10);
    rrpc__iobuf_commit(b.get(), 10);
  }
  // Blocks keep the allocator they came from after the default is restored.
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "new", 3));
  EXPECT_EQ(nullptr, BlockOf(a.get(), 4)->region);
  EXPECT_EQ(5, ca.allocs.load());
  EXPECT_EQ(0, ca.frees.load());
  ExpectConsistent(a.get(), s + "new");
  ExpectConsistent(b.get(), s + std::string(10, 'r'));
  a.reset();
  EXPECT_EQ(0, ca.frees.load());  // b still shares them
  b.reset();
  EXPECT_EQ(5, ca.frees.load());
  EXPECT_EQ(0, ca.live_bytes.load());
}

TEST(IobufTest, FailingAllocatorLeavesIobufUnchanged) {
  for (int code : {-ENOMEM, -RRPC_EPOOL}) {
    CountingAlloc ca;
    ca.fail_code = code;
    Buf a = NewBuf();
    AllocScope scope(&ca.table);
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "start", 5));  // leaves tail room
    rrpc_block *tail = BlockOf(a.get(), 0);
    const uint32_t tail_size = tail->size;

    // The third new block fails: the two made before it are returned.
    ca.fail_after = 2;
    std::string big(5 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE, 'b');
    EXPECT_EQ(code, rrpc_iobuf_append(a.get(), big.data(), big.size()));
    ExpectConsistent(a.get(), "start");
    EXPECT_EQ(1u, rrpc_iobuf_piece_count(a.get()));
    EXPECT_EQ(tail_size, tail->size);
    EXPECT_EQ(3, ca.allocs.load());
    EXPECT_EQ(2, ca.frees.load());

    // Fits in the tail: no allocation needed, so it succeeds.
    ca.fail_after = 0;
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), "-more", 5));
    ExpectConsistent(a.get(), "start-more");

    void *p = nullptr;
    size_t avail = 0;
    EXPECT_EQ(code, rrpc__iobuf_reserve(a.get(), 2 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &p, &avail));
    EXPECT_EQ(nullptr, a->spare);
    ExpectConsistent(a.get(), "start-more");

    // rrpc__block_alloc reports the allocator's code too.
    rrpc_block *blk = nullptr;
    EXPECT_EQ(code, rrpc__block_alloc(10, &blk));
    EXPECT_EQ(nullptr, blk);

    ca.fail_after = -1;
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), big.data(), big.size()));
    ExpectConsistent(a.get(), "start-more" + big);
    a.reset();
    EXPECT_EQ(ca.allocs.load(), ca.frees.load());
    EXPECT_EQ(0, ca.live_bytes.load());
  }
}

// An allocator that hands out less than asked is refused, not overrun.
TEST(IobufTest, ShortAllocatorIsRefused) {
  struct Short {
    static int Alloc(void *, size_t size, void **data, size_t *cap, void **region) {
      *data = malloc(size / 2);
      *cap = size / 2;
      *region = nullptr;
      return 0;
    }
    static void Free(void *ctx, void *data, size_t, void *) {
      ++*static_cast<int *>(ctx);
      free(data);
    }
  };
  int frees = 0;
  rrpc_block_allocator table{};
  table.name = "short";
  table.alloc = &Short::Alloc;
  table.free = &Short::Free;
  table.ctx = &frees;
  struct Sink {
    static void Log(void *arg, rrpc_log_level level, const char *, int, const char *msg) {
      if (level == RRPC_LOG_ERROR) static_cast<std::string *>(arg)->append(msg);
    }
  };
  std::string logged;
  rrpc_log_set_sink(&Sink::Log, &logged);
  {
    AllocScope scope(&table);
    Buf a = NewBuf();
    EXPECT_EQ(-EINVAL, rrpc_iobuf_append(a.get(), "x", 1));
    EXPECT_EQ(1, frees);
    ExpectConsistent(a.get(), "");
  }
  rrpc_log_set_sink(nullptr, nullptr);
  EXPECT_NE(std::string::npos, logged.find("'short'")) << logged;
}

TEST(IobufTest, AllocatorSwitchWhileOtherThreadsAllocate) {
  CountingAlloc ca;
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; t++) {
    threads.emplace_back([&] {
      std::string s(3000, 'w');
      while (!stop.load()) {
        Buf b = NewBuf();
        for (int k = 0; k < 10; k++) ASSERT_EQ(0, rrpc_iobuf_append(b.get(), s.data(), s.size()));
        ASSERT_TRUE(rrpc_iobuf_equals(b.get(), std::string(30000, 'w').data(), 30000));
      }
    });
  }
  for (int i = 0; i < 2000; i++) rrpc_block_allocator_set(i % 2 ? nullptr : &ca.table);
  rrpc_block_allocator_set(nullptr);
  stop = true;
  for (auto &th : threads) th.join();
  EXPECT_EQ(ca.allocs.load(), ca.frees.load());
}

// ---- reading into the tail --------------------------------------------------------------

TEST(IobufTest, ReserveCommit) {
  Buf a = NewBuf();
  void *p;
  size_t avail;
  ASSERT_EQ(0, rrpc__iobuf_reserve(a.get(), 0, &p, &avail));
  EXPECT_EQ(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, avail);
  EXPECT_EQ(0u, rrpc_iobuf_length(a.get()));  // nothing until commit
  memcpy(p, "abcdef", 6);
  rrpc__iobuf_commit(a.get(), 6);
  ExpectConsistent(a.get(), "abcdef");

  // The next reserve continues right after, in the same block.
  void *p2;
  ASSERT_EQ(0, rrpc__iobuf_reserve(a.get(), 100, &p2, &avail));
  EXPECT_EQ(static_cast<char *>(p) + 6, p2);
  EXPECT_EQ(RRPC_IOBUF_DEFAULT_BLOCK_SIZE - 6, avail);
  memcpy(p2, "gh", 2);
  rrpc__iobuf_commit(a.get(), 2);
  ExpectConsistent(a.get(), "abcdefgh");
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(a.get()));

  // More than the tail holds: a new block of at least min_size.
  ASSERT_EQ(0, rrpc__iobuf_reserve(a.get(), 3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &p, &avail));
  EXPECT_GE(avail, 3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE);
  EXPECT_NE(nullptr, a->spare);
  std::string big(avail, 'R');
  memcpy(p, big.data(), avail);
  rrpc__iobuf_commit(a.get(), avail);
  EXPECT_EQ(nullptr, a->spare);
  ExpectConsistent(a.get(), "abcdefgh" + big);
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(a.get()));

  // Full last block: new block. Reserve without commit, twice: the same
  // block is handed out again, and commit(0) appends nothing.
  ASSERT_EQ(0, rrpc__iobuf_reserve(a.get(), 0, &p, &avail));
  ASSERT_EQ(0, rrpc__iobuf_reserve(a.get(), 0, &p2, &avail));
  EXPECT_EQ(p, p2);
  rrpc__iobuf_commit(a.get(), 0);
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(a.get()));
  ExpectConsistent(a.get(), "abcdefgh" + big);

  // A shared last block is never reserved into.
  Buf b = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "xyz", 3));
  Buf c = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(c.get(), b.get()));
  ASSERT_EQ(0, rrpc__iobuf_reserve(b.get(), 1, &p, &avail));
  EXPECT_NE(BlockOf(b.get(), 0)->data + 3, p);
  memcpy(p, "W", 1);
  rrpc__iobuf_commit(b.get(), 1);
  ExpectConsistent(b.get(), "xyzW");
  ExpectConsistent(c.get(), "xyz");
  EXPECT_EQ(3u, BlockOf(c.get(), 0)->size);

  // Left reserved and never committed: clear/destroy release it (ASan checks).
  ASSERT_EQ(0, rrpc__iobuf_reserve(c.get(), 0, &p, &avail));
  ASSERT_EQ(0, rrpc__iobuf_reserve(b.get(), 50000, &p, &avail));
  rrpc_iobuf_clear(b.get());
  EXPECT_EQ(nullptr, b->spare);
  EXPECT_EQ(-EINVAL, rrpc__iobuf_reserve(b.get(), size_t{UINT32_MAX} + 1, &p, &avail));
}

// ---- views --------------------------------------------------------------------------------

TEST(IobufTest, FillIov) {
  Buf a = NewBuf();
  struct iovec iov[8];
  size_t bytes = 123;
  EXPECT_EQ(0, rrpc__iobuf_fill_iov(a.get(), iov, 8, &bytes));
  EXPECT_EQ(0u, bytes);

  std::mt19937 rng(4);
  std::string s = RandomBytes(rng, 4 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 1);
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
  rrpc_iobuf_pop_front(a.get(), 10);
  s.erase(0, 10);
  ASSERT_EQ(5u, rrpc_iobuf_piece_count(a.get()));

  EXPECT_EQ(5, rrpc__iobuf_fill_iov(a.get(), iov, 8, &bytes));
  EXPECT_EQ(s.size(), bytes);
  std::string joined;
  for (int i = 0; i < 5; i++) joined.append(static_cast<char *>(iov[i].iov_base), iov[i].iov_len);
  EXPECT_EQ(s, joined);
  EXPECT_EQ(BlockOf(a.get(), 0)->data + 10, iov[0].iov_base);  // borrowed, not copied

  EXPECT_EQ(2, rrpc__iobuf_fill_iov(a.get(), iov, 2, &bytes));
  EXPECT_EQ(2 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE - 10, bytes);
  EXPECT_EQ(0, rrpc__iobuf_fill_iov(a.get(), iov, 0, &bytes));
  EXPECT_EQ(0u, bytes);
}

TEST(IobufTest, Contiguous) {
  auto u1 = std::make_unique<UserMem>(), u2 = std::make_unique<UserMem>();  // outlive `a`
  Buf a = NewBuf();
  char scratch[64];
  EXPECT_EQ(nullptr, rrpc__iobuf_contiguous(a.get(), 1, scratch));
  EXPECT_NE(nullptr, rrpc__iobuf_contiguous(a.get(), 0, scratch));

  u1->bytes = "0123456789";
  u2->bytes = "abcdefghij";
  ASSERT_EQ(0, rrpc_iobuf_append_user(a.get(), &u1->bytes[0], 10, nullptr, &UserMem::Deleter, u1.get()));
  ASSERT_EQ(0, rrpc_iobuf_append_user(a.get(), &u2->bytes[0], 10, nullptr, &UserMem::Deleter, u2.get()));
  // Within the first piece: borrowed.
  const void *p = rrpc__iobuf_contiguous(a.get(), 10, scratch);
  EXPECT_EQ(static_cast<const void *>(&u1->bytes[0]), p);
  // Across pieces: copied to scratch.
  p = rrpc__iobuf_contiguous(a.get(), 15, scratch);
  EXPECT_EQ(static_cast<const void *>(scratch), p);
  EXPECT_EQ(0, memcmp(p, "0123456789abcde", 15));
  EXPECT_EQ(nullptr, rrpc__iobuf_contiguous(a.get(), 21, scratch));
  rrpc_iobuf_pop_front(a.get(), 12);
  p = rrpc__iobuf_contiguous(a.get(), 8, scratch);
  EXPECT_EQ(static_cast<const void *>(&u2->bytes[2]), p);
}

// ---- large buffers -------------------------------------------------------------------------

TEST(IobufTest, LargeBuffers) {
  const size_t kSize = 8u << 20;
  std::mt19937 rng(5);
  std::string s = RandomBytes(rng, kSize);
  Buf a = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(a.get(), s.data(), s.size()));
  EXPECT_EQ(kSize / RRPC_IOBUF_DEFAULT_BLOCK_SIZE, rrpc_iobuf_piece_count(a.get()));
  ExpectConsistent(a.get(), s);

  // Share it, then cut the copy into odd-sized chunks and reassemble.
  Buf b = NewBuf(), whole = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(b.get(), a.get()));
  size_t off = 0;
  std::vector<char> chunk;
  while (rrpc_iobuf_length(b.get()) > 0) {
    Buf piece = NewBuf();
    size_t n = 1 + rng() % (300000);
    long got = rrpc_iobuf_cut(b.get(), n, piece.get());
    ASSERT_GT(got, 0);
    chunk.resize(static_cast<size_t>(got));
    ASSERT_EQ(chunk.size(), rrpc_iobuf_copy_out(piece.get(), 0, chunk.data(), chunk.size()));
    ASSERT_EQ(0, memcmp(chunk.data(), s.data() + off, chunk.size()));
    off += chunk.size();
    ASSERT_EQ(0, rrpc_iobuf_move(whole.get(), piece.get()));
  }
  EXPECT_EQ(kSize, off);
  ExpectConsistent(whole.get(), s);
  // Every block is shared by `a` and by the piece(s) of `whole` it was cut into.
  for (size_t i = 0; i < rrpc_iobuf_piece_count(a.get()); i++) ASSERT_GE(Refs(a.get(), i), 2u);

  // copy_out at an arbitrary offset spanning many blocks.
  std::string mid(1 << 20, '\0');
  EXPECT_EQ(mid.size(), rrpc_iobuf_copy_out(whole.get(), 12345, &mid[0], mid.size()));
  EXPECT_EQ(s.substr(12345, mid.size()), mid);

  // Pop almost everything, one odd size at a time.
  size_t popped = 0;
  while (rrpc_iobuf_length(a.get()) > 1000) popped += rrpc_iobuf_pop_front(a.get(), 77777);
  ExpectConsistent(a.get(), s.substr(popped));
}

}  // namespace

// Default blocks allocated on one thread and released on another (a request
// read on a loop and dropped by a pool worker) come back to the allocating
// side through the depot instead of going to free() and malloc() again.
namespace {

// Under AddressSanitizer blocks are not cached (block.c): the reuse checks
// turn into "nothing is cached" checks there.
#if defined(__SANITIZE_ADDRESS__)
#define IOBUF_TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define IOBUF_TEST_ASAN 1
#endif
#endif
#ifdef IOBUF_TEST_ASAN
constexpr bool kBlockCacheOn = false;
#else
constexpr bool kBlockCacheOn = true;
#endif

rrpc_iobuf_block_cache_stats CacheStats() {
  rrpc_iobuf_block_cache_stats st;
  rrpc_iobuf_block_cache_stats_get(&st);
  return st;
}

// Sets the block cache's bounds for one test and puts the defaults back.
struct CacheBounds {
  CacheBounds(unsigned per_thread, unsigned shared) {
    EXPECT_EQ(0, rrpc_iobuf_set_block_cache(per_thread, shared));
  }
  ~CacheBounds() {
    EXPECT_EQ(0, rrpc_iobuf_set_block_cache(RRPC_IOBUF_BLOCK_CACHE_PER_THREAD, RRPC_IOBUF_BLOCK_CACHE_SHARED));
  }
};

std::vector<rrpc_block *> AllocBlocks(size_t n) {
  std::vector<rrpc_block *> v(n);
  for (auto &b : v) EXPECT_EQ(0, rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b));
  return v;
}

}  // namespace

TEST(IobufTest, BlocksReleasedOnAnotherThreadAreReusedWhereAllocated) {
  constexpr int kN = 48;  // more than a thread's own list keeps (32)
  if (!kBlockCacheOn) GTEST_SKIP() << "no block cache under AddressSanitizer";
  std::vector<rrpc_block *> blocks(kN);
  std::thread producer([&] {
    for (auto &b : blocks) ASSERT_EQ(rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b), 0);
  });
  producer.join();
  std::vector<void *> addrs(blocks.begin(), blocks.end());
  std::thread consumer([&] {
    for (auto *b : blocks) rrpc__block_unref(b);  // its list fills, the rest goes to the depot
  });
  consumer.join();
  int reused = 0;
  std::thread again([&] {
    std::vector<rrpc_block *> got(16);
    for (auto &b : got) ASSERT_EQ(rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b), 0);
    for (auto *b : got)
      if (std::find(addrs.begin(), addrs.end(), (void *)b) != addrs.end()) reused++;
    for (auto *b : got) rrpc__block_unref(b);
  });
  again.join();
  EXPECT_EQ(reused, 16) << "a fresh thread's blocks came from malloc, not from the depot";
}

// ---- the block cache: knob, counters, bounds, thread exit ------------------------

TEST(BlockCache, FreedBlocksAreReusedAndCounted) {
  rrpc_iobuf_block_cache_stats before{}, after{};
  void *first = nullptr;
  int same = 0;
  // A fresh thread, so that the counts are this test's alone.
  std::thread t([&] {
    before = CacheStats();
    rrpc_block *b;
    ASSERT_EQ(0, rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b));
    first = b;
    rrpc__block_unref(b);
    for (int i = 0; i < 1000; i++) {
      ASSERT_EQ(0, rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b));
      same += (void *)b == first;
      rrpc__block_unref(b);
    }
    after = CacheStats();
  });
  t.join();
  if (kBlockCacheOn) {
    EXPECT_EQ(1000, same) << "the freed block was not handed out again";
    EXPECT_GE(after.hits - before.hits, 1000u);
    EXPECT_LE(after.misses - before.misses, 1u);
  } else {
    EXPECT_EQ(before.hits, after.hits);
    EXPECT_EQ(1001u, after.misses - before.misses);
    EXPECT_EQ(1001u, after.overflows - before.overflows);
    EXPECT_EQ(0u, after.cached);
  }
}

// A thread that frees blocks allocated elsewhere (a pool worker dropping
// requests a loop read) keeps at most its own bound, the shared list takes
// at most its bound, and the rest goes to free().
TEST(BlockCache, BoundHoldsOnAThreadThatOnlyFrees) {
  CacheBounds bounds(8, 16);
  constexpr unsigned kN = 200;
  std::vector<rrpc_block *> blocks;
  std::thread producer([&] { blocks = AllocBlocks(kN); });
  producer.join();

  rrpc_iobuf_block_cache_stats before = CacheStats(), during{};
  std::promise<unsigned> freed;
  std::promise<void> may_exit;
  std::thread freer([&] {
    for (auto *b : blocks) rrpc__block_unref(b);
    freed.set_value(rrpc__block_cache_thread_count());
    may_exit.get_future().wait();
  });
  unsigned own = freed.get_future().get();
  during = CacheStats();
  may_exit.set_value();
  freer.join();
  rrpc_iobuf_block_cache_stats after = CacheStats();

  EXPECT_EQ(kBlockCacheOn ? 8u : 0u, own);
  EXPECT_LE(during.cached, before.cached + 8 + 16);
  EXPECT_GE(during.overflows - before.overflows, kN - 8 - 16);
  // Its own list went with it; what it gave the shared list stays there.
  EXPECT_EQ(during.cached - own, after.cached);
}

// Blocks kept by a thread are freed when it exits: the cached count drops
// by its list, and by nothing more.
TEST(BlockCache, AnExitedThreadsBlocksAreFreed) {
  CacheBounds bounds(32, 0);  // nothing goes to the shared list
  std::promise<unsigned> allocated, freed;
  std::promise<void> may_free, may_exit;
  std::thread t([&] {
    std::vector<rrpc_block *> v = AllocBlocks(20);
    allocated.set_value(rrpc__block_cache_thread_count());
    may_free.get_future().wait();
    for (auto *b : v) rrpc__block_unref(b);
    freed.set_value(rrpc__block_cache_thread_count());
    may_exit.get_future().wait();
  });
  // Read while the thread holds its 20 blocks, then after it freed them.
  std::pair<unsigned, unsigned> k;
  k.first = allocated.get_future().get();
  rrpc_iobuf_block_cache_stats held = CacheStats();
  may_free.set_value();
  k.second = freed.get_future().get();
  rrpc_iobuf_block_cache_stats kept = CacheStats();
  may_exit.set_value();
  t.join();
  rrpc_iobuf_block_cache_stats after = CacheStats();

  if (kBlockCacheOn) {
    EXPECT_EQ(std::min(k.first + 20, 32u), k.second);
    EXPECT_GE(k.second, 20u);
  } else {
    EXPECT_EQ(0u, k.second);
  }
  EXPECT_EQ(held.cached + (k.second - k.first), kept.cached);
  EXPECT_EQ(kept.cached - k.second, after.cached) << "the exited thread's blocks are still counted";
}

// A block that comes back from the cache behaves as a new one: empty, one
// reference, and sharing and contents are as without the cache.
TEST(BlockCache, ReusedBlocksBehaveAsNew) {
  std::thread t([] {
    Buf a = NewBuf();
    std::string big(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, 'x');
    ASSERT_EQ(0, rrpc_iobuf_append(a.get(), big.data(), big.size()));
    rrpc_block *old = BlockOf(a.get(), 0);
    a.reset();  // its block goes to the cache

    Buf b = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append(b.get(), "hello", 5));
    rrpc_block *blk = BlockOf(b.get(), 0);
    if (kBlockCacheOn) {
      EXPECT_EQ(old, blk);
    }
    EXPECT_EQ(1u, blk->refs.load());
    EXPECT_EQ(5u, blk->size);
    ExpectConsistent(b.get(), "hello");

    Buf c = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(c.get(), b.get()));
    EXPECT_EQ(2u, blk->refs.load());
    b.reset();  // shared: not freed, not cached
    EXPECT_EQ(1u, blk->refs.load());
    ExpectConsistent(c.get(), "hello");
    ASSERT_EQ(0, rrpc_iobuf_append(c.get(), " world", 6));
    ExpectConsistent(c.get(), "hello world");
    c.reset();

    Buf d = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append(d.get(), "again", 5));
    if (kBlockCacheOn) {
      EXPECT_EQ(old, BlockOf(d.get(), 0));
    }
    EXPECT_EQ(1u, BlockOf(d.get(), 0)->refs.load());
    ExpectConsistent(d.get(), "again");
  });
  t.join();
}

#ifdef IOBUF_TEST_ASAN
// Under AddressSanitizer a freed block goes back to free() at once, so a
// use after free of its data is still reported.
TEST(BlockCache, AFreedBlockIsPoisonedUnderAsan) {
  rrpc_block *b;
  ASSERT_EQ(0, rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b));
  const void *data = b->data;
  EXPECT_FALSE(__asan_address_is_poisoned(data));
  rrpc__block_unref(b);
  EXPECT_TRUE(__asan_address_is_poisoned(data));
  EXPECT_TRUE(__asan_address_is_poisoned(b));
}
#endif

TEST(BlockCache, SetterRefusesBoundsOverTheMaximum) {
  EXPECT_EQ(-EINVAL, rrpc_iobuf_set_block_cache(RRPC_IOBUF_BLOCK_CACHE_MAX + 1, 0));
  EXPECT_EQ(-EINVAL, rrpc_iobuf_set_block_cache(0, RRPC_IOBUF_BLOCK_CACHE_MAX + 1));
  CacheBounds none(0, 0);
  // No cache: a block freed on this thread goes to free().
  std::thread t([] {
    rrpc_iobuf_block_cache_stats before = CacheStats();
    rrpc_block *b;
    ASSERT_EQ(0, rrpc__block_alloc(RRPC_IOBUF_DEFAULT_BLOCK_SIZE, &b));
    rrpc__block_unref(b);
    EXPECT_EQ(0u, rrpc__block_cache_thread_count());
    EXPECT_EQ(1u, CacheStats().overflows - before.overflows);
  });
  t.join();
}

namespace {

// ---- reuse: a scratch iobuf keeps its block -------------------------------------

// Filled, copied on and reused per call, as the C++ face does with its
// scratch iobufs: the same block serves every fill, none is allocated or
// leaked (the counting allocator sees every block), and a shared block is
// never written again.
TEST(IobufReuse, KeepsOneUnsharedBlockAndLeaksNone) {
  CountingAlloc ca;
  AllocScope scope(&ca.table);
  {
    Buf s = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "first", 5));
    rrpc_block *kept = BlockOf(s.get(), 0);
    for (int i = 0; i < 100; i++) {
      rrpc_iobuf_reuse(s.get());
      rrpc_iobuf_reuse(s.get()); // twice in a row keeps it too
      EXPECT_EQ(0u, rrpc_iobuf_length(s.get()));
      std::string msg = "call " + std::to_string(i);
      ASSERT_EQ(0, rrpc_iobuf_append(s.get(), msg.data(), msg.size()));
      ExpectConsistent(s.get(), msg);
      EXPECT_EQ(kept, BlockOf(s.get(), 0)) << i;
    }
    EXPECT_EQ(1, ca.allocs.load());

    // Shared with another iobuf: reuse drops it, the other keeps its bytes.
    Buf other = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(other.get(), s.get()));
    rrpc_iobuf_reuse(s.get());
    ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "new", 3));
    EXPECT_NE(kept, BlockOf(s.get(), 0));
    ExpectConsistent(other.get(), "call 99");
    EXPECT_EQ(2, ca.allocs.load());
  }
  EXPECT_EQ(ca.allocs.load(), ca.frees.load());
  EXPECT_EQ(0, ca.live_bytes.load());
}

// An append into the kept block takes a shortcut when it fits whole
// (iobuf.c); one that does not fit fills the kept block and continues in
// new ones, and one of exactly its size fits.
TEST(IobufReuse, AppendsLargerThanTheKeptBlockSpill) {
  Buf s = NewBuf();
  ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "seed", 4));
  rrpc_block *kept = BlockOf(s.get(), 0);
  const size_t cap = kept->cap;
  rrpc_iobuf_reuse(s.get());
  std::string big(cap * 2 + 7, '\0');
  for (size_t i = 0; i < big.size(); i++) big[i] = static_cast<char>('a' + i % 23);
  ASSERT_EQ(0, rrpc_iobuf_append(s.get(), big.data(), big.size()));
  ExpectConsistent(s.get(), big);
  EXPECT_EQ(3u, rrpc_iobuf_piece_count(s.get()));
  EXPECT_EQ(kept, BlockOf(s.get(), 0)); // filled first
  rrpc_iobuf_clear(s.get());

  ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "seed", 4));
  kept = BlockOf(s.get(), 0);
  rrpc_iobuf_reuse(s.get());
  std::string exact(kept->cap, 'z');
  ASSERT_EQ(0, rrpc_iobuf_append(s.get(), exact.data(), exact.size()));
  ExpectConsistent(s.get(), exact);
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(s.get()));
  EXPECT_EQ(kept, BlockOf(s.get(), 0));
}

// User memory is never kept (it is not ours to write), and a block kept
// under one allocator is not used for appends under another.
TEST(IobufReuse, NeverKeepsUserMemoryOrAnotherAllocatorsBlock) {
  UserMem um;
  um.bytes = "user bytes";
  {
    Buf s = NewBuf();
    ASSERT_EQ(0, rrpc_iobuf_append_user(s.get(), &um.bytes[0], um.bytes.size(), nullptr,
                                        &UserMem::Deleter, &um));
    rrpc_iobuf_reuse(s.get());
    EXPECT_EQ(1, um.deleted.load());
    ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "x", 1)); // a malloc block, kept below
    rrpc_iobuf_reuse(s.get());
    CountingAlloc ca;
    {
      AllocScope scope(&ca.table);
      ASSERT_EQ(0, rrpc_iobuf_append(s.get(), "y", 1));
      EXPECT_EQ(1, ca.allocs.load()); // not the kept malloc block
      rrpc_iobuf_clear(s.get());
    }
    EXPECT_EQ(ca.allocs.load(), ca.frees.load());
  }
}

}  // namespace
