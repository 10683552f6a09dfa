// request_pack_unittest.cc - a request issued on its connection's loop is
// packed straight into the connection's pending output before the call is
// enrolled; these reach each edge where it must be taken back or refused,
// on demand (the channel's test hook runs between the pack and the
// enrolment): the connection closing there (the call moves to a fresh
// connection, the packed bytes never count again), a cancel there (the call
// ends with ECANCELED, its request never reaches the server), and the
// connection's unwritten-bytes cap refusing a request behind a packed one.
#include <gtest/gtest.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "rrpc/internal/request_pack_hook.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

extern "C" void rrpc__socket_fail(struct rrpc__socket *s, int code);

namespace {

std::atomic<int> g_requests{0};

// The first call's response waits (its handler runs on the server's pool)
// until the test thread is back from issuing it: that thread held the
// connection's write token while it wrote, and a response read while it
// still did (the thread preempted on a loaded host) would have the chain's
// next call find the token taken and skip the packed path under test.
std::mutex g_gate_mu;
std::condition_variable g_gate_cv;
bool g_gate_open = false;

void open_gate() {
  std::lock_guard<std::mutex> g(g_gate_mu);
  g_gate_open = true;
  g_gate_cv.notify_all();
}

void echo_handler(void *, rrpc_server_call *call) {
  g_requests.fetch_add(1);
  if (rrpc_test::iobuf_string(rrpc_server_call_request(call)) == "gate") {
    std::unique_lock<std::mutex> g(g_gate_mu);
    g_gate_cv.wait_for(g, std::chrono::seconds(10), [] { return g_gate_open; });
  }
  const rrpc_iobuf *req = rrpc_server_call_request(call);
  if (rrpc_iobuf_length(req) <= 1024) {
    rrpc_server_call_respond(call, req);
    return;
  }
  // A large request is answered by its length: the cap test's limit is the
  // process's, so a large echo could meet it on the server's side too (with
  // an earlier response still counted there) and close the connection.
  rrpc_iobuf *ack = nullptr;
  rrpc_iobuf_new(&ack);
  std::string n = "len=" + std::to_string(rrpc_iobuf_length(req));
  rrpc_iobuf_append(ack, n.data(), n.size());
  rrpc_server_call_respond(call, ack);
  rrpc_iobuf_free(ack);
}

// What the hook does to the one call it is aimed at; it counts the packed
// requests it saw of that call and of any other.
enum class Edge { kNone, kClose, kCancel };
std::atomic<rrpc_controller *> g_target{nullptr};
std::atomic<Edge> g_edge{Edge::kNone};
std::atomic<int> g_hits{0}, g_other{0};

void packed_hook(struct rrpc__socket *s, rrpc_controller *cntl) {
  if (cntl != g_target.load()) {
    g_other.fetch_add(1);
    return;
  }
  g_target.store(nullptr);  // once: a retry on a fresh connection goes through
  g_hits.fetch_add(1);
  if (g_edge.load() == Edge::kClose) rrpc__socket_fail(s, -RRPC_ECLOSE);
  if (g_edge.load() == Edge::kCancel) rrpc_controller_cancel(cntl);
}

// One async call's end.
struct Done {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  int code = 1;
  std::string response;
  rrpc_controller *cntl = nullptr;
  rrpc_iobuf *req = nullptr, *resp = nullptr;
  Done() {
    rrpc_controller_new(&cntl);
    rrpc_iobuf_new(&req);
    rrpc_iobuf_new(&resp);
  }
  ~Done() {
    rrpc_controller_free(cntl);
    rrpc_iobuf_free(req);
    rrpc_iobuf_free(resp);
  }
  static void run(void *arg, rrpc_controller *c) {
    Done *d = static_cast<Done *>(arg);
    std::lock_guard<std::mutex> g(d->mu);
    d->code = rrpc_controller_error_code(c);
    d->response = rrpc_test::iobuf_string(d->resp);
    d->done = true;
    d->cv.notify_all();
  }
  void wait() {
    std::unique_lock<std::mutex> g(mu);
    cv.wait(g, [&] { return done; });
  }
};

// The first call's done runs on the connection's loop and issues the next
// ones there: the first of them packed into the pending output (the loop
// takes the free token), the later ones behind it in the same round.
struct Chain {
  rrpc_channel *ch = nullptr;
  Done first, second, third;
  bool with_third = false;
  int rc2 = 1, rc3 = 1;
  static void on_first(void *arg, rrpc_controller *c) {
    Chain *k = static_cast<Chain *>(arg);
    k->rc2 = rrpc_channel_call(k->ch, "test.Echo", "Echo", k->second.cntl, k->second.req, k->second.resp,
                               Done::run, &k->second);
    if (k->with_third)
      k->rc3 = rrpc_channel_call(k->ch, "test.Echo", "Echo", k->third.cntl, k->third.req, k->third.resp,
                                 Done::run, &k->third);
    Done::run(&k->first, c);
  }
  void start() {
    rrpc_iobuf_append(first.req, "gate", 4);
    ASSERT_EQ(0, rrpc_channel_call(ch, "test.Echo", "Echo", first.cntl, first.req, first.resp, on_first, this));
    open_gate();
  }
};

uint64_t unwritten_now() {
  rrpc_limit_stats st;
  rrpc_limit_stats_get(&st);
  return st.unwritten_bytes;
}

// Every byte counted as unwritten is written or given back: waits (bounded)
// for the writers' accounting to settle after their sends.
bool unwritten_settles() {
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (unwritten_now() != 0) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

class RequestPack : public ::testing::Test {
 protected:
  void SetUp() override {
    g_requests = 0;
    g_hits = 0;
    g_other = 0;
    g_target = nullptr;
    g_edge = Edge::kNone;
    g_gate_open = false;
    ASSERT_EQ(0, rrpc_server_new(nullptr, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.Echo", "Echo", echo_handler, nullptr));
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    std::string addr = "127.0.0.1:" + std::to_string(rrpc_server_port(server_));
    rrpc_channel_options co = {};
    co.timeout_ms = 5000;
    ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &chain_.ch));
    rrpc__request_packed_hook = packed_hook;
  }
  void TearDown() override {
    rrpc__request_packed_hook = nullptr;
    rrpc_channel_free(chain_.ch);
    rrpc_server_free(server_);
  }
  rrpc_server *server_ = nullptr;
  Chain chain_;
};

TEST_F(RequestPack, ConnectionClosedBetweenPackAndEnrolmentRetriesOnAFreshOne) {
  rrpc_iobuf_append(chain_.second.req, "second", 6);
  g_target = chain_.second.cntl;
  g_edge = Edge::kClose;
  chain_.start();
  chain_.first.wait();
  chain_.second.wait();
  EXPECT_EQ(0, chain_.rc2);
  EXPECT_EQ(1, g_hits.load()) << "the second request was not packed into the pending output";
  EXPECT_EQ(0, chain_.second.code) << rrpc_controller_error_text(chain_.second.cntl);
  EXPECT_EQ("second", chain_.second.response);
  EXPECT_EQ(2, g_requests.load());
  EXPECT_TRUE(unwritten_settles()) << unwritten_now() << " bytes still counted as unwritten";
}

TEST_F(RequestPack, CancelBetweenPackAndEnrolmentSendsNothing) {
  rrpc_iobuf_append(chain_.second.req, "second", 6);
  g_target = chain_.second.cntl;
  g_edge = Edge::kCancel;
  chain_.start();
  chain_.first.wait();
  chain_.second.wait();
  EXPECT_EQ(0, chain_.rc2);
  EXPECT_EQ(1, g_hits.load()) << "the second request was not packed into the pending output";
  EXPECT_EQ(-ECANCELED, chain_.second.code);
  // A later call on the same connection: had the canceled request gone
  // out, the server would have read it first.
  Done last;
  rrpc_iobuf_append(last.req, "last", 4);
  ASSERT_EQ(0, rrpc_channel_call(chain_.ch, "test.Echo", "Echo", last.cntl, last.req, last.resp, nullptr, nullptr));
  EXPECT_EQ("last", rrpc_test::iobuf_string(last.resp));
  EXPECT_EQ(2, g_requests.load()) << "the canceled request reached the server";
  EXPECT_TRUE(unwritten_settles()) << unwritten_now() << " bytes still counted as unwritten";
}

TEST_F(RequestPack, CapRefusesARequestBehindAPackedOne) {
  rrpc_limits saved, small;
  rrpc_limits_get(&saved);
  small = saved;
  small.socket_max_unwritten_bytes = 4096;
  // The second is over the cap alone (a connection with nothing queued
  // may always queue one message); the third is refused behind it.
  std::string big(16384, 'b');
  rrpc_iobuf_append(chain_.second.req, big.data(), big.size());
  rrpc_iobuf_append(chain_.third.req, "third", 5);
  chain_.with_third = true;
  g_target = chain_.second.cntl;
  rrpc_limits_set(&small);
  chain_.start();
  chain_.first.wait();
  chain_.second.wait();
  chain_.third.wait();
  rrpc_limits_set(&saved);
  EXPECT_EQ(1, g_hits.load()) << "the second request was not packed into the pending output";
  EXPECT_EQ(0, g_other.load()) << "the third request was packed past the cap";
  EXPECT_EQ(0, chain_.second.code) << rrpc_controller_error_text(chain_.second.cntl);
  EXPECT_EQ("len=" + std::to_string(big.size()), chain_.second.response);
  EXPECT_EQ(0, chain_.rc3);
  EXPECT_EQ(-RRPC_EOVERCROWDED, chain_.third.code) << rrpc_controller_error_text(chain_.third.cntl);
  EXPECT_EQ(2, g_requests.load());
  EXPECT_TRUE(unwritten_settles()) << unwritten_now() << " bytes still counted as unwritten";
}

}  // namespace
