// remote_post_guard_rdma_test.cc - the guard that keeps a connection's QP
// alive across a one-sided post (transport/rdma/remote/carriage.c) is the
// connection's own: a post held in flight on one connection (car_observe.h's
// post hook, blocked on a condition this test controls) neither delays a
// post on another connection nor that other connection's teardown, and the
// teardown of the held post's own connection waits for it. In-process, two
// rrpc channels to one rrpc server over RDMA (Soft-RoCE in tools/rxe-vm).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#include "rrpc/remote.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

extern "C" {
#include "rrpc/remote/carriage.h"
#include "rrpc/remote/link.h"
#include "rrpc/transport.h"
#include "transport/rdma/remote/car_observe.h"
}

namespace {

using std::chrono::seconds;
constexpr size_t kLen = 64 << 10;           // each connection's region at the server
constexpr uint64_t kTag = 1ull << 61;        // above every wr_id a link uses
constexpr auto kBound = seconds(30);         // what "does not wait" means here

// ---- the server: a region on the caller's connection per "Reg" --------------

struct Server {
  std::mutex mu;
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<rrpc_remote_link *> links;
  std::vector<rrpc_remote_region *> regions;
};

Server &server() {
  static Server *s = new Server;
  return *s;
}

void RegHandler(void *, rrpc_server_call *call) {
  Server &sv = server();
  rrpc_iobuf *resp;
  rrpc_iobuf_new(&resp);
  {
    std::lock_guard<std::mutex> g(sv.mu);
    rrpc_remote_link *l = nullptr;
    rrpc_remote_region *r = nullptr;
    rrpc_remote_token t;
    sv.bufs.emplace_back(kLen);
    if (rrpc_server_call_remote_link(call, &l) == 0 &&
        rrpc_remote_region_register(l, sv.bufs.back().data(), kLen, RRPC_REMOTE_WRITE, &r) == 0 &&
        rrpc_remote_region_token(r, &t) == 0) {
      rrpc_iobuf_append(resp, t.bytes, sizeof t.bytes);
    } else {
      rrpc_controller_set_failed(rrpc_server_call_controller(call), 1, "register failed");
    }
    if (l) sv.links.push_back(l);
    if (r) sv.regions.push_back(r);
  }
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

// ---- the hooks: posts held per connection, teardowns seen ------------------

struct Hooks {
  std::mutex mu;
  std::condition_variable cv;
  rrpc__rmt_car *hold = nullptr;  // posts on this connection wait for `released`
  bool entered = false, released = false;
  std::map<rrpc__rmt_car *, std::vector<unsigned>> td;  // each teardown's in-flight counts
  std::map<uint64_t, int> wc;                          // completions of our wr_ids
};

Hooks &hooks() {
  static Hooks *h = new Hooks;
  return *h;
}

void OnPost(rrpc__rmt_car *c) {
  Hooks &h = hooks();
  std::unique_lock<std::mutex> g(h.mu);
  if (c != h.hold) return;
  h.entered = true;
  h.cv.notify_all();
  // Bounded: a test that failed before releasing does not hang the process.
  h.cv.wait_for(g, seconds(120), [&] { return h.released; });
}

void OnTeardown(rrpc__rmt_car *c, unsigned in_flight) {
  Hooks &h = hooks();
  std::lock_guard<std::mutex> g(h.mu);
  h.td[c].push_back(in_flight);
  h.cv.notify_all();
}

void OnWc(uint64_t wr_id, int status) {
  if (!(wr_id & kTag)) return;
  Hooks &h = hooks();
  std::lock_guard<std::mutex> g(h.mu);
  h.wc[wr_id] = status;
  h.cv.notify_all();
}

template <class Pred>
bool WaitFor(Pred p) {
  Hooks &h = hooks();
  std::unique_lock<std::mutex> g(h.mu);
  return h.cv.wait_for(g, kBound, p);
}

void Release() {
  Hooks &h = hooks();
  std::lock_guard<std::mutex> g(h.mu);
  h.released = true;
  h.cv.notify_all();
}

uint32_t Be32(const uint8_t *p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
uint64_t Be64(const uint8_t *p) { return uint64_t(Be32(p)) << 32 | Be32(p + 4); }

// One connection: a channel, its link and carriage, a region of the
// server's on it (rkey and address: the token's bytes 28 and 32,
// docs/remote-memory.md), a local buffer registered for raw posts.
struct Conn {
  rrpc_channel *ch = nullptr;
  rrpc_remote_link *link = nullptr;
  rrpc__rmt_car *car = nullptr;
  rrpc__rmt_car_mr *mr = nullptr;
  uint32_t rkey = 0;
  uint64_t raddr = 0;
  std::vector<uint8_t> local = std::vector<uint8_t>(kLen, 0x5a);

  ~Conn() {
    Close();
    if (mr) rrpc__rmt_car_free(mr);  // local only: outlives the connection
  }
  std::string Up(const std::string &addr) {
    rrpc_channel_options co = {};
    co.timeout_ms = 20000;
    co.use_rdma = 1;
    if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) return "channel";
    rrpc_controller *c;
    rrpc_controller_new(&c);
    rrpc_iobuf *rq, *rs;
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    int rc = rrpc_channel_call(ch, "test.Guard", "Reg", c, rq, rs, nullptr, nullptr);
    bool rdma = rc == 0 && rrpc_controller_used_rdma(c);
    std::string tok = rrpc_test::iobuf_string(rs);
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    if (rc != 0) return "Reg call: " + std::to_string(rc);
    if (!rdma) return "the call did not use RDMA";
    if (tok.size() != RRPC_REMOTE_TOKEN_LEN) return "token";
    const uint8_t *t = reinterpret_cast<const uint8_t *>(tok.data());
    rkey = Be32(t + 28);
    raddr = Be64(t + 32);
    if (rrpc_channel_remote_link(ch, &link) != 0) return "link";
    car = rrpc__rmt_car_of(rrpc__rmt_link_socket(link));
    if (car == nullptr) return "no one-sided carriage";
    uint32_t unused;
    if (rrpc__rmt_car_reg(car, local.data(), local.size(), 0, &mr, &unused) != 0) return "local MR";
    return "";
  }
  // One raw RDMA WRITE of len bytes into the server's region: the post's code.
  int Post(uint64_t id, uint32_t len = 4096) {
    return rrpc__rmt_car_post(car, 1, local.data(), rrpc__rmt_car_lkey(mr), len, raddr, rkey, kTag | id);
  }
  // Ends the connection: its verbs objects go to the teardown.
  void Close() {
    if (link) rrpc__socket_fail(rrpc__rmt_link_socket(link), -RRPC_ECLOSE);
    rrpc_remote_link_release(link);
    link = nullptr;
    rrpc_channel_free(ch);
    ch = nullptr;
  }
};

class RemotePostGuard : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
    {
      Hooks &h = hooks();
      std::lock_guard<std::mutex> g(h.mu);
      h.hold = nullptr;
      h.entered = h.released = false;
      h.td.clear();
      h.wc.clear();
    }
    rrpc__rmt_car_observe(OnWc);
    rrpc__rmt_car_hook_post(OnPost);
    rrpc__rmt_car_hook_teardown(OnTeardown);
    rrpc_server_options so = {};
    so.use_rdma = 1;
    ASSERT_EQ(0, rrpc_server_new(&so, &srv_));
    rrpc_server_add_method(srv_, "test.Guard", "Reg", RegHandler, nullptr);
    ASSERT_EQ(0, rrpc_server_start(srv_, (rrpc_test::rdma_test_addr() + ":0").c_str()));
    std::string addr = rrpc_test::rdma_test_addr() + ":" + std::to_string(rrpc_server_port(srv_));
    ASSERT_EQ("", a_.Up(addr));
    ASSERT_EQ("", b_.Up(addr));
    ASSERT_NE(a_.car, b_.car);
  }
  void TearDown() override {
    Release();  // whatever a failed assertion left held
    if (held_.joinable()) held_.join();
    a_.Close();
    b_.Close();
    {
      Server &sv = server();
      std::lock_guard<std::mutex> g(sv.mu);
      for (auto *r : sv.regions) rrpc_remote_region_free(r);
      for (auto *l : sv.links) rrpc_remote_link_release(l);
      sv.regions.clear();
      sv.links.clear();
    }
    if (srv_) rrpc_server_free(srv_);
    rrpc__rmt_car_hook_post(nullptr);
    rrpc__rmt_car_hook_teardown(nullptr);
    rrpc__rmt_car_observe(nullptr);
  }
  // A's post (wr_id 1) held in flight on its own thread.
  void HoldAPost() {
    {
      Hooks &h = hooks();
      std::lock_guard<std::mutex> g(h.mu);
      h.hold = a_.car;
    }
    held_ = std::thread([this] { held_rc_ = a_.Post(1); });
    ASSERT_TRUE(WaitFor([] { return hooks().entered; })) << "A's post never reached the hook";
  }
  rrpc_server *srv_ = nullptr;
  Conn a_, b_;
  std::thread held_;
  int held_rc_ = -1;
};

