// rpc_unittest.cc - end-to-end tests of the C API over TCP loopback:
// channel + server + controller, attachments, concurrency, timeouts,
// unknown service/method, malformed frames, a server killed mid-call.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/errors.h"
#include "rrpc/internal/baidu_std.h"
#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/common/test_util.h"

namespace {

using rrpc_test::pattern;
using rrpc_test::iobuf_string;

// ---- handlers ---------------------------------------------------------------

void echo_handler(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  // Echo the attachment back by sharing its blocks.
  rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), rrpc_controller_request_attachment(c));
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

void fail_handler(void *, rrpc_server_call *call) {
  rrpc_controller_set_failed(rrpc_server_call_controller(call), 7777, "told to fail");
  rrpc_server_call_respond(call, nullptr);
}

// Responds from another thread after the number of milliseconds in the request.
void late_handler(void *, rrpc_server_call *call) {
  int ms = std::atoi(iobuf_string(rrpc_server_call_request(call)).c_str());
  std::thread([call, ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));  // the server's behaviour under test
    rrpc_iobuf *b;
    rrpc_iobuf_new(&b);
    rrpc_iobuf_append(b, "late", 4);
    rrpc_server_call_respond(call, b);
    rrpc_iobuf_free(b);
  }).detach();
}

struct Held {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<rrpc_server_call *> calls;
};

void hold_handler(void *arg, rrpc_server_call *call) {
  Held *h = static_cast<Held *>(arg);
  std::lock_guard<std::mutex> g(h->mu);
  h->calls.push_back(call);
  h->cv.notify_all();
}

void add_methods(rrpc_server *s, Held *held) {
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Fail", fail_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Late", late_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Hold", hold_handler, held));
}

// ---- a server in a child process (for kill -9) -----------------------------
// When this binary runs with RRPC_TEST_CHILD_SERVER set, it serves Hold on an
// ephemeral port, prints the port, and waits to be killed.
__attribute__((constructor)) void maybe_child_server() {
  if (getenv("RRPC_TEST_CHILD_SERVER") == nullptr) return;
  static Held held;
  rrpc_server *s;
  if (rrpc_server_new(nullptr, &s) != 0) _exit(2);
  rrpc_server_add_method(s, "test.EchoService", "Hold", hold_handler, &held);
  rrpc_server_add_method(s, "test.EchoService", "Echo", echo_handler, nullptr);
  if (rrpc_server_start(s, "127.0.0.1:0") != 0) _exit(3);
  printf("%d\n", rrpc_server_port(s));
  fflush(stdout);
  for (;;) pause();
}

class RpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    rrpc_server_options o = {};
    o.max_body_size = 16u << 20;
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    add_methods(server_, &held_);
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    port_ = rrpc_server_port(server_);
    ASSERT_GT(port_, 0);
    addr_ = "127.0.0.1:" + std::to_string(port_);
    rrpc_channel_options co = {};
    co.timeout_ms = 5000;
    co.max_body_size = 16u << 20;
    ASSERT_EQ(0, rrpc_channel_new(addr_.c_str(), &co, &channel_));
  }
  void TearDown() override {
    rrpc_channel_free(channel_);
    release_held();
    rrpc_server_free(server_);
  }
  void release_held() {
    std::lock_guard<std::mutex> g(held_.mu);
    for (auto *c : held_.calls) rrpc_server_call_respond(c, nullptr);
    held_.calls.clear();
  }
  // A sync call; returns the code and fills the response and attachment.
  int call(const char *method, const std::string &req, const std::string &att, std::string *resp,
           std::string *resp_att, int32_t timeout_ms = 0) {
    rrpc_controller *c;
    EXPECT_EQ(0, rrpc_controller_new(&c));
    rrpc_controller_set_timeout_ms(c, timeout_ms);
    rrpc_iobuf *rq, *rs;
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    rrpc_iobuf_append(rq, req.data(), req.size());
    rrpc_iobuf_append(rrpc_controller_request_attachment(c), att.data(), att.size());
    int rc = rrpc_channel_call(channel_, "test.EchoService", method, c, rq, rs, nullptr, nullptr);
    EXPECT_EQ(rc, rrpc_controller_error_code(c));
    if (resp) *resp = iobuf_string(rs);
    if (resp_att) *resp_att = iobuf_string(rrpc_controller_response_attachment(c));
    last_error_ = rrpc_controller_error_text(c);
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    return rc;
  }

  rrpc_server *server_ = nullptr;
  rrpc_channel *channel_ = nullptr;
  Held held_;
  int port_ = 0;
  std::string addr_;
  std::string last_error_;
};

