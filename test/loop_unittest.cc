// loop_unittest.cc - tests for the event loops (src/rrpc/core/loop.c), the timer
// heap (src/rrpc/core/timer_heap.c) and loop groups (src/rrpc/core/loop_group.c).
//
// Synchronisation is by futures and condition variables only. Waits carry a
// generous limit so a bug fails the test instead of hanging it.
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "rrpc/internal/loop.h"
#include "rrpc/internal/timer_heap.h"
#include "rrpc/log.h"
#include "test/common/test_util.h"

namespace {

constexpr auto kWaitLimit = std::chrono::seconds(30);

// For a test that holds a loop in a task on purpose (a gate) while the test
// thread acts: on a loaded machine the wait can pass the watchdog's wall
// bound, which is the test's doing, not the loop's. Off while in scope.
struct WatchdogOff {
  WatchdogOff() { rrpc__loop_watchdog_set(0, 0); }
  ~WatchdogOff() { rrpc_test::watchdog_restore(); }
};

// ---- helpers ----------------------------------------------------------------

void Thunk(void *arg) {
  auto *f = static_cast<std::function<void()> *>(arg);
  (*f)();
  delete f;
}

int Post(rrpc__loop *loop, std::function<void()> f) {
  auto *p = new std::function<void()>(std::move(f));
  int rc = rrpc__loop_post(loop, Thunk, p);
  if (rc) delete p;
  return rc;
}

// Runs f on the loop thread and waits for it.
void RunSync(rrpc__loop *loop, const std::function<void()> &f) {
  std::promise<void> done;
  auto fut = done.get_future();
  ASSERT_EQ(0, Post(loop, [&] {
              f();
              done.set_value();
            }));
  ASSERT_EQ(std::future_status::ready, fut.wait_for(kWaitLimit));
}

// Returns once every fd event that was pending when it was called has been
// dispatched: task A runs in some round, its post of B makes that round's
// epoll_wait non-blocking (so it collects everything ready), and B runs in
// the round after the dispatch.
void Flush(rrpc__loop *loop) {
  std::promise<void> done;
  auto fut = done.get_future();
  ASSERT_EQ(0, Post(loop, [&] { ASSERT_EQ(0, Post(loop, [&] { done.set_value(); })); }));
  ASSERT_EQ(std::future_status::ready, fut.wait_for(kWaitLimit));
}

std::string ThreadName() {
  char buf[32] = {0};
  pthread_getname_np(pthread_self(), buf, sizeof buf);
  return buf;
}

std::string LoopThreadName(rrpc__loop *loop) {
  std::string name;
  RunSync(loop, [&] { name = ThreadName(); });
  return name;
}

// A counter that tests can wait on. Add wakes the waiters only when the
// lowest target among them is reached: tasks on the loop call Add, and
// waking the waiting thread on every one (160,000 times in
// TasksFromManyThreadsKeepPerPosterOrder) put a futex wake-up with its
// system time into each task - on a loaded CI VM one took 11 ms, 10 of them
// system time inside pthread_cond_broadcast, and failed the watchdog.
class Counter {
 public:
  void Add(int n = 1) {
    std::lock_guard<std::mutex> g(mu_);
    value_ += n;
    if (waiters_ > 0 && value_ >= lowest_target_) cv_.notify_all();
  }
  int Get() {
    std::lock_guard<std::mutex> g(mu_);
    return value_;
  }
  // True once value >= target.
  bool WaitFor(int target) {
    std::unique_lock<std::mutex> g(mu_);
    lowest_target_ = waiters_ == 0 ? target : std::min(lowest_target_, target);
    waiters_++;
    bool ok = cv_.wait_for(g, kWaitLimit, [&] { return value_ >= target; });
    // Another waiter's higher target is not remembered: it is woken early
    // (at this one's target) and waits again, which is only a spare wake-up.
    if (--waiters_ == 0) lowest_target_ = 0;
    return ok;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int value_ = 0;
  int waiters_ = 0;
  int lowest_target_ = 0;
};

// Captures rrpc log messages for the lifetime of the object.
class LogCapture {
 public:
  LogCapture() { rrpc_log_set_sink(&LogCapture::Sink, this); }
  ~LogCapture() { rrpc_log_set_sink(nullptr, nullptr); }
  std::vector<std::string> Messages() {
    std::lock_guard<std::mutex> g(mu_);
    return msgs_;
  }

 private:
  static void Sink(void *arg, rrpc_log_level, const char *, int, const char *msg) {
    auto *self = static_cast<LogCapture *>(arg);
    std::lock_guard<std::mutex> g(self->mu_);
    self->msgs_.push_back(msg);
  }
  std::mutex mu_;
  std::vector<std::string> msgs_;
};

class LoopTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(0, rrpc__loop_start("test-loop", &loop_)); }
  void TearDown() override {
    if (loop_) rrpc__loop_stop(loop_);
  }
  rrpc__loop *loop_ = nullptr;
};

// ---- clock, identity, names -------------------------------------------------

TEST(LoopClock, NowUsIsMonotonicClock) {
  auto steady_us = [] {
    return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch())
                                     .count());
  };
  uint64_t prev = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t a = steady_us();
    uint64_t n = rrpc__now_us();
    uint64_t b = steady_us();
    EXPECT_LE(a, n);
    EXPECT_LE(n, b);
    EXPECT_LE(prev, n);
    prev = n;
  }
}

TEST_F(LoopTest, CurrentAndInThread) {
  EXPECT_EQ(nullptr, rrpc__loop_current());
  EXPECT_EQ(0, rrpc__loop_in_thread(loop_));
  rrpc__loop *other = nullptr;
  ASSERT_EQ(0, rrpc__loop_start("other", &other));
  rrpc__loop *seen = nullptr;
  int in = -1, in_other = -1;
  RunSync(loop_, [&] {
    seen = rrpc__loop_current();
    in = rrpc__loop_in_thread(loop_);
    in_other = rrpc__loop_in_thread(other);
  });
  EXPECT_EQ(loop_, seen);
  EXPECT_EQ(1, in);
  EXPECT_EQ(0, in_other);
  RunSync(other, [&] { seen = rrpc__loop_current(); });
  EXPECT_EQ(other, seen);
  rrpc__loop_stop(other);
}


// Returns once the loop has decided to block in its wait (a bounded spin on
// its sleeping flag: the loop has nothing else to do, so it gets there).
void WaitAsleep(rrpc__loop *loop) {
  auto end = std::chrono::steady_clock::now() + kWaitLimit;
  while (rrpc__loop_awake(loop) && std::chrono::steady_clock::now() < end) std::this_thread::yield();
  ASSERT_FALSE(rrpc__loop_awake(loop));
}

