// loopback_bench.cc - rrpc's C API over TCP loopback against a raw-socket
// reference measured in the same run.
//
// Latency, each for --seconds:
//   raw      : one thread ping-pongs N bytes with a blocking-socket echo
//              thread (the floor any TCP RPC pays: two syscalls and two
//              wake-ups per side)
//   sync     : one caller, one connection, synchronous echo RPCs, handlers
//              on the loop (the fastest mode)
//   syncpool : the same against the default server (handlers on the pool)
//   async64  : one connection, 64 asynchronous echo RPCs kept in flight
// It prints QPS and p50/p99 latency for each and the ratios against raw.
//
// Saturation (--case=sat runs only these), 16 connections x 16 in flight:
//   rawpipe  : raw pipelined echo, the same load: 2 epoll threads each side
//              (as many as rrpc's loops here), each reads what is there and
//              writes it back (the client re-issues what returned)
//   sat      : rrpc, 16 channels x 16 async calls re-issued on completion,
//              server in the default mode (pool)
//   satloop  : the same, handlers on the loop
//
// One connection (--case=oneconn): 16 caller threads x 16 calls in flight on
// one channel, server threads 1 (one loop, handlers in it), 2, 4, 8 (one
// loop parsing, the rest running handlers): QPS and the ratio to the first
// (--oneconn_threads=1,2 runs only those: interleaved A/B runs of one pair).
// For each: QPS, CPU time per RPC (getrusage user+sys of the whole process:
// client and server), read/write syscalls per RPC (/proc/self/io syscr +
// syscw; run one case under `perf stat -e raw_syscalls:sys_enter` for all
// syscalls) and voluntary context switches per RPC (each is one thread
// going to sleep and being woken: the wake-ups).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <dirent.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
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
int g_rescue_us = 0;           // --pool_rescue_us: the pool servers' rrpc_server_options.pool_rescue_us
int g_batch_sched = 0;         // --pool_batch_sched: their pool_batch_sched (> 0: SCHED_BATCH workers)
int g_busy_queue = 0;          // --pool_busy_queue: their pool_busy_queue (> 0: on; default off)
int g_flush_us = 0;            // --pool_write_flush_us: their pool_write_flush_us (0: default)
int g_short_task_us = 0;       // --pool_short_task_us: their pool_short_task_us (0: default)
std::vector<int> g_oneconn_threads = {1, 2, 4, 8};  // --oneconn_threads=1,2: the server thread counts
int g_pool_threads = 0;        // --pool_threads: the pool server's pool size (0: the server's default)

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

// A connected loopback TCP pair with TCP_NODELAY on both ends.
void tcp_pair(int sv[2]) {
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
}

Result bench_raw() {
  int sv[2];
  tcp_pair(sv);
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


// ---- saturation ---------------------------------------------------------------

enum { SAT_CONNS = 16, SAT_DEPTH = 16, SAT_THREADS = 2 };

extern "C" void rrpc__worker_pools_totals(uint64_t *rejected, uint64_t *rescues, uint64_t *wakeups,
                                          uint64_t *left_to_busy);  // worker_pool.c

struct Usage {
  double cpu_s;
  uint64_t rw_syscalls;
  uint64_t vcsw;
  uint64_t pool_wakeups;  // sleeping pool workers woken (futex), all servers
  uint64_t left_to_busy;  // batches left to busy workers (pool_busy_queue)
};

Usage usage_now() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  Usage u;
  u.cpu_s = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
            ru.ru_stime.tv_usec / 1e6;
  u.vcsw = (uint64_t)ru.ru_nvcsw;
  uint64_t rejected, rescues;
  rrpc__worker_pools_totals(&rejected, &rescues, &u.pool_wakeups, &u.left_to_busy);
  u.rw_syscalls = 0;
  FILE *f = fopen("/proc/self/io", "r");
  if (f != nullptr) {
    char key[64];
    unsigned long long v;
    while (fscanf(f, "%63[^:]: %llu\n", key, &v) == 2)
      if (strcmp(key, "syscr") == 0 || strcmp(key, "syscw") == 0) u.rw_syscalls += v;
    fclose(f);
  }
  return u;
}