TEST_F(RpcTest, SyncEcho) {
  std::string resp, att;
  ASSERT_EQ(0, call("Echo", "hello", "attach", &resp, &att));
  EXPECT_EQ("hello", resp);
  EXPECT_EQ("attach", att);
}

TEST_F(RpcTest, AttachmentSizes) {
  const size_t sizes[] = {0, 1, 64, 4095, 4096, 8193, 65536, 1u << 20, 8u << 20};
  unsigned seed = 1;
  for (size_t n : sizes) {
    std::string req = pattern(n / 3, seed), att = pattern(n, seed + 1), resp, ratt;
    ASSERT_EQ(0, call("Echo", req, att, &resp, &ratt)) << n << ": " << last_error_;
    EXPECT_TRUE(resp == req) << n;
    EXPECT_TRUE(ratt == att) << n;
    seed += 2;
  }
}

TEST_F(RpcTest, SixtyFourConcurrentCallers) {
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 64; t++) {
    ts.emplace_back([this, t, &failures] {
      for (int i = 0; i < 50; i++) {
        std::string req = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::string att = pattern((size_t)(t * 97 + i) % 3000, (unsigned)t), resp, ratt;
        if (call("Echo", req, att, &resp, &ratt) != 0 || resp != req || ratt != att) failures++;
      }
    });
  }
  for (auto &t : ts) t.join();
  EXPECT_EQ(0, failures.load());
}

// Callers on a single connection take it without the channel's lock
// (channel.c, conn_get_fast), and the connection they load may be replaced
// and freed under them: here the server restarts under eight calling
// threads, so the channel's connection breaks, is retired and replaced
// again and again. Every call ends, calls succeed again afterwards, and
// under TSan/ASan no race or use after free shows.
TEST_F(RpcTest, CallersWhileTheSingleConnectionIsReplaced) {
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  auto one_call = [this]() {
    rrpc_controller *c;
    rrpc_iobuf *rq, *rs;
    if (rrpc_controller_new(&c) != 0) return -1;
    rrpc_controller_set_timeout_ms(c, 2000);
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    rrpc_iobuf_append(rq, "x", 1);
    int rc = rrpc_channel_call(channel_, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
    if (rc == 0 && iobuf_string(rs) != "x") rc = -1;
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    return rc;
  };
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; t++) {
    ts.emplace_back([&] {
      while (!stop.load()) (one_call() == 0 ? ok : failed)++;
    });
  }
  for (int round = 0; round < 8; round++) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // calls flow on this connection
    rrpc_server_free(server_);  // closes it under the callers
    server_ = nullptr;
    rrpc_server_options o = {};
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    add_methods(server_, &held_);
    ASSERT_EQ(0, rrpc_server_start(server_, addr_.c_str()));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  stop = true;
  for (auto &t : ts) t.join();
  EXPECT_GT(ok.load(), 0);
  EXPECT_EQ(0, one_call());
  std::printf("calls: %d succeeded, %d failed while the server restarted\n", ok.load(), failed.load());
}

// ---- responses from a scripted server ------------------------------------------
// The client cuts a read that holds one lone response straight into the
// caller's iobufs (channel.c, on_lone_response) and reads of several through
// its batch: every kind of response must come out the same either way.

