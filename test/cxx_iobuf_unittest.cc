// cxx_iobuf_unittest.cc - the parts of the C++ face that need no network:
// rrpc::IOBuf (copy vs share, borrowed attachments), the protobuf zero-copy
// streams and message (de)serialization over iobuf pieces, the flags and
// their validators, and the glog sink.
#include <gtest/gtest.h>
#include <glog/logging.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rrpc/cxx/detail.h"
#include "rrpc/cxx/rrpc.h"
#include "rrpc/loops.h"
#include "test/cxx_echo.pb.h"
#include "test/cxx_echo_service.h"

extern "C" {
#include "rrpc/internal/log.h"
}

namespace {

using cxxtest::Pattern;

// ---- IOBuf ----------------------------------------------------------------------

TEST(CxxIOBufTest, AppendCopiesAndReads) {
  rrpc::IOBuf b;
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(0, b.append("hello"));
  EXPECT_EQ(0, b.append(std::string(" world")));
  EXPECT_EQ(0, b.append(std::string_view("!!", 1)));
  EXPECT_EQ(12u, b.size());
  EXPECT_EQ(12u, b.length());
  EXPECT_EQ("hello world!", b.to_string());
  EXPECT_TRUE(b.equals("hello world!"));
  EXPECT_TRUE(b == "hello world!");
  EXPECT_FALSE(b.equals("hello world"));
  char out[5] = {};
  EXPECT_EQ(5u, b.copy_to(out, 5, 6));
  EXPECT_EQ(0, memcmp(out, "world", 5));
  EXPECT_EQ(6u, b.pop_front(6));
  EXPECT_EQ("world!", b.to_string());
  char cut[3];
  EXPECT_EQ(3u, b.cutn(cut, 3));
  EXPECT_EQ(0, memcmp(cut, "wor", 3));
  EXPECT_EQ("ld!", b.to_string());
  b.clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(0u, b.pop_front(10));
}

TEST(CxxIOBufTest, AppendIOBufSharesBlocks) {
  rrpc::IOBuf a;
  ASSERT_EQ(0, a.append(Pattern(20000, 1)));
  rrpc::IOBuf b;
  ASSERT_EQ(0, b.append(a));
  ASSERT_EQ(a.backing_block_num(), b.backing_block_num());
  for (size_t i = 0; i < a.backing_block_num(); i++) {
    EXPECT_EQ(a.backing_block(i).data(), b.backing_block(i).data()) << "block " << i;
  }
  EXPECT_EQ(a.to_string(), b.to_string());
  // Doubling itself.
  ASSERT_EQ(0, b.append(b));
  EXPECT_EQ(40000u, b.size());
  EXPECT_EQ(Pattern(20000, 1) + Pattern(20000, 1), b.to_string());
}

TEST(CxxIOBufTest, CopyShares_MoveMoves) {
  rrpc::IOBuf a;
  ASSERT_EQ(0, a.append(Pattern(10000, 2)));
  const char* first = a.backing_block(0).data();
  rrpc::IOBuf copy(a);
  EXPECT_EQ(first, copy.backing_block(0).data());
  EXPECT_EQ(10000u, a.size());
  rrpc::IOBuf moved(std::move(a));
  EXPECT_EQ(first, moved.backing_block(0).data());
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty and usable
  ASSERT_EQ(0, a.append("again"));
  EXPECT_EQ("again", a.to_string());
  rrpc::IOBuf assigned;
  assigned.append("old");
  assigned = copy;
  EXPECT_EQ(first, assigned.backing_block(0).data());
  EXPECT_EQ(Pattern(10000, 2), assigned.to_string());
  assigned = std::move(moved);
  EXPECT_TRUE(moved.empty());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(10000u, assigned.size());
  assigned = assigned;  // self-assignment keeps the bytes
  EXPECT_EQ(10000u, assigned.size());
}

TEST(CxxIOBufTest, CutnMovesBytes) {
  rrpc::IOBuf a, b;
  ASSERT_EQ(0, a.append(Pattern(10000, 3)));
  EXPECT_EQ(4000u, a.cutn(&b, 4000));
  EXPECT_EQ(6000u, a.size());
  EXPECT_EQ(Pattern(10000, 3).substr(0, 4000), b.to_string());
  EXPECT_EQ(Pattern(10000, 3).substr(4000), a.to_string());
  EXPECT_EQ(6000u, a.cutn(&b, 1u << 30));
  EXPECT_EQ(Pattern(10000, 3), b.to_string());
}

// brpc's idioms with a std::string and an IOBuf target, as a brpc program
// writes them: they used to bind to the void* overloads and write over the
// string object itself (ASan: stack-buffer-overflow in rrpc_iobuf_copy_out).
TEST(CxxIOBufTest, BrpcStringAndIOBufIdioms) {
  const std::string all = Pattern(20000, 7);
  rrpc::IOBuf a;
  ASSERT_EQ(0, a.append(all.substr(0, 9000)));
  ASSERT_EQ(0, a.append(all.substr(9000)));  // two pieces at least

  // cutn(std::string*, n) APPENDS and consumes.
  std::string s = "keep:";
  EXPECT_EQ(100u, a.cutn(&s, 100));
  EXPECT_EQ("keep:" + all.substr(0, 100), s);
  EXPECT_EQ(all.size() - 100, a.size());

  // copy_to(std::string*, n, pos) REPLACES and consumes nothing; clipped at the end.
  std::string c = "old contents that must go";
  EXPECT_EQ(10u, a.copy_to(&c, 10));
  EXPECT_EQ(all.substr(100, 10), c);
  EXPECT_EQ(5000u, a.copy_to(&c, 5000, 8850));  // across the piece boundary
  EXPECT_EQ(all.substr(100 + 8850, 5000), c);
  EXPECT_EQ(50u, a.copy_to(&c, 1000, a.size() - 50));
  EXPECT_EQ(all.substr(all.size() - 50), c);
  EXPECT_EQ(0u, a.copy_to(&c, 10, a.size()));
  EXPECT_EQ(all.substr(all.size() - 50), c);  // untouched past the end, as brpc
  std::string whole;
  EXPECT_EQ(a.size(), a.copy_to(&whole));
  EXPECT_EQ(all.substr(100), whole);

  // append_to(std::string*) and append_to(IOBuf*) APPEND, consume nothing.
  std::string t = "x";
  EXPECT_EQ(3u, a.append_to(&t, 3, 1));
  EXPECT_EQ("x" + all.substr(101, 3), t);
  rrpc::IOBuf d;
  ASSERT_EQ(0, d.append("head:"));
  EXPECT_EQ(6000u, a.append_to(&d, 6000, 8000));
  EXPECT_EQ("head:" + all.substr(100 + 8000, 6000), d.to_string());
  EXPECT_EQ(all.size() - 100, a.size());
  EXPECT_EQ(0u, a.append_to(&d, 10, a.size() + 1));
  EXPECT_EQ(all.substr(100), a.to_string());
}

TEST(CxxIOBufTest, UserDataIsSharedAndDeletedOnce) {
  static std::string storage = Pattern(3000, 4);
  int deletes = 0;
  {
    rrpc::IOBuf a;
    ASSERT_EQ(0, a.append_user_data(storage.data(), storage.size(), [&deletes](void* p) {
      EXPECT_EQ(static_cast<void*>(storage.data()), p);
      deletes++;
    }));
    EXPECT_EQ(storage.data(), a.backing_block(0).data());  // no copy
    rrpc::IOBuf b(a);
    a.clear();
    EXPECT_EQ(0, deletes);  // b still refers to it
    EXPECT_EQ(storage, b.to_string());
  }
  EXPECT_EQ(1, deletes);
  // A refused append (len 0) does not run the deleter.
  rrpc::IOBuf c;
  EXPECT_NE(0, c.append_user_data(storage.data(), 0, [&deletes](void*) { deletes++; }));
  EXPECT_EQ(1, deletes);
}

TEST(CxxIOBufTest, ControllerAttachmentsBorrowTheCIobufs) {
  rrpc::Controller cntl;
  EXPECT_EQ(rrpc_controller_request_attachment(cntl.c_controller()),
            cntl.request_attachment().c_iobuf());
  EXPECT_EQ(rrpc_controller_response_attachment(cntl.c_controller()),
            cntl.response_attachment().c_iobuf());
  rrpc::IOBuf data;
  ASSERT_EQ(0, data.append(Pattern(9000, 5)));
  cntl.request_attachment() = data;  // fills the controller's own iobuf, sharing
  EXPECT_EQ(9000u, rrpc_iobuf_length(rrpc_controller_request_attachment(cntl.c_controller())));
  EXPECT_EQ(data.backing_block(0).data(), cntl.request_attachment().backing_block(0).data());
  cntl.Reset();
  EXPECT_TRUE(cntl.request_attachment().empty());
  EXPECT_EQ(rrpc_controller_request_attachment(cntl.c_controller()),
            cntl.request_attachment().c_iobuf());
  EXPECT_EQ(9000u, data.size());  // the shared source is untouched
}

TEST(CxxControllerTest, FailureCodesArePositive) {
  rrpc::Controller cntl;
  EXPECT_FALSE(cntl.Failed());
  EXPECT_EQ(0, cntl.ErrorCode());
  cntl.SetFailed(rrpc::EREQUEST, "bad %s %d", "thing", 42);
  EXPECT_TRUE(cntl.Failed());
  EXPECT_EQ(1003, cntl.ErrorCode());
  EXPECT_EQ(-RRPC_EREQUEST, rrpc_controller_error_code(cntl.c_controller()));
  EXPECT_EQ("bad thing 42", cntl.ErrorText());
  cntl.Reset();
  EXPECT_FALSE(cntl.Failed());
  cntl.SetFailed("why");
  EXPECT_EQ(rrpc::EINTERNAL, cntl.ErrorCode());
  EXPECT_EQ("why", cntl.ErrorText());
  // Long texts are cut, not overflowed.
  cntl.SetFailed(rrpc::EINTERNAL, "%s", std::string(2000, 'x').c_str());
  EXPECT_LE(cntl.ErrorText().size(), 512u);
  cntl.set_log_id(77);
  EXPECT_EQ(77, cntl.log_id());
}

// ---- zero-copy streams ----------------------------------------------------------

// An iobuf made of many small user pieces, so streams cross piece borders.
void AppendInPieces(rrpc::IOBuf* buf, const std::string& bytes, std::vector<std::string>* keep) {
  size_t pos = 0;
  size_t step = 1;
  keep->reserve(keep->size() + bytes.size());
  while (pos < bytes.size()) {
    size_t n = std::min(step, bytes.size() - pos);
    keep->push_back(bytes.substr(pos, n));
    std::string& s = keep->back();
    ASSERT_EQ(0, buf->append_user_data(s.data(), s.size(), [](void*) {}));
    pos += n;
    step = step % 13 + 1;
  }
}

TEST(CxxZeroCopyTest, InputStreamAcrossPieces) {
  std::string bytes = Pattern(5000, 6);
  std::vector<std::string> keep;
  rrpc::IOBuf buf;
  AppendInPieces(&buf, bytes, &keep);
  ASSERT_GT(buf.backing_block_num(), 500u);
  rrpc::IOBufAsZeroCopyInputStream in(buf);
  std::string got;
  const void* data;
  int size;
  int round = 0;
  while (in.Next(&data, &size)) {
    ASSERT_GT(size, 0);
    int take = size;
    if (round % 3 == 1 && size > 1) {
      take = size / 2;
      in.BackUp(size - take);
    }
    got.append(static_cast<const char*>(data), static_cast<size_t>(take));
    EXPECT_EQ(static_cast<int64_t>(got.size()), in.ByteCount());
    if (round % 7 == 3) {
      ASSERT_TRUE(in.Skip(5));
      got.append(bytes, got.size(), 5);
    }
    round++;
  }
  EXPECT_EQ(bytes, got);
  EXPECT_FALSE(in.Skip(1));
}

TEST(CxxZeroCopyTest, ParseMessageSplitIntoPieces) {
  cxxtest::EchoRequest req;
  req.set_message("split me");
  req.set_payload(Pattern(3000, 7));
  req.set_fail_text("text");
  req.set_attachment_seed(12345);
  std::string wire = req.SerializeAsString();
  std::vector<std::string> keep;
  rrpc::IOBuf buf;
  AppendInPieces(&buf, wire, &keep);
  cxxtest::EchoRequest parsed;
  ASSERT_TRUE(rrpc::detail::ParseFromIOBuf(&parsed, buf.c_iobuf()));
  EXPECT_EQ(req.SerializeAsString(), parsed.SerializeAsString());
  // Truncated or missing required fields: no.
  rrpc::IOBuf cut;
  ASSERT_EQ(0, cut.append(wire.substr(0, wire.size() - 3)));
  EXPECT_FALSE(rrpc::detail::ParseFromIOBuf(&parsed, cut.c_iobuf()));
  rrpc::IOBuf empty;
  EXPECT_FALSE(rrpc::detail::ParseFromIOBuf(&parsed, empty.c_iobuf()));
  cxxtest::Empty e;
  EXPECT_TRUE(rrpc::detail::ParseFromIOBuf(&e, empty.c_iobuf()));
}

// An allocator that counts what is out, and can be told to fail.
struct CountingAllocator {
  static std::atomic<long> out;
  static std::atomic<long> allocs;
  static std::atomic<bool> fail;
  static int Alloc(void*, size_t size, void** data, size_t* cap, void** region) {
    if (fail.load()) return -ENOMEM;
    *data = malloc(size);
    if (*data == nullptr) return -ENOMEM;
    *cap = size;
    *region = nullptr;
    out++;
    allocs++;
    return 0;
  }
  static void Free(void*, void* data, size_t, void*) {
    out--;
    free(data);
  }
};
std::atomic<long> CountingAllocator::out{0};
std::atomic<long> CountingAllocator::allocs{0};
std::atomic<bool> CountingAllocator::fail{false};

class CountingAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const rrpc_block_allocator a = {"counting", CountingAllocator::Alloc,
                                           CountingAllocator::Free, nullptr};
    CountingAllocator::out = 0;
    CountingAllocator::allocs = 0;
    CountingAllocator::fail = false;
    rrpc_block_allocator_set(&a);
  }
  void TearDown() override {
    rrpc_block_allocator_set(nullptr);
    EXPECT_EQ(0, CountingAllocator::out.load()) << "areas not given back";
  }
};