struct SatResult {
  const char *name;
  double qps;
  double cpu_us_per_rpc;
  double rw_syscalls_per_rpc;
  double wakeups_per_rpc;
  double pool_wakeups_per_rpc;
  double left_to_busy_per_rpc;
  std::string by_thread;  // CPU % per thread kind (rrpc-work: the server pool; rrpc-loop: client and server loops)
};

SatResult sat_result(const char *name, uint64_t rpcs, double secs, const Usage &a, const Usage &b) {
  double n = rpcs ? (double)rpcs : 1.0;
  return SatResult{name, (double)rpcs / secs, (b.cpu_s - a.cpu_s) * 1e6 / n,
                   (double)(b.rw_syscalls - a.rw_syscalls) / n, (double)(b.vcsw - a.vcsw) / n,
                   (double)(b.pool_wakeups - a.pool_wakeups) / n, (double)(b.left_to_busy - a.left_to_busy) / n,
                   std::string()};
}

// One epoll thread over some sockets: read what is there, write it all
// back. The server echoes requests; the client echoes responses, which
// re-issues them, so each connection keeps SAT_DEPTH messages in flight.
void pipe_echo_thread(std::vector<int> fds, std::atomic<bool> *stop, std::atomic<uint64_t> *bytes) {
  int ep = epoll_create1(0);
  for (int fd : fds) {
    epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  std::vector<char> buf(64 * 1024);
  epoll_event evs[64];
  uint64_t local = 0;
  while (!stop->load(std::memory_order_relaxed)) {
    int n = epoll_wait(ep, evs, 64, 100);
    for (int i = 0; i < n; i++) {
      ssize_t r = read(evs[i].data.fd, buf.data(), buf.size());
      if (r <= 0) continue;
      full_io(evs[i].data.fd, buf.data(), (size_t)r, true);
      local += (uint64_t)r;
    }
  }
  if (bytes) bytes->fetch_add(local);
  close(ep);
}

SatResult bench_rawpipe() {
  std::vector<int> cli, srv;
  for (int i = 0; i < SAT_CONNS; i++) {
    int sv[2];
    tcp_pair(sv);
    cli.push_back(sv[0]);
    srv.push_back(sv[1]);
  }
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> bytes{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < SAT_THREADS; t++) {
    std::vector<int> mine_s, mine_c;
    for (int i = t; i < SAT_CONNS; i += SAT_THREADS) {
      mine_s.push_back(srv[i]);
      mine_c.push_back(cli[i]);
    }
    ts.emplace_back(pipe_echo_thread, mine_s, &stop, nullptr);
    ts.emplace_back(pipe_echo_thread, mine_c, &stop, &bytes);
  }
  Usage a = usage_now();
  uint64_t t0 = now_ns();
  std::vector<char> burst(g_size * SAT_DEPTH, 'x');
  for (int fd : cli) full_io(fd, burst.data(), burst.size(), true);
  std::this_thread::sleep_for(std::chrono::duration<double>(g_seconds));  // the measuring window
  stop = true;
  for (auto &t : ts) t.join();
  double secs = (double)(now_ns() - t0) / 1e9;
  Usage b = usage_now();
  for (int i = 0; i < SAT_CONNS; i++) {
    close(cli[i]);
    close(srv[i]);
  }
  return sat_result("rawpipe", bytes.load() / g_size, secs, a, b);
}

// The saturation case's calls: each completion counts itself and re-issues
// until the stop flag is up - no clock read, latency record or lock per
// call, as the raw pipelined echo it is compared with has none. (Before,
// it shared the async case's harness: two clock reads, a mutex and a
// vector append per call, counted as rrpc's CPU.)
struct SatBench {
  rrpc_channel *ch;
  rrpc_iobuf *req;
  const std::atomic<bool> *stop;
  std::atomic<uint64_t> done{0};
  std::mutex mu;
  std::condition_variable cv;
  int outstanding = 0;
  int failures = 0;
};

struct SatSlot {
  SatBench *b;
  rrpc_controller *cntl;
  rrpc_iobuf *resp;
};

void sat_issue(SatSlot *s);

void sat_done(void *arg, rrpc_controller *c) {
  SatSlot *s = static_cast<SatSlot *>(arg);
  SatBench *b = s->b;
  b->done.fetch_add(1, std::memory_order_relaxed);
  bool failed = rrpc_controller_failed(c) != 0;
  bool again = !b->stop->load(std::memory_order_relaxed);
  if (failed || !again) {
    std::lock_guard<std::mutex> g(b->mu);
    if (failed) b->failures++;
    if (!again && --b->outstanding == 0) b->cv.notify_all();
  }
  if (again) sat_issue(s);
}

void sat_issue(SatSlot *s) {
  rrpc_iobuf_clear(s->resp);
  if (rrpc_channel_call(s->b->ch, "bench.Echo", "Echo", s->cntl, s->b->req, s->resp, sat_done, s) != 0) abort();
}

std::map<std::string, long> ticks_by_thread();
std::string thread_share(const std::map<std::string, long> &a, const std::map<std::string, long> &b, double secs);

SatResult bench_sat(const std::string &addr, const char *name) {
  std::vector<rrpc_channel *> chans;
  for (int i = 0; i < SAT_CONNS; i++) {
    rrpc_channel_options co = {};
    co.timeout_ms = 10000;
    rrpc_channel *ch;
    if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) abort();
    chans.push_back(ch);
  }
  std::atomic<bool> stop{false};
  std::vector<SatBench> benches(SAT_CONNS);
  std::vector<std::vector<SatSlot>> slots(SAT_CONNS, std::vector<SatSlot>(SAT_DEPTH));
  std::string payload(g_size, 'x');
  for (int i = 0; i < SAT_CONNS; i++) {
    SatBench &b = benches[i];
    b.ch = chans[i];
    b.stop = &stop;
    rrpc_iobuf_new(&b.req);
    rrpc_iobuf_append(b.req, payload.data(), payload.size());
    b.outstanding = SAT_DEPTH;
    for (auto &s : slots[i]) {
      s.b = &b;
      rrpc_controller_new(&s.cntl);
      rrpc_iobuf_new(&s.resp);
    }
  }
  std::map<std::string, long> th0 = ticks_by_thread();
  Usage a = usage_now();
  uint64_t t0 = now_ns();
  for (int i = 0; i < SAT_CONNS; i++)
    for (auto &s : slots[i]) sat_issue(&s);
  // The measurement's length (not synchronisation: the calls stop when the
  // flag is seen, and every one is waited for below).
  std::this_thread::sleep_for(std::chrono::nanoseconds((uint64_t)(g_seconds * 1e9)));
  stop.store(true, std::memory_order_relaxed);
  uint64_t rpcs = 0;
  int failures = 0;
  for (auto &b : benches) {
    std::unique_lock<std::mutex> g(b.mu);
    b.cv.wait(g, [&] { return b.outstanding == 0; });
    rpcs += b.done.load(std::memory_order_relaxed);
    failures += b.failures;
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  Usage u = usage_now();
  std::string by_thread = thread_share(th0, ticks_by_thread(), secs);
  if (failures) fprintf(stderr, "%s: %d calls failed\n", name, failures);
  for (int i = 0; i < SAT_CONNS; i++) {
    for (auto &s : slots[i]) {
      rrpc_controller_free(s.cntl);
      rrpc_iobuf_free(s.resp);
    }
    rrpc_iobuf_free(benches[i].req);
    rrpc_channel_free(chans[i]);
  }
  SatResult r = sat_result(name, rpcs, secs, a, u);
  r.by_thread = by_thread;
  return r;
}

// ---- one connection, many cores --------------------------------------------------

// 16 caller threads x 16 async calls in flight on ONE channel (one
// connection), against a server with one loop and `threads` threads in all:
// 1 = handlers on that loop; N > 1 = the loop parses, N - 1 pool threads
// run handlers and write responses.
extern "C" uint64_t rrpc__completions_handed_off_total(void);  // channel.c

struct OneConn {
  double qps, cpu_us_per_rpc, cpu_pct;  // cpu_pct: user+sys of the process over wall time (200 = 2 cores)
  double handed_off;                    // share of the completions run on another client loop
  double wakeups, pool_wakeups, rw;     // per RPC: voluntary switches, pool futex wake-ups, reads + writes
  std::string by_thread;                // CPU % per thread kind (name without its number)
};

// CPU ticks per thread kind ("rrpc-srv", "rrpc-loop", "rrpc-work", the
// bench's own threads), from /proc/self/task/*/stat: which thread is the
// one at 100 % of a core.
std::map<std::string, long> ticks_by_thread() {
  std::map<std::string, long> m;
  DIR *d = opendir("/proc/self/task");
  if (d == nullptr) return m;
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string dir = std::string("/proc/self/task/") + e->d_name;
    FILE *f = fopen((dir + "/stat").c_str(), "r");
    if (f == nullptr) continue;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    char *open = strchr(buf, '(');
    if (close == nullptr || open == nullptr) continue;
    std::string name(open + 1, close);
    while (!name.empty() && (isdigit((unsigned char)name.back()) || name.back() == '-')) name.pop_back();
    long ut = 0, st = 0;
    // fields after ")": state(3) ... utime(14) stime(15)
    if (sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) == 2) m[name] += ut + st;
  }
  closedir(d);
  return m;
}