std::string ResponseFrame(int64_t cid, const std::string &payload, const std::string &att, int32_t error_code = 0,
                          const std::string &error_text = "") {
  rrpc__rpc_meta m;
  memset(&m, 0, sizeof m);
  m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
  m.correlation_id = cid;
  if (error_code != 0) {
    m.has |= RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT;
    m.error_code = error_code;
    m.error_text = rrpc__str{error_text.data(), error_text.size()};
  }
  rrpc_iobuf *out, *p, *a;
  rrpc_iobuf_new(&out);
  rrpc_iobuf_new(&p);
  rrpc_iobuf_new(&a);
  rrpc_iobuf_append(p, payload.data(), payload.size());
  rrpc_iobuf_append(a, att.data(), att.size());
  EXPECT_EQ(0, rrpc__baidu_pack(out, &m, p, a));
  std::string s = iobuf_string(out);
  rrpc_iobuf_free(out);
  rrpc_iobuf_free(p);
  rrpc_iobuf_free(a);
  return s;
}

// A response whose attachment_size is past its body: the call fails, the
// stream stays in sync.
std::string BadAttachmentFrame(int64_t cid) {
  rrpc__rpc_meta m;
  memset(&m, 0, sizeof m);
  m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID | RRPC_META_HAS_ATTACHMENT_SIZE;
  m.correlation_id = cid;
  m.attachment_size = 100;
  std::string meta(rrpc__rpc_meta_size(&m), '\0');
  rrpc__rpc_meta_encode(&m, reinterpret_cast<uint8_t *>(&meta[0]));
  std::string body = meta + "0123456789";
  return rrpc_test::frame_header(static_cast<uint32_t>(body.size()), static_cast<uint32_t>(meta.size())) + body;
}

TEST(ClientResponses, LoneAndBatchedResponsesOfEveryKind) {
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof sa;
  ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
  ASSERT_EQ(0, listen(lfd, 1));
  ASSERT_EQ(0, getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &len));
  const int port = ntohs(sa.sin_port);

  // The server's answer to the k-th request, whose correlation id is cid.
  auto script = [](int k, int64_t cid, int fd) {
    std::string out;
    switch (k) {
      case 0: out = BadAttachmentFrame(cid); break;
      case 1: out = ResponseFrame(cid, "", "", 1234, "told to fail"); break;
      case 2:  // a late response alone in its read, then the answer
        out = ResponseFrame(cid + 1000, "late", "x");
        (void)!write(fd, out.data(), out.size());
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        out = ResponseFrame(cid, "p2", "a2");
        break;
      case 3: out = ResponseFrame(cid + 1000, "late", "x") + ResponseFrame(cid, "p3", "a3"); break;  // one read
      case 4: out = BadAttachmentFrame(cid + 1000) + BadAttachmentFrame(cid); break;
      default: out = ResponseFrame(cid, "p" + std::to_string(k), std::string(k * 100, 'a')); break;
    }
    (void)!write(fd, out.data(), out.size());
  };
  std::thread server([&] {
    int fd = accept(lfd, nullptr, nullptr);
    if (fd < 0) return;
    rrpc_iobuf *in;
    rrpc_iobuf_new(&in);
    char buf[4096];
    int k = 0;
    for (;;) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n <= 0) break;
      rrpc_iobuf_append(in, buf, static_cast<size_t>(n));
      rrpc__baidu_msg msg;
      while (rrpc__baidu_cut(in, 0, &msg) == 1) {
        script(k++, msg.meta.correlation_id, fd);
        rrpc__baidu_msg_destroy(&msg);
      }
    }
    rrpc_iobuf_free(in);
    close(fd);
  });

  rrpc_channel *ch;
  rrpc_channel_options co = {};
  co.timeout_ms = 2000;
  ASSERT_EQ(0, rrpc_channel_new(("127.0.0.1:" + std::to_string(port)).c_str(), &co, &ch));
  auto call = [&](std::string *resp, std::string *att) {
    rrpc_controller *c;
    rrpc_iobuf *rq, *rs;
    EXPECT_EQ(0, rrpc_controller_new(&c));
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    rrpc_iobuf_append(rs, "old:", 4);  // a response is appended to what the caller's iobuf holds
    rrpc_iobuf_append(rq, "q", 1);
    int rc = rrpc_channel_call(ch, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
    *resp = iobuf_string(rs);
    *att = iobuf_string(rrpc_controller_response_attachment(c));
    if (rc != 0) *resp = rrpc_controller_error_text(c);
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    return rc;
  };
  std::string resp, att;
  EXPECT_EQ(-RRPC_ERESPONSE, call(&resp, &att)) << resp;
  EXPECT_EQ(-1234, call(&resp, &att));  // the code comes back negative, as from rrpc_channel_call
  EXPECT_EQ("told to fail", resp);
  const uint64_t late = rrpc_channel_late_responses(ch);
  EXPECT_EQ(0, call(&resp, &att));
  EXPECT_EQ("old:p2", resp);
  EXPECT_EQ("a2", att);
  EXPECT_EQ(0, call(&resp, &att));
  EXPECT_EQ("old:p3", resp);
  EXPECT_EQ("a3", att);
  EXPECT_EQ(late + 2, rrpc_channel_late_responses(ch));
  EXPECT_EQ(-RRPC_ERESPONSE, call(&resp, &att)) << resp;
  for (int k = 5; k < 8; k++) {
    EXPECT_EQ(0, call(&resp, &att));
    EXPECT_EQ("old:p" + std::to_string(k), resp);
    EXPECT_EQ(std::string(k * 100, 'a'), att);
  }
  rrpc_channel_free(ch);
  server.join();
  close(lfd);
}