TEST_F(CountingAllocatorTest, SerializeLargeMessageWritesStraightIntoBlocks) {
  cxxtest::EchoResponse resp;
  resp.set_message("m");
  resp.set_payload(Pattern(3u << 20, 8));
  {
    rrpc::IOBuf buf;
    std::string why;
    ASSERT_EQ(0, rrpc::detail::SerializeToIOBuf(resp, buf.c_iobuf(), &why)) << why;
    EXPECT_EQ(resp.ByteSizeLong(), buf.size());
    EXPECT_EQ(resp.SerializeAsString(), buf.to_string());
    // Blocks sized from the hint: a 3 MiB message takes a few 1 MiB blocks,
    // not hundreds of 8 KiB ones.
    EXPECT_LE(buf.backing_block_num(), 5u);
    EXPECT_GT(CountingAllocator::allocs.load(), 0);
    cxxtest::EchoResponse back;
    ASSERT_TRUE(rrpc::detail::ParseFromIOBuf(&back, buf.c_iobuf()));
    EXPECT_EQ(resp.payload(), back.payload());
  }
  EXPECT_EQ(0, CountingAllocator::out.load());
}

TEST_F(CountingAllocatorTest, SerializeSmallMessageCopiesIntoTail) {
  cxxtest::EchoRequest req;
  req.set_message("small");
  rrpc::IOBuf buf;
  ASSERT_EQ(0, buf.append("prefix"));
  std::string why;
  ASSERT_EQ(0, rrpc::detail::SerializeToIOBuf(req, buf.c_iobuf(), &why));
  EXPECT_EQ("prefix" + req.SerializeAsString(), buf.to_string());
  EXPECT_EQ(1u, buf.backing_block_num());  // shares the tail block
}

