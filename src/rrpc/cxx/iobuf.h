// rrpc/cxx/iobuf.h - rrpc::IOBuf, a C++ RAII handle on a C rrpc_iobuf, and
// protobuf zero-copy streams over iobufs. Owns nothing else; every byte
// operation is one call into the public C API (rrpc/iobuf.h).
//
// [thread-compatible], like the C iobuf: one IOBuf must not be used by two
// threads at once; IOBufs that share blocks may be used concurrently.
#ifndef RRPC_CXX_IOBUF_H
#define RRPC_CXX_IOBUF_H

#include <google/protobuf/io/zero_copy_stream.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

#include "rrpc/iobuf.h"

namespace rrpc {

class Controller;

// IOBuf - either OWNS a C iobuf (made by the constructors below, freed by the
// destructor) or BORROWS one (the attachments a Controller hands out: their
// C iobuf belongs to the C controller). Either way the operations are the
// same. Every method says whether it COPIES bytes or SHARES blocks.
// Functions returning int give 0 or a negative code (-ENOMEM, ...).
class IOBuf {
 public:
  // An empty, owned iobuf. Throws std::bad_alloc if the C iobuf cannot be
  // allocated (the only place an IOBuf throws).
  IOBuf();
  // A new owned iobuf SHARING every block of `other` (no byte is copied).
  IOBuf(const IOBuf& other);
  // A new owned iobuf that takes `other`'s bytes (MOVED, no refcount
  // traffic); `other` is left empty but usable.
  IOBuf(IOBuf&& other);
  // Drop this iobuf's bytes, then SHARE `other`'s blocks. The target keeps
  // its C iobuf, so assigning into a borrowed attachment fills the
  // attachment.
  IOBuf& operator=(const IOBuf& other);
  // Drop this iobuf's bytes, then MOVE `other`'s bytes here.
  IOBuf& operator=(IOBuf&& other);
  ~IOBuf();

  // ---- appending -----------------------------------------------------------
  // COPIES n bytes.
  int append(const void* data, size_t n);
  // COPIES the bytes of s.
  int append(std::string_view s) { return append(s.data(), s.size()); }
  int append(const char* s) { return append(std::string_view(s)); }
  int append(const std::string& s) { return append(s.data(), s.size()); }
  // SHARES every block of other (other == *this doubles the content).
  int append(const IOBuf& other);
  // Adds user memory [data, data+n) as one block, SHARED, no copy. deleter(data)
  // runs exactly once when the last reference drops, on whichever thread drops
  // it. `region` is a cookie from rrpc_rdma_register_memory or nullptr. On
  // error nothing is appended and the deleter does NOT run.
  int append_user_data(void* data, size_t n, std::function<void(void*)> deleter,
                       void* region = nullptr);