// A clock read lent to the round clock off a loop thread serves it until
// given back; on a loop thread, or nested in another lend, a lend changes
// nothing.
TEST_F(LoopTest, RoundClockLendServesOffTheLoopOnlyUntilGivenBack) {
  uint64_t lent = rrpc__round_lend(12345);
  EXPECT_EQ(12345u, rrpc__round_now_us());
  uint64_t inner = rrpc__round_lend(777);
  EXPECT_EQ(12345u, rrpc__round_now_us());
  rrpc__round_unlend(inner);
  EXPECT_EQ(12345u, rrpc__round_now_us());
  rrpc__round_unlend(lent);
  uint64_t before = rrpc__now_us();
  EXPECT_LE(before, rrpc__round_now_us());
  uint64_t round = 0, during = 0, after = 0;
  RunSync(loop_, [&] {
    round = rrpc__round_now_us();
    uint64_t l = rrpc__round_lend(1);
    during = rrpc__round_now_us();
    rrpc__round_unlend(l);
    after = rrpc__round_now_us();
  });
  EXPECT_NE(1u, during);
  EXPECT_EQ(round, during);
  EXPECT_EQ(round, after);
}

// The round clock: off loop threads a fresh read; on a loop thread the read
// taken when the round's wait returned - never ahead of the clock, and
// taken again after every blocking wait (a task posted to a sleeping loop
// wakes it, so its round's clock is not older than the post).
TEST_F(LoopTest, RoundClockIsFreshOffTheLoopAndTheWakeUpReadOnIt) {
  uint64_t a = rrpc__now_us();
  uint64_t r = rrpc__round_now_us();
  uint64_t b = rrpc__now_us();
  EXPECT_LE(a, r);
  EXPECT_LE(r, b);
  for (int i = 0; i < 20; i++) {
    WaitAsleep(loop_);  // in its wait: the post below wakes it
    uint64_t posted = rrpc__now_us();
    uint64_t round = 0, now = 0;
    RunSync(loop_, [&] {
      round = rrpc__round_now_us();
      now = rrpc__now_us();
    });
    EXPECT_NE(0u, round);
    EXPECT_LE(round, now);
    EXPECT_LE(posted, round) << "round " << i;
  }
}
TEST_F(LoopTest, ThreadIsNamed) {
  EXPECT_EQ("test-loop", LoopThreadName(loop_));
  rrpc__loop *l = nullptr;
  ASSERT_EQ(0, rrpc__loop_start("a-very-long-loop-name", &l));
  EXPECT_EQ("a-very-long-loo", LoopThreadName(l));  // Linux keeps 15 chars
  rrpc__loop_stop(l);
}

TEST_F(LoopTest, StopOnOwnThreadIsRefused) {
  LogCapture logs;
  RunSync(loop_, [&] { rrpc__loop_stop(loop_); });
  EXPECT_EQ(1u, logs.Messages().size());
  // Still alive and working.
  EXPECT_EQ("test-loop", LoopThreadName(loop_));
}

// ---- stop hooks ----------------------------------------------------------------

// Stop hooks run once, at stop, on the loop thread, in the order added;
// deleted ones never run, also when a hook deletes another.
struct StopHookRec {
  rrpc__loop *loop;
  std::vector<int> *order;
  int id;
  StopHookRec *victim;  // deleted by this hook when it runs
  bool on_loop;
};

void stop_hook(void *arg) {
  auto *r = static_cast<StopHookRec *>(arg);
  r->on_loop = rrpc__loop_in_thread(r->loop) != 0;
  r->order->push_back(r->id);
  if (r->victim != nullptr) rrpc__loop_stop_hook_del(r->loop, stop_hook, r->victim);
}

TEST_F(LoopTest, StopHooksRunOnceAtStopOnTheLoopThread) {
  std::vector<int> order;
  StopHookRec d{loop_, &order, 4, nullptr, false}, c{loop_, &order, 3, nullptr, false};
  StopHookRec b{loop_, &order, 2, nullptr, false}, a{loop_, &order, 1, &c, false};
  RunSync(loop_, [&] {
    for (StopHookRec *r : {&a, &b, &c, &d}) ASSERT_EQ(0, rrpc__loop_stop_hook_add(loop_, stop_hook, r));
    rrpc__loop_stop_hook_del(loop_, stop_hook, &b);  // never runs
  });
  EXPECT_TRUE(order.empty());  // nothing runs before the stop
  rrpc__loop_stop(loop_);
  loop_ = nullptr;
  EXPECT_EQ(order, (std::vector<int>{1, 4}));  // c was deleted by a
  EXPECT_TRUE(a.on_loop && d.on_loop);
}

// ---- tasks ------------------------------------------------------------------

TEST_F(LoopTest, PostNeverRunsInline) {
  std::atomic<bool> returned{false};
  std::promise<bool> seen;
  auto fut = seen.get_future();
  RunSync(loop_, [&] {
    ASSERT_EQ(0, Post(loop_, [&] { seen.set_value(returned.load()); }));
    returned = true;
  });
  ASSERT_EQ(std::future_status::ready, fut.wait_for(kWaitLimit));
  EXPECT_TRUE(fut.get());

  // Same from a foreign thread.
  std::atomic<bool> returned2{false};
  std::promise<bool> seen2;
  auto fut2 = seen2.get_future();
  WatchdogOff off;
  std::promise<void> gate;
  std::shared_future<void> gate_f = gate.get_future().share();
  ASSERT_EQ(0, Post(loop_, [&] { gate_f.wait(); }));  // keep the loop busy
  ASSERT_EQ(0, Post(loop_, [&] { seen2.set_value(returned2.load()); }));
  returned2 = true;
  gate.set_value();
  ASSERT_EQ(std::future_status::ready, fut2.wait_for(kWaitLimit));
  EXPECT_TRUE(fut2.get());
}

struct OrderItem {
  int poster;
  int seq;
};
struct OrderState {
  std::vector<int> next;  // per poster: the seq expected next (loop thread only)
  std::atomic<int> out_of_order{0};
  Counter ran;
};
OrderState *g_order;

void OrderTask(void *arg) {
  auto *it = static_cast<OrderItem *>(arg);
  if (g_order->next[it->poster] != it->seq) g_order->out_of_order++;
  g_order->next[it->poster] = it->seq + 1;
  g_order->ran.Add();
}

TEST_F(LoopTest, TasksFromManyThreadsKeepPerPosterOrder) {
  constexpr int kPosters = 8, kPerPoster = 20000;
  OrderState state;
  state.next.assign(kPosters, 0);
  g_order = &state;
  std::vector<OrderItem> items(kPosters * kPerPoster);
  std::promise<void> go;
  std::shared_future<void> go_f = go.get_future().share();
  std::vector<std::thread> posters;
  std::atomic<int> post_errors{0};
  for (int p = 0; p < kPosters; p++) {
    posters.emplace_back([&, p] {
      go_f.wait();
      for (int s = 0; s < kPerPoster; s++) {
        OrderItem *it = &items[p * kPerPoster + s];
        it->poster = p;
        it->seq = s;
        if (rrpc__loop_post(loop_, OrderTask, it)) post_errors++;
      }
    });
  }
  go.set_value();
  for (auto &t : posters) t.join();
  EXPECT_EQ(0, post_errors.load());
  ASSERT_TRUE(state.ran.WaitFor(kPosters * kPerPoster));
  Flush(loop_);
  EXPECT_EQ(kPosters * kPerPoster, state.ran.Get());
  EXPECT_EQ(0, state.out_of_order.load());
  for (int p = 0; p < kPosters; p++) EXPECT_EQ(kPerPoster, state.next[p]);
  g_order = nullptr;
}

