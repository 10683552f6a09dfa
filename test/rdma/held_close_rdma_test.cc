// held_close_rdma_test.cc - a peer's close that arrives while received bytes
// are held back ends the stream after those bytes, as TCP's FIN does.
//
// An owner that forwards what it reads (rrpc-run's relay) holds its rrpc
// socket's reading while its consumer is full (rrpc__socket_hold_read); an
// RDMA transport then leaves arrivals in its ring. The peer's close CDC used
// to fail the socket at once, and the held tail was never delivered: curl
// under rrpc-run lost the end of a 64 MiB download. Here, at the socket
// level and in order: the server sends a first message; the client takes it
// and holds reading; the server sends the rest, waits until it has left its
// write queue, and closes. The close is heard while the rest is held
// (counter closes_after_held); the socket must stay open until the client
// resumes, then deliver every byte, then close with ECLOSE. Before the fix
// the client's socket failed as soon as the close CDC came, with only the
// first message delivered. Run in both dialects (cursor-mode.sh).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "rrpc/errors.h"
#include "rrpc/iobuf.h"
#include "rrpc/rdma.h"
extern "C" {  // the socket layer rrpc-run's relay drives; C headers without guards of their own
#include "rrpc/internal/loop.h"
#include "rrpc/internal/socket.h"
#include "rrpc/transport.h"
}
#include "test/common/test_util.h"

namespace {

constexpr size_t kFirst = 1024;
constexpr size_t kRest = 96 << 10;  // well under the receive ring: all of it lands while held
constexpr auto kWait = std::chrono::seconds(15);

// One end's view, shared between its loop thread and the test.
struct End {
  std::mutex mu;
  std::condition_variable cv;
  std::string got;
  bool closed = false;
  int code = 0;
  bool hold_after_first = false;  // the client: hold reading once kFirst bytes came
  bool holding = false;

  bool wait(const std::function<bool()> &done) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, kWait, done);
  }
};

int on_data(void *owner, rrpc__socket *s, rrpc_iobuf *rbuf) {
  End *e = static_cast<End *>(owner);
  size_t n = rrpc_iobuf_length(rbuf);
  std::string chunk(n, '\0');
  rrpc_iobuf_copy_out(rbuf, 0, chunk.data(), n);
  rrpc_iobuf_pop_front(rbuf, n);
  std::lock_guard<std::mutex> g(e->mu);
  e->got += chunk;
  if (e->hold_after_first && !e->holding && e->got.size() >= kFirst) {
    e->holding = true;
    int rc = rrpc__socket_hold_read(s, 1);
    if (rc != 0) return rc;
  }
  e->cv.notify_all();
  return 0;
}

void on_close(void *owner, rrpc__socket *, int code) {
  End *e = static_cast<End *>(owner);
  std::lock_guard<std::mutex> g(e->mu);
  e->closed = true;
  e->code = code;
  e->cv.notify_all();
}

const rrpc__socket_handler kHandler = {on_data, on_close};

struct Task {
  std::function<void()> fn;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
};

void run_task(void *arg) {
  Task *t = static_cast<Task *>(arg);
  t->fn();
  std::lock_guard<std::mutex> g(t->mu);
  t->done = true;
  t->cv.notify_all();
}

// Run fn on the loop thread and wait for it (hold_read is loop-thread only).
bool on_loop(rrpc__loop *loop, std::function<void()> fn) {
  Task t;
  t.fn = std::move(fn);
  if (rrpc__loop_post(loop, run_task, &t) != 0) return false;
  std::unique_lock<std::mutex> g(t.mu);
  return t.cv.wait_for(g, kWait, [&] { return t.done; });
}

uint64_t closes_after_held() {
  rrpc_rdma_stats st{};
  rrpc_rdma_get_stats(&st);
  return st.closes_after_held;
}

int write_bytes(rrpc__socket *s, const std::string &bytes) {
  rrpc_iobuf *b = nullptr;
  if (rrpc_iobuf_new(&b) != 0) return -ENOMEM;
  int rc = rrpc_iobuf_append(b, bytes.data(), bytes.size());
  if (rc == 0) rc = rrpc__socket_write(s, b);
  rrpc_iobuf_free(b);
  return rc;
}