TEST_F(CountingAllocatorTest, SerializeErrors) {
  cxxtest::EchoRequest missing;  // required field unset
  rrpc::IOBuf buf;
  std::string why;
  EXPECT_EQ(-EINVAL, rrpc::detail::SerializeToIOBuf(missing, buf.c_iobuf(), &why));
  EXPECT_NE(std::string::npos, why.find("message")) << why;
  EXPECT_TRUE(buf.empty());

  cxxtest::EchoResponse big;
  big.set_message("m");
  big.set_payload(Pattern(100000, 9));
  CountingAllocator::fail = true;
  int rc = rrpc::detail::SerializeToIOBuf(big, buf.c_iobuf(), &why);
  EXPECT_EQ(-ENOMEM, rc);
  CountingAllocator::fail = false;
  buf.clear();
}

TEST_F(CountingAllocatorTest, OutputStreamBackUpAndReuse) {
  rrpc::IOBuf buf;
  {
    rrpc::IOBufAsZeroCopyOutputStream out(&buf);
    void* data;
    int size;
    ASSERT_TRUE(out.Next(&data, &size));
    ASSERT_GE(size, 100);
    memcpy(data, "abc", 3);
    out.BackUp(size - 3);
    EXPECT_EQ(3, out.ByteCount());
    void* data2;
    int size2;
    ASSERT_TRUE(out.Next(&data2, &size2));
    EXPECT_EQ(static_cast<char*>(data) + 3, data2);  // the rest of the same block
    memcpy(data2, "def", 3);
    out.BackUp(size2 - 3);
    EXPECT_EQ(0, out.Flush());
    EXPECT_EQ("abcdef", buf.to_string());
    // A Next that is wholly backed up appends nothing.
    ASSERT_TRUE(out.Next(&data, &size));
    out.BackUp(size);
  }
  EXPECT_EQ("abcdef", buf.to_string());
  EXPECT_EQ(1u, buf.backing_block_num());
  buf.clear();
  EXPECT_EQ(0, CountingAllocator::out.load());
}