struct AsyncState {
  std::mutex mu;
  std::condition_variable cv;
  int done = 0;
  int failed = 0;
  std::vector<int> times_called;
};

struct AsyncCall {
  AsyncState *st;
  int idx;
  rrpc_controller *cntl;
  rrpc_iobuf *req, *resp;
  std::string expect;
};

void async_done(void *arg, rrpc_controller *c) {
  AsyncCall *a = static_cast<AsyncCall *>(arg);
  bool ok = !rrpc_controller_failed(c) && iobuf_string(a->resp) == a->expect;
  std::lock_guard<std::mutex> g(a->st->mu);
  a->st->times_called[a->idx]++;
  if (!ok) a->st->failed++;
  a->st->done++;
  a->st->cv.notify_all();
}

// n asynchronous calls with their own controllers and buffers. The
// destructor waits for every issued call's callback before freeing, so an
// assertion that ends a test early cannot free memory a callback still uses.
struct AsyncBatch {
  AsyncState st;
  std::vector<AsyncCall> calls;
  int issued = 0;

  explicit AsyncBatch(int n) : calls((size_t)n) {
    st.times_called.assign((size_t)n, 0);
    for (int i = 0; i < n; i++) {
      AsyncCall &a = calls[(size_t)i];
      a.st = &st;
      a.idx = i;
      rrpc_controller_new(&a.cntl);
      rrpc_iobuf_new(&a.req);
      rrpc_iobuf_new(&a.resp);
    }
  }
  ~AsyncBatch() {
    wait_for(issued);
    for (auto &a : calls) {
      rrpc_controller_free(a.cntl);
      rrpc_iobuf_free(a.req);
      rrpc_iobuf_free(a.resp);
    }
  }
  // Call i sends `text` and expects it back.
  void set_request(int i, const std::string &text) {
    AsyncCall &a = calls[(size_t)i];
    a.expect = text;
    rrpc_iobuf_append(a.req, text.data(), text.size());
  }
  int issue(rrpc_channel *ch, const char *method, int i) {
    AsyncCall &a = calls[(size_t)i];
    int rc = rrpc_channel_call(ch, "test.EchoService", method, a.cntl, a.req, a.resp, async_done, &a);
    if (rc == 0) issued++;
    return rc;
  }
  int issue(rrpc_channel *ch, const rrpc_method *m, int i) {
    AsyncCall &a = calls[(size_t)i];
    int rc = rrpc_channel_call_method(ch, m, a.cntl, a.req, a.resp, async_done, &a);
    if (rc == 0) issued++;
    return rc;
  }
  void wait_for(int n) {
    std::unique_lock<std::mutex> g(st.mu);
    st.cv.wait(g, [&] { return st.done >= n; });
  }
  void wait_all() { wait_for((int)calls.size()); }
};

