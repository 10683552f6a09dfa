// client.cpp - rdma_performance client: keeps --queue_depth RPCs in flight
// on each of --thread_num connections and prints QPS, throughput and latency
// (avg/p50/p99/p999) each second, then a summary line. Exits 1 if any RPC
// failed. Flags and service follow brpc's example of the same name.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "examples/rdma_performance/latency_histogram.h"
#include "examples/rdma_performance/test.pb.h"
#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/server.h"

DEFINE_string(servers, "127.0.0.1:8002", "Servers (ip:port), separated by ',', '+' or ' '");
DEFINE_bool(use_rdma, false, "Use RDMA (falls back to TCP if it cannot be set up)");
DEFINE_int32(thread_num, 1, "Client threads; each has its own connection");
DEFINE_int32(queue_depth, 1, "RPCs in flight per thread");
DEFINE_int32(attachment_size, 0, "Bytes of request attachment per RPC");
DEFINE_bool(echo_attachment, false, "Ask the server to send the attachment back");
DEFINE_int32(rpc_timeout_ms, 2000, "Timeout of each RPC (ms)");
DEFINE_int32(test_seconds, 20, "Length of the test in seconds (0 = until test_iterations)");
DEFINE_int64(test_iterations, 0, "Stop after this many RPCs in all (0 = until test_seconds)");

namespace {

using Clock = std::chrono::steady_clock;

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

class Chain : public google::protobuf::Closure {
 public:
  Chain(rrpc::Channel* channel, const rrpc::IOBuf* attachment, bool report_cpu,
        std::atomic<int>* live, std::mutex* mu, std::condition_variable* cv)
      : stub_(channel), attachment_(attachment), report_cpu_(report_cpu), live_(live), mu_(mu),
        cv_(cv) {
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
      if (report_cpu_ && response_.cpu_usage() != last_cpu_usage_) {
        last_cpu_usage_ = response_.cpu_usage();  // changes once a second
        g_server_cpu.store(strtod(last_cpu_usage_.c_str(), nullptr), std::memory_order_relaxed);
        g_used_rdma.store(cntl_.used_rdma() ? 1 : 0, std::memory_order_relaxed);
      }
    }
    Issue();
  }

 private:
  void End() {
    std::lock_guard<std::mutex> lk(*mu_);
    if (--*live_ == 0) cv_->notify_all();
  }

  test::PerfTestService_Stub stub_;
  const rrpc::IOBuf* attachment_;
  bool report_cpu_;
  std::atomic<int>* live_;
  std::mutex* mu_;
  std::condition_variable* cv_;
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

// A client thread: one channel, queue_depth chains. Returns when they ended.
void ClientThread(int index, const std::string& server, const rrpc::IOBuf* attachment,
                  std::atomic<int>* init_failures) {
  rrpc::ChannelOptions options;
  options.use_rdma = FLAGS_use_rdma;
  options.timeout_ms = FLAGS_rpc_timeout_ms;
  rrpc::Channel channel;
  std::vector<std::unique_ptr<Chain>> chains;
  if (channel.Init(server.c_str(), &options) != 0) {
    init_failures->fetch_add(1);
    std::lock_guard<std::mutex> lk(g_live_mu);
    g_live -= FLAGS_queue_depth;
    g_live_cv.notify_all();
    return;
  }
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<int> live{FLAGS_queue_depth};
  for (int i = 0; i < FLAGS_queue_depth; i++) {
    chains.emplace_back(new Chain(&channel, attachment, index == 0 && i == 0, &live, &mu, &cv));
  }
  for (auto& c : chains) c->Issue();
  {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return live.load() == 0; });
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
  if (cpu >= 0) snprintf(cpu_text, sizeof cpu_text, "%.1f%%", cpu);
  printf("%s qps=%.0f throughput=%.2fMiB/s latency_us avg=%.1f p50=%.1f p99=%.1f p999=%.1f "
         "failed=%llu server_cpu=%s\n",
         prefix, qps, mib_s, l.latency_ns->Mean() / 1000.0, l.latency_ns->Percentile(0.5) / 1000.0,
         l.latency_ns->Percentile(0.99) / 1000.0, l.latency_ns->Percentile(0.999) / 1000.0,
         static_cast<unsigned long long>(l.failed), cpu_text);
  fflush(stdout);
}

}  // namespace

int main(int argc, char* argv[]) {
  gflags::SetUsageMessage("rdma_performance client; see docs/cxx.md");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  std::vector<std::string> servers = SplitServers(FLAGS_servers);
  if (servers.empty() || FLAGS_thread_num <= 0 || FLAGS_queue_depth <= 0 ||
      FLAGS_attachment_size < 0 || (FLAGS_test_seconds <= 0 && FLAGS_test_iterations <= 0)) {
    fprintf(stderr, "bad flags: need --servers, --thread_num > 0, --queue_depth > 0, "
                    "--attachment_size >= 0, and --test_seconds or --test_iterations > 0\n");
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
  if (init_failures.load() > 0) {
    fprintf(stderr, "%d of %d channels could not be initialized\n", init_failures.load(),
            FLAGS_thread_num);
    return 1;
  }
  if (t.failed > 0) {
    fprintf(stderr, "%llu RPCs failed; the first: %s\n",
            static_cast<unsigned long long>(t.failed), g_first_error.c_str());
    return 1;
  }
  return t.latency_ns.total > 0 ? 0 : 1;
}
