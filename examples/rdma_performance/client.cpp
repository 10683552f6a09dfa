// client.cpp - rdma_performance client: keeps --queue_depth RPCs in flight
// on each of --thread_num connections and prints QPS, throughput and latency
// (avg/p50/p99/p999) each second, then a summary line. Exits 1 if any RPC
// failed, and at once (with the reason) if a server cannot be reached. Flags
// and service follow brpc's example of the same name, which reports the
// server's CPU use as a fraction of one CPU (server_cpu prints it as %).
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sys/resource.h>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "examples/rdma_performance/latency_histogram.h"
#include "examples/rdma_performance/test.pb.h"
#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/server.h"
#include "rrpc/rdma.h"

DEFINE_string(servers, "127.0.0.1:8002",
              "Servers (ip:port), separated by ',', '+' or ' ' (thread i calls server i % n); or a "
              "naming URL (list://, file://, dns://) that every thread's channel balances over "
              "with --load_balancer");
DEFINE_string(load_balancer, "rr",
              "brpc's load balancer for a naming URL in --servers: rr, random, wrr, la, c_murmurhash");
DEFINE_bool(use_rdma, false, "Use RDMA (falls back to TCP if it cannot be set up)");
DEFINE_int32(thread_num, 1, "Client threads; each has its own connection");
DEFINE_int32(queue_depth, 1, "RPCs in flight per thread");
DEFINE_int32(attachment_size, 0, "Bytes of request attachment per RPC");
DEFINE_bool(echo_attachment, false, "Ask the server to send the attachment back");
DEFINE_int32(rpc_timeout_ms, 2000, "Timeout of each RPC (ms)");
DEFINE_int32(test_seconds, 20, "Length of the test in seconds (0 = until test_iterations)");
DEFINE_int64(test_iterations, 0, "Stop after this many RPCs in all (0 = until test_seconds)");
DEFINE_int32(expected_qps, 0,
             "RPCs per second in all, spread over the threads (0 = as fast as queue_depth allows)");
DEFINE_string(connection_type, "single",
              "brpc's connection type: single (one connection per channel, calls multiplexed), "
              "pooled (a connection per call in flight, reused) or short (one per call)");
DEFINE_string(protocol, "baidu_std", "brpc's protocol name; rrpc speaks only baidu_std");

namespace {

using Clock = std::chrono::steady_clock;

rrpc::ConnectionType g_connection_type = rrpc::CONNECTION_TYPE_SINGLE;  // from main

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
          .count());
}

// ---- results, recorded by the threads that complete RPCs -------------------------

// One per completing thread (rrpc loop threads), so recording needs no
// shared writes; the reporter adds them up.
struct Recorder {
  perf::LatencyHistogram latency_ns;
  std::atomic<uint64_t> failed{0};
};

std::mutex g_recorders_mu;
std::vector<std::unique_ptr<Recorder>> g_recorders;  // never shrinks

Recorder* LocalRecorder() {
  thread_local Recorder* mine = nullptr;
  if (mine == nullptr) {
    std::lock_guard<std::mutex> lk(g_recorders_mu);
    g_recorders.emplace_back(new Recorder);
    mine = g_recorders.back().get();
  }
  return mine;
}

struct Totals {
  perf::HistogramSnapshot latency_ns;
  uint64_t failed = 0;
};

Totals Collect() {
  Totals t;
  std::lock_guard<std::mutex> lk(g_recorders_mu);
  for (const auto& r : g_recorders) {
    r->latency_ns.AddTo(&t.latency_ns);
    t.failed += r->failed.load(std::memory_order_relaxed);
  }
  return t;
}

std::atomic<bool> g_stop{false};
std::atomic<int64_t> g_issued{0};
std::atomic<double> g_server_cpu{-1.0};
std::atomic<int> g_used_rdma{-1};
std::mutex g_first_error_mu;
std::string g_first_error;

// ---- one chain of RPCs: each completion issues the next ---------------------------

class Chain;

// What a client thread's chains share: the count of chains not yet ended
// and, with --expected_qps, the chains waiting for their next turn. Guarded
// by mu; cv wakes the thread when either changes.
struct ThreadState {
  std::mutex mu;
  std::condition_variable cv;
  int live = 0;
  bool paced = false;
  std::deque<Chain*> idle;  // first in, first out: every chain takes turns
};

class Chain : public google::protobuf::Closure {
 public:
  Chain(rrpc::Channel* channel, const rrpc::IOBuf* attachment, bool report_cpu, ThreadState* ts)
      : stub_(channel), attachment_(attachment), report_cpu_(report_cpu), ts_(ts) {
    request_.set_echo_attachment(FLAGS_echo_attachment);
  }