TEST_F(RpcTest, AsyncManyInFlight) {
  const int n = 512;
  AsyncBatch b(n);
  for (int i = 0; i < n; i++) {
    b.set_request(i, "req-" + std::to_string(i));
    ASSERT_EQ(0, b.issue(channel_, "Echo", i));
  }
  b.wait_all();
  EXPECT_EQ(0, b.st.failed);
  for (int i = 0; i < n; i++) EXPECT_EQ(1, b.st.times_called[(size_t)i]) << i;
}

// The default server runs Echo on its worker pool: workers hand finished
// call objects back to the connection's returned list while the loop takes
// that list whole, trims it to its spare cap (freeing the rest) and reuses
// the calls. A pusher once read the count out of the list's head, which the
// loop could have taken and freed meanwhile (a read of freed memory, seen by
// TSan in CxxRpcTest.ManyThreadsOnOneChannel). Rounds of bursts larger than
// the cap make the loop trim while workers push; TSan and ASan watch.
TEST_F(RpcTest, PoolWorkersReturnCallsWhileTheLoopTrimsThem) {
  const int threads = 6, rounds = 12, n = 64;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; t++)
    ts.emplace_back([&, t] {
      for (int r = 0; r < rounds; r++) {
        AsyncBatch b(n);
        for (int i = 0; i < n; i++) {
          b.set_request(i, std::to_string(t) + "-" + std::to_string(r) + "-" + std::to_string(i));
          if (b.issue(channel_, "Echo", i) != 0) bad++;
        }
        b.wait_all();
        if (b.st.failed != 0) bad++;
        for (int i = 0; i < n; i++)
          if (b.st.times_called[(size_t)i] != 1) bad++;
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(0, bad.load());
}

// A prepared method (rrpc_method) calls as its names do: the same echo,
// sync and async, the same errors for a method the server lacks; bad names
// are refused when it is made, and it may be freed as soon as the calls
// through it have returned (async ones still in flight).
TEST_F(RpcTest, PreparedMethodCallsAsItsNames) {
  rrpc_method *m = reinterpret_cast<rrpc_method *>(1);
  EXPECT_EQ(-EINVAL, rrpc_method_new(nullptr, "Echo", &m));
  EXPECT_EQ(nullptr, m);
  EXPECT_EQ(-EINVAL, rrpc_method_new("test.EchoService", nullptr, &m));
  EXPECT_EQ(-EINVAL, rrpc_method_new("", "Echo", &m));
  EXPECT_EQ(-EINVAL, rrpc_method_new("test.EchoService", "", &m));
  std::string longest(RRPC_METHOD_NAME_MAX, 'x');
  EXPECT_EQ(-EINVAL, rrpc_method_new((longest + "x").c_str(), "Echo", &m));
  EXPECT_EQ(-EINVAL, rrpc_method_new("test.EchoService", nullptr, nullptr));
  ASSERT_EQ(0, rrpc_method_new(longest.c_str(), longest.c_str(), &m));
  rrpc_method_free(m);
  rrpc_method_free(nullptr);

  ASSERT_EQ(0, rrpc_method_new("test.EchoService", "Echo", &m));
  EXPECT_STREQ("test.EchoService", rrpc_method_service(m));
  EXPECT_STREQ("Echo", rrpc_method_name(m));
  rrpc_controller *c;
  ASSERT_EQ(0, rrpc_controller_new(&c));
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "prepared", 8);
  rrpc_iobuf_append(rrpc_controller_request_attachment(c), "att", 3);
  EXPECT_EQ(-EINVAL, rrpc_channel_call_method(channel_, nullptr, c, rq, rs, nullptr, nullptr));
  EXPECT_EQ(-EINVAL, rrpc_channel_call_method(nullptr, m, c, rq, rs, nullptr, nullptr));
  ASSERT_EQ(0, rrpc_channel_call_method(channel_, m, c, rq, rs, nullptr, nullptr));
  EXPECT_EQ("prepared", iobuf_string(rs));
  EXPECT_EQ("att", iobuf_string(rrpc_controller_response_attachment(c)));
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);

  const int n = 64;
  AsyncBatch b(n);
  for (int i = 0; i < n; i++) {
    b.set_request(i, "prep-" + std::to_string(i));
    ASSERT_EQ(0, b.issue(channel_, m, i));
  }
  rrpc_method_free(m);  // the calls in flight hold nothing of it
  b.wait_all();
  EXPECT_EQ(0, b.st.failed);
  for (int i = 0; i < n; i++) EXPECT_EQ(1, b.st.times_called[(size_t)i]) << i;

  rrpc_method *missing;
  ASSERT_EQ(0, rrpc_method_new("test.EchoService", "NoSuchMethod", &missing));
  ASSERT_EQ(0, rrpc_controller_new(&c));
  EXPECT_EQ(-RRPC_ENOMETHOD, rrpc_channel_call_method(channel_, missing, c, nullptr, nullptr, nullptr, nullptr));
  EXPECT_NE(nullptr, strstr(rrpc_controller_error_text(c), "NoSuchMethod"));
  rrpc_controller_free(c);
  rrpc_method_free(missing);
}

