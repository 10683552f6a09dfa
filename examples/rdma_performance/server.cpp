// server.cpp - rdma_performance server: answers test.PerfTestService.Test,
// echoing the attachment when asked and reporting this process's CPU usage
// (as brpc's server does: CPUs used, a fraction, "0.748").
// Interoperates with brpc's rdma_performance client.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "examples/rdma_performance/test.pb.h"
#include "rrpc/cxx/server.h"

DEFINE_int32(port, 8002, "TCP port of the server");
DEFINE_bool(use_rdma, false, "Offer RDMA to clients (they fall back to TCP if it cannot be set up)");

namespace {

// CPU time (user + system) of this process in clock ticks, from
// /proc/self/stat fields 14 and 15; -1 if unreadable.
long long ProcessCpuTicks() {
  FILE* f = fopen("/proc/self/stat", "r");
  if (f == nullptr) return -1;
  char buf[1024];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  // The command name (field 2) may hold spaces; fields after it follow the
  // last ')'.
  const char* p = strrchr(buf, ')');
  if (p == nullptr) return -1;
  unsigned long long utime = 0, stime = 0;
  // After ")": state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt
  // majflt cmajflt utime(14) stime(15).
  if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
    return -1;
  return static_cast<long long>(utime + stime);
}

// Samples the CPU usage once a second on its own thread; the handler only
// reads the last value.
class CpuSampler {
 public:
  CpuSampler() : thread_([this] { Loop(); }) {}
  ~CpuSampler() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // CPUs used over the last second (1000 = one whole CPU; can exceed 1000
  // with threads), in thousandths, so the handler formats it without
  // floating-point printf.
  int thousandths() const { return thousandths_.load(std::memory_order_relaxed); }

 private:
  void Loop() {
    const double ticks_per_s = static_cast<double>(sysconf(_SC_CLK_TCK));
    long long last_ticks = ProcessCpuTicks();
    auto last = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::seconds(1), [this] { return stop_; })) {
      long long ticks = ProcessCpuTicks();
      auto now = std::chrono::steady_clock::now();
      double wall = std::chrono::duration<double>(now - last).count();
      if (ticks >= 0 && last_ticks >= 0 && wall > 0) {
        double cpus = static_cast<double>(ticks - last_ticks) / ticks_per_s / wall;
        thousandths_.store(static_cast<int>(cpus * 1000 + 0.5), std::memory_order_relaxed);
      }
      last_ticks = ticks;
      last = now;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> thousandths_{0};
  std::thread thread_;  // last: starts after the members it uses
};

class PerfTestServiceImpl : public test::PerfTestService {
 public:
  explicit PerfTestServiceImpl(const CpuSampler* cpu) : cpu_(cpu) {}

  void Test(google::protobuf::RpcController* cntl_base, const test::PerfTestRequest* request,
            test::PerfTestResponse* response, google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(cntl_base);
    if (request->echo_attachment()) {
      cntl->response_attachment().append(cntl->request_attachment());  // shared, no copy
    }
    // brpc's format: a fraction of one CPU ("0.748"), which brpc's client
    // multiplies by 100 to print a percentage.
    // Formatted backwards into a local buffer and set in one go: no
    // temporary strings per call (they cost as much as rrpc's framing).
    unsigned t = static_cast<unsigned>(cpu_->thousandths());
    char buf[16];
    char* end = buf + sizeof buf;
    char* p = end;
    for (int i = 0; i < 3; i++, t /= 10) *--p = static_cast<char>('0' + t % 10);
    *--p = '.';
    do *--p = static_cast<char>('0' + t % 10);
    while ((t /= 10) != 0);
    response->set_cpu_usage(p, static_cast<size_t>(end - p));
    done->Run();
  }

 private:
  const CpuSampler* cpu_;
};

}  // namespace

int main(int argc, char* argv[]) {
  FLAGS_logtostderr = true;  // glog to stderr, not to files (--logtostderr=false overrides)
  gflags::SetUsageMessage("rdma_performance server; see docs/cxx.md");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  google::InitGoogleLogging(argv[0]);  // before any LOG, so glog does not warn about it
  CpuSampler cpu;
  PerfTestServiceImpl service(&cpu);
  rrpc::Server server;
  if (server.AddService(&service, rrpc::SERVER_DOESNT_OWN_SERVICE) != 0) return 1;
  rrpc::ServerOptions options;
  options.use_rdma = FLAGS_use_rdma;
  if (server.Start(FLAGS_port, &options) != 0) return 1;
  LOG(INFO) << "rdma_performance server on port " << server.listen_port()
            << (FLAGS_use_rdma ? " (RDMA offered)" : " (TCP)");
  server.RunUntilAskedToQuit();
  return 0;
}
