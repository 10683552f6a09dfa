// lock_unittest.cc - rrpc__lock (src/rrpc/internal/lock.h, lock.c), the
// futex-word mutex of the per-call locks: mutual exclusion and the ordering
// a mutex gives (what one holder wrote, the next sees), with more threads
// than cores so holders are preempted and waiters go to sleep in the
// kernel (the contended path). Under ThreadSanitizer a missing acquire or
// release is reported as a race on the counters.
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

// The header's inline halves use C11's atomic names; C++ has the same
// functions in std (std::atomic<int> is laid out as C's atomic_int).
using std::atomic_compare_exchange_strong_explicit;
using std::atomic_exchange_explicit;
using std::atomic_init;
using std::atomic_int;
using std::memory_order_acquire;
using std::memory_order_relaxed;
using std::memory_order_release;
extern "C" {
#include "rrpc/internal/lock.h"
}

namespace {

TEST(Lock, CountsEveryIncrementOfManyThreads) {
  constexpr int kThreads = 8;
  constexpr int kRounds = 100000;
  rrpc__lock lock;
  rrpc__lock_init(&lock);
  // Two plain words, written apart: a holder that overlapped another would
  // leave them unequal or short.
  long a = 0, b = 0;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&] {
      for (int i = 0; i < kRounds; i++) {
        rrpc__lock_acquire(&lock);
        a++;
        if (i % 64 == 0) std::this_thread::yield();  // preempted while holding: others must sleep
        b++;
        rrpc__lock_release(&lock);
      }
    });
  for (auto &t : ts) t.join();
  EXPECT_EQ(a, long{kThreads} * kRounds);
  EXPECT_EQ(b, a);
  // Free again, and usable from this thread.
  rrpc__lock_acquire(&lock);
  rrpc__lock_release(&lock);
}

TEST(Lock, AWaiterGetsItOnceTheHolderLetsGo) {
  rrpc__lock lock;
  rrpc__lock_init(&lock);
  std::atomic<int> stage{0};
  int seen = 0;  // written under the lock by the holder, read by the waiter
  rrpc__lock_acquire(&lock);
  std::thread waiter([&] {
    stage.store(1);
    rrpc__lock_acquire(&lock);  // sleeps until the main thread releases
    seen = stage.load() == 2 ? 42 : -1;
    rrpc__lock_release(&lock);
  });
  while (stage.load() != 1) std::this_thread::yield();
  stage.store(2);  // before the release: the waiter can only get the lock after this
  rrpc__lock_release(&lock);
  waiter.join();
  EXPECT_EQ(seen, 42);
}

}  // namespace