TEST_F(LoopTest, PostsFromLoopThreadRunInOrderNextRound) {
  std::vector<int> order;
  RunSync(loop_, [&] {
    for (int i = 0; i < 100; i++) ASSERT_EQ(0, Post(loop_, [&order, i] { order.push_back(i); }));
  });
  Flush(loop_);
  ASSERT_EQ(100u, order.size());
  for (int i = 0; i < 100; i++) EXPECT_EQ(i, order[i]);
}

// ---- stop -------------------------------------------------------------------

void CountTask(void *arg) { static_cast<std::atomic<int> *>(arg)->fetch_add(1); }

TEST(LoopStop, RunsPendingTasksThenRefusesNewOnes) {
  rrpc__loop *loop = nullptr;
  ASSERT_EQ(0, rrpc__loop_start("stop-test", &loop));
  WatchdogOff off;
  std::promise<void> gate;
  std::shared_future<void> gate_f = gate.get_future().share();
  std::atomic<int> ran{0};
  ASSERT_EQ(0, Post(loop, [&] { gate_f.wait(); }));  // the loop is now stuck
  int posted = 0;
  for (int i = 0; i < 1000; i++) {
    ASSERT_EQ(0, rrpc__loop_post(loop, CountTask, &ran));
    posted++;
  }
  std::thread stopper([&] { rrpc__loop_stop(loop); });
  // Post until stop has begun; every accepted post must still run.
  int rc;
  while ((rc = rrpc__loop_post(loop, CountTask, &ran)) == 0) {
    posted++;
    std::this_thread::yield();
  }
  EXPECT_EQ(-ESHUTDOWN, rc);
  rrpc__timer_id id;
  EXPECT_EQ(-ESHUTDOWN, rrpc__loop_timer_add(loop, 0, CountTask, &ran, &id));
  EXPECT_EQ(0, ran.load());  // nothing ran behind the gate
  gate.set_value();
  stopper.join();
  EXPECT_EQ(posted, ran.load());
}

TEST(LoopStop, ConcurrentPostersNeverLoseATask) {
  rrpc__loop *loop = nullptr;
  ASSERT_EQ(0, rrpc__loop_start("stop-race", &loop));
  constexpr int kPosters = 4;
  std::atomic<int> ran{0};
  std::atomic<long> accepted{0};
  std::atomic<int> refused{0}, other_errors{0};
  Counter warmed;  // posters that got 1000 tasks in
  std::vector<std::thread> posters;
  for (int p = 0; p < kPosters; p++) {
    posters.emplace_back([&] {
      for (long n = 0;; n++) {
        int rc = rrpc__loop_post(loop, CountTask, &ran);
        if (rc == -ESHUTDOWN) {
          refused++;
          return;
        }
        if (rc) {
          other_errors++;
          return;
        }
        accepted++;
        if (n == 1000) warmed.Add();
      }
    });
  }
  ASSERT_TRUE(warmed.WaitFor(kPosters));
  // The loop is running the posters' tasks right now. The gate task keeps
  // its thread (and so the loop's memory) alive until every poster has
  // stopped calling in; it runs in the final batch at the latest.
  WatchdogOff off;
  std::promise<void> gate;
  std::shared_future<void> gate_f = gate.get_future().share();
  ASSERT_EQ(0, Post(loop, [&] { gate_f.wait(); }));
  std::thread stopper([&] { rrpc__loop_stop(loop); });
  for (auto &t : posters) t.join();
  gate.set_value();
  stopper.join();
  EXPECT_EQ(kPosters, refused.load());
  EXPECT_EQ(0, other_errors.load());
  EXPECT_EQ(accepted.load(), static_cast<long>(ran.load()));
}

TEST(LoopStop, StopAnIdleLoopAndPendingTimersAreDropped) {
  for (int i = 0; i < 20; i++) {
    rrpc__loop *loop = nullptr;
    ASSERT_EQ(0, rrpc__loop_start("idle", &loop));
    std::atomic<int> fired{0};
    rrpc__timer_id id;
    ASSERT_EQ(0, rrpc__loop_timer_add(loop, rrpc__now_us() + 3600ull * 1000000, CountTask, &fired,
                                      &id));
    rrpc__loop_stop(loop);
    EXPECT_EQ(0, fired.load());
  }
}

// ---- watchers ---------------------------------------------------------------

struct Pipe {
  int rd = -1, wr = -1;
  Pipe() {
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0) {
      rd = fds[0];
      wr = fds[1];
    }
  }
  ~Pipe() {
    if (rd >= 0) close(rd);
    if (wr >= 0) close(wr);
  }
  void Write(const std::string &s) const { ASSERT_EQ((ssize_t)s.size(), write(wr, s.data(), s.size())); }
};

// A watcher plus what its callback saw. Callbacks run on the loop thread;
// the recorded events and bytes are guarded by mu_ because the test thread
// reads them while later callbacks may already be appending (the kernel
// orders those, but thread checkers cannot see it).
struct Probe {
  rrpc__watcher w{};
  Counter calls;
  size_t read_per_call = 0;  // 0: read everything; n: n bytes; -1: never read
  std::function<void(Probe *, uint32_t)> extra;  // loop thread; set while quiet

  static void Cb(rrpc__watcher *w, uint32_t ev) {
    auto *p = static_cast<Probe *>(w->arg);
    std::string got;
    if ((ev & EPOLLIN) && p->read_per_call != (size_t)-1) {
      char buf[256];
      size_t want = p->read_per_call ? p->read_per_call : sizeof buf;
      ssize_t n = read(w->fd, buf, want);
      if (n > 0) got.assign(buf, (size_t)n);
    }
    {
      std::lock_guard<std::mutex> g(p->mu_);
      p->events_.push_back(ev);
      p->data_ += got;
    }
    if (p->extra) p->extra(p, ev);
    p->calls.Add();
  }
  void Init(int fd, uint32_t ev) {
    w.fd = fd;
    w.events = ev;
    w.cb = &Probe::Cb;
    w.arg = this;
  }
  std::vector<uint32_t> Events() {
    std::lock_guard<std::mutex> g(mu_);
    return events_;
  }
  std::string Data() {
    std::lock_guard<std::mutex> g(mu_);
    return data_;
  }

 private:
  std::mutex mu_;
  std::vector<uint32_t> events_;
  std::string data_;
};

// ---- pollers ------------------------------------------------------------------

