// handoff.h - how long this machine, now, takes to hand work from one thread
// to another through an rrpc loop: the wake-ups a latency under test pays
// besides the code it times. A test that holds a path to "within 1 ms"
// measures these beside it, round for round, and holds the path's excess
// over them to the bound: on a quiet host they are tens of microseconds, so
// the bound means what it says; on a loaded one (CI's 2 shared cores) each
// wake-up may wait a scheduler slice, which is the machine's, not the
// code's, and is what they then measure.
#ifndef RRPC_TEST_COMMON_HANDOFF_H
#define RRPC_TEST_COMMON_HANDOFF_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

extern "C" {  // a C header without a guard of its own
#include "rrpc/internal/loop.h"
}

namespace rrpc_test {

class Handoff {
 public:
  Handoff() { ok_ = rrpc__loop_start("handoff", &loop_) == 0; }
  ~Handoff() {
    if (ok_) rrpc__loop_stop(loop_);
  }
  Handoff(const Handoff &) = delete;
  Handoff &operator=(const Handoff &) = delete;
  bool ok() const { return ok_; }

  // One hop, the path of an async call's done: microseconds from a post
  // (from this thread) until the task ran on the loop's thread; -1 if the
  // post failed.
  int64_t one_hop_us() {
    Hop h;
    auto t0 = Clock::now();
    if (rrpc__loop_post(loop_, Hop::run, &h) != 0) return -1;
    std::unique_lock<std::mutex> g(h.mu);
    h.cv.wait(g, [&] { return h.ran; });
    return us(t0, h.at);
  }

  // Two hops, the path of a sync call that another thread ends: a thread
  // blocked on a condition variable, a post to the loop whose task wakes
  // it; microseconds from the post until the woken thread ran, or -1.
  int64_t two_hop_us() {
    Hop h;
    Clock::time_point woke;
    bool waiting = false;
    std::thread waiter([&] {
      std::unique_lock<std::mutex> g(h.mu);
      waiting = true;
      h.cv.notify_all();
      h.cv.wait(g, [&] { return h.ran; });
      woke = Clock::now();
    });
    {
      // Once this lock is taken after `waiting`, the waiter is inside its wait.
      std::unique_lock<std::mutex> g(h.mu);
      h.cv.wait(g, [&] { return waiting; });
    }
    auto t0 = Clock::now();
    if (rrpc__loop_post(loop_, Hop::run, &h) != 0) {
      {
        std::lock_guard<std::mutex> g(h.mu);
        h.ran = true;
        h.cv.notify_all();
      }
      waiter.join();
      return -1;
    }
    waiter.join();
    return us(t0, woke);
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Hop {
    std::mutex mu;
    std::condition_variable cv;
    bool ran = false;
    Clock::time_point at;
    static void run(void *arg) {
      Hop *h = static_cast<Hop *>(arg);
      std::lock_guard<std::mutex> g(h->mu);
      h->ran = true;
      h->at = Clock::now();
      h->cv.notify_all();
    }
  };
  static int64_t us(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::microseconds>(b - a).count();
  }
  rrpc__loop *loop_ = nullptr;
  bool ok_ = false;
};

}  // namespace rrpc_test

#endif  // RRPC_TEST_COMMON_HANDOFF_H