TEST_F(RemotePostGuard, APostOnOneConnectionDoesNotWaitForAnothersPostInFlight) {
  HoldAPost();
  // B's post, bounded: it must not wait for A's.
  auto b = std::async(std::launch::async, [this] { return b_.Post(2); });
  bool b_done = b.wait_for(kBound) == std::future_status::ready;
  EXPECT_TRUE(b_done) << "a post on B waited for A's post in flight";
  if (!b_done) Release();  // B's post then ends, and so does this test
  EXPECT_EQ(0, b.get());
  EXPECT_TRUE(WaitFor([] { return hooks().wc.count(kTag | 2) == 1; })) << "B's write never completed";
  {
    std::lock_guard<std::mutex> g(hooks().mu);
    EXPECT_EQ(IBV_WC_SUCCESS, hooks().wc[kTag | 2]);
    EXPECT_FALSE(hooks().released);  // A's post was in flight all along
  }
  Release();
  held_.join();
  EXPECT_EQ(0, held_rc_);
  EXPECT_TRUE(WaitFor([] { return hooks().wc.count(kTag | 1) == 1; })) << "A's write never completed";
  std::lock_guard<std::mutex> g(hooks().mu);
  EXPECT_EQ(IBV_WC_SUCCESS, hooks().wc[kTag | 1]);
}

