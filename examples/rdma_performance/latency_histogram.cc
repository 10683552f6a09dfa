// latency_histogram.cc - bucket arithmetic and snapshots of the log-linear
// histogram (latency_histogram.h).
#include "examples/rdma_performance/latency_histogram.h"

namespace perf {

int BucketOf(uint64_t v) {
  if (v < 2 * kSub) return static_cast<int>(v);  // exact region
  int e = 63 - __builtin_clzll(v);               // top bit, >= kSubBits + 1
  int shift = e - kSubBits;
  return (shift + 1) * kSub + static_cast<int>((v >> shift) - kSub);
}

uint64_t BucketLow(int b) {
  if (b < 2 * kSub) return static_cast<uint64_t>(b);
  int shift = b / kSub - 1;
  return (static_cast<uint64_t>(b % kSub) + kSub) << shift;
}

void HistogramSnapshot::Add(const HistogramSnapshot& o) {
  for (int i = 0; i < kBuckets; i++) counts[i] += o.counts[i];
  total += o.total;
  sum += o.sum;
}

void HistogramSnapshot::Subtract(const HistogramSnapshot& o) {
  for (int i = 0; i < kBuckets; i++) counts[i] -= o.counts[i];
  total -= o.total;
  sum -= o.sum;
}

double HistogramSnapshot::Mean() const {
  return total == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(total);
}

double HistogramSnapshot::Percentile(double p) const {
  // Use the bucket counts' own total: it is consistent with them even when
  // `total` was read a moment apart.
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  if (n == 0) return 0.0;
  uint64_t rank = static_cast<uint64_t>(p * static_cast<double>(n));
  if (rank >= n) rank = n - 1;
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; i++) {
    seen += counts[i];
    if (seen > rank) {
      double lo = static_cast<double>(BucketLow(i));
      double hi = i + 1 < kBuckets ? static_cast<double>(BucketLow(i + 1)) : lo;
      return i < 2 * kSub ? lo : (lo + hi) / 2;
    }
  }
  return static_cast<double>(BucketLow(kBuckets - 1));
}

void LatencyHistogram::AddTo(HistogramSnapshot* out) const {
  for (int i = 0; i < kBuckets; i++) out->counts[i] += counts_[i].load(std::memory_order_relaxed);
  out->sum += sum_.load(std::memory_order_relaxed);
  out->total += total_.load(std::memory_order_relaxed);
}

}  // namespace perf
