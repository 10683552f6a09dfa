// iobuf.cc - rrpc::IOBuf and the protobuf zero-copy streams over C iobufs.
// Calls only the public C API (rrpc/iobuf.h); owns no state of its own
// beyond the blocks an output stream has taken and not yet appended.
#include "rrpc/cxx/iobuf.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <utility>

namespace rrpc {

IOBuf::IOBuf() : buf_(nullptr), owned_(true) {
  if (rrpc_iobuf_new(&buf_) != 0) throw std::bad_alloc();
}

IOBuf::IOBuf(const IOBuf& other) : IOBuf() {
  if (rrpc_iobuf_append_iobuf(buf_, other.buf_) != 0) {
    rrpc_iobuf_free(buf_);
    throw std::bad_alloc();
  }
}

IOBuf::IOBuf(IOBuf&& other) : IOBuf() {
  if (rrpc_iobuf_move(buf_, other.buf_) != 0) {
    rrpc_iobuf_free(buf_);
    throw std::bad_alloc();
  }
}

IOBuf& IOBuf::operator=(const IOBuf& other) {
  if (this == &other) return *this;
  rrpc_iobuf_clear(buf_);
  if (rrpc_iobuf_append_iobuf(buf_, other.buf_) != 0) throw std::bad_alloc();
  return *this;
}

IOBuf& IOBuf::operator=(IOBuf&& other) {
  if (this == &other) return *this;
  rrpc_iobuf_clear(buf_);
  if (rrpc_iobuf_move(buf_, other.buf_) != 0) throw std::bad_alloc();
  return *this;
}

IOBuf::~IOBuf() {
  if (owned_) rrpc_iobuf_free(buf_);
}

int IOBuf::append(const void* data, size_t n) { return rrpc_iobuf_append(buf_, data, n); }

int IOBuf::append(const IOBuf& other) { return rrpc_iobuf_append_iobuf(buf_, other.buf_); }

namespace {
// The deleter travels to C as (fn, arg); arg is a heap copy of the
// std::function, freed after it ran.
void RunUserDeleter(void* data, void* arg) {
  auto* fn = static_cast<std::function<void(void*)>*>(arg);
  try {
    if (*fn) (*fn)(data);
  } catch (...) {
    // A deleter runs on a C thread; nothing may unwind into it.
  }
  delete fn;
}
}  // namespace

int IOBuf::append_user_data(void* data, size_t n, std::function<void(void*)> deleter,
                            void* region) {
  auto* fn = new (std::nothrow) std::function<void(void*)>(std::move(deleter));
  if (fn == nullptr) return -ENOMEM;
  int rc = rrpc_iobuf_append_user(buf_, data, n, region, RunUserDeleter, fn);
  if (rc != 0) delete fn;  // the C side did not take the memory
  return rc;
}

size_t IOBuf::cutn(IOBuf* out, size_t n) {
  long rc = rrpc_iobuf_cut(buf_, n, out->buf_);
  return rc < 0 ? 0 : static_cast<size_t>(rc);
}

size_t IOBuf::cutn(void* out, size_t n) {
  size_t got = rrpc_iobuf_copy_out(buf_, 0, out, n);
  return rrpc_iobuf_pop_front(buf_, got);
}

size_t IOBuf::cutn(std::string* out, size_t n) {
  size_t len = size();
  if (n > len) n = len;
  size_t old = out->size();
  out->resize(old + n);
  return cutn(out->data() + old, n);
}

size_t IOBuf::pop_front(size_t n) { return rrpc_iobuf_pop_front(buf_, n); }

size_t IOBuf::copy_to(void* out, size_t n, size_t pos) const {
  return rrpc_iobuf_copy_out(buf_, pos, out, n);
}

// The bytes [pos, pos+n) clipped to the iobuf: how many there are.
static size_t clip(size_t len, size_t n, size_t pos) {
  if (pos >= len) return 0;
  return n < len - pos ? n : len - pos;
}

size_t IOBuf::copy_to(std::string* out, size_t n, size_t pos) const {
  if (pos >= size()) return 0;  // *out untouched, as brpc's
  n = clip(size(), n, pos);
  out->resize(n);
  return copy_to(out->data(), n, pos);
}

size_t IOBuf::append_to(std::string* out, size_t n, size_t pos) const {
  n = clip(size(), n, pos);
  size_t old = out->size();
  out->resize(old + n);
  return copy_to(out->data() + old, n, pos);
}

// Shares the blocks: a temporary view of the whole iobuf is trimmed to the
// range and moved onto out (no byte is copied).
size_t IOBuf::append_to(IOBuf* out, size_t n, size_t pos) const {
  n = clip(size(), n, pos);
  if (n == 0) return 0;
  IOBuf view(*this);
  view.pop_front(pos);
  return view.cutn(out, n);
}

std::string IOBuf::to_string() const {
  std::string s;
  s.reserve(size());
  size_t n = rrpc_iobuf_piece_count(buf_);
  for (size_t i = 0; i < n; i++) {
    const void* p;
    size_t len;
    void* region;
    if (rrpc_iobuf_piece(buf_, i, &p, &len, &region) == 0) s.append(static_cast<const char*>(p), len);
  }
  return s;
}

size_t IOBuf::size() const { return rrpc_iobuf_length(buf_); }

void IOBuf::clear() { rrpc_iobuf_clear(buf_); }

bool IOBuf::equals(std::string_view s) const {
  return rrpc_iobuf_equals(buf_, s.data(), s.size()) == 1;
}

size_t IOBuf::backing_block_num() const { return rrpc_iobuf_piece_count(buf_); }

std::string_view IOBuf::backing_block(size_t i) const {
  const void* p;
  size_t len;
  void* region;
  if (rrpc_iobuf_piece(buf_, i, &p, &len, &region) != 0) return {};
  return std::string_view(static_cast<const char*>(p), len);
}

// ---- input stream ------------------------------------------------------------

IOBufAsZeroCopyInputStream::IOBufAsZeroCopyInputStream(const rrpc_iobuf* buf)
    : buf_(buf), npieces_(rrpc_iobuf_piece_count(buf)) {}

bool IOBufAsZeroCopyInputStream::Next(const void** data, int* size) {
  while (piece_ < npieces_) {
    const void* p;
    size_t len;
    void* region;
    if (rrpc_iobuf_piece(buf_, piece_, &p, &len, &region) != 0) return false;
    if (offset_ < len) {
      // protobuf counts in int: hand out at most INT_MAX bytes at a time.
      size_t n = std::min(len - offset_, static_cast<size_t>(INT_MAX));
      *data = static_cast<const char*>(p) + offset_;
      *size = static_cast<int>(n);
      offset_ += n;
      byte_count_ += static_cast<int64_t>(n);
      return true;
    }
    piece_++;
    offset_ = 0;
  }
  return false;
}

void IOBufAsZeroCopyInputStream::BackUp(int count) {
  // The contract of ZeroCopyInputStream: count <= the size of the last Next,
  // which came from the current piece.
  offset_ -= static_cast<size_t>(count);
  byte_count_ -= count;
}

bool IOBufAsZeroCopyInputStream::Skip(int count) {
  const void* data;
  int size;
  while (count > 0) {
    if (!Next(&data, &size)) return false;
    if (size > count) {
      BackUp(size - count);
      return true;
    }
    count -= size;
  }
  return true;
}

// ---- output stream -----------------------------------------------------------

namespace {
// Each block of an output stream is one allocator area whose first bytes
// remember where it came from, so the C deleter can give it back with no
// side table and no extra allocation.
struct AreaHeader {
  const rrpc_block_allocator* alloc;
  void* base;
  size_t cap;
  void* region;
};
constexpr size_t kAreaHeaderSpan = (sizeof(AreaHeader) + 15) / 16 * 16;
constexpr size_t kMaxBlock = size_t(1) << 20;

void FreeArea(void* /*data*/, void* arg) {
  auto* h = static_cast<AreaHeader*>(arg);
  // Copy before freeing: the header lives inside the area.
  AreaHeader copy = *h;
  copy.alloc->free(copy.alloc->ctx, copy.base, copy.cap, copy.region);
}
}  // namespace

IOBufAsZeroCopyOutputStream::IOBufAsZeroCopyOutputStream(rrpc_iobuf* buf, size_t size_hint)
    : buf_(buf), hint_(size_hint) {}

IOBufAsZeroCopyOutputStream::~IOBufAsZeroCopyOutputStream() { Commit(); }

void IOBufAsZeroCopyOutputStream::Commit() {
  if (area_ == nullptr) return;
  auto* h = static_cast<AreaHeader*>(area_);
  int rc = used_ == 0 ? -1
                      : rrpc_iobuf_append_user(buf_, data_, used_, h->region, FreeArea, h);
  if (rc != 0) {
    // Nothing written, or the iobuf could not take it: the area is still ours.
    if (used_ != 0 && error_ == 0) error_ = rc;
    FreeArea(data_, h);
  }
  area_ = nullptr;
  data_ = nullptr;
  avail_ = used_ = 0;
}

bool IOBufAsZeroCopyOutputStream::Next(void** data, int* size) {
  if (error_ != 0) return false;
  if (area_ != nullptr && used_ < avail_) {
    // Space left after a BackUp: hand out the rest of the same block.
    *data = data_ + used_;
    *size = static_cast<int>(avail_ - used_);
    byte_count_ += *size;
    used_ = avail_;
    return true;
  }
  Commit();
  if (error_ != 0) return false;

  size_t want = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;
  if (hint_ > static_cast<size_t>(byte_count_)) {
    size_t left = hint_ - static_cast<size_t>(byte_count_) + kAreaHeaderSpan;
    want = std::max(want, std::min(left, kMaxBlock));
  }
  const rrpc_block_allocator* a = rrpc_block_allocator_get();
  void* base = nullptr;
  size_t cap = 0;
  void* region = nullptr;
  int rc = a->alloc(a->ctx, want, &base, &cap, &region);
  if (rc != 0 && want > RRPC_IOBUF_DEFAULT_BLOCK_SIZE) {
    // A pool may not have large areas; small ones still do the job.
    want = RRPC_IOBUF_DEFAULT_BLOCK_SIZE;
    rc = a->alloc(a->ctx, want, &base, &cap, &region);
  }
  if (rc != 0) {
    error_ = rc;
    return false;
  }
  auto* h = new (base) AreaHeader{a, base, cap, region};
  area_ = h;
  data_ = static_cast<char*>(base) + kAreaHeaderSpan;
  avail_ = std::min(cap - kAreaHeaderSpan, static_cast<size_t>(INT_MAX));
  used_ = avail_;
  *data = data_;
  *size = static_cast<int>(avail_);
  byte_count_ += *size;
  return true;
}

void IOBufAsZeroCopyOutputStream::BackUp(int count) {
  used_ -= static_cast<size_t>(count);
  byte_count_ -= count;
}

int IOBufAsZeroCopyOutputStream::Flush() {
  Commit();
  return error_;
}

}  // namespace rrpc