// A poller that counts its calls and how many of them began with the round's
// clock unread (0) - a spin - and reports work when told to.
struct SpinProbe {
  std::atomic<int> calls{0}, spins{0}, work{0};
  std::atomic<int> stale{0};  // a spin's clock read older than a read just before it
  std::atomic<int> uncached{0};  // a spin's second round read differed from its first
  static int Poll(void *arg) {
    auto *s = static_cast<SpinProbe *>(arg);
    s->calls.fetch_add(1);
    if (rrpc__tls_round_us == 0) {
      s->spins.fetch_add(1);
      uint64_t before = rrpc__now_us();
      uint64_t r = rrpc__round_now_us();
      if (r < before) s->stale.fetch_add(1);
      if (rrpc__round_now_us() != r) s->uncached.fetch_add(1);
    }
    return s->work.load();
  }
};

// A polling loop that finds nothing spins on its pollers alone - no clock
// read, no timers, no epoll (system calls where the clock is not in the
// vDSO) - and reads the round's clock at its first use, fresh, once. Its
// fds, timers and tasks are still served: tasks every spin, fds and timers
// within a bounded number of spins. A poller that finds work gets a full
// round after each call.
TEST_F(LoopTest, IdlePollingLoopSpinsWithoutTheClockAndStillServesFdsAndTimers) {
  SpinProbe probe;
  RunSync(loop_, [&] { ASSERT_EQ(0, rrpc__loop_poller_add(loop_, SpinProbe::Poll, &probe)); });
  // A bounded wait: a polling loop spins without pause.
  auto wait_calls = [&](int n) {
    auto end = std::chrono::steady_clock::now() + kWaitLimit;
    while (probe.calls.load() < n && std::chrono::steady_clock::now() < end) std::this_thread::yield();
    return probe.calls.load() >= n;
  };
  ASSERT_TRUE(wait_calls(2000));
  int calls = probe.calls.load(), spins = probe.spins.load();
  EXPECT_GE(spins, calls * 8 / 10) << "most idle rounds should be spins: " << spins << " of " << calls;
  EXPECT_LT(spins, calls) << "full rounds still come between spins";
  EXPECT_EQ(0, probe.stale.load());
  EXPECT_EQ(0, probe.uncached.load());

  // Fds and timers are served while it spins.
  Pipe p;
  ASSERT_GE(p.rd, 0);
  Probe fd;
  fd.Init(p.rd, EPOLLIN);
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &fd.w));
  p.Write("x");
  ASSERT_TRUE(fd.calls.WaitFor(1));
  struct TimerCtx {
    uint64_t deadline = 0, at = 0;
    Counter fired;
  } t;
  t.deadline = rrpc__now_us() + 2000;
  rrpc__timer_id id;
  ASSERT_EQ(0, rrpc__loop_timer_add(
                   loop_, t.deadline,
                   [](void *a) {
                     auto *c = static_cast<TimerCtx *>(a);
                     c->at = rrpc__now_us();
                     c->fired.Add();
                   },
                   &t, &id));
  ASSERT_TRUE(t.fired.WaitFor(1));
  EXPECT_GE(t.at, t.deadline) << "a timer fired early";
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &fd.w));

  // A poller that finds work every time: every round is a full one.
  probe.work.store(1);
  Flush(loop_);  // from here every round sees the work flag
  int spins_before = probe.spins.load(), calls_before = probe.calls.load();
  ASSERT_TRUE(wait_calls(calls_before + 2000));
  EXPECT_LE(probe.spins.load() - spins_before, 1) << "a poller with work got spins without a full round";
  RunSync(loop_, [&] { rrpc__loop_poller_del(loop_, SpinProbe::Poll, &probe); });
}

TEST_F(LoopTest, PipeReadableEvents) {
  Pipe p;
  ASSERT_GE(p.rd, 0);
  Probe probe;
  probe.Init(p.rd, EPOLLIN);
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probe.w));
  Flush(loop_);
  EXPECT_EQ(0, probe.calls.Get());  // nothing to read yet

  p.Write("hello");
  ASSERT_TRUE(probe.calls.WaitFor(1));
  Flush(loop_);
  EXPECT_EQ("hello", probe.Data());
  EXPECT_TRUE(probe.Events()[0] & EPOLLIN);
  p.Write(" world");
  ASSERT_TRUE(probe.calls.WaitFor(2));
  Flush(loop_);
  EXPECT_EQ("hello world", probe.Data());

  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &probe.w));
  Flush(loop_);  // a callback may run once more until here
  int calls = probe.calls.Get();
  p.Write("!");
  Flush(loop_);
  EXPECT_EQ(calls, probe.calls.Get());
}

// ---- the watchdog ---------------------------------------------------------------

uint64_t ThreadCpuUs() {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

// A callback that burns 30 ms of its own CPU is reported against a 10 ms
// busy bound even though its wall time stays under the (here 20 s) blocked
// bound, whatever the machine's load.
TEST_F(LoopTest, WatchdogReportsCpuTimeOverTheBusyBound) {
  rrpc__loop_watchdog_set(20 * 1000 * 1000, 10 * 1000);
  uint64_t before = rrpc__loop_watchdog_hits();
  RunSync(loop_, [] {
    uint64_t start = ThreadCpuUs();
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (ThreadCpuUs() - start < 30 * 1000 && std::chrono::steady_clock::now() < give_up) {
    }
  });
  // The report is made after the callback returns, which RunSync does not
  // wait for. Wait for the count itself rather than Flush: Flush runs one
  // more callback, and a guest on a loaded host may charge a preempted
  // vCPU's time to whatever ran (a one-off bazel run reported 2).
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (rrpc__loop_watchdog_hits() == before && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::yield();
  }
  uint64_t seen = rrpc__loop_watchdog_hits() - before;
  rrpc_test::watchdog_restore();
  EXPECT_EQ(1u, seen);
  rrpc_test::watchdog_expect(seen);
}

// ---- deferred work (rrpc__loop_defer) -----------------------------------------

int Defer(rrpc__loop *loop, std::function<void()> f) {
  auto *p = new std::function<void()>(std::move(f));
  int rc = rrpc__loop_defer(loop, Thunk, p);
  if (rc) delete p;
  return rc;
}

TEST_F(LoopTest, DeferRunsAfterTheTaskBeforeTheNextRound) {
  std::vector<std::string> order;  // loop thread until Flush returns
  RunSync(loop_, [&] {
    ASSERT_EQ(0, Post(loop_, [&] { order.push_back("next round"); }));
    ASSERT_EQ(0, Defer(loop_, [&] {
                order.push_back("deferred");
                ASSERT_EQ(0, Defer(loop_, [&] { order.push_back("deferred by deferred"); }));
              }));
    order.push_back("task");
  });
  Flush(loop_);
  EXPECT_EQ((std::vector<std::string>{"task", "deferred", "deferred by deferred", "next round"}), order);
}

// What fd callbacks defer runs once every callback of the batch has run: the
// socket layer relies on it to write a round's responses in one go.
TEST_F(LoopTest, DeferFromFdCallbacksRunsAfterTheWholeBatch) {
  Pipe a, b;
  Probe pa, pb;
  std::vector<std::string> order;  // loop thread until Flush returns
  auto note = [&order](Probe *, uint32_t) {
    order.push_back("callback");
    ASSERT_EQ(0, Defer(rrpc__loop_current(), [&order] { order.push_back("deferred"); }));
  };
  pa.Init(a.rd, EPOLLIN);
  pb.Init(b.rd, EPOLLIN);
  pa.extra = note;
  pb.extra = note;
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &pa.w));
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &pb.w));
  // Hold the loop in a task while both pipes become readable, so one
  // epoll_wait returns both.
  WatchdogOff off;
  std::promise<void> go, entered;
  std::shared_future<void> gate = go.get_future().share();
  ASSERT_EQ(0, Post(loop_, [gate, &entered] {
              entered.set_value();
              gate.wait();
            }));
  // Only once the loop is inside the task: an epoll_wait already under way
  // could otherwise return the first pipe without the second.
  ASSERT_EQ(std::future_status::ready, entered.get_future().wait_for(kWaitLimit));
  a.Write("x");
  b.Write("y");
  go.set_value();
  ASSERT_TRUE(pa.calls.WaitFor(1));
  ASSERT_TRUE(pb.calls.WaitFor(1));
  Flush(loop_);
  EXPECT_EQ((std::vector<std::string>{"callback", "callback", "deferred", "deferred"}), order);
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &pa.w));
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &pb.w));
  Flush(loop_);
}