// ---- flags ------------------------------------------------------------------------

TEST(CxxFlagsTest, ValidatorsRejectBadValues) {
  EXPECT_EQ("", gflags::SetCommandLineOption("rdma_ring_size", "1000"));
  EXPECT_EQ("", gflags::SetCommandLineOption("rdma_ring_size", "8192"));
  EXPECT_NE("", gflags::SetCommandLineOption("rdma_ring_size", "65536"));
  EXPECT_EQ(65536u, FLAGS_rdma_ring_size);
  gflags::SetCommandLineOption("rdma_ring_size", "1048576");
  EXPECT_EQ("", gflags::SetCommandLineOption("rdma_gid_index", "-2"));
  EXPECT_NE("", gflags::SetCommandLineOption("rdma_gid_index", "3"));
  gflags::SetCommandLineOption("rdma_gid_index", "-1");
  EXPECT_EQ("", gflags::SetCommandLineOption("max_body_size", "0"));
  EXPECT_EQ("", gflags::SetCommandLineOption("event_dispatcher_num", "-1"));
  EXPECT_EQ("", gflags::SetCommandLineOption("rdma_sq_size", "-5"));
}

// --rrpc_completion_handoff reaches rrpc_set_completion_handoff when a
// Channel or Server starts; unset, the C setting stays; 1 is refused.
TEST(CxxFlagsTest, CompletionHandoffFlagSetsTheCKnob) {
  gflags::FlagSaver saver;
  ASSERT_EQ(0, rrpc_set_completion_handoff(0));
  rrpc::detail::ApplyLoopFlags();
  EXPECT_EQ(-1, rrpc_completion_handoff());  // off by default
  EXPECT_EQ("", gflags::SetCommandLineOption("rrpc_completion_handoff", "-3"));
  ASSERT_NE("", gflags::SetCommandLineOption("rrpc_completion_handoff", "6"));
  rrpc::detail::ApplyLoopFlags();
  EXPECT_EQ(6, rrpc_completion_handoff());
  ASSERT_NE("", gflags::SetCommandLineOption("rrpc_completion_handoff", "1"));
  rrpc::detail::ApplyLoopFlags();
  EXPECT_EQ(6, rrpc_completion_handoff());  // refused: the last good one stays
  rrpc_set_completion_handoff(0);
}