std::string thread_share(const std::map<std::string, long> &a, const std::map<std::string, long> &b, double secs) {
  std::string out;
  double hz = (double)sysconf(_SC_CLK_TCK);
  for (const auto &kv : b) {
    auto it = a.find(kv.first);
    long d = kv.second - (it == a.end() ? 0 : it->second);
    if (d <= 0) continue;
    char one[96];
    snprintf(one, sizeof one, " %s %.0f%%", kv.first.c_str(), 100.0 * (double)d / hz / secs);
    out += one;
  }
  return out;
}

OneConn bench_oneconn(int threads) {
  rrpc_server_options so = {};
  so.num_threads = 1;
  if (threads <= 1) so.handlers_in_loop = 1;
  else so.pool_threads = threads - 1;
  so.pool_rescue_us = g_rescue_us;
  so.pool_batch_sched = g_batch_sched;
  so.pool_busy_queue = g_busy_queue;
  so.pool_short_task_us = g_short_task_us;
  so.pool_write_flush_us = g_flush_us;
  rrpc_server *srv;
  if (rrpc_server_new(&so, &srv) != 0 || rrpc_server_add_method(srv, "bench.Echo", "Echo", echo_handler, nullptr) != 0 ||
      rrpc_server_start(srv, "127.0.0.1:0") != 0)
    abort();
  std::string addr = "127.0.0.1:" + std::to_string(rrpc_server_port(srv));
  rrpc_channel_options co = {};
  co.timeout_ms = 10000;
  rrpc_channel *ch;
  if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) abort();
  std::atomic<uint64_t> calls{0};
  uint64_t h0 = rrpc__completions_handed_off_total();
  Usage u0 = usage_now();
  std::map<std::string, long> th0 = ticks_by_thread();
  uint64_t t0 = now_ns(), end = t0 + (uint64_t)(g_seconds * 1e9);
  std::vector<std::thread> ts;
  for (int t = 0; t < 16; t++) {
    ts.emplace_back([&] {
      struct Wave {
        std::mutex mu;
        std::condition_variable cv;
        int left = 0;
      } w;
      rrpc_iobuf *req;
      rrpc_iobuf_new(&req);
      std::string payload(g_size, 'x');
      rrpc_iobuf_append(req, payload.data(), payload.size());
      rrpc_controller *c[16];
      for (auto &x : c) rrpc_controller_new(&x);
      pthread_setname_np(pthread_self(), "caller");
      uint64_t mine = 0;
      while (now_ns() < end) {
        w.left = 16;
        for (auto &x : c)
          rrpc_channel_call(ch, "bench.Echo", "Echo", x, req, nullptr,
                            [](void *arg, rrpc_controller *) {
                              Wave *wv = static_cast<Wave *>(arg);
                              std::lock_guard<std::mutex> g(wv->mu);
                              if (--wv->left == 0) wv->cv.notify_all();
                            },
                            &w);
        std::unique_lock<std::mutex> g(w.mu);
        w.cv.wait(g, [&] { return w.left == 0; });
        mine += 16;
      }
      calls += mine;
      for (auto &x : c) rrpc_controller_free(x);
      rrpc_iobuf_free(req);
    });
  }
  std::map<std::string, long> th1;
  {
    // The callers are still alive near the end: sample just before they stop.
    while (now_ns() + 20000000 < end) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    th1 = ticks_by_thread();
  }
  double th_secs = (double)(now_ns() - t0) / 1e9;
  for (auto &t : ts) t.join();
  double secs = (double)(now_ns() - t0) / 1e9;
  Usage u1 = usage_now();
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
  double cpu = u1.cpu_s - u0.cpu_s;
  double n = (double)calls.load();
  double handed = (double)(rrpc__completions_handed_off_total() - h0) / n;
  return {(double)calls.load() / secs,
          cpu * 1e6 / n,
          100 * cpu / secs,
          handed,
          (double)(u1.vcsw - u0.vcsw) / n,
          (double)(u1.pool_wakeups - u0.pool_wakeups) / n,
          (double)(u1.rw_syscalls - u0.rw_syscalls) / n,
          thread_share(th0, th1, th_secs)};
}