TEST_F(LoopTest, LevelTriggeredRepeatsUntilDrained) {
  Pipe p;
  Probe probe;
  probe.Init(p.rd, EPOLLIN);
  probe.read_per_call = 1;
  p.Write("abcde");
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probe.w));
  ASSERT_TRUE(probe.calls.WaitFor(5));
  Flush(loop_);
  EXPECT_EQ(5, probe.calls.Get());
  EXPECT_EQ("abcde", probe.Data());
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &probe.w));
  Flush(loop_);
}

TEST_F(LoopTest, EdgeTriggeredFiresOncePerChange) {
  int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  Probe probe;
  probe.Init(efd, EPOLLIN | EPOLLET);
  probe.read_per_call = (size_t)-1;  // never read: the fd stays readable
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probe.w));
  uint64_t one = 1;
  ASSERT_EQ(8, write(efd, &one, 8));
  ASSERT_TRUE(probe.calls.WaitFor(1));
  Flush(loop_);
  EXPECT_EQ(1, probe.calls.Get());  // still readable, but no new edge
  ASSERT_EQ(8, write(efd, &one, 8));
  ASSERT_TRUE(probe.calls.WaitFor(2));
  Flush(loop_);
  EXPECT_EQ(2, probe.calls.Get());
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &probe.w));
  Flush(loop_);
  close(efd);
}

TEST_F(LoopTest, WritableAndModify) {
  Pipe p;
  Probe probe;
  probe.Init(p.wr, 0);  // registered, interested in nothing yet
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probe.w));
  Flush(loop_);
  EXPECT_EQ(0, probe.calls.Get());

  // From a foreign thread; edge-triggered, so it reports once.
  ASSERT_EQ(0, rrpc__loop_watch_mod(loop_, &probe.w, EPOLLOUT | EPOLLET));
  EXPECT_EQ((uint32_t)(EPOLLOUT | EPOLLET), probe.w.events);
  ASSERT_TRUE(probe.calls.WaitFor(1));
  Flush(loop_);
  EXPECT_EQ(1, probe.calls.Get());
  EXPECT_TRUE(probe.Events()[0] & EPOLLOUT);

  // On the loop thread, level-triggered: the callback switches interest off
  // again, as a socket does once its write queue is drained.
  probe.extra = [this](Probe *pr, uint32_t) { EXPECT_EQ(0, rrpc__loop_watch_mod(loop_, &pr->w, 0)); };
  RunSync(loop_, [&] { ASSERT_EQ(0, rrpc__loop_watch_mod(loop_, &probe.w, EPOLLOUT)); });
  ASSERT_TRUE(probe.calls.WaitFor(2));
  Flush(loop_);
  EXPECT_EQ(2, probe.calls.Get());
  EXPECT_EQ(0u, probe.w.events);
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &probe.w));
  Flush(loop_);
}

TEST_F(LoopTest, HangupIsReported) {
  Pipe p;
  Probe probe;
  probe.Init(p.rd, EPOLLIN);
  std::promise<uint32_t> got;
  auto fut = got.get_future();
  probe.extra = [&, this](Probe *pr, uint32_t ev) {
    if (ev & EPOLLHUP) {
      EXPECT_EQ(0, rrpc__loop_watch_del(loop_, &pr->w));
      got.set_value(ev);
    }
  };
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probe.w));
  close(p.wr);
  p.wr = -1;
  ASSERT_EQ(std::future_status::ready, fut.wait_for(kWaitLimit));
  EXPECT_TRUE(fut.get() & EPOLLHUP);
  Flush(loop_);
}

TEST_F(LoopTest, WatcherErrors) {
  Pipe p;
  rrpc__watcher w{};
  w.fd = p.rd;
  w.events = EPOLLIN;
  w.cb = [](rrpc__watcher *, uint32_t) {};
  EXPECT_EQ(-ENOENT, rrpc__loop_watch_mod(loop_, &w, EPOLLOUT));
  EXPECT_EQ((uint32_t)EPOLLIN, w.events);  // unchanged on failure
  EXPECT_EQ(-ENOENT, rrpc__loop_watch_del(loop_, &w));
  ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &w));
  EXPECT_EQ(-EEXIST, rrpc__loop_watch_add(loop_, &w));
  ASSERT_EQ(0, rrpc__loop_watch_del(loop_, &w));
  rrpc__watcher bad{};
  bad.fd = -1;
  bad.cb = w.cb;
  EXPECT_EQ(-EBADF, rrpc__loop_watch_add(loop_, &bad));
}

// Two watchers are ready in the same epoll batch; whichever runs first
// deletes both. The other must not be called, so an owner on the loop
// thread may free a watcher right after deleting it.
TEST_F(LoopTest, DeleteOnLoopThreadSuppressesRestOfBatch) {
  Pipe a, b;
  Probe pa, pb;
  pa.Init(a.rd, EPOLLIN);
  pb.Init(b.rd, EPOLLIN);
  pa.read_per_call = pb.read_per_call = (size_t)-1;  // never read: stays ready
  bool deleted = false;
  auto del_both = [&, this](Probe *, uint32_t) {
    if (deleted) return;
    deleted = true;
    EXPECT_EQ(0, rrpc__loop_watch_del(loop_, &pa.w));
    EXPECT_EQ(0, rrpc__loop_watch_del(loop_, &pb.w));
  };
  pa.extra = del_both;
  pb.extra = del_both;
  a.Write("x");
  b.Write("y");
  // Register both inside one task so the next epoll_wait returns both.
  RunSync(loop_, [&] {
    ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &pa.w));
    ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &pb.w));
  });
  Flush(loop_);
  EXPECT_TRUE(deleted);
  EXPECT_EQ(1, pa.calls.Get() + pb.calls.Get());
}

