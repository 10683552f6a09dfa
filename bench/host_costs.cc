// host_costs.cc - what the operations rrpc's costs are made of cost on this
// host: a system call, a clock read, an atomic add, a cache line moved
// between two cores, and a futex wake-up round trip between two threads.
//
// Why: loopback_bench's ratios against the raw echo move a lot between
// hosts (the pool mode was 2.1x on one development host and 3.6x on
// another), and the reason is in these numbers - a VM whose null system
// call costs a microsecond and whose wake-up costs tens of them charges the
// pool's hop far more than the raw echo's reads and writes. Run it beside a
// benchmark and quote both.
//
//   build/bench/host_costs [--iterations=N]   (default 200000; wake-ups N/10)
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

double NsSince(Clock::time_point t0, long n) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
}

// Pins the calling thread to one CPU if there are two or more (so that the
// two sides of a round trip run on different cores); 0 if it could.
int PinTo(int cpu) {
  if (std::thread::hardware_concurrency() < 2) return -1;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

void FutexWait(std::atomic<int> *w, int val) {
  syscall(SYS_futex, reinterpret_cast<int *>(w), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}

void FutexWake(std::atomic<int> *w) {
  syscall(SYS_futex, reinterpret_cast<int *>(w), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

double NullSyscall(long n) {
  auto t0 = Clock::now();
  for (long i = 0; i < n; i++) syscall(SYS_getppid);
  return NsSince(t0, n);
}

double ClockRead(long n) {
  timespec ts;
  auto t0 = Clock::now();
  for (long i = 0; i < n; i++) clock_gettime(CLOCK_MONOTONIC, &ts);
  return NsSince(t0, n);
}

double AtomicAdd(long n) {
  std::atomic<long> x{0};
  auto t0 = Clock::now();
  for (long i = 0; i < n; i++) x.fetch_add(1);
  return NsSince(t0, n);
}

// One line written in turn by two threads spinning on it: a round trip
// moves it to the other core and back.
double LineRoundTrip(long n) {
  alignas(64) std::atomic<int> turn{0};
  std::thread peer([&] {
    PinTo(1);
    for (long i = 0; i < n; i++) {
      while (turn.load(std::memory_order_acquire) != 1) {
      }
      turn.store(0, std::memory_order_release);
    }
  });
  PinTo(0);
  auto t0 = Clock::now();
  for (long i = 0; i < n; i++) {
    turn.store(1, std::memory_order_release);
    while (turn.load(std::memory_order_acquire) != 0) {
    }
  }
  double ns = NsSince(t0, n);
  peer.join();
  return ns;
}

// Two threads wake each other through futexes, each sleeping in between:
// what a loop handing a request to a sleeping worker (and back) pays.
double WakeRoundTrip(long n) {
  std::atomic<int> to_peer{0}, to_me{0};
  std::thread peer([&] {
    for (long i = 0; i < n; i++) {
      while (to_peer.load(std::memory_order_acquire) == 0) FutexWait(&to_peer, 0);
      to_peer.store(0, std::memory_order_relaxed);
      to_me.store(1, std::memory_order_release);
      FutexWake(&to_me);
    }
  });
  auto t0 = Clock::now();
  for (long i = 0; i < n; i++) {
    to_peer.store(1, std::memory_order_release);
    FutexWake(&to_peer);
    while (to_me.load(std::memory_order_acquire) == 0) FutexWait(&to_me, 0);
    to_me.store(0, std::memory_order_relaxed);
  }
  double ns = NsSince(t0, n);
  peer.join();
  return ns;
}

}  // namespace

int main(int argc, char **argv) {
  long n = 200000;
  for (int i = 1; i < argc; i++) {
    if (strncmp(argv[i], "--iterations=", 13) == 0) {
      n = atol(argv[i] + 13);
    } else {
      fprintf(stderr, "usage: %s [--iterations=N]\n", argv[0]);
      return 2;
    }
  }
  if (n < 10) n = 10;
  printf("host costs (%u CPUs, %ld iterations; wake-ups %ld)\n", std::thread::hardware_concurrency(), n, n / 10);
  printf("%-34s %10.1f ns\n", "null system call (getppid)", NullSyscall(n));
  printf("%-34s %10.1f ns\n", "clock_gettime(CLOCK_MONOTONIC)", ClockRead(n));
  printf("%-34s %10.1f ns\n", "atomic add, one thread", AtomicAdd(n * 10));
  // Two threads spinning on one CPU would wait out time slices: only with two.
  if (std::thread::hardware_concurrency() >= 2)
    printf("%-34s %10.1f ns\n", "cache line round trip, 2 cores", LineRoundTrip(n));
  // Unpinned again: the wake-up pair goes wherever the scheduler puts it.
  cpu_set_t all;
  CPU_ZERO(&all);
  for (unsigned c = 0; c < std::thread::hardware_concurrency() && c < CPU_SETSIZE; c++) CPU_SET(c, &all);
  pthread_setaffinity_np(pthread_self(), sizeof all, &all);
  printf("%-34s %10.1f ns\n", "futex wake-up round trip", WakeRoundTrip(n / 10));
  return 0;
}