TEST(CxxFlagsTest, OptionsTakeTheirDefaultsFromFlags) {
  gflags::FlagSaver saver;  // restores every flag at the end
  FLAGS_max_body_size = 12345678;
  FLAGS_event_dispatcher_num = 3;
  FLAGS_usercode_in_pthread = true;
  FLAGS_usercode_pool_threads = 5;
  FLAGS_usercode_in_loop = true;
  FLAGS_usercode_queue_max = 77;
  FLAGS_rrpc_pool_rescue_us = 250;
  FLAGS_rrpc_pool_batch_sched = true;
  FLAGS_rrpc_pool_busy_queue = -1;
  FLAGS_rrpc_pool_short_task_us = 20;
  FLAGS_rrpc_pool_write_flush_us = 300;
  rrpc::ServerOptions s;
  EXPECT_EQ(12345678u, s.max_body_size);
  // --event_dispatcher_num sizes the process-wide loops (brpc's meaning),
  // not each server's own.
  EXPECT_EQ(0, s.num_threads);
  EXPECT_TRUE(s.handlers_in_pool);
  EXPECT_EQ(5, s.pool_threads);
  EXPECT_TRUE(s.handlers_in_loop);
  EXPECT_EQ(77, s.pool_queue_max);
  EXPECT_EQ(250, s.pool_rescue_us);
  EXPECT_TRUE(s.pool_batch_sched);
  EXPECT_EQ(-1, s.pool_busy_queue);
  EXPECT_EQ(20, s.pool_short_task_us);
  EXPECT_EQ(300, s.pool_write_flush_us);
  EXPECT_FALSE(s.use_rdma);
  rrpc::ChannelOptions c;
  EXPECT_EQ(12345678u, c.max_body_size);
  EXPECT_EQ(500, c.timeout_ms);
  EXPECT_EQ(200, c.connect_timeout_ms);
  EXPECT_EQ(3, c.max_retry);
  EXPECT_FALSE(c.use_rdma);
  // brpc's names and defaults.
  gflags::CommandLineFlagInfo info;
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("rdma_fallback", &info));
  EXPECT_EQ("true", info.default_value);
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("rdma_gid_index", &info));
  EXPECT_EQ("-1", info.default_value);
  ASSERT_TRUE(gflags::GetCommandLineFlagInfo("rdma_sq_size", &info));
  EXPECT_EQ("128", info.default_value);
  for (const char* name : {"rdma_device", "rdma_port", "rdma_rq_size",
                           "rdma_memory_pool_initial_size_mb", "rdma_memory_pool_increase_size_mb",
                           "rdma_memory_pool_max_size_mb", "rdma_use_polling", "rdma_trace_verbose",
                           "rdma_handshake_timeout_ms", "rdma_zerocopy_min_size"}) {
    EXPECT_TRUE(gflags::GetCommandLineFlagInfo(name, &info)) << name;
  }
}

