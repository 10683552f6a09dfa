// test/common/hostile.h - tools for tests that play a hostile or careless
// peer with plain sockets, and measure what the server pays for it (RSS,
// CPU, descriptors, latency).
#ifndef RRPC_TEST_COMMON_HOSTILE_H
#define RRPC_TEST_COMMON_HOSTILE_H

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace rrpc_test {

// Under ASan (quarantine) and TSan (shadow memory) a process's RSS is not
// what the code allocated: RSS bounds are asserted only in plain builds;
// sanitizer builds check the library's own accounting instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

// A blocking TCP connection to 127.0.0.1:port, or -1.
int raw_connect(int port);

// A whole baidu_std request frame for service/method with `payload`.
std::string request_frame(const std::string &service, const std::string &method,
                          const std::string &payload, int64_t correlation_id);
// Only the 12-byte header of a frame that announces `body_size` bytes with a
// meta of `meta_size` bytes.
std::string frame_header(uint32_t body_size, uint32_t meta_size);

// Resident set size of `pid` (0 = this process), bytes.
size_t rss_bytes(pid_t pid = 0);
// The peak RSS of this process so far, bytes (getrusage: unlike reading
// /proc/self/statm it takes no lock that the process's mmap calls need, so
// sampling it cannot stall the threads being measured).
size_t peak_rss_bytes();
// User + system CPU seconds of `pid` (0 = this process) so far.
double cpu_seconds(pid_t pid = 0);
// Open descriptors of this process.
int open_fds();

// Calls `cond` until it is true or `timeout_ms` passed (checking every
// millisecond or so); true if it became true. For conditions that have no
// notification to wait on (another process's state, kernel state).
bool wait_until(const std::function<bool()> &cond, int timeout_ms);

// True once the peer closed `fd` (a read sees EOF or a reset), waiting at
// most timeout_ms. Data that arrives first is read and dropped.
bool peer_closed(int fd, int timeout_ms);

// Milliseconds, monotonic.
double now_ms();

// The p-th percentile (0..100) of `v` (sorted here).
double percentile(std::vector<double> v, double p);

// Raise this process's RLIMIT_NOFILE soft limit to at least n (to the hard
// limit at most); returns the new soft limit.
long raise_fd_limit(long n);

// One line of the adversarial report: "ADVERSARIAL <case>: <text>".
void report(const std::string &name, const std::string &text);

}  // namespace rrpc_test

#endif  // RRPC_TEST_COMMON_HOSTILE_H
