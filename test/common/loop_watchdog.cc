// loop_watchdog.cc - linked into every test binary: turns the loop watchdog
// on for the whole run and fails the run if any loop callback (task, timer,
// fd watcher, poller) used over 10 ms of its thread's CPU time (issue 11's
// bound; 50 ms under the sanitizers, which slow everything several-fold),
// or went to sleep and took over 100 ms of wall time (issue 11: nothing
// blocks a loop thread; a blocking connect or a sleeping in-loop handler
// holds a loop for 200 ms to seconds).
// RRPC_LOOP_WATCHDOG_MS=N sets both to N ms; 0 turns the check off.
//
// Why the wall bound is not 10 ms: on the shared, loaded 2-core CI VM (load average 20)
// a loop that waits a few microseconds for a mutex whose holder was just
// preempted sleeps for a whole time slice - measured 44 ms wall, 47 us CPU
// in RpcTest.SixtyFourConcurrentCallers - and CPU time is inflated too
// (15 ms for a callback moving several MB). Those are the machine's, not
// the code's; a blocking call is not hidden by the looser bound.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <unistd.h>

#include "rrpc/internal/loop.h"
#include "test/common/test_util.h"

namespace {

uint64_t g_expected = 0;

// test/adversarial/ has the watchdog on only with RRPC_LOOP_WATCHDOG_MS set:
// deliberate overload (thousands of connections) on a loaded CI box;
// measured there: a connection's close_task waited 133 ms (33 us CPU) for
// the server's mutex in Idle.TwoThousandSlowConnectionsAreClosed, a
// lock-hold finding for the server's sweep, not a blocking call.
bool watchdog_off_by_default() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = '\0';
  return strstr(self, "/test/adversarial/") != nullptr;
}  // reports a test provoked on purpose

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr uint64_t kBusyUs = 50 * 1000;
#else
constexpr uint64_t kBusyUs = 10 * 1000;
#endif
constexpr uint64_t kBlockedUs = 100 * 1000;

// The RDMA suite runs inside the Soft-RoCE VM (tools/rxe-vm sets RXE_VM_DEV
// there), where QEMU's TCG translates every guest instruction: one fixed
// CPU-bound workload took 2.18 - 2.61 s of guest CPU against 0.081 -
// 0.102 s on the host (about 29x; docs/threads.md), so the bounds scale by
// 30 and still stand for about the host's 10 ms of work.
// RRPC_LOOP_WATCHDOG_SCALE=N overrides the factor (1: host bounds, to list
// every callback over 10 ms of guest CPU).
constexpr uint64_t kTcgScale = 30;

uint64_t bound_scale() {
  const char *e = getenv("RRPC_LOOP_WATCHDOG_SCALE");
  if (e != nullptr && atoll(e) > 0) return (uint64_t)atoll(e);
  return getenv("RXE_VM_DEV") != nullptr ? kTcgScale : 1;
}

// In the RDMA suite the watchdog fails the binary only with
// RRPC_LOOP_WATCHDOG_STRICT=1, which `make test-rdma` and `make TSAN=1
// test-rdma-tsan` set now that the RDMA transport's verbs setup and
// teardown run on its background verbs thread; run by hand (or with =0) it
// reports without failing, to list what is left (docs/performance.md,
// "Loop watchdog in the RDMA suite").
bool report_only() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return false;
  self[n] = '\0';
  const char *strict = getenv("RRPC_LOOP_WATCHDOG_STRICT");
  return strstr(self, "/test/rdma/") != nullptr && (strict == nullptr || atoi(strict) == 0);
}

void watchdog_on() {
  const char *e = getenv("RRPC_LOOP_WATCHDOG_MS");
  if (e != nullptr) rrpc__loop_watchdog_set((uint64_t)atoll(e) * 1000, 0);
  else if (watchdog_off_by_default()) rrpc__loop_watchdog_set(0, 0);
  else rrpc__loop_watchdog_set(kBlockedUs * bound_scale(), kBusyUs * bound_scale());
}

class LoopWatchdog : public ::testing::Environment {
 public:
  void SetUp() override {
    watchdog_on();
    before_ = rrpc__loop_watchdog_hits();
  }
  void TearDown() override {
    uint64_t hits = rrpc__loop_watchdog_hits() - before_;
    if (report_only()) {
      if (hits > g_expected)
        printf("loop watchdog: %llu loop callback(s) over the bound (ERROR lines above); report-only in the RDMA "
               "suite, RRPC_LOOP_WATCHDOG_STRICT=1 fails on them\n",
               (unsigned long long)(hits - g_expected));
      return;
    }
    EXPECT_EQ(g_expected, hits) << "a loop callback ran over the watchdog threshold (see the ERROR lines above)";
  }

 private:
  uint64_t before_ = 0;
};

const ::testing::Environment *const g_env = ::testing::AddGlobalTestEnvironment(new LoopWatchdog);

}  // namespace

#if defined(__SANITIZE_ADDRESS__)
// ASan keeps freed memory in a quarantine (256 MB by default) to catch a
// use after free; when it overflows, the thread whose free tipped it
// recycles about a tenth of it at once - some 25 MB of chunks, tens of ms
// of system time on a VM where page faults and munmap are slow - and any
// other thread that allocates meanwhile waits for it. Both land in
// whichever loop callback was freeing or allocating: cluster_unittest under
// ASan failed the watchdog in 2 of 10 runs on such a host (ran 128 ms with
// 128 ms of system time inside ASan's free; slept 236 ms inside its malloc),
// and in 0 of 10 with a 32 MB quarantine, which still holds the last tens
// of MB freed. ASAN_OPTIONS overrides it.
extern "C" __attribute__((used)) const char *__asan_default_options() { return "quarantine_size_mb=32"; }
#endif

namespace rrpc_test {
void watchdog_expect(uint64_t n) { g_expected += n; }
void watchdog_restore() { watchdog_on(); }
}  // namespace rrpc_test