// ---- glog sink --------------------------------------------------------------------

class CapturingSink : public google::LogSink {
 public:
  void send(google::LogSeverity severity, const char* /*full_filename*/,
            const char* base_filename, int line, const google::LogMessageTime& /*time*/,
            const char* message, size_t message_len) override {
    std::lock_guard<std::mutex> lk(mu);
    entries.push_back({severity, base_filename, line, std::string(message, message_len)});
  }
  struct Entry {
    google::LogSeverity severity;
    std::string file;
    int line;
    std::string text;
  };
  std::mutex mu;
  std::vector<Entry> entries;
};

TEST(CxxLogTest, CoreMessagesReachGlogAtTheirSeverity) {
  rrpc::Channel ch;  // the first Server/Channel installs the sink
  CapturingSink sink;
  google::AddLogSink(&sink);
  rrpc__log(RRPC_LOG_WARNING, "src/rrpc/some_file.c", 42, "hello %d", 5);
  rrpc__log(RRPC_LOG_ERROR, "src/rrpc/other.c", 7, "bad %s", "thing");
  rrpc__log(RRPC_LOG_INFO, "src/rrpc/info.c", 9, "note");
  google::RemoveLogSink(&sink);
  ASSERT_EQ(3u, sink.entries.size());
  EXPECT_EQ(google::GLOG_WARNING, sink.entries[0].severity);
  EXPECT_EQ("some_file.c", sink.entries[0].file);
  EXPECT_EQ(42, sink.entries[0].line);
  EXPECT_EQ("hello 5", sink.entries[0].text);
  EXPECT_EQ(google::GLOG_ERROR, sink.entries[1].severity);
  EXPECT_EQ("bad thing", sink.entries[1].text);
  EXPECT_EQ(google::GLOG_INFO, sink.entries[2].severity);
}

}  // namespace