// A socket-like round trip: many watchers, each echoing through a pipe pair.
TEST_F(LoopTest, ManyWatchers) {
  constexpr int kPipes = 300;  // more than one epoll batch
  std::vector<Pipe> pipes(kPipes);
  std::vector<Probe> probes(kPipes);
  Counter total;
  for (int i = 0; i < kPipes; i++) {
    ASSERT_GE(pipes[i].rd, 0);
    probes[i].Init(pipes[i].rd, EPOLLIN);
    probes[i].extra = [&total](Probe *, uint32_t) { total.Add(); };
    ASSERT_EQ(0, rrpc__loop_watch_add(loop_, &probes[i].w));
  }
  for (int i = 0; i < kPipes; i++) pipes[i].Write(std::to_string(i));
  ASSERT_TRUE(total.WaitFor(kPipes));
  Flush(loop_);
  for (int i = 0; i < kPipes; i++) {
    EXPECT_EQ(std::to_string(i), probes[i].Data());
    EXPECT_EQ(1, probes[i].calls.Get());
    EXPECT_EQ(0, rrpc__loop_watch_del(loop_, &probes[i].w));
  }
  Flush(loop_);
}

// ---- timers -----------------------------------------------------------------

struct Fired {
  uint64_t deadline = 0;
  rrpc__timer_id id = 0;
  uint64_t at = 0;
};

TEST_F(LoopTest, TimersFireInDeadlineOrderAndNeverEarly) {
  constexpr int kTimers = 300;
  struct Ctx {
    std::vector<Fired> fired;  // loop thread only
    Counter count;
  } ctx;
  struct One {
    Ctx *ctx;
    uint64_t deadline;
    rrpc__timer_id id;
  };
  std::vector<One> ones(kTimers);
  std::mt19937 rng(42);
  // Add all from inside one task, so none fires before the last is in and
  // the firing order is exactly (deadline, id). Deadlines share 1 ms steps
  // to create ties.
  RunSync(loop_, [&] {
    uint64_t base = rrpc__now_us();
    for (int i = 0; i < kTimers; i++) {
      ones[i].ctx = &ctx;
      ones[i].deadline = base + 1000 * (rng() % 30);
      ASSERT_EQ(0, rrpc__loop_timer_add(
                       loop_, ones[i].deadline,
                       [](void *a) {
                         auto *o = static_cast<One *>(a);
                         o->ctx->fired.push_back({o->deadline, o->id, rrpc__now_us()});
                         o->ctx->count.Add();
                       },
                       &ones[i], &ones[i].id));
      if (i) {
        EXPECT_GT(ones[i].id, ones[i - 1].id);
      }
      EXPECT_NE(0u, ones[i].id);
    }
  });
  ASSERT_TRUE(ctx.count.WaitFor(kTimers));
  Flush(loop_);
  ASSERT_EQ((size_t)kTimers, ctx.fired.size());
  for (int i = 0; i < kTimers; i++) {
    const Fired &f = ctx.fired[i];
    EXPECT_GE(f.at, f.deadline) << "timer " << f.id << " fired early";
    if (i) {
      const Fired &p = ctx.fired[i - 1];
      EXPECT_TRUE(p.deadline < f.deadline || (p.deadline == f.deadline && p.id < f.id))
          << "position " << i;
    }
  }
}

// A timer added from another thread while the loop sleeps towards a far
// deadline must wake it. Whether the loop is already blocked when the add
// lands is a race, so the scenario repeats; the loop is blocked in most
// rounds, and a missing wake-up would stall one for the whole hour.
TEST_F(LoopTest, EarlierTimerFromOtherThreadWakesLoop) {
  std::atomic<int> far_fired{0};
  rrpc__timer_id far_id, near_id;
  ASSERT_EQ(0, rrpc__loop_timer_add(loop_, rrpc__now_us() + 3600ull * 1000000, CountTask,
                                    &far_fired, &far_id));
  for (int round = 0; round < 20; round++) {
    Flush(loop_);  // the loop now heads for a block until the far deadline
    std::promise<uint64_t> fired_at;
    auto fut = fired_at.get_future();
    uint64_t deadline = rrpc__now_us() + 1000;
    ASSERT_EQ(0, rrpc__loop_timer_add(
                     loop_, deadline,
                     [](void *a) {
                       static_cast<std::promise<uint64_t> *>(a)->set_value(rrpc__now_us());
                     },
                     &fired_at, &near_id));
    EXPECT_GT(near_id, far_id);
    ASSERT_EQ(std::future_status::ready, fut.wait_for(kWaitLimit)) << "round " << round;
    EXPECT_GE(fut.get(), deadline);
  }
  EXPECT_EQ(0, rrpc__loop_timer_cancel(loop_, far_id));
  EXPECT_EQ(0, far_fired.load());
}

struct CancelProbe {
  rrpc__loop *loop = nullptr;
  std::atomic<int> fired{0};
  rrpc__timer_id id = 0;
  rrpc__timer_id other = 0;  // cancelled from this timer's callback
  int self_cancel_rc = 1, other_cancel_rc = 1;
  std::promise<void> done;
};

void CancelProbeCb(void *arg) {
  auto *p = static_cast<CancelProbe *>(arg);
  p->fired++;
  p->self_cancel_rc = rrpc__loop_timer_cancel(p->loop, p->id);
  if (p->other) p->other_cancel_rc = rrpc__loop_timer_cancel(p->loop, p->other);
  p->done.set_value();
}

TEST_F(LoopTest, TimerCancel) {
  // Unknown ids.
  EXPECT_EQ(-ENOENT, rrpc__loop_timer_cancel(loop_, 0));
  EXPECT_EQ(-ENOENT, rrpc__loop_timer_cancel(loop_, 123456789));

  // Far timer: cancel once, then it is gone.
  CancelProbe far;
  far.loop = loop_;
  ASSERT_EQ(0, rrpc__loop_timer_add(loop_, rrpc__now_us() + 3600ull * 1000000, CancelProbeCb, &far,
                                    &far.id));
  EXPECT_EQ(0, rrpc__loop_timer_cancel(loop_, far.id));
  EXPECT_EQ(-ENOENT, rrpc__loop_timer_cancel(loop_, far.id));

  // Already due, but cancelled while the loop thread is busy with us: it
  // can never run. `later` (same deadline, later id) proves the loop got
  // past that deadline.
  CancelProbe due, later;
  due.loop = later.loop = loop_;
  RunSync(loop_, [&] {
    uint64_t now = rrpc__now_us();
    ASSERT_EQ(0, rrpc__loop_timer_add(loop_, now, CancelProbeCb, &due, &due.id));
    EXPECT_EQ(0, rrpc__loop_timer_cancel(loop_, due.id));
    ASSERT_EQ(0, rrpc__loop_timer_add(loop_, now, CancelProbeCb, &later, &later.id));
  });
  ASSERT_EQ(std::future_status::ready, later.done.get_future().wait_for(kWaitLimit));
  Flush(loop_);
  EXPECT_EQ(0, due.fired.load());
  EXPECT_EQ(1, later.fired.load());
  // Cancelling from inside its own callback: it is running, so -ENOENT.
  EXPECT_EQ(-ENOENT, later.self_cancel_rc);
  // And after it ran.
  EXPECT_EQ(-ENOENT, rrpc__loop_timer_cancel(loop_, later.id));

  // A callback cancels a timer due at the same time but not yet run.
  CancelProbe first, second;
  first.loop = second.loop = loop_;
  RunSync(loop_, [&] {
    uint64_t now = rrpc__now_us();
    ASSERT_EQ(0, rrpc__loop_timer_add(loop_, now, CancelProbeCb, &first, &first.id));
    ASSERT_EQ(0, rrpc__loop_timer_add(loop_, now, CancelProbeCb, &second, &second.id));
    first.other = second.id;
  });
  ASSERT_EQ(std::future_status::ready, first.done.get_future().wait_for(kWaitLimit));
  Flush(loop_);
  EXPECT_EQ(0, first.other_cancel_rc);
  EXPECT_EQ(0, second.fired.load());
}

