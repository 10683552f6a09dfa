// clc_sniff_test.cc - hostile first bytes on a TCP-only server (issue 13,
// item 3): the start of an SMC-R CLC eyecatcher, then nothing. The server
// must not spin on it, must close it at the sniff deadline, must notice a
// client that closes half-way, and must not leak the descriptor.
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

// "SMCR" in EBCDIC: the first bytes of every SMC-R CLC message.
const unsigned char kEye[4] = {0xE2, 0xD4, 0xC3, 0xD9};
const int kSniffMs = 400;

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

class ClcSniff : public ::testing::Test {
 protected:
  void SetUp() override {
    rrpc_limits l = {};
    l.clc_sniff_timeout_ms = kSniffMs;
    rrpc_limits_set(&l);
    rrpc_server_options o = {};
    o.num_threads = 1;  // one loop: a spinning connection would starve the rest
    ASSERT_EQ(0, rrpc_server_new(&o, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "test.EchoService", "Echo", echo, nullptr));
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    port_ = rrpc_server_port(server_);
  }
  void TearDown() override {
    rrpc_server_free(server_);
    rrpc_limits_set(nullptr);
  }
  rrpc_server *server_ = nullptr;
  int port_ = 0;
};

TEST_F(ClcSniff, PartialEyecatcherNeitherSpinsNorStays) {
  rrpc_limit_stats before;
  rrpc_limit_stats_get(&before);
  std::vector<int> fds;
  for (int i = 0; i < 4; i++) {
    int fd = raw_connect(port_);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(4, send(fd, kEye, 4, 0));
    fds.push_back(fd);
  }
  // CPU of the whole process while the server holds the four: the test's
  // own threads sleep in poll, so this is the server's loop.
  double t0 = now_ms(), c0 = cpu_seconds();
  bool closed = true;
  for (int fd : fds) closed = peer_closed(fd, kSniffMs + 3000) && closed;
  double wall_ms = now_ms() - t0, cpu_pct = (cpu_seconds() - c0) * 1000.0 / wall_ms * 100.0;
  rrpc_limit_stats after;
  rrpc_limit_stats_get(&after);
  char line[200];
  snprintf(line, sizeof line, "4 connections sent 4 of 8 CLC header bytes: server CPU %.1f%% over "
           "%.0f ms; all closed by the %d ms sniff deadline: %s", cpu_pct, wall_ms, kSniffMs,
           closed ? "yes" : "NO");
  report("clc-sniff-partial", line);
  EXPECT_TRUE(closed);
  EXPECT_LT(cpu_pct, 25.0);
  EXPECT_GE(wall_ms, kSniffMs * 0.9);
  EXPECT_EQ(before.clc_sniff_timeouts + 4, after.clc_sniff_timeouts);
  for (int fd : fds) close(fd);
}

TEST_F(ClcSniff, ClientThatLeavesMidHeaderIsNoticedAndItsFdFreed) {
  int base = open_fds();
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(3, send(fd, kEye, 3, 0));
  // Its server side is open now (accepted), then the client goes.
  ASSERT_TRUE(wait_until([&] { return open_fds() >= base + 2; }, 3000));
  close(fd);
  double t0 = now_ms();
  // Well before the sniff deadline: the EOF itself must end it.
  bool freed = wait_until([&] { return open_fds() <= base; }, kSniffMs / 2);
  char line[160];
  snprintf(line, sizeof line, "client closed after 3 CLC bytes: server fd released in %.0f ms: %s",
           now_ms() - t0, freed ? "yes" : "NO");
  report("clc-sniff-eof", line);
  EXPECT_TRUE(freed);
}

TEST_F(ClcSniff, PlainClientStillServedAfterSniffing) {
  int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  std::string f = request_frame("test.EchoService", "Echo", "hello", 7);
  // One byte at a time: the sniffer must not take a 'P' for anything.
  for (char ch : f) ASSERT_EQ(1, send(fd, &ch, 1, 0));
  char buf[256];
  ssize_t n = 0, got = 0;
  while (got < 12 && (n = recv(fd, buf + got, sizeof buf - static_cast<size_t>(got), 0)) > 0) got += n;
  ASSERT_GE(got, 12);
  EXPECT_EQ(0, memcmp(buf, "PRPC", 4));
  close(fd);
}

}  // namespace