  // Issues the next RPC, or ends the chain when the test is over.
  void Issue() {
    if (g_stop.load(std::memory_order_relaxed) ||
        (FLAGS_test_iterations > 0 && g_issued.fetch_add(1) >= FLAGS_test_iterations)) {
      End();
      return;
    }
    cntl_.Reset();
    cntl_.request_attachment().append(*attachment_);  // shared: no copy per RPC
    start_ns_ = NowNs();
    stub_.Test(&cntl_, &request_, &response_, this);
  }

  // The RPC completed (on an rrpc loop thread).
  void Run() override {
    uint64_t ns = NowNs() - start_ns_;
    Recorder* r = LocalRecorder();
    if (cntl_.Failed()) {
      r->failed.fetch_add(1, std::memory_order_relaxed);
      std::lock_guard<std::mutex> lk(g_first_error_mu);
      if (g_first_error.empty()) {
        g_first_error = "[E" + std::to_string(cntl_.ErrorCode()) + "] " + cntl_.ErrorText();
      }
    } else {
      r->latency_ns.Record(ns);
      // brpc's cpu_usage: the CPUs the server process used, as a fraction
      // (1 = one CPU), and empty in most responses (brpc's server fills it
      // in at most every 100 ms).
      if (report_cpu_ && !response_.cpu_usage().empty() &&
          response_.cpu_usage() != last_cpu_usage_) {
        last_cpu_usage_ = response_.cpu_usage();
        g_server_cpu.store(strtod(last_cpu_usage_.c_str(), nullptr), std::memory_order_relaxed);
      }
      if (report_cpu_) g_used_rdma.store(cntl_.used_rdma() ? 1 : 0, std::memory_order_relaxed);
    }
    if (!ts_->paced) {
      Issue();
      return;
    }
    // Paced: the client thread issues the next RPC when its turn comes
    // (a loop thread must not wait for it).
    std::lock_guard<std::mutex> lk(ts_->mu);
    ts_->idle.push_back(this);
    ts_->cv.notify_all();
  }

 private:
  void End() {
    std::lock_guard<std::mutex> lk(ts_->mu);
    if (--ts_->live == 0) ts_->cv.notify_all();
  }

  test::PerfTestService_Stub stub_;
  const rrpc::IOBuf* attachment_;
  bool report_cpu_;
  ThreadState* ts_;
  rrpc::Controller cntl_;
  test::PerfTestRequest request_;
  test::PerfTestResponse response_;
  uint64_t start_ns_ = 0;
  std::string last_cpu_usage_;
};

