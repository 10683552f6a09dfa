// accept_emfile_test.cc - a server at its descriptor limit (issue 13, item
// 5). The server runs in a child process with RLIMIT_NOFILE = 64; the test
// opens many more connections than it can hold and keeps connecting, and
// measures the child's CPU, its log volume and a probe call's latency.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/common/test_util.h"

namespace {

using namespace rrpc_test;

void echo(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

// The child's CPU over the 1 s window (refusing ~200 connections a second
// and serving a probe call every 10 ms), in % of one core. What the test is
// for - an accept loop that spins at EMFILE - takes a whole core (100 %).
// Plain builds measured 1 - 3 %; under ASan and TSan, which slow every
// system call's user-space side several-fold, 3 - 8 % on a VM host whose
// system calls cost 1 us (read in 10 ms clock ticks: 1 % steps), so their
// bound is 15 % (3x; the loop watchdog gives them 5x).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kCpuBoundPct = 15.0;
#else
constexpr double kCpuBoundPct = 5.0;
#endif

// The child: a server with 64 descriptors at most, its log in a file.
__attribute__((constructor)) void maybe_emfile_child() {
  const char *log = getenv("RRPC_TEST_EMFILE_CHILD");
  if (log == nullptr) return;
  if (freopen(log, "w", stderr) == nullptr) _exit(2);
  setvbuf(stderr, nullptr, _IOLBF, 0);  // the child is killed, not exited
  rlimit r{64, 64};
  if (setrlimit(RLIMIT_NOFILE, &r) != 0) _exit(3);
  rrpc_server *s;
  rrpc_server_options o = {};
  o.num_threads = 1;
  if (rrpc_server_new(&o, &s) != 0) _exit(4);
  rrpc_server_add_method(s, "test.EchoService", "Echo", echo, nullptr);
  if (rrpc_server_start(s, "127.0.0.1:0") != 0) _exit(5);
  printf("%d\n", rrpc_server_port(s));
  fflush(stdout);
  for (;;) pause();
}

int count_lines(const std::string &path, const std::string &needle) {
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(AcceptAtFdLimit, NoSpinNoLogFloodStillServing) {
  raise_fd_limit(1024);
  std::string log = "/tmp/rrpc_emfile_" + std::to_string(getpid()) + ".log";
  Child child = spawn_self({"RRPC_TEST_EMFILE_CHILD=" + log});
  ASSERT_GT(child.pid, 0);
  int port = atoi(child.first_output.c_str());
  ASSERT_GT(port, 0);
  std::string addr = "127.0.0.1:" + std::to_string(port);
  rrpc_channel_options co = {};
  co.timeout_ms = 3000;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "probe", 5);
  auto call = [&] {
    rrpc_iobuf_clear(rs);
    double t0 = now_ms();
    int rc = rrpc_channel_call(ch, "test.EchoService", "Echo", c, rq, rs, nullptr, nullptr);
    return rc == 0 ? now_ms() - t0 : -1.0;
  };
  ASSERT_GE(call(), 0.0);  // the probe's connection exists before the flood

  // Fill the child's table, then keep knocking for a second, at a paced
  // 200 connections a second (the load, not a synchronisation).
  std::vector<int> hogs;
  for (int i = 0; i < 100; i++) {
    int fd = raw_connect(port);
    if (fd >= 0) hogs.push_back(fd);
  }
  double t0 = now_ms(), c0 = cpu_seconds(child.pid);
  std::vector<double> lat;
  int failed = 0;
  while (now_ms() - t0 < 1000) {
    for (int i = 0; i < 2; i++) {
      int fd = raw_connect(port);
      if (fd >= 0) hogs.push_back(fd);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    double l = call();
    if (l < 0) failed++;
    else lat.push_back(l);
  }
  double wall = now_ms() - t0, cpu_pct = (cpu_seconds(child.pid) - c0) * 1000.0 / wall * 100.0;
  int lines = count_lines(log, "accept on port");
  char line[400];
  snprintf(line, sizeof line, "server with RLIMIT_NOFILE=64, %zu connections opened at it (~200/s during the window): accept-loop "
           "process CPU %.1f%% over %.0f ms; %d accept log lines; probe echo p50/p99 %.2f/%.2f ms "
           "(%d failed)", hogs.size(), cpu_pct, wall, lines, percentile(lat, 50), percentile(lat, 99),
           failed);
  report("accept-emfile", line);
  EXPECT_LT(cpu_pct, kCpuBoundPct);
  EXPECT_LE(lines, 3);
  EXPECT_EQ(0, failed);
  for (int fd : hogs) close(fd);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
  kill(child.pid, SIGKILL);
  wait_child(child);
  unlink(log.c_str());
}

}  // namespace
