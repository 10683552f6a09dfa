// latency_histogram.h - log-linear latency histogram for rdma_performance:
// exact below 64 ns, then 32 buckets per power of two (at most ~3% error),
// covering every uint64_t. One writer per histogram (no atomic RMW on the
// hot path); any thread may read a snapshot at any time.
#ifndef RRPC_EXAMPLES_LATENCY_HISTOGRAM_H
#define RRPC_EXAMPLES_LATENCY_HISTOGRAM_H

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace perf {

constexpr int kSubBits = 5;                        // 32 sub-buckets per power of two
constexpr int kSub = 1 << kSubBits;
constexpr int kBuckets = (64 - kSubBits + 1) * kSub;  // 1920

// Bucket of a value, and the range [BucketLow, BucketLow of the next) back.
int BucketOf(uint64_t v);
uint64_t BucketLow(int b);

// A snapshot: plain counters that can be added, subtracted and queried.
struct HistogramSnapshot {
  std::vector<uint64_t> counts = std::vector<uint64_t>(kBuckets, 0);
  uint64_t total = 0;
  uint64_t sum = 0;  // of recorded values

  void Add(const HistogramSnapshot& o);
  void Subtract(const HistogramSnapshot& o);  // o must be an earlier snapshot of the same
  double Mean() const;
  // The value below which a fraction p (0..1) of the samples lie, as the
  // midpoint of its bucket; 0 with no samples.
  double Percentile(double p) const;
};

class LatencyHistogram {
 public:
  // Only the owning thread calls Record.
  void Record(uint64_t v) {
    Bump(&counts_[BucketOf(v)], 1);
    Bump(&sum_, v);
    Bump(&total_, 1);
  }
  // Adds the current counts into *out. Any thread; concurrent Records may
  // or may not be included.
  void AddTo(HistogramSnapshot* out) const;

 private:
  static void Bump(std::atomic<uint64_t>* c, uint64_t by) {
    c->store(c->load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  std::atomic<uint64_t> counts_[kBuckets] = {};
  std::atomic<uint64_t> sum_{0};
  std::atomic<uint64_t> total_{0};
};

}  // namespace perf

#endif  // RRPC_EXAMPLES_LATENCY_HISTOGRAM_H