std::vector<std::string> SplitServers(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == ',' || c == '+' || c == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur.push_back(c);
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// Chains that have not ended, across all threads; the reporter waits on it.
std::mutex g_live_mu;
std::condition_variable g_live_cv;
std::atomic<int> g_live{0};

std::mutex g_reach_mu;
std::string g_unreachable;  // why the first thread that could not start could not

void CouldNotStart(const std::string& why) {
  std::lock_guard<std::mutex> lk(g_reach_mu);
  if (g_unreachable.empty()) g_unreachable = why;
}

// One synchronous RPC before the test, as brpc's client makes: a server that
// cannot be reached ends the test at once instead of failing RPCs for all of
// --test_seconds.
bool Reachable(rrpc::Channel* channel, const std::string& server) {
  rrpc::Controller cntl;
  test::PerfTestRequest request;
  test::PerfTestResponse response;
  request.set_echo_attachment(false);
  test::PerfTestService_Stub(channel).Test(&cntl, &request, &response, nullptr);
  if (!cntl.Failed()) return true;
  CouldNotStart("cannot reach " + server + ": [E" + std::to_string(cntl.ErrorCode()) + "] " +
                cntl.ErrorText());
  return false;
}

// With --expected_qps: issue this thread's idle chains one turn apart until
// the test is over, then let every chain end.
void Pace(ThreadState* ts, double per_second) {
  const auto interval = std::chrono::nanoseconds(static_cast<int64_t>(1e9 / per_second));
  auto next = Clock::now();
  std::unique_lock<std::mutex> lk(ts->mu);
  for (;;) {
    // Wait for the turn (a rate, not a synchronisation), then for a chain.
    ts->cv.wait_until(lk, next, [] { return g_stop.load(); });
    ts->cv.wait(lk, [&] { return g_stop.load() || ts->live == 0 || !ts->idle.empty(); });
    if (ts->idle.empty()) break;  // stopped with every chain in flight, or all ended
    Chain* c = ts->idle.front();
    ts->idle.pop_front();
    lk.unlock();
    c->Issue();  // ends the chain instead when the test is over
    lk.lock();
    if (g_stop.load() && ts->idle.empty()) break;
    next += interval;
    // After a stall, do not burst to catch up by more than a second.
    if (next < Clock::now() - std::chrono::seconds(1)) next = Clock::now();
  }
  // Chains still in flight come back idle (or end); end those too.
  ts->cv.wait(lk, [&] { return ts->live == 0 || !ts->idle.empty(); });
  while (ts->live > 0) {
    std::deque<Chain*> idle;
    idle.swap(ts->idle);
    lk.unlock();
    for (Chain* c : idle) c->Issue();
    lk.lock();
    ts->cv.wait(lk, [&] { return ts->live == 0 || !ts->idle.empty(); });
  }
}

// A client thread: one channel, queue_depth chains. Returns when they ended.
void ClientThread(int index, const std::string& server, const rrpc::IOBuf* attachment,
                  std::atomic<int>* init_failures) {
  rrpc::ChannelOptions options;
  options.use_rdma = FLAGS_use_rdma;
  options.timeout_ms = FLAGS_rpc_timeout_ms;
  options.connection_type = g_connection_type;
  rrpc::Channel channel;
  std::vector<std::unique_ptr<Chain>> chains;
  const bool naming = server.find("://") != std::string::npos;
  int rc = naming ? channel.Init(server.c_str(), FLAGS_load_balancer.c_str(), &options)
                  : channel.Init(server.c_str(), &options);
  if (rc != 0) CouldNotStart("cannot set up a channel to " + server + ": " + channel.init_error());
  if (rc != 0 || !Reachable(&channel, server)) {
    init_failures->fetch_add(1);
    g_stop = true;  // the numbers would be meaningless: end the other threads too
    std::lock_guard<std::mutex> lk(g_live_mu);
    g_live -= FLAGS_queue_depth;
    g_live_cv.notify_all();
    return;
  }
  ThreadState ts;
  ts.live = FLAGS_queue_depth;
  ts.paced = FLAGS_expected_qps > 0;
  for (int i = 0; i < FLAGS_queue_depth; i++) {
    chains.emplace_back(new Chain(&channel, attachment, index == 0 && i == 0, &ts));
  }
  if (ts.paced) {
    for (auto& c : chains) ts.idle.push_back(c.get());
    Pace(&ts, static_cast<double>(FLAGS_expected_qps) / FLAGS_thread_num);
  } else {
    for (auto& c : chains) c->Issue();
    std::unique_lock<std::mutex> lk(ts.mu);
    ts.cv.wait(lk, [&] { return ts.live == 0; });
  }
  std::lock_guard<std::mutex> lk(g_live_mu);
  g_live -= FLAGS_queue_depth;
  g_live_cv.notify_all();
}

struct Line {
  double seconds;
  uint64_t rpcs;
  uint64_t failed;
  const perf::HistogramSnapshot* latency_ns;
};

void PrintStats(const char* prefix, const Line& l) {
  double qps = l.seconds > 0 ? static_cast<double>(l.rpcs) / l.seconds : 0;
  double bytes_per_rpc = static_cast<double>(FLAGS_attachment_size) *
                         (FLAGS_echo_attachment ? 2.0 : 1.0);
  double mib_s = qps * bytes_per_rpc / (1024.0 * 1024.0);
  double cpu = g_server_cpu.load();
  char cpu_text[32] = "n/a";
  if (cpu >= 0) snprintf(cpu_text, sizeof cpu_text, "%.1f%%", cpu * 100.0);
  printf("%s qps=%.0f throughput=%.2fMiB/s latency_us avg=%.1f p50=%.1f p99=%.1f p999=%.1f "
         "failed=%llu server_cpu=%s\n",
         prefix, qps, mib_s, l.latency_ns->Mean() / 1000.0, l.latency_ns->Percentile(0.5) / 1000.0,
         l.latency_ns->Percentile(0.99) / 1000.0, l.latency_ns->Percentile(0.999) / 1000.0,
         static_cast<unsigned long long>(l.failed), cpu_text);
  fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  FLAGS_logtostderr = true;  // glog to stderr, not to files (--logtostderr=false overrides)
  gflags::SetUsageMessage("rdma_performance client; see docs/cxx.md");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);  // before any LOG, so glog does not warn about it
  std::vector<std::string> servers;
  if (FLAGS_servers.find("://") != std::string::npos)
    servers.push_back(FLAGS_servers);  // a naming URL: one cluster channel per thread
  else
    servers = SplitServers(FLAGS_servers);
  if (servers.empty() || FLAGS_thread_num <= 0 || FLAGS_queue_depth <= 0 ||
      FLAGS_attachment_size < 0 || (FLAGS_test_seconds <= 0 && FLAGS_test_iterations <= 0)) {
    fprintf(stderr, "bad flags: need --servers, --thread_num > 0, --queue_depth > 0, "
                    "--attachment_size >= 0, and --test_seconds or --test_iterations > 0\n");
    return 2;
  }
  if (FLAGS_protocol != "baidu_std") {
    fprintf(stderr, "--protocol=%s: rrpc speaks only baidu_std (brpc's RDMA transport also "
                    "carries only baidu_std)\n", FLAGS_protocol.c_str());
    return 2;
  }
  rrpc::ConnectionType connection_type;
  if (!rrpc::ParseConnectionType(FLAGS_connection_type, &connection_type)) {
    fprintf(stderr, "--connection_type=%s: brpc's values are single, pooled and short\n",
            FLAGS_connection_type.c_str());
    return 2;
  }
  g_connection_type = connection_type;
  if (FLAGS_expected_qps < 0) {
    fprintf(stderr, "--expected_qps must be >= 0\n");
    return 2;
  }
  rrpc::IsAskedToQuit();  // Ctrl-C ends the test early, with a summary

  // The attachment is made once and shared by every RPC.
  rrpc::IOBuf attachment;
  std::string bytes(static_cast<size_t>(FLAGS_attachment_size), 'a');
  for (size_t i = 0; i < bytes.size(); i++) bytes[i] = static_cast<char>('a' + i % 26);
  attachment.append(bytes);

  g_live = FLAGS_thread_num * FLAGS_queue_depth;
  std::atomic<int> init_failures{0};
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < FLAGS_thread_num; i++) {
    threads.emplace_back(ClientThread, i, servers[static_cast<size_t>(i) % servers.size()],
                         &attachment, &init_failures);
  }

  perf::HistogramSnapshot prev;
  uint64_t prev_failed = 0;
  for (int sec = 1;; sec++) {
    bool all_ended;
    {
      std::unique_lock<std::mutex> lk(g_live_mu);
      all_ended = g_live_cv.wait_until(lk, start + std::chrono::seconds(sec),
                                       [] { return g_live.load() == 0; });
    }
    if (all_ended) break;
    Totals t = Collect();
    perf::HistogramSnapshot delta = t.latency_ns;
    delta.Subtract(prev);
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[%4ds]", sec);
    PrintStats(prefix, {1.0, delta.total, t.failed - prev_failed, &delta});
    prev = t.latency_ns;
    prev_failed = t.failed;
    if ((FLAGS_test_seconds > 0 && sec >= FLAGS_test_seconds) || rrpc::IsAskedToQuit()) break;
  }
  g_stop = true;
  for (std::thread& t : threads) t.join();
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();

  Totals t = Collect();
  int used_rdma = g_used_rdma.load();
  char prefix[512];
  snprintf(prefix, sizeof prefix,
           "summary: servers=%s thread_num=%d queue_depth=%d attachment_size=%d "
           "echo_attachment=%s transport=%s seconds=%.1f rpcs=%llu",
           FLAGS_servers.c_str(), FLAGS_thread_num, FLAGS_queue_depth, FLAGS_attachment_size,
           FLAGS_echo_attachment ? "true" : "false",
           used_rdma < 0 ? "none" : (used_rdma ? "RDMA" : "TCP"), seconds,
           static_cast<unsigned long long>(t.latency_ns.total));
  PrintStats(prefix, {seconds, t.latency_ns.total, t.failed, &t.latency_ns});
  // The whole process's CPU and voluntary context switches (wake-ups), for
  // CPU and wake-ups per RPC next to the server's (tools/many-core-bench).
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) == 0)
    fprintf(stderr, "client usage: user_s=%.3f sys_s=%.3f vcsw=%ld ivcsw=%ld\n",
            ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
            ru.ru_nvcsw, ru.ru_nivcsw);
  rrpc_rdma_stats rs;
  if (used_rdma > 0 && rrpc_rdma_get_stats(&rs) == 0)  // the client's side of the data path
    fprintf(stderr, "client rdma: writes=%llu cdc_sent=%llu completions=%llu piece_wants=%llu blocked_on_window=%llu "
            "blocked_on_send_queue=%llu bytes_copied_send=%llu bytes_copied_recv=%llu\n",
            static_cast<unsigned long long>(rs.writes), static_cast<unsigned long long>(rs.cdc_sent),
            static_cast<unsigned long long>(rs.completions), static_cast<unsigned long long>(rs.piece_wants),
            static_cast<unsigned long long>(rs.blocked_on_window),
            static_cast<unsigned long long>(rs.blocked_on_send_queue),
            static_cast<unsigned long long>(rs.bytes_copied_send),
            static_cast<unsigned long long>(rs.bytes_copied_recv));
  if (init_failures.load() > 0) {
    std::lock_guard<std::mutex> lk(g_reach_mu);
    fprintf(stderr, "%d of %d client threads could not start; %s\n", init_failures.load(),
            FLAGS_thread_num, g_unreachable.c_str());
    return 1;
  }
  if (t.failed > 0) {
    fprintf(stderr, "%llu RPCs failed; the first: %s\n",
            static_cast<unsigned long long>(t.failed), g_first_error.c_str());
    return 1;
  }
  return t.latency_ns.total > 0 ? 0 : 1;
}