  // ---- taking bytes out ----------------------------------------------------
  // MOVES the first min(n, size()) bytes to the end of *out (an edge block is
  // SHARED by both). Returns the bytes moved.
  size_t cutn(IOBuf* out, size_t n);
  // COPIES the first min(n, size()) bytes to out and drops them here.
  size_t cutn(void* out, size_t n);
  // COPIES the first min(n, size()) bytes to the END of *out (brpc's
  // overload: the string grows, nothing in it is overwritten) and drops them
  // here. Returns the bytes moved.
  size_t cutn(std::string* out, size_t n);
  // Any other object pointer must not reach cutn(void*) (it would overwrite
  // the object itself): a compile error, not a stack overflow.
  template <typename T, typename = std::enable_if_t<std::is_class_v<T>>>
  size_t cutn(T* out, size_t n) = delete;
  // Drops the first min(n, size()) bytes; returns how many.
  size_t pop_front(size_t n);
  // COPIES up to n bytes starting at pos into out without consuming them.
  size_t copy_to(void* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const;
  // brpc's string form: *out is REPLACED by the (up to n) bytes from pos
  // (left untouched when pos is at or past the end).
  size_t copy_to(std::string* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const;
  // brpc refuses copy_to(IOBuf*) at compile time too (its meaning would be
  // unclear): append_to says it appends.
  size_t copy_to(IOBuf* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const = delete;
  template <typename T, typename = std::enable_if_t<std::is_class_v<T>>>
  size_t copy_to(T* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const = delete;
  // APPENDS up to n bytes from pos to *out without consuming them: COPIES
  // into a string, SHARES blocks with an IOBuf. Returns the bytes appended.
  size_t append_to(std::string* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const;
  size_t append_to(IOBuf* out, size_t n = static_cast<size_t>(-1), size_t pos = 0) const;
  // COPIES all bytes into a new string.
  std::string to_string() const;

  // ---- looking ------------------------------------------------------------
  size_t size() const;
  size_t length() const { return size(); }
  bool empty() const { return size() == 0; }
  void clear();
  bool equals(std::string_view s) const;
  bool operator==(std::string_view s) const { return equals(s); }
  // The pieces (block slices) this iobuf is made of; borrowed views that are
  // valid until the iobuf changes.
  size_t backing_block_num() const;
  std::string_view backing_block(size_t i) const;

  // The C iobuf, borrowed (valid as long as this IOBuf).
  rrpc_iobuf* c_iobuf() { return buf_; }
  const rrpc_iobuf* c_iobuf() const { return buf_; }

 private:
  friend class Controller;
  struct Borrow {};
  // BORROWS buf (not freed by the destructor).
  IOBuf(Borrow, rrpc_iobuf* buf) : buf_(buf), owned_(false) {}

  rrpc_iobuf* buf_;
  bool owned_;
};

// Reads the bytes of an iobuf piece by piece, without flattening them.
// Borrows the iobuf, which must not change while the stream is used.
class IOBufAsZeroCopyInputStream : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit IOBufAsZeroCopyInputStream(const rrpc_iobuf* buf);
  explicit IOBufAsZeroCopyInputStream(const IOBuf& buf)
      : IOBufAsZeroCopyInputStream(buf.c_iobuf()) {}

  bool Next(const void** data, int* size) override;
  void BackUp(int count) override;
  bool Skip(int count) override;
  int64_t ByteCount() const override { return byte_count_; }

 private:
  const rrpc_iobuf* buf_;
  size_t npieces_;
  size_t piece_ = 0;   // current piece index
  size_t offset_ = 0;  // bytes of the current piece already handed out
  int64_t byte_count_ = 0;
};

// Appends to an iobuf block by block: Next() hands out the free part of a
// block taken from the current block allocator (the RDMA-registered pool
// when RDMA is on), and the written part of each block is appended to the
// iobuf as a SHARED user block when the next one is needed, on Flush(), or in
// the destructor. No byte is copied. Borrows the iobuf.
class IOBufAsZeroCopyOutputStream : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  // size_hint: the bytes the caller expects to write (0 = unknown); blocks
  // are sized to fit it (1 MiB at most each) so a message needs few blocks.
  explicit IOBufAsZeroCopyOutputStream(rrpc_iobuf* buf, size_t size_hint = 0);
  explicit IOBufAsZeroCopyOutputStream(IOBuf* buf, size_t size_hint = 0)
      : IOBufAsZeroCopyOutputStream(buf->c_iobuf(), size_hint) {}
  ~IOBufAsZeroCopyOutputStream() override;

  bool Next(void** data, int* size) override;
  void BackUp(int count) override;
  int64_t ByteCount() const override { return byte_count_; }

  // Appends what was written so far to the iobuf. 0, or the first error met
  // (an allocation failure; then Next() has returned false as well).
  int Flush();
  int error() const { return error_; }

 private:
  void Commit();

  rrpc_iobuf* buf_;
  size_t hint_;
  void* area_ = nullptr;  // current block: area header, then data
  char* data_ = nullptr;
  size_t avail_ = 0;      // usable bytes at data_
  size_t used_ = 0;       // bytes handed out (minus backed up) at data_
  int64_t byte_count_ = 0;
  int error_ = 0;
};

}  // namespace rrpc

#endif  // RRPC_CXX_IOBUF_H