TEST_F(RpcTest, UnknownServiceAndMethod) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  int rc = rrpc_channel_call(channel_, "test.NoSuchService", "Echo", c, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(-RRPC_ENOSERVICE, rc);
  EXPECT_NE(nullptr, strstr(rrpc_controller_error_text(c), "test.NoSuchService"));
  rc = rrpc_channel_call(channel_, "test.EchoService", "NoSuchMethod", c, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(-RRPC_ENOMETHOD, rc);
  EXPECT_NE(nullptr, strstr(rrpc_controller_error_text(c), "NoSuchMethod"));
  rrpc_controller_free(c);
  // The connection still serves.
  std::string resp;
  EXPECT_EQ(0, call("Echo", "still", "", &resp, nullptr));
  EXPECT_EQ("still", resp);
}

TEST_F(RpcTest, HandlerFailureCodeReachesClient) {
  EXPECT_EQ(-7777, call("Fail", "", "", nullptr, nullptr));
  EXPECT_EQ("told to fail", last_error_);
}

TEST_F(RpcTest, TimeoutThenLateResponseIsDropped) {
  std::string resp;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(-RRPC_ERPCTIMEDOUT, call("Late", "300", "", &resp, nullptr, 50));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 50);
  EXPECT_LT(ms, 280);
  // A later call on the same connection gets its own response, not the late one.
  EXPECT_EQ(0, call("Late", "1", "", &resp, nullptr, 2000));
  EXPECT_EQ("late", resp);
  EXPECT_EQ(0, call("Echo", "x", "", &resp, nullptr));
  EXPECT_EQ("x", resp);
}

// Calls with a timeout share their connection's deadline list and one loop
// timer (channel.c, "deadlines"); a call whose deadline is earlier than the
// list's tail keeps a timer of its own. Whichever way, each call that gets
// no answer fails with ERPCTIMEDOUT at its own deadline: not before it
// (latency >= timeout) and not at some other call's (well before the next
// longer timeout here). The upper bound is loose for a loaded CI machine.
TEST_F(RpcTest, MixedTimeoutsOnOneConnectionEachEndAtTheirOwnDeadline) {
  const int timeouts_ms[] = {400, 100, 300, 50, 200, 200, 600, 150};
  const int n = (int)(sizeof timeouts_ms / sizeof timeouts_ms[0]);
  AsyncBatch b(n);
  for (int i = 0; i < n; i++) {
    rrpc_controller_set_timeout_ms(b.calls[(size_t)i].cntl, timeouts_ms[i]);
    ASSERT_EQ(0, b.issue(channel_, "Hold", i));
  }
  {
    std::unique_lock<std::mutex> g(b.st.mu);
    bool all = b.st.cv.wait_for(g, std::chrono::seconds(10), [&] { return b.st.done == n; });
    if (!all) {
      g.unlock();
      release_held();  // lets the destructor's wait end
      FAIL() << "calls left without a timeout";
    }
  }
  for (int i = 0; i < n; i++) {
    rrpc_controller *c = b.calls[(size_t)i].cntl;
    EXPECT_EQ(-RRPC_ERPCTIMEDOUT, rrpc_controller_error_code(c)) << i;
    EXPECT_EQ(1, b.st.times_called[(size_t)i]) << i;
    EXPECT_GE(rrpc_controller_latency_us(c), (int64_t)timeouts_ms[i] * 1000) << i;
    EXPECT_LT(rrpc_controller_latency_us(c), (int64_t)(timeouts_ms[i] + 250) * 1000) << i;
  }
}

