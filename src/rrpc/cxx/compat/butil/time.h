// butil/time.h - the wall and monotonic clocks brpc programs read through
// butil, and the POSIX sleeps (usleep, sleep) its callers expect next to
// them.
#ifndef RRPC_COMPAT_BUTIL_TIME_H
#define RRPC_COMPAT_BUTIL_TIME_H

#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

namespace butil {

inline int64_t gettimeofday_us() {
  timeval tv;
  gettimeofday(&tv, nullptr);
  return tv.tv_sec * 1000000L + tv.tv_usec;
}
inline int64_t gettimeofday_ms() { return gettimeofday_us() / 1000L; }
inline int64_t monotonic_time_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1000000000L + ts.tv_nsec;
}
inline int64_t monotonic_time_us() { return monotonic_time_ns() / 1000L; }
inline int64_t monotonic_time_ms() { return monotonic_time_ns() / 1000000L; }

}  // namespace butil

#endif  // RRPC_COMPAT_BUTIL_TIME_H
