// remote_write_pair.cc - rrpc_remote_write throughput of T threads, each
// writing to its own peer over its own connection, in one process: T rrpc
// servers (use_rdma) and T channels to them. Each thread keeps --depth
// writes of --size bytes in flight into a region its peer registered on
// that connection, for --seconds (bounded by --max_ops per thread too).
//
// It measures whether one connection's posts wait for another's: on rxe a
// post does the transfer's copy in the poster's thread, so with a guard
// shared by every connection the threads' posts run one at a time.
//
// --size_b=B makes the last thread's writes B bytes (the others' stay
// --size): with one connection writing large pieces and another small ones,
// the small writes' latency shows whether their posts wait for the large.
//
// Output: one line, "remote_write_pair threads=T size=S size_b=B depth=D
// ops=N secs=X ops_per_s=R cpu_us_per_op=C failed=F" (cpu: the whole
// process's user+system time, servers included, per completed write), then
// per thread "t<i> size=.. ops=.. lat_p50_us=.. lat_p99_us=.." (a write's
// latency: rrpc_remote_write called to its done). Exit status 0 only when
// every write succeeded.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rdma.h"
#include "rrpc/remote.h"
#include "rrpc/rrpc.h"

namespace {

struct Opts {
  int threads = 2;
  size_t size = 64 << 10;
  size_t size_b = 0; /* 0: as size */
  int depth = 4;
  double seconds = 5;
  long max_ops = 1000000;
  std::string host = "127.0.0.1";
  bool rdma = true;
};

// A peer: a server whose "Reg" registers its buffer (write rights) on the
// caller's connection and answers the token.
struct Peer {
  rrpc_server *srv = nullptr;
  std::vector<uint8_t> buf;
  std::mutex mu;
  rrpc_remote_link *link = nullptr;
  rrpc_remote_region *region = nullptr;
};

void RegHandler(void *arg, rrpc_server_call *call) {
  Peer *p = static_cast<Peer *>(arg);
  rrpc_iobuf *resp;
  rrpc_iobuf_new(&resp);
  {
    std::lock_guard<std::mutex> g(p->mu);
    rrpc_remote_token t;
    if (p->link == nullptr && rrpc_server_call_remote_link(call, &p->link) == 0 &&
        rrpc_remote_region_register(p->link, p->buf.data(), p->buf.size(), RRPC_REMOTE_WRITE, &p->region) == 0 &&
        rrpc_remote_region_token(p->region, &t) == 0)
      rrpc_iobuf_append(resp, t.bytes, sizeof t.bytes);
    else
      rrpc_controller_set_failed(rrpc_server_call_controller(call), 1, "register failed");
  }
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

// A writer: its connection, local region, the peer's token, the writes in flight.
struct Writer {
  rrpc_channel *ch = nullptr;
  rrpc_remote_link *link = nullptr;
  rrpc_remote_region *local = nullptr;
  rrpc_remote_token tok;
  std::vector<uint8_t> buf;
  size_t size = 0;
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  long done = 0, failed = 0;
  // A link completes its transfers in order: the oldest start is the done one's.
  std::deque<std::chrono::steady_clock::time_point> starts;
  std::vector<long> lat_us;

  static void Done(void *arg, int status) {
    Writer *w = static_cast<Writer *>(arg);
    auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> g(w->mu);
    if (!w->starts.empty()) {
      w->lat_us.push_back(long(std::chrono::duration_cast<std::chrono::microseconds>(now - w->starts.front()).count()));
      w->starts.pop_front();
    }
    w->in_flight--;
    if (status == 0) w->done++;
    else w->failed++;
    w->cv.notify_all();
  }
};

double CpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int Setup(Writer *w, const std::string &addr, const Opts &o, size_t size) {
  rrpc_channel_options co = {};
  co.timeout_ms = 20000;
  co.use_rdma = o.rdma ? 1 : 0;
  if (rrpc_channel_new(addr.c_str(), &co, &w->ch) != 0) return -1;
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  int rc = rrpc_channel_call(w->ch, "bench.Peer", "Reg", c, rq, rs, nullptr, nullptr);
  if (rc == 0 && o.rdma && !rrpc_controller_used_rdma(c)) rc = -2;
  if (rc == 0 && rrpc_iobuf_length(rs) != sizeof w->tok.bytes) rc = -3;
  if (rc == 0) rrpc_iobuf_copy_out(rs, 0, w->tok.bytes, sizeof w->tok.bytes);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  if (rc != 0) return rc;
  if (rrpc_channel_remote_link(w->ch, &w->link) != 0) return -4;
  w->size = size;
  w->buf.assign(size, 0x3c);
  return rrpc_remote_region_register(w->link, w->buf.data(), w->buf.size(), 0, &w->local);
}

// Keeps depth writes in flight until the deadline or max_ops; waits for the last.
void Run(Writer *w, const Opts &o, std::chrono::steady_clock::time_point end) {
  long started = 0;
  std::unique_lock<std::mutex> g(w->mu);
  while (std::chrono::steady_clock::now() < end && started < o.max_ops) {
    w->cv.wait_until(g, end, [&] { return w->in_flight < o.depth; });
    if (w->in_flight >= o.depth) break;
    w->in_flight++;
    started++;
    w->starts.push_back(std::chrono::steady_clock::now());
    g.unlock();
    rrpc_remote_xfer x = {};
    x.local = w->local;
    x.token = &w->tok;
    x.length = w->size;
    x.done = Writer::Done;
    x.arg = w;
    int rc = rrpc_remote_write(w->link, &x);
    g.lock();
    if (rc != 0) {
      w->starts.pop_back();
      w->in_flight--;
      w->failed++;
      break;
    }
  }
  w->cv.wait_for(g, std::chrono::seconds(60), [&] { return w->in_flight == 0; });
}

bool Arg(const char *a, const char *name, std::string *v) {
  size_t n = strlen(name);
  if (strncmp(a, name, n) != 0 || a[n] != '=') return false;
  *v = a + n + 1;
  return true;
}

}  // namespace

int main(int argc, char **argv) {
  Opts o;
  for (int i = 1; i < argc; i++) {
    std::string v;
    if (Arg(argv[i], "--threads", &v)) o.threads = atoi(v.c_str());
    else if (Arg(argv[i], "--size", &v)) o.size = strtoull(v.c_str(), nullptr, 0);
    else if (Arg(argv[i], "--size_b", &v)) o.size_b = strtoull(v.c_str(), nullptr, 0);
    else if (Arg(argv[i], "--depth", &v)) o.depth = atoi(v.c_str());
    else if (Arg(argv[i], "--seconds", &v)) o.seconds = atof(v.c_str());
    else if (Arg(argv[i], "--max_ops", &v)) o.max_ops = atol(v.c_str());
    else if (Arg(argv[i], "--host", &v)) o.host = v;
    else if (Arg(argv[i], "--tcp", &v)) o.rdma = v != "1";
    else {
      fprintf(stderr,
              "usage: %s [--threads=2] [--size=65536] [--size_b=SIZE] [--depth=4] [--seconds=5] [--max_ops=1000000] "
              "[--host=127.0.0.1] [--tcp=1 (no RDMA: the TCP carriage)]\n",
              argv[0]);
      return 2;
    }
  }
  if (o.threads < 1 || o.threads > 16 || o.depth < 1 || o.size == 0 || o.seconds <= 0 || o.seconds > 120) {
    fprintf(stderr, "remote_write_pair: threads 1..16, depth >= 1, size > 0, seconds in (0, 120]\n");
    return 2;
  }
  if (o.rdma && !rrpc_rdma_available()) {
    fprintf(stderr, "remote_write_pair: no RDMA device here (run it in tools/rxe-vm)\n");
    return 2;
  }
  std::vector<Peer> peers(size_t(o.threads));
  std::vector<Writer> writers(size_t(o.threads));
  for (int i = 0; i < o.threads; i++) {
    Peer &p = peers[size_t(i)];
    size_t size = i == o.threads - 1 && o.size_b ? o.size_b : o.size;
    p.buf.assign(size, 0);
    rrpc_server_options so = {};
    so.use_rdma = o.rdma ? 1 : 0;
    if (rrpc_server_new(&so, &p.srv) != 0) return 1;
    rrpc_server_add_method(p.srv, "bench.Peer", "Reg", RegHandler, &p);
    if (rrpc_server_start(p.srv, (o.host + ":0").c_str()) != 0) return 1;
    std::string addr = o.host + ":" + std::to_string(rrpc_server_port(p.srv));
    int rc = Setup(&writers[size_t(i)], addr, o, size);
    if (rc != 0) {
      fprintf(stderr, "remote_write_pair: connection %d: setup failed (%d)\n", i, rc);
      return 1;
    }
  }
  double cpu0 = CpuSeconds();
  auto t0 = std::chrono::steady_clock::now();
  auto end = t0 + std::chrono::microseconds(long(o.seconds * 1e6));
  std::vector<std::thread> th;
  for (int i = 0; i < o.threads; i++) th.emplace_back(Run, &writers[size_t(i)], std::cref(o), end);
  for (auto &t : th) t.join();
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double cpu = CpuSeconds() - cpu0;
  long ops = 0, failed = 0;
  for (auto &w : writers) {
    std::lock_guard<std::mutex> g(w.mu);
    ops += w.done;
    failed += w.failed + w.in_flight;
  }
  printf("remote_write_pair threads=%d size=%zu size_b=%zu depth=%d ops=%ld secs=%.3f ops_per_s=%.1f cpu_us_per_op=%.1f "
         "failed=%ld\n",
         o.threads, o.size, o.size_b ? o.size_b : o.size, o.depth, ops, secs, double(ops) / secs,
         ops ? cpu * 1e6 / double(ops) : 0.0, failed);
  for (int i = 0; i < o.threads; i++) {
    Writer &w = writers[size_t(i)];
    std::lock_guard<std::mutex> g(w.mu);
    std::vector<long> l = w.lat_us;
    std::sort(l.begin(), l.end());
    long p50 = l.empty() ? -1 : l[l.size() / 2], p99 = l.empty() ? -1 : l[(l.size() * 99) / 100];
    printf("t%d size=%zu ops=%ld lat_p50_us=%ld lat_p99_us=%ld\n", i, w.size, w.done, p50, p99);
  }
  fflush(stdout);
  for (auto &w : writers) {
    rrpc_remote_region_free(w.local);
    rrpc_remote_link_release(w.link);
    rrpc_channel_free(w.ch);
  }
  for (auto &p : peers) {
    if (p.region) rrpc_remote_region_free(p.region);
    if (p.link) rrpc_remote_link_release(p.link);
    rrpc_server_free(p.srv);
  }
  return failed == 0 && ops > 0 ? 0 : 1;
}
