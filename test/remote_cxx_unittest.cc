// remote_cxx_unittest.cc - rrpc::RemoteToken (src/rrpc/cxx/remote.h): a
// token issued by an owner's table parses back to the same fields and bytes;
// malformed input leaves an empty token with the C API's code.
// rrpc::RemoteLink / RemoteRegion on a real channel and server (TCP): the
// server's handler registers a region and answers its token, the client
// writes and reads through it with std::function completions, and every
// handle is released by its destructor.
#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rrpc/cxx/flags.h"
#include "rrpc/cxx/remote.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"
extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote/table.h"
}

namespace {

TEST(RemoteCxx, TokenFromAnOwnerTableRoundTrips) {
  rrpc__rmt_conn c;
  ASSERT_EQ(0, rrpc__rmt_conn_init(&c, 0xfeedull, 40, 0));
  rrpc__rmt_region r;
  ASSERT_EQ(0, rrpc__rmt_own_add(&c, RRPC_REMOTE_WRITE, 1 << 20, nullptr, &r));
  uint8_t raw[RRPC_REMOTE_TOKEN_LEN];
  ASSERT_EQ(0, rrpc__rmt_own_token(&c, r.id, 0x1234, 0x10000, raw));
  std::string wire(reinterpret_cast<char *>(raw), sizeof(raw));

  rrpc::RemoteToken t;
  EXPECT_FALSE(t.valid());
  EXPECT_EQ("", t.bytes());
  ASSERT_EQ(0, t.Parse(wire));
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(wire, t.bytes());
  EXPECT_EQ(1u, t.id());
  EXPECT_EQ(40u, t.generation());
  EXPECT_EQ(0xfeedull, t.conn_id());
  EXPECT_EQ(1ull << 20, t.length());
  EXPECT_TRUE(t.can_write());
  EXPECT_FALSE(t.can_read());

  EXPECT_EQ(-RRPC_EPARSE, t.Parse(wire.substr(1)));
  EXPECT_FALSE(t.valid()) << "a failed parse empties the token";
  EXPECT_EQ(0u, t.id());
  EXPECT_EQ(-EINVAL, t.Parse(nullptr, 40));
  rrpc__rmt_conn_fini(&c);
}

struct Owned {
  std::vector<uint8_t> mem = std::vector<uint8_t>(1 << 20);
  rrpc::RemoteLink link;
  rrpc::RemoteRegion region;
};

void reg_handler(void *arg, rrpc_server_call *call) {
  Owned *o = static_cast<Owned *>(arg);
  rrpc_iobuf *resp;
  rrpc_iobuf_new(&resp);
  rrpc::RemoteToken t;
  if (o->link.Open(call) == 0 &&
      o->link.Register(o->mem.data(), o->mem.size(), rrpc::REMOTE_READ | rrpc::REMOTE_WRITE, &o->region) == 0 &&
      o->region.Token(&t) == 0) {
    std::string b = t.bytes();
    rrpc_iobuf_append(resp, b.data(), b.size());
  }
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

TEST(RemoteCxx, LinkAndRegionHandlesWriteAndReadThroughAToken) {
  Owned owned;
  rrpc_server *srv;
  ASSERT_EQ(0, rrpc_server_new(nullptr, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Remote", "Reg", reg_handler, &owned));
  ASSERT_EQ(0, rrpc_server_start(srv, "127.0.0.1:0"));
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(("127.0.0.1:" + std::to_string(rrpc_server_port(srv))).c_str(), nullptr, &ch));
  {
    rrpc_iobuf *rs;
    rrpc_iobuf_new(&rs);
    rrpc_controller *cntl;
    ASSERT_EQ(0, rrpc_controller_new(&cntl));
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.Remote", "Reg", cntl, nullptr, rs, nullptr, nullptr));
    rrpc_controller_free(cntl);
    rrpc::RemoteToken tok;
    ASSERT_EQ(0, tok.Parse(rrpc_test::iobuf_string(rs)));
    rrpc_iobuf_free(rs);
    rrpc::RemoteLink link;
    ASSERT_EQ(0, link.Open(ch));
    std::vector<uint8_t> local(1 << 20);
    for (size_t i = 0; i < local.size(); i++) local[i] = uint8_t(i * 13 + 1);
    rrpc::RemoteRegion lr;
    ASSERT_EQ(0, link.Register(local.data(), local.size(), 0, &lr));
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> got;
    auto done = [&](int st) {
      std::lock_guard<std::mutex> g(mu);
      got.push_back(st);
      cv.notify_all();
    };
    ASSERT_EQ(0, link.Write(lr, 0, tok, 0, local.size(), done));
    ASSERT_EQ(0, link.Read(lr, 0, tok, 0, 4096, done));
    {
      std::unique_lock<std::mutex> g(mu);
      ASSERT_TRUE(cv.wait_for(g, std::chrono::seconds(20), [&] { return got.size() == 2; }));
    }
    EXPECT_EQ(0, got[0]);
    EXPECT_EQ(0, got[1]);
    EXPECT_EQ(0, memcmp(owned.mem.data(), local.data(), local.size()));
    EXPECT_EQ(-RRPC_EREMOTERANGE, link.Write(lr, 0, tok, 1, local.size(), done));
    EXPECT_EQ(-EINVAL, link.Write(lr, 0, rrpc::RemoteToken(), 0, 1, done));
  }
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

// --remote_*: a value out of range is refused when set and the limit in
// force stays; one in range is what the next link takes.
TEST(RemoteFlags, OutOfRangeValuesAreRefusedAndInRangeOnesReachTheLimits) {
  struct Bad {
    const char *flag, *value;
  } bad[] = {{"remote_piece_size", "4095"},  {"remote_piece_size", "1048577"}, {"remote_max_inflight", "0"},
             {"remote_max_inflight", "9"},   {"remote_max_regions", "0"},       {"remote_max_regions", "1048577"},
             {"remote_bind_wait_ms", "0"},    {"remote_bind_wait_ms", "600001"}};
  for (const Bad &b : bad) EXPECT_TRUE(gflags::SetCommandLineOption(b.flag, b.value).empty()) << b.flag << "=" << b.value;
  EXPECT_EQ(uint64_t{1} << 20, FLAGS_remote_piece_size);  // the refused values did not stick
  EXPECT_EQ(8, FLAGS_remote_max_inflight);
  EXPECT_EQ(4096, FLAGS_remote_max_regions);
  EXPECT_EQ(10000, FLAGS_remote_bind_wait_ms);
  rrpc_remote_limits l;
  rrpc_remote_limits_get(&l);
  EXPECT_EQ(size_t{1} << 20, l.piece_size);
  EXPECT_EQ(8, l.max_inflight);
  EXPECT_EQ(4096u, l.max_regions);
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_piece_size", "65536").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_inflight", "3").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_regions", "17").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_bind_wait_ms", "2500").empty());
  rrpc_remote_limits_get(&l);
  EXPECT_EQ(size_t{65536}, l.piece_size);
  EXPECT_EQ(3, l.max_inflight);
  EXPECT_EQ(17u, l.max_regions);
  EXPECT_EQ(2500, l.bind_wait_ms);
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_piece_size", "1048576").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_inflight", "8").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_max_regions", "4096").empty());
  ASSERT_FALSE(gflags::SetCommandLineOption("remote_bind_wait_ms", "10000").empty());
}

}  // namespace
