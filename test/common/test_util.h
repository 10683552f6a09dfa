// test/common/test_util.h - helpers shared by rrpc's test suites: reading an
// iobuf as a string, deterministic byte patterns, and re-running the test
// binary itself as a child process (a server to kill, a client with other
// process-wide settings).
#ifndef RRPC_TEST_COMMON_TEST_UTIL_H
#define RRPC_TEST_COMMON_TEST_UTIL_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rrpc/iobuf.h"

namespace rrpc_test {

// The bytes of `b` (COPIES them).
std::string iobuf_string(const rrpc_iobuf *b);

// n bytes that differ with the position and the seed, so a misplaced or
// swapped piece shows.
std::string pattern(size_t n, unsigned seed);

struct Child {
  pid_t pid = -1;
  std::string first_output;  // what the child printed first (a port, a result)
};

// Runs /proc/self/exe with the current environment plus `extra_env`
// ("NAME=VALUE"); returns once the child printed something (or exited).
Child spawn_self(const std::vector<std::string> &extra_env);

// Waits for the child; its exit code, or -1 if it did not exit normally.
int wait_child(const Child &c);

// Where the SMC-R test vectors are: $RRPC_TEST_DATA_DIR/smc-r/, or
// test/data/smc-r/ relative to the repository root (the tests' cwd).
std::string smc_data_dir();

// The bytes of a .hex vector under smc_data_dir(): '#' lines are comments,
// the rest hex pairs. A file that cannot be opened fails the current test.
std::vector<uint8_t> load_smc_hex(const std::string &rel);

// The address RDMA tests give their servers and clients: $RRPC_TEST_RDMA_ADDR,
// else the VM's rxe netdev address 10.99.0.1 when this host has it (so the
// RoCE v2 GID matches; tools/run-rdma-tests), else 127.0.0.1.
std::string rdma_test_addr();

// What `cmd` (run by /bin/sh) printed on stdout; its exit code in *rc when
// given (-1 if it did not exit normally). Blocks until it ends.
std::string command_output(const std::string &cmd, int *rc = nullptr);

// The loop watchdog runs in every test binary (test/common/loop_watchdog.cc)
// and fails the run on any report; a test that provokes `n` on purpose
// declares them here.
void watchdog_expect(uint64_t n);
// Put the run's thresholds back after a test changed them.
void watchdog_restore();

}  // namespace rrpc_test

#endif  // RRPC_TEST_COMMON_TEST_UTIL_H
