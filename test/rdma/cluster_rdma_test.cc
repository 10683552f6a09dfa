// cluster_rdma_test.cc - a cluster channel over the RDMA transport: rr over
// 3 in-process RDMA servers while two threads stream calls; one server is
// stopped mid-stream. Each server connection negotiates RDMA on its own.
// No call may fail beyond what retries absorb (max_retry), the dead server
// is isolated, and it rejoins after a restart on the same port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/rdma/tsan_suppressions.h"
#include "test/common/test_util.h"

using rrpc_test::rdma_test_addr;

namespace {

using Clock = std::chrono::steady_clock;

struct Srv {
  rrpc_server *s = nullptr;
  int port = 0;
  std::atomic<int> calls{0};
  static void echo(void *arg, rrpc_server_call *call) {
    static_cast<Srv *>(arg)->calls++;
    rrpc_server_call_respond(call, rrpc_server_call_request(call));
  }
};

int start(Srv *v, int port) {
  rrpc_server_options o = {};
  o.use_rdma = 1;
  int rc = rrpc_server_new(&o, &v->s);
  if (rc != 0) return rc;
  rrpc_server_add_method(v->s, "test.Echo", "Echo", Srv::echo, v);
  rc = rrpc_server_start(v->s, (rdma_test_addr() + ":" + std::to_string(port)).c_str());
  if (rc == 0) v->port = rrpc_server_port(v->s);
  return rc;
}

__attribute__((constructor)) void configure_rdma() {
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  // Generous: the test asserts that no call falls back to TCP, and under
  // ThreadSanitizer in the TCG guest on a loaded 2-core host one handshake
  // waited over 3 s for its CONFIRM (446 calls then went over TCP). Nothing
  // here depends on the timeout itself.
  o.handshake_timeout_ms = 15000;
  if (const char *d = getenv("RRPC_TEST_RDMA_DEVICE")) o.device = d;
  rrpc_rdma_global_init(&o);
}

int call(rrpc_channel *ch, int *used_rdma) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_append(rq, "ping", 4);
  int rc = rrpc_channel_call(ch, "test.Echo", "Echo", c, rq, nullptr, nullptr, nullptr);
  *used_rdma = rrpc_controller_used_rdma(c);
  rrpc_iobuf_free(rq);
  rrpc_controller_free(c);
  return rc;
}

bool wait_for(const std::function<bool()> &cond, int ms) {
  auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (!cond()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling a condition, bounded
  }
  return true;
}

rrpc_cluster_stats cstats(rrpc_channel *ch) {
  rrpc_cluster_stats s;
  rrpc_channel_cluster_stats(ch, &s);
  return s;
}

TEST(ClusterRdma, RoundRobinOverThreeServersSurvivesOneKilledMidStream) {
  ASSERT_EQ(1, rrpc_rdma_available()) << "no active RDMA device";
  Srv srv[3];
  std::string url = "list://";
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(0, start(&srv[i], 0));
    url += (i ? "," : "") + rdma_test_addr() + ":" + std::to_string(srv[i].port);
  }
  rrpc_channel_options o = {};
  o.use_rdma = 1;
  o.timeout_ms = 20000;
  o.connect_timeout_ms = 5000;
  o.health_check_interval_ms = 100;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new_lb(url.c_str(), "rr", &o, &ch));

  std::atomic<int> done{0}, failed{0}, over_tcp{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int t = 0; t < 2; t++) {
    load.emplace_back([&] {
      for (int i = 0; i < 4000 && !stop; i++) {  // bounded in count; stopped when done
        int rdma = 0;
        if (call(ch, &rdma) != 0) failed++;
        else if (!rdma) over_tcp++;
        done++;
      }
    });
  }
  ASSERT_TRUE(wait_for([&] { return done >= 300; }, 60000));
  ASSERT_GT(srv[1].calls.load(), 50);
  int port1 = srv[1].port;
  rrpc_server_stop(srv[1].s);  // mid-stream: calls in flight on it see their connection close
  // A handler already queued when it stopped may still run (rrpc_server_stop's
  // contract; its response is dropped and the client retries elsewhere): a
  // CI run counted one such call after the stop. Free waits for them.
  rrpc_server_free(srv[1].s);
  srv[1].s = nullptr;
  int mark = done;
  ASSERT_TRUE(wait_for([&] { return done >= mark + 300; }, 60000));
  EXPECT_EQ(0, failed.load()) << "failures beyond what retries absorb";
  EXPECT_EQ(1u, cstats(ch).isolated);
  // Restart on the same port: it rejoins.
  srv[1].calls = 0;
  ASSERT_EQ(0, start(&srv[1], port1));
  EXPECT_TRUE(wait_for([&] { return srv[1].calls > 20; }, 60000));
  stop = true;
  for (auto &t : load) t.join();
  EXPECT_EQ(0, failed.load());
  EXPECT_EQ(0, over_tcp.load()) << "calls that fell back to TCP";
  EXPECT_GE(cstats(ch).revivals, 1u);
  printf("cluster over RDMA: %d calls, %d failed, %llu retries, %llu isolations\n", done.load(),
         failed.load(), (unsigned long long)cstats(ch).retries, (unsigned long long)cstats(ch).isolations);
  rrpc_channel_free(ch);
  for (auto &v : srv)
    if (v.s) rrpc_server_free(v.s);
}

}  // namespace
