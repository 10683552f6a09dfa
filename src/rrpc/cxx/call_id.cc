// call_id.cc - the ids of calls someone may Join (Controller::call_id()).
// Only controllers asked for their id register one, so calls nobody joins
// cost nothing here. The live ids are kept in shards (lock, set, condition
// variable) so joins and ends of unrelated calls rarely meet on one lock.
#include "rrpc/cxx/call_id.h"

#include <google/protobuf/stubs/callback.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <unordered_set>

#include "rrpc/cxx/callback.h"

namespace rrpc {
namespace {

struct Shard {
  std::mutex mu;
  std::condition_variable ended;
  std::unordered_set<uint64_t> live;
  int joiners = 0;  // under mu: threads waiting in Join on this shard
};

constexpr uint64_t kShards = 16;

Shard* Shards() {
  static Shard* shards = new Shard[kShards];  // never freed: ids may end during exit
  return shards;
}

Shard& ShardOf(uint64_t id) { return Shards()[id % kShards]; }

// Ids start above the small values Controller keeps for "no id" and "ended".
std::atomic<uint64_t> g_next_id{16};

class NoOpClosure : public google::protobuf::Closure {
 public:
  void Run() override {}
};

}  // namespace

namespace detail {

uint64_t NewCallId() {
  uint64_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  Shard& s = ShardOf(id);
  std::lock_guard<std::mutex> lock(s.mu);
  s.live.insert(id);
  return id;
}

void EndCallId(uint64_t id) {
  Shard& s = ShardOf(id);
  std::lock_guard<std::mutex> lock(s.mu);
  s.live.erase(id);
  if (s.joiners > 0) s.ended.notify_all();
}

}  // namespace detail

void Join(CallId id) {
  if (id.value == 0) return;
  Shard& s = ShardOf(id.value);
  std::unique_lock<std::mutex> lock(s.mu);
  s.joiners++;
  s.ended.wait(lock, [&] { return s.live.count(id.value) == 0; });
  s.joiners--;
}

google::protobuf::Closure* DoNothing() {
  static NoOpClosure* closure = new NoOpClosure;  // never deleted: shared by every caller
  return closure;
}

}  // namespace rrpc