// The list's timer is armed for the first call's deadline and fires early
// once that call is answered: it must re-arm for the next call on the list
// (which then ends at its own deadline, not never), and a later call with a
// shorter timeout than the armed one must not wait for it.
TEST_F(RpcTest, DeadlineTimerRearmsAfterItsCallWasAnswered) {
  std::string resp;
  ASSERT_EQ(0, call("Echo", "a", "", &resp, nullptr, 50));  // arms the timer at +50 ms
  AsyncBatch b(2);
  rrpc_controller_set_timeout_ms(b.calls[0].cntl, 300);  // on the list, after the armed deadline
  ASSERT_EQ(0, b.issue(channel_, "Hold", 0));
  rrpc_controller_set_timeout_ms(b.calls[1].cntl, 5000);
  ASSERT_EQ(0, b.issue(channel_, "Hold", 1));
  {
    std::unique_lock<std::mutex> g(b.st.mu);
    bool first = b.st.cv.wait_for(g, std::chrono::seconds(3), [&] { return b.st.done >= 1; });
    if (!first) {
      g.unlock();
      release_held();
      FAIL() << "the 300 ms call did not time out";
    }
  }
  EXPECT_EQ(-RRPC_ERPCTIMEDOUT, rrpc_controller_error_code(b.calls[0].cntl));
  EXPECT_GE(rrpc_controller_latency_us(b.calls[0].cntl), 300000);
  EXPECT_EQ(0, b.st.times_called[1]);  // its deadline is seconds away
  // A shorter timeout than the one now armed (5 s): a timer of its own.
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(-RRPC_ERPCTIMEDOUT, call("Hold", "", "", nullptr, nullptr, 80));
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GE(ms, 80);
  EXPECT_LT(ms, 2000);
  release_held();  // answers the 5 s call
  b.wait_all();
  EXPECT_EQ(1, b.st.times_called[1]);
}

TEST_F(RpcTest, ServerStopFailsPendingCallsOnce) {
  const int n = 8;
  AsyncBatch b(n);
  for (int i = 0; i < n; i++) ASSERT_EQ(0, b.issue(channel_, "Hold", i));
  {
    std::unique_lock<std::mutex> g(held_.mu);
    held_.cv.wait(g, [&] { return (int)held_.calls.size() == n; });
  }
  rrpc_server_stop(server_);
  b.wait_all();
  for (int i = 0; i < n; i++) {
    EXPECT_EQ(1, b.st.times_called[(size_t)i]);
    EXPECT_EQ(-RRPC_ECLOSE, rrpc_controller_error_code(b.calls[(size_t)i].cntl));
  }
  release_held();  // responses after stop go nowhere, and nothing crashes
}

TEST(RpcKill, ServerKilledMidCallFailsEachPendingCallOnce) {
  rrpc_test::Child child = rrpc_test::spawn_self({"RRPC_TEST_CHILD_SERVER=1"});
  ASSERT_GT(child.pid, 0);
  pid_t pid = child.pid;
  std::string addr = std::string("127.0.0.1:") + std::to_string(atoi(child.first_output.c_str()));

  rrpc_channel_options co = {};
  co.timeout_ms = 20000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  // One completed call proves the child serves.
  rrpc_controller *c0;
  rrpc_controller_new(&c0);
  ASSERT_EQ(0, rrpc_channel_call(ch, "test.EchoService", "Echo", c0, nullptr, nullptr, nullptr, nullptr));
  rrpc_controller_free(c0);

  const int k = 16;
  {
    AsyncBatch b(k);
    for (int i = 0; i < k; i++) ASSERT_EQ(0, b.issue(ch, "Hold", i));
    kill(pid, SIGKILL);
    rrpc_test::wait_child(child);
    b.wait_all();
    for (int i = 0; i < k; i++) {
      EXPECT_EQ(1, b.st.times_called[(size_t)i]);
      EXPECT_EQ(-RRPC_ECLOSE, rrpc_controller_error_code(b.calls[(size_t)i].cntl));
    }
  }
  rrpc_channel_free(ch);
}

