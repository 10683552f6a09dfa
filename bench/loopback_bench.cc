// loopback_bench.cc - rrpc's C API over TCP loopback against a raw-socket
// reference measured in the same run.
//
// Three measurements, each for --seconds:
//   raw     : one thread ping-pongs N bytes with a blocking-socket echo
//             thread (the floor any TCP RPC pays: two syscalls and two
//             wake-ups per side)
//   sync    : one caller, one connection, synchronous 64 B echo RPCs
//   async64 : one connection, 64 asynchronous echo RPCs kept in flight
// It prints QPS and p50/p99 latency for each and the ratios against raw.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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

#include "rrpc/rrpc.h"

namespace {

using Clock = std::chrono::steady_clock;

double g_seconds = 3.0;
size_t g_size = 64;
std::string g_case = "all";  // or raw, sync, async: one case alone (for profiling)

uint64_t now_ns() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

struct Result {
  const char *name;
  double qps;
  double p50_us, p99_us;
};

Result summarize(const char *name, std::vector<uint32_t> &lat_ns, double secs) {
  std::sort(lat_ns.begin(), lat_ns.end());
  auto pct = [&](double p) {
    if (lat_ns.empty()) return 0.0;
    size_t i = std::min(lat_ns.size() - 1, (size_t)(p * (double)lat_ns.size()));
    return lat_ns[i] / 1000.0;
  };
  return Result{name, (double)lat_ns.size() / secs, pct(0.50), pct(0.99)};
}

bool full_io(int fd, char *buf, size_t n, bool wr) {
  size_t done = 0;
  while (done < n) {
    ssize_t r = wr ? write(fd, buf + done, n - done) : read(fd, buf + done, n - done);
    if (r <= 0) return false;
    done += (size_t)r;
  }
  return true;
}

Result bench_raw() {
  int sv[2];
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(lfd, (sockaddr *)&sa, sizeof sa);
  listen(lfd, 1);
  socklen_t len = sizeof sa;
  getsockname(lfd, (sockaddr *)&sa, &len);
  sv[0] = socket(AF_INET, SOCK_STREAM, 0);
  connect(sv[0], (sockaddr *)&sa, sizeof sa);
  sv[1] = accept(lfd, nullptr, nullptr);
  close(lfd);
  int one = 1;
  setsockopt(sv[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(sv[1], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::thread echo([&] {
    std::vector<char> b(g_size);
    while (full_io(sv[1], b.data(), g_size, false) && full_io(sv[1], b.data(), g_size, true)) {
    }
  });
  std::vector<char> b(g_size, 'x');
  std::vector<uint32_t> lat;
  lat.reserve(1 << 20);
  uint64_t end = now_ns() + (uint64_t)(g_seconds * 1e9), t0 = now_ns(), t;
  while ((t = now_ns()) < end) {
    full_io(sv[0], b.data(), g_size, true);
    full_io(sv[0], b.data(), g_size, false);
    lat.push_back((uint32_t)(now_ns() - t));
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  shutdown(sv[0], SHUT_RDWR);
  echo.join();
  close(sv[0]);
  close(sv[1]);
  return summarize("raw", lat, secs);
}

void echo_handler(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, rrpc_server_call_request(call)); }

Result bench_sync(rrpc_channel *ch) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *req, *resp;
  rrpc_iobuf_new(&req);
  rrpc_iobuf_new(&resp);
  std::string payload(g_size, 'x');
  rrpc_iobuf_append(req, payload.data(), payload.size());
  std::vector<uint32_t> lat;
  lat.reserve(1 << 20);
  uint64_t end = now_ns() + (uint64_t)(g_seconds * 1e9), t0 = now_ns(), t;
  int failures = 0;
  while ((t = now_ns()) < end) {
    rrpc_iobuf_clear(resp);
    if (rrpc_channel_call(ch, "bench.Echo", "Echo", c, req, resp, nullptr, nullptr) != 0) failures++;
    lat.push_back((uint32_t)(now_ns() - t));
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  if (failures) fprintf(stderr, "sync: %d calls failed\n", failures);
  rrpc_iobuf_free(req);
  rrpc_iobuf_free(resp);
  rrpc_controller_free(c);
  return summarize("sync", lat, secs);
}

struct AsyncBench {
  rrpc_channel *ch;
  rrpc_iobuf *req;
  uint64_t end_ns;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<uint32_t> lat;
  int outstanding = 0;
  int failures = 0;
};

struct Slot {
  AsyncBench *b;
  rrpc_controller *cntl;
  rrpc_iobuf *resp;
  uint64_t start;
};

void issue(Slot *s);

void on_done(void *arg, rrpc_controller *c) {
  Slot *s = static_cast<Slot *>(arg);
  uint64_t t = now_ns();
  bool again = t < s->b->end_ns;
  {
    std::lock_guard<std::mutex> g(s->b->mu);
    s->b->lat.push_back((uint32_t)(t - s->start));
    if (rrpc_controller_failed(c)) s->b->failures++;
    if (!again && --s->b->outstanding == 0) s->b->cv.notify_all();
  }
  if (again) issue(s);
}

void issue(Slot *s) {
  rrpc_iobuf_clear(s->resp);
  s->start = now_ns();
  if (rrpc_channel_call(s->b->ch, "bench.Echo", "Echo", s->cntl, s->b->req, s->resp, on_done, s) != 0) abort();
}

Result bench_async(rrpc_channel *ch, int depth) {
  AsyncBench b;
  b.ch = ch;
  rrpc_iobuf_new(&b.req);
  std::string payload(g_size, 'x');
  rrpc_iobuf_append(b.req, payload.data(), payload.size());
  b.lat.reserve(1 << 22);
  std::vector<Slot> slots((size_t)depth);
  uint64_t t0 = now_ns();
  b.end_ns = t0 + (uint64_t)(g_seconds * 1e9);
  b.outstanding = depth;
  for (auto &s : slots) {
    s.b = &b;
    rrpc_controller_new(&s.cntl);
    rrpc_iobuf_new(&s.resp);
  }
  for (auto &s : slots) issue(&s);
  {
    std::unique_lock<std::mutex> g(b.mu);
    b.cv.wait(g, [&] { return b.outstanding == 0; });
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  if (b.failures) fprintf(stderr, "async: %d calls failed\n", b.failures);
  for (auto &s : slots) {
    rrpc_controller_free(s.cntl);
    rrpc_iobuf_free(s.resp);
  }
  rrpc_iobuf_free(b.req);
  return summarize("async64", b.lat, secs);
}

}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--seconds=", 10) == 0) g_seconds = atof(argv[i] + 10);
    else if (strncmp(argv[i], "--size=", 7) == 0) g_size = (size_t)atol(argv[i] + 7);
    else if (strncmp(argv[i], "--case=", 7) == 0) g_case = argv[i] + 7;
    else {
      fprintf(stderr, "usage: %s [--seconds=S] [--size=BYTES] [--case=all|raw|sync|async]\n", argv[0]);
      return 2;
    }
  }
  rrpc_server *srv;
  if (rrpc_server_new(nullptr, &srv) != 0 ||
      rrpc_server_add_method(srv, "bench.Echo", "Echo", echo_handler, nullptr) != 0 ||
      rrpc_server_start(srv, "127.0.0.1:0") != 0) {
    fprintf(stderr, "cannot start the server\n");
    return 1;
  }
  std::string addr = "127.0.0.1:" + std::to_string(rrpc_server_port(srv));
  rrpc_channel *ch;
  rrpc_channel_options co = {};
  co.timeout_ms = 10000;
  if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) return 1;

  if (g_case != "all") {
    Result r = g_case == "raw" ? bench_raw() : g_case == "sync" ? bench_sync(ch) : bench_async(ch, 64);
    printf("%s: %.0f calls/s over %.1f s, %.0f calls\n", r.name, r.qps, g_seconds, r.qps * g_seconds);
    rrpc_channel_free(ch);
    rrpc_server_free(srv);
    return 0;
  }
  Result raw = bench_raw();
  Result sync = bench_sync(ch);
  Result async = bench_async(ch, 64);
  printf("loopback %zu B echo, %.1f s each (same run)\n", g_size, g_seconds);
  printf("%-8s %12s %10s %10s %14s %14s\n", "case", "QPS", "p50 us", "p99 us", "QPS vs raw", "p50 vs raw");
  for (const Result &r : {raw, sync, async}) {
    printf("%-8s %12.0f %10.1f %10.1f %13.2fx %13.2fx\n", r.name, r.qps, r.p50_us, r.p99_us, r.qps / raw.qps,
           r.p50_us / raw.p50_us);
  }
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
  return 0;
}