bool wait_unwritten_zero(rrpc__socket *s) {
  // The write queue drains on the loop; look until it did, bounded.
  auto until = std::chrono::steady_clock::now() + kWait;
  while (rrpc__socket_unwritten(s) != 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(HeldClose, PeerCloseWhileBytesAreHeldEndsTheStreamAfterThem) {
  rrpc_rdma_options ro;
  rrpc_rdma_options_init(&ro);
  ASSERT_EQ(0, rrpc_rdma_global_init(&ro));
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  const rrpc_transport_ops *ops = nullptr;
  ASSERT_EQ(0, rrpc__transport_pick(1, &ops));
  rrpc__loop *loop = nullptr;
  ASSERT_EQ(0, rrpc__loop_start("held-close", &loop));

  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(lfd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  // The rig names an address on the RDMA device's netdev (tools/run-rdma-tests).
  if (const char *a = getenv("RRPC_TEST_RDMA_ADDR"); a != nullptr && *a != '\0') {
    ASSERT_EQ(1, inet_pton(AF_INET, a, &sa.sin_addr)) << a;
  }
  ASSERT_EQ(0, bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof sa));
  ASSERT_EQ(0, listen(lfd, 4));
  socklen_t sl = sizeof sa;
  ASSERT_EQ(0, getsockname(lfd, reinterpret_cast<sockaddr *>(&sa), &sl));

  End client, server;
  client.hold_after_first = true;
  rrpc__socket *cs = nullptr, *ss = nullptr;
  ASSERT_EQ(0, rrpc__socket_connect(loop, reinterpret_cast<sockaddr *>(&sa), sizeof sa, 5000, 1, ops, &kHandler,
                                    &client, &cs));
  int afd = accept(lfd, nullptr, nullptr);
  ASSERT_GE(afd, 0);
  close(lfd);
  ASSERT_EQ(0, rrpc__socket_create(loop, afd, 0, ops, &kHandler, &server, &ss));

  std::string first = rrpc_test::pattern(kFirst, 3), rest = rrpc_test::pattern(kRest, 4);
  ASSERT_EQ(0, write_bytes(ss, first));
  ASSERT_TRUE(client.wait([&] { return client.holding || client.closed; })) << "the first message never came";
  ASSERT_FALSE(client.closed) << rrpc_strerror(client.code);
  ASSERT_TRUE(rrpc__socket_is_rdma(cs)) << "the connection fell back to TCP: this case needs RDMA";

  uint64_t before = closes_after_held();
  ASSERT_EQ(0, write_bytes(ss, rest));
  ASSERT_TRUE(wait_unwritten_zero(ss));
  ASSERT_TRUE(on_loop(loop, [&] { rrpc__socket_fail(ss, -RRPC_ECLOSE); }));
  ASSERT_TRUE(server.wait([&] { return server.closed; }));

  // The close CDC is either heard while the rest is held (the counter) or,
  // the old way, fails the client's socket with the rest undelivered.
  auto heard = [&] { return client.closed || closes_after_held() > before; };
  auto until = std::chrono::steady_clock::now() + kWait;
  while (!heard() && std::chrono::steady_clock::now() < until) {
    std::unique_lock<std::mutex> g(client.mu);
    client.cv.wait_for(g, std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(heard()) << "the server's close never reached the client";
  {
    std::lock_guard<std::mutex> g(client.mu);
    EXPECT_FALSE(client.closed) << "closed with " << client.got.size() << " of " << kFirst + kRest
                                << " bytes delivered: " << rrpc_strerror(client.code);
  }

  ASSERT_TRUE(on_loop(loop, [&] { rrpc__socket_hold_read(cs, 0); }));
  ASSERT_TRUE(client.wait([&] { return client.closed; })) << "the close heard was never delivered";
  {
    std::lock_guard<std::mutex> g(client.mu);
    EXPECT_EQ(-RRPC_ECLOSE, client.code) << rrpc_strerror(client.code);
    ASSERT_EQ(kFirst + kRest, client.got.size());
    EXPECT_TRUE(client.got == first + rest) << "bytes differ";
  }
  printf("held close: %zu bytes delivered before the close, closes_after_held +%llu\n", client.got.size(),
         static_cast<unsigned long long>(closes_after_held() - before));

  rrpc__socket_unref(cs);
  rrpc__socket_unref(ss);
  rrpc__loop_stop(loop);
}

}  // namespace