TEST_F(LoopTest, TenThousandTimersWithRandomCancels) {
  constexpr int kTimers = 10000;
  struct Slot {
    std::atomic<int> fired{0};
    Counter *count;
  };
  Counter count;
  std::vector<Slot> slots(kTimers);
  std::vector<rrpc__timer_id> ids(kTimers);
  std::mt19937 rng(7);
  // The cancel order is drawn first: its first kFar timers are due long
  // after the test, so cancels meet pending timers however loaded the
  // machine is (adding 10,000 timers can outlast the 20 ms windows).
  constexpr int kFar = 100;
  std::vector<int> order(kTimers);
  for (int i = 0; i < kTimers; i++) order[i] = i;
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<char> far(kTimers, 0);
  for (int k = 0; k < kFar; k++) far[order[k]] = 1;
  uint64_t max_deadline = 0;
  for (int i = 0; i < kTimers; i++) {
    slots[i].count = &count;
    // A quarter fall due within 2 ms and race the cancels; the rest give
    // the cancellers 20 ms even on a slow (sanitized) build.
    uint64_t d = rrpc__now_us() + (i % 4 ? 20000 + rng() % 20000 : rng() % 2000);
    if (far[i]) d = rrpc__now_us() + 3600ull * 1000000;
    else max_deadline = std::max(max_deadline, d);
    ASSERT_EQ(0, rrpc__loop_timer_add(
                     loop_, d,
                     [](void *a) {
                       auto *s = static_cast<Slot *>(a);
                       s->fired++;
                       s->count->Add();
                     },
                     &slots[i], &ids[i]));
  }
  // Cancel a random half from two threads at once while timers fire.
  std::vector<int> rc(kTimers, 1);
  auto canceller = [&](int from, int to) {
    for (int k = from; k < to; k++) rc[order[k]] = rrpc__loop_timer_cancel(loop_, ids[order[k]]);
  };
  std::thread t1(canceller, 0, kTimers / 4);
  std::thread t2(canceller, kTimers / 4, kTimers / 2);
  t1.join();
  t2.join();
  int cancelled = 0;
  for (int k = 0; k < kTimers / 2; k++) {
    int r = rc[order[k]];
    EXPECT_TRUE(r == 0 || r == -ENOENT) << r;
    if (r == 0) cancelled++;
  }
  EXPECT_GE(cancelled, kFar);
  ASSERT_TRUE(count.WaitFor(kTimers - cancelled));
  // A later timer proves every earlier one had its chance.
  std::promise<void> last;
  rrpc__timer_id last_id;
  ASSERT_EQ(0, rrpc__loop_timer_add(
                   loop_, max_deadline + 1,
                   [](void *a) { static_cast<std::promise<void> *>(a)->set_value(); }, &last,
                   &last_id));
  ASSERT_EQ(std::future_status::ready, last.get_future().wait_for(kWaitLimit));
  EXPECT_EQ(kTimers - cancelled, count.Get());
  for (int i = 0; i < kTimers; i++) {
    EXPECT_EQ(rc[i] == 0 ? 0 : 1, slots[i].fired.load()) << "timer " << i;
    if (rc[i] == 1) {
      EXPECT_EQ(-ENOENT, rrpc__loop_timer_cancel(loop_, ids[i]));
    }
  }
}

TEST_F(LoopTest, TimerAddedFromCallback) {
  struct Chain {
    rrpc__loop *loop;
    int step = 0;
    uint64_t deadlines[3] = {0, 0, 0};
    uint64_t fired_at[3] = {0, 0, 0};
    std::promise<void> done;
  } chain;
  chain.loop = loop_;
  static rrpc__task_fn step_fn = [](void *a) {
    auto *c = static_cast<Chain *>(a);
    c->fired_at[c->step] = rrpc__now_us();
    c->step++;
    if (c->step == 3) {
      c->done.set_value();
      return;
    }
    // Step 1 re-arms 1 ms ahead, step 2 re-arms in the past.
    c->deadlines[c->step] = c->step == 1 ? rrpc__now_us() + 1000 : 0;
    rrpc__timer_id id;
    EXPECT_EQ(0, rrpc__loop_timer_add(c->loop, c->deadlines[c->step], step_fn, c, &id));
  };
  rrpc__timer_id id;
  chain.deadlines[0] = rrpc__now_us() + 500;
  ASSERT_EQ(0, rrpc__loop_timer_add(loop_, chain.deadlines[0], step_fn, &chain, &id));
  ASSERT_EQ(std::future_status::ready, chain.done.get_future().wait_for(kWaitLimit));
  for (int i = 0; i < 3; i++) EXPECT_GE(chain.fired_at[i], chain.deadlines[i]);
}

// A timer that keeps re-arming itself in the past must not starve tasks:
// the loop runs only the timers that existed when a round began.
TEST_F(LoopTest, SelfRearmingTimerDoesNotStarveTasks) {
  struct Spin {
    rrpc__loop *loop;
    bool stop = false;  // loop thread only
    long rounds = 0;
    std::promise<void> done;
  } spin;
  spin.loop = loop_;
  static rrpc__task_fn fn = [](void *a) {
    auto *s = static_cast<Spin *>(a);
    if (s->stop) {
      s->done.set_value();
      return;
    }
    s->rounds++;
    rrpc__timer_id id;
    EXPECT_EQ(0, rrpc__loop_timer_add(s->loop, 0, fn, s, &id));
  };
  rrpc__timer_id id;
  ASSERT_EQ(0, rrpc__loop_timer_add(loop_, 0, fn, &spin, &id));
  ASSERT_EQ(0, Post(loop_, [&] { spin.stop = true; }));
  ASSERT_EQ(std::future_status::ready, spin.done.get_future().wait_for(kWaitLimit));
}