TEST_F(RemotePostGuard, ATeardownWaitsForItsOwnPostsInFlightOnly) {
  HoldAPost();
  rrpc__rmt_car *a = a_.car, *b = b_.car;
  // B's teardown: nothing of B's is in flight, so it goes through at once.
  b_.Close();
  bool b_done = WaitFor([&] {
    auto it = hooks().td.find(b);
    return it != hooks().td.end() && !it->second.empty() && it->second.back() == 0;
  });
  EXPECT_TRUE(b_done) << "B's teardown waited for A's post in flight";
  if (!b_done) return;  // TearDown releases A's post
  // A's teardown finds A's post in flight and waits for it.
  a_.Close();
  ASSERT_TRUE(WaitFor([&] {
    auto it = hooks().td.find(a);
    return it != hooks().td.end() && !it->second.empty();
  })) << "A's teardown never started";
  {
    std::lock_guard<std::mutex> g(hooks().mu);
    EXPECT_EQ(std::vector<unsigned>{1u}, hooks().td[a]) << "A's teardown did not wait for A's post";
    // B's teardown found nothing in flight. (A freed endpoint's address may
    // be a later one's, whose teardown then reports here too: nothing posts
    // on those.)
    for (unsigned n : hooks().td[b]) EXPECT_EQ(0u, n);
  }
  Release();
  held_.join();
  // The post took the QP before the teardown marked it dead: it was made.
  EXPECT_EQ(0, held_rc_);
  EXPECT_TRUE(WaitFor([&] { return hooks().td[a].size() >= 2; })) << "A's teardown did not finish once its post was done";
  std::lock_guard<std::mutex> g(hooks().mu);
  EXPECT_EQ(0u, hooks().td[a][1]);
}

}  // namespace