void print_sat(const std::vector<SatResult> &rs) {
  printf("saturation: %d connections x %d in flight, %zu B echo, %.1f s each (same run; CPU = client + server)\n",
         SAT_CONNS, SAT_DEPTH, g_size, g_seconds);
  printf("%-8s %12s %12s %12s %12s %12s %12s %12s %s\n", "case", "QPS", "CPU us/RPC", "rw sys/RPC", "wakeups/RPC",
         "pool wk/RPC", "left/RPC", "CPU vs raw", "CPU % by thread kind (rrpc-work: pool; rrpc-loop: both sides)");
  for (const SatResult &r : rs)
    printf("%-8s %12.0f %12.2f %12.2f %12.3f %12.4f %12.4f %11.2fx %s\n", r.name, r.qps, r.cpu_us_per_rpc,
           r.rw_syscalls_per_rpc, r.wakeups_per_rpc, r.pool_wakeups_per_rpc, r.left_to_busy_per_rpc,
           r.cpu_us_per_rpc / rs[0].cpu_us_per_rpc, r.by_thread.c_str());
}

}  // namespace

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--seconds=", 10) == 0) g_seconds = atof(argv[i] + 10);
    else if (strncmp(argv[i], "--size=", 7) == 0) g_size = (size_t)atol(argv[i] + 7);
    else if (strncmp(argv[i], "--case=", 7) == 0) g_case = argv[i] + 7;
    else if (strncmp(argv[i], "--client_loops=", 15) == 0) rrpc_set_event_dispatcher_num(atoi(argv[i] + 15));
    else if (strncmp(argv[i], "--handoff=", 10) == 0) rrpc_set_completion_handoff(atoi(argv[i] + 10));
    else if (strncmp(argv[i], "--pool_rescue_us=", 17) == 0) g_rescue_us = atoi(argv[i] + 17);
    else if (strncmp(argv[i], "--pool_batch_sched=", 19) == 0) g_batch_sched = atoi(argv[i] + 19);
    else if (strncmp(argv[i], "--pool_busy_queue=", 18) == 0) g_busy_queue = atoi(argv[i] + 18);
    else if (strncmp(argv[i], "--pool_short_task_us=", 21) == 0) g_short_task_us = atoi(argv[i] + 21);
    else if (strncmp(argv[i], "--pool_write_flush_us=", 22) == 0) g_flush_us = atoi(argv[i] + 22);
    else if (strncmp(argv[i], "--pool_threads=", 15) == 0) g_pool_threads = atoi(argv[i] + 15);
    else if (strncmp(argv[i], "--oneconn_threads=", 18) == 0) {
      g_oneconn_threads.clear();
      for (const char *q = argv[i] + 18; *q != '\0'; q = strchr(q, ',') != nullptr ? strchr(q, ',') + 1 : "")
        g_oneconn_threads.push_back(atoi(q));
    }
    else {
      fprintf(stderr, "usage: %s [--seconds=S] [--size=BYTES] [--case=all|raw|sync|syncpool|async|sat|rawpipe|satone|satloopone|oneconn] [--client_loops=N] [--handoff=MIN (>= 2: on; default off)] [--pool_rescue_us=US (< 0: pass on at once)] [--pool_batch_sched=N (> 0: SCHED_BATCH pool threads)] [--pool_threads=N (pool server; 0: default)] [--oneconn_threads=1,2,4,8] [--pool_busy_queue=N (> 0: on)] [--pool_short_task_us=US] [--pool_write_flush_us=US (< 0: the loop writes)]\n", argv[0]);
      return 2;
    }
  }
  // Two servers: handlers on the loop (the fastest mode) and the default
  // (handlers on the worker pool).
  rrpc_server *srv, *psrv;
  rrpc_server_options lo = {}, po = {};
  lo.handlers_in_loop = 1;
  po.pool_rescue_us = g_rescue_us;
  po.pool_batch_sched = g_batch_sched;
  po.pool_busy_queue = g_busy_queue;
  po.pool_short_task_us = g_short_task_us;
  po.pool_write_flush_us = g_flush_us;
  po.pool_threads = g_pool_threads;
  if (rrpc_server_new(&lo, &srv) != 0 ||
      rrpc_server_add_method(srv, "bench.Echo", "Echo", echo_handler, nullptr) != 0 ||
      rrpc_server_start(srv, "127.0.0.1:0") != 0 || rrpc_server_new(&po, &psrv) != 0 ||
      rrpc_server_add_method(psrv, "bench.Echo", "Echo", echo_handler, nullptr) != 0 ||
      rrpc_server_start(psrv, "127.0.0.1:0") != 0) {
    fprintf(stderr, "cannot start the servers\n");
    return 1;
  }
  std::string addr = "127.0.0.1:" + std::to_string(rrpc_server_port(srv));
  std::string paddr = "127.0.0.1:" + std::to_string(rrpc_server_port(psrv));
  rrpc_channel *ch, *pch;
  rrpc_channel_options co = {};
  co.timeout_ms = 10000;
  if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0 || rrpc_channel_new(paddr.c_str(), &co, &pch) != 0) return 1;

  int rc = 0;
  if (g_case == "oneconn") {
    printf("one connection, 16 caller threads x 16 in flight, %zu B echo, %.1f s each (same run)\n", g_size,
           g_seconds);
    printf("client loops %d (--client_loops), CPU = client + server, %% of one core\n", rrpc_event_dispatcher_num());
    double base = 0;
    for (int t : g_oneconn_threads) {
      if (t > 2 * (int)sysconf(_SC_NPROCESSORS_ONLN)) break;
      OneConn r = bench_oneconn(t);
      if (base == 0) base = r.qps;
      printf("server threads %d: %10.0f QPS  %.2fx the single loop  CPU %6.2f us/RPC  %5.0f %%  wakeups/RPC %.3f  "
             "pool wk/RPC %.4f  rw sys/RPC %.3f  handed off %.2f  by thread:%s\n",
             t, r.qps, r.qps / base, r.cpu_us_per_rpc, r.cpu_pct, r.wakeups, r.pool_wakeups, r.rw, r.handed_off,
             r.by_thread.c_str());
    }
  } else if (g_case == "sat") {
    print_sat({bench_rawpipe(), bench_sat(paddr, "sat"), bench_sat(addr, "satloop")});
  } else if (g_case == "rawpipe" || g_case == "satone" || g_case == "satloopone") {
    SatResult r = g_case == "rawpipe" ? bench_rawpipe()
                  : g_case == "satone" ? bench_sat(paddr, "sat")
                                       : bench_sat(addr, "satloop");
    printf("%s: %.0f calls over %.1f s\n", r.name, r.qps * g_seconds, g_seconds);
  } else if (g_case != "all") {
    Result r = g_case == "raw"        ? bench_raw()
               : g_case == "sync"     ? bench_sync(ch)
               : g_case == "syncpool" ? bench_sync(pch)
                                      : bench_async(ch, 64);
    if (g_case == "syncpool") r.name = "syncpool";
    printf("%s: %.0f calls/s over %.1f s, %.0f calls\n", r.name, r.qps, g_seconds, r.qps * g_seconds);
  } else {
    Result raw = bench_raw();
    Result sync = bench_sync(ch);
    Result syncpool = bench_sync(pch);
    syncpool.name = "syncpool";
    Result async = bench_async(ch, 64);
    printf("loopback %zu B echo, %.1f s each (same run)\n", g_size, g_seconds);
    printf("%-8s %12s %10s %10s %14s %14s\n", "case", "QPS", "p50 us", "p99 us", "QPS vs raw", "p50 vs raw");
    for (const Result &r : {raw, sync, syncpool, async}) {
      printf("%-8s %12.0f %10.1f %10.1f %13.2fx %13.2fx\n", r.name, r.qps, r.p50_us, r.p99_us, r.qps / raw.qps,
             r.p50_us / raw.p50_us);
    }
  }
  rrpc_channel_free(ch);
  rrpc_channel_free(pch);
  rrpc_server_free(srv);
  rrpc_server_free(psrv);
  return rc;
}