// The timer heap on its own, against a reference model: random adds,
// cancels and pops, large enough to grow and shrink both arrays.
TEST(TimerHeap, MatchesReferenceModel) {
  rrpc__timer_heap h;
  rrpc__timer_heap_init(&h);
  std::set<std::pair<uint64_t, rrpc__timer_id>> model;  // (deadline, id)
  std::map<rrpc__timer_id, uint64_t> deadline_of;
  std::vector<rrpc__timer_id> live;
  std::mt19937_64 rng(1234);
  uint64_t now = 0;
  rrpc__timer_id last_id = 0;
  for (int step = 0; step < 200000; step++) {
    int op = (int)(rng() % 10);
    // Phases: grow to ~20k, then drain, so the shrink paths run too.
    bool growing = (step / 40000) % 2 == 0;
    if (op < (growing ? 6 : 2)) {
      uint64_t d = now + rng() % 5000;
      rrpc__timer_id id;
      ASSERT_EQ(0, rrpc__timer_heap_add(&h, d, CountTask, (void *)(uintptr_t)d, &id));
      ASSERT_GT(id, last_id);
      last_id = id;
      model.insert({d, id});
      deadline_of[id] = d;
      live.push_back(id);
    } else if (op < 8 && !live.empty()) {
      size_t k = rng() % live.size();
      rrpc__timer_id id = live[k];
      live[k] = live.back();
      live.pop_back();
      bool present = deadline_of.count(id) != 0;
      ASSERT_EQ(present ? 0 : -ENOENT, rrpc__timer_heap_cancel(&h, id));
      if (present) {
        model.erase({deadline_of[id], id});
        deadline_of.erase(id);
      }
      ASSERT_EQ(-ENOENT, rrpc__timer_heap_cancel(&h, id));
    } else {
      now += rng() % 300;
      for (;;) {
        rrpc__task_fn fn;
        void *arg;
        int rc = rrpc__timer_heap_pop_due(&h, now, UINT64_MAX, &fn, &arg);
        bool due = !model.empty() && model.begin()->first <= now;
        ASSERT_EQ(due ? 0 : -EAGAIN, rc);
        if (rc) break;
        ASSERT_EQ(model.begin()->first, (uint64_t)(uintptr_t)arg);
        deadline_of.erase(model.begin()->second);
        model.erase(model.begin());
      }
    }
    ASSERT_EQ(model.size(), rrpc__timer_heap_size(&h));
    ASSERT_EQ(model.empty() ? UINT64_MAX : model.begin()->first, rrpc__timer_heap_next_deadline(&h));
  }
  // id_limit holds back timers created at or after it.
  rrpc__timer_id a, b;
  ASSERT_EQ(0, rrpc__timer_heap_add(&h, 0, CountTask, nullptr, &a));
  ASSERT_EQ(0, rrpc__timer_heap_add(&h, 0, CountTask, nullptr, &b));
  rrpc__task_fn fn;
  void *arg;
  // Older due timers from the model may come first; drain up to `a`.
  while (rrpc__timer_heap_pop_due(&h, 0, b, &fn, &arg) == 0) {
  }
  EXPECT_EQ(-ENOENT, rrpc__timer_heap_cancel(&h, a));
  EXPECT_EQ(0, rrpc__timer_heap_cancel(&h, b));
  rrpc__timer_heap_destroy(&h);
}

// ---- loop groups ------------------------------------------------------------

TEST(LoopGroup, RoundRobinAndNames) {
  rrpc__loop_group *g = nullptr;
  EXPECT_EQ(-EINVAL, rrpc__loop_group_start(0, "grp", &g));
  ASSERT_EQ(0, rrpc__loop_group_start(3, "grp", &g));
  EXPECT_EQ(3, rrpc__loop_group_size(g));
  std::vector<rrpc__loop *> seq;
  for (int i = 0; i < 9; i++) seq.push_back(rrpc__loop_group_next(g));
  EXPECT_EQ(3u, std::set<rrpc__loop *>(seq.begin(), seq.end()).size());
  for (int i = 3; i < 9; i++) EXPECT_EQ(seq[i - 3], seq[i]);
  EXPECT_EQ("grp-0", LoopThreadName(seq[0]));
  EXPECT_EQ("grp-1", LoopThreadName(seq[1]));
  EXPECT_EQ("grp-2", LoopThreadName(seq[2]));

  // Concurrent pickers share the loops exactly evenly.
  constexpr int kThreads = 4, kPicks = 3000;
  std::mutex mu;
  std::map<rrpc__loop *, int> picks;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&] {
      std::map<rrpc__loop *, int> mine;
      for (int i = 0; i < kPicks; i++) mine[rrpc__loop_group_next(g)]++;
      std::lock_guard<std::mutex> l(mu);
      for (auto &kv : mine) picks[kv.first] += kv.second;
    });
  }
  for (auto &t : ts) t.join();
  ASSERT_EQ(3u, picks.size());
  for (auto &kv : picks) EXPECT_EQ(kThreads * kPicks / 3, kv.second);
  rrpc__loop_group_stop(g);
}

TEST(LoopGroup, LongNameKeepsSuffix) {
  rrpc__loop_group *g = nullptr;
  ASSERT_EQ(0, rrpc__loop_group_start(2, "averyveryverylongname", &g));
  EXPECT_EQ("averyveryvery-0", LoopThreadName(rrpc__loop_group_next(g)));
  EXPECT_EQ("averyveryvery-1", LoopThreadName(rrpc__loop_group_next(g)));
  rrpc__loop_group_stop(g);
}

TEST(LoopGroup, GlobalIsASingleton) {
  constexpr int kThreads = 8;
  std::vector<rrpc__loop_group *> got(kThreads, nullptr);
  std::vector<int> rcs(kThreads, 1);
  std::promise<void> go;
  std::shared_future<void> go_f = go.get_future().share();
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++)
    ts.emplace_back([&, t] {
      go_f.wait();
      rcs[t] = rrpc__loop_group_global(0, &got[t]);
    });
  go.set_value();
  for (auto &t : ts) t.join();
  for (int t = 0; t < kThreads; t++) {
    ASSERT_EQ(0, rcs[t]);
    EXPECT_EQ(got[0], got[t]);
  }
  rrpc__loop_group *again = nullptr;
  ASSERT_EQ(0, rrpc__loop_group_global(7, &again));  // n ignored now
  EXPECT_EQ(got[0], again);
  EXPECT_EQ(-EINVAL, rrpc__loop_group_global(-1, &again));

  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int want = (int)std::min<long>(std::max<long>(cpus, 1), 4);
  EXPECT_EQ(want, rrpc__loop_group_size(got[0]));
  std::set<std::string> names;
  for (int i = 0; i < want; i++) names.insert(LoopThreadName(rrpc__loop_group_next(got[0])));
  EXPECT_EQ((size_t)want, names.size());
  EXPECT_EQ(1u, names.count("rrpc-loop-0"));

  // Stopping it is refused; it keeps working.
  LogCapture logs;
  rrpc__loop_group_stop(got[0]);
  EXPECT_EQ(1u, logs.Messages().size());
  EXPECT_EQ(0u, LoopThreadName(rrpc__loop_group_next(got[0])).rfind("rrpc-loop-", 0));
}

}  // namespace