TEST(RpcConnect, RefusedConnectionFailsSyncAndAsyncOnce) {
  // Bind a port and close it, so nothing listens there.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, bind(fd, (sockaddr *)&sa, sizeof sa));
  socklen_t len = sizeof sa;
  getsockname(fd, (sockaddr *)&sa, &len);
  close(fd);
  std::string addr = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
  rrpc_channel *ch;
  rrpc_channel_options co = {};
  co.max_retry = -1;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  rrpc_controller *c;
  rrpc_controller_new(&c);
  EXPECT_EQ(-ECONNREFUSED, rrpc_channel_call(ch, "a.B", "C", c, nullptr, nullptr, nullptr, nullptr));
  AsyncState st;
  st.times_called.assign(1, 0);
  AsyncCall a{&st, 0, c, nullptr, nullptr, ""};
  rrpc_iobuf_new(&a.resp);
  ASSERT_EQ(0, rrpc_channel_call(ch, "a.B", "C", c, nullptr, a.resp, async_done, &a));
  {
    std::unique_lock<std::mutex> g(st.mu);
    st.cv.wait(g, [&] { return st.done == 1; });
  }
  EXPECT_EQ(1, st.times_called[0]);
  EXPECT_EQ(-ECONNREFUSED, rrpc_controller_error_code(c));
  rrpc_iobuf_free(a.resp);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
}

// ---- malformed frames against a live server -----------------------------------

int raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (sockaddr *)&sa, sizeof sa) != 0) return -1;
  timeval tv = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Sends bytes and reports whether the server closed the connection (EOF).
bool server_closes_after(int port, const std::string &bytes, bool half_close) {
  int fd = raw_connect(port);
  if (fd < 0) return false;
  if (write(fd, bytes.data(), bytes.size()) != (ssize_t)bytes.size()) return false;
  if (half_close) shutdown(fd, SHUT_WR);
  char b[256];
  ssize_t r;
  do r = read(fd, b, sizeof b);
  while (r > 0);
  close(fd);
  return r == 0;
}

std::string header(const char *magic, uint32_t body, uint32_t meta) {
  std::string h(magic, 4);
  uint32_t b = htonl(body), m = htonl(meta);
  h.append((const char *)&b, 4);
  h.append((const char *)&m, 4);
  return h;
}

TEST_F(RpcTest, MalformedFramesCloseOnlyThatConnection) {
  struct Case {
    const char *name;
    std::string bytes;
    bool half_close;
  } cases[] = {
      {"truncated header", std::string("PRP"), true},
      {"bad magic", header("XRPC", 10, 2) + std::string(10, 'a'), false},
      {"meta_size > body_size", header("PRPC", 4, 9) + "abcd", false},
      {"body over max", header("PRPC", 64u << 20, 1), false},
      {"garbage meta", header("PRPC", 6, 6) + std::string("\xff\xff\xff\xff\xff\xff", 6), false},
  };
  for (auto &cs : cases) {
    EXPECT_TRUE(server_closes_after(port_, cs.bytes, cs.half_close)) << cs.name;
    std::string resp;
    EXPECT_EQ(0, call("Echo", cs.name, "", &resp, nullptr)) << cs.name;
    EXPECT_EQ(cs.name, resp);
  }
}

TEST(RpcErrors, StrerrorKnowsEveryCode) {
  EXPECT_STREQ("ERPCTIMEDOUT", rrpc_err_name(-RRPC_ERPCTIMEDOUT));
  EXPECT_STREQ("ENOSERVICE", rrpc_err_name(1001));
  EXPECT_STREQ("ECONNREFUSED", rrpc_err_name(-ECONNREFUSED));
  EXPECT_NE(nullptr, strstr(rrpc_strerror(-RRPC_ENORDMA), "--with-rdma"));
  EXPECT_STREQ("unknown error", rrpc_strerror(987654));
}

}  // namespace
