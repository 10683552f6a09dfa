// idle_test.cc - slow connections against idle_timeout_s (issue 13, item
// 10): 2,000 connections that send part of a frame and then nothing are
// closed by the server's idle timeout, and a probe call's latency is
// measured before and while they are open.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"

namespace {

using namespace rrpc_test;

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

// Latencies (ms) of `n` sync echo calls over `ch`; failures are counted and
// the first one's cause is kept in `why`.
std::vector<double> probe(rrpc_channel *ch, int n, int *failures, std::string *why) {
  std::vector<double> v;
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "probe", 5);
  for (int i = 0; i < n; i++) {
    rrpc_iobuf_clear(rs);
    double t0 = now_ms();
    int rc = rrpc_channel_call(ch, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
    if (rc == 0) {
      v.push_back(now_ms() - t0);
      continue;
    }
    if ((*failures)++ == 0) *why = std::to_string(rc) + " " + rrpc_controller_error_text(c);
  }
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  return v;
}

TEST(Idle, TwoThousandSlowConnectionsAreClosed) {
  const int kSlow = 2000, kIdleS = 1;
  ASSERT_GE(raise_fd_limit(2 * kSlow + 256), 2 * kSlow + 256);
  rrpc_server_options o = {};
  o.idle_timeout_s = kIdleS;
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(&o, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Echo", echo, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, "127.0.0.1:0"));
  int port = rrpc_server_port(s);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  rrpc_channel_options co = {};
  co.timeout_ms = 5000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  int fails = 0;
  std::string why;
  std::vector<double> base = probe(ch, 200, &fails, &why);

  rrpc_limit_stats s0;
  rrpc_limit_stats_get(&s0);
  std::vector<int> fds;
  std::string part = frame_header(100, 20).substr(0, 6);
  double t_open = now_ms();
  for (int i = 0; i < kSlow; i++) {
    // The probe's own connection must not go idle while these open (it
    // took 1.2 s under TSan in CI): the server would rightly close it, and
    // a call written as it closes fails - a channel never resends a request
    // that may have reached the server. That race is the idle timeout's,
    // documented in docs/security.md, not what this case measures.
    if (i % 200 == 0) probe(ch, 1, &fails, &why);
    int fd = raw_connect(port);
    ASSERT_GE(fd, 0) << "connection " << i;
    ASSERT_EQ(6, send(fd, part.data(), part.size(), 0));
    fds.push_back(fd);
  }
  double opened_ms = now_ms() - t_open;
  std::vector<double> during = probe(ch, 200, &fails, &why);
  // Every slow connection must be gone within 1.25 x the timeout after its
  // last byte (plus a margin for a loaded machine).
  int closed = 0;
  double t0 = now_ms();
  for (int fd : fds) closed += peer_closed(fd, static_cast<int>(kIdleS * 1250 + 5000 - (now_ms() - t0)));
  double all_closed_ms = now_ms() - t_open;
  rrpc_limit_stats s1;
  rrpc_limit_stats_get(&s1);
  char line[400];
  snprintf(line, sizeof line, "%d slow connections (6 bytes each, then silence), idle_timeout_s=%d: "
           "%d closed, the last %.0f ms after the first opened (opening took %.0f ms); probe echo "
           "p50/p99 %.2f/%.2f ms before, %.2f/%.2f ms while they were open (%d failed)", kSlow, kIdleS,
           closed, all_closed_ms, opened_ms, percentile(base, 50), percentile(base, 99),
           percentile(during, 50), percentile(during, 99), fails);
  report("slow-connections", line);
  EXPECT_EQ(kSlow, closed);
  EXPECT_GE(s1.idle_closes - s0.idle_closes, static_cast<uint64_t>(kSlow));
  EXPECT_EQ(0, fails) << "first failure: " << why;
  EXPECT_LT(percentile(during, 99), 200.0);
  for (int fd : fds) close(fd);
  rrpc_channel_free(ch);
  rrpc_server_free(s);
}

TEST(Idle, ActiveConnectionStaysOpen) {
  rrpc_server_options o = {};
  o.idle_timeout_s = 1;
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(&o, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.EchoService", "Echo", echo, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, "127.0.0.1:0"));
  int fd = raw_connect(rrpc_server_port(s));
  ASSERT_GE(fd, 0);
  std::string f = rrpc_test::request_frame("test.EchoService", "Echo", "x", 1);
  // A request every 300 ms for 2.5 idle timeouts: never idle for 1 s.
  for (int i = 0; i < 8; i++) {
    ASSERT_EQ(static_cast<ssize_t>(f.size()), send(fd, f.data(), f.size(), MSG_NOSIGNAL)) << i;
    EXPECT_FALSE(peer_closed(fd, 300)) << i;  // reads the response; waits 300 ms
  }
  close(fd);
  rrpc_server_free(s);
}

}  // namespace
