// preload_input_unittest.cc - what rrpc-run's preload parses besides the
// policy and the frames: the numeric RRPC_RUN_* settings
// (preload/env_num.c) and the stat port's request check
// (preload/stat_route.c), fed malformed input: overflow, negative, trailing
// junk, empty, huge. A refused value leaves the caller's default as it was.
#include <gtest/gtest.h>

#include <cerrno>
#include <climits>
#include <string>

#include "preload/env_num.h"
#include "preload/stat_route.h"

namespace {

constexpr long kDefault = 4242;

// The value rrpc_run_env_num leaves in a variable that held kDefault.
long parsed(const char *v, long lo, long hi, int want_rc) {
  long out = kDefault;
  EXPECT_EQ(want_rc, rrpc_run_env_num(v, lo, hi, &out)) << (v ? v : "(null)");
  return out;
}

TEST(PreloadEnvNum, UnsetOrEmptyKeepsTheDefault) {
  EXPECT_EQ(kDefault, parsed(nullptr, 0, 10000, 1));
  EXPECT_EQ(kDefault, parsed("", 0, 10000, 1));
}

TEST(PreloadEnvNum, DigitsInRange) {
  EXPECT_EQ(0, parsed("0", 0, 10000, 0));
  EXPECT_EQ(10000, parsed("10000", 0, 10000, 0));
  EXPECT_EQ(7, parsed("007", 0, 10000, 0));
  EXPECT_EQ(65535, parsed("65535", 1, 65535, 0));
  EXPECT_EQ(512L << 10, parsed("524288", 1, 512L << 10, 0));
}

TEST(PreloadEnvNum, OutOfRangeIsRefused) {
  EXPECT_EQ(kDefault, parsed("10001", 0, 10000, -ERANGE));
  EXPECT_EQ(kDefault, parsed("0", 1, 65535, -ERANGE));    // port 0, ring of 0 KiB
  EXPECT_EQ(kDefault, parsed("65536", 1, 65535, -ERANGE));
}

TEST(PreloadEnvNum, OverflowIsOutOfRangeNotWrapped) {
  // Past LONG_MAX, and far past it: strtol would saturate, a naive loop wrap.
  EXPECT_EQ(kDefault, parsed("9223372036854775808", 0, LONG_MAX, -ERANGE));
  EXPECT_EQ(LONG_MAX, parsed("9223372036854775807", 0, LONG_MAX, 0));
  EXPECT_EQ(kDefault, parsed("18446744073709551617", 0, 10000, -ERANGE));
  std::string huge(100000, '9');
  EXPECT_EQ(kDefault, parsed(huge.c_str(), 0, 600000, -ERANGE));
}

TEST(PreloadEnvNum, SignsSpacesAndJunkAreRefused) {
  for (const char *v : {"-1", "-0", "+5", " 5", "5 ", "\t5", "50ms", "1e3", "0x10", "5.0", "-", "+", " ",
                        "\xd9\xa1", "5\n"}) {
    EXPECT_EQ(kDefault, parsed(v, 0, 10000, -EINVAL));
  }
}

TEST(PreloadEnvNum, JunkAfterHugeDigitsIsStillMalformed) {
  std::string v(64, '9');
  v += "x";
  EXPECT_EQ(kDefault, parsed(v.c_str(), 0, 10000, -EINVAL));
}

rrpc_run_stat_page route(const std::string &req) { return rrpc_run_stat_route(req.data(), req.size()); }

TEST(PreloadStatRoute, ThePages) {
  EXPECT_EQ(RRPC_RUN_STAT_CONNECTIONS, route("GET /connections HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(RRPC_RUN_STAT_VARS, route("GET /vars HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(RRPC_RUN_STAT_VARS, route("GET /vars?x=1 HTTP/1.0\r\n\r\n"));
  EXPECT_EQ(RRPC_RUN_STAT_CONNECTIONS, route("GET /connections"));  // cut short after the path
  EXPECT_EQ(RRPC_RUN_STAT_VARS, route("GET /vars\n"));
}

TEST(PreloadStatRoute, EverythingElseIsNotFound) {
  for (const char *r : {"", "G", "GET", "GET /", "GET /var", "GET /varsx HTTP/1.1\r\n", "GET /vars/x",
                        "GET /connectionsX", "get /vars", "POST /vars HTTP/1.1", " GET /vars", "GET  /vars",
                        "HEAD /connections"}) {
    EXPECT_EQ(RRPC_RUN_STAT_NOT_FOUND, route(r)) << r;
  }
  EXPECT_EQ(RRPC_RUN_STAT_NOT_FOUND, rrpc_run_stat_route(nullptr, 0));
}

TEST(PreloadStatRoute, BytesNotCString) {
  // A NUL right after the path ends nothing: the check reads the length.
  EXPECT_EQ(RRPC_RUN_STAT_NOT_FOUND, route(std::string("GET /vars\0 HTTP/1.1", 19)));
  // Fewer bytes than the path: no read past n even when more follow in memory.
  const char buf[] = "GET /vars HTTP/1.1";
  EXPECT_EQ(RRPC_RUN_STAT_NOT_FOUND, rrpc_run_stat_route(buf, 8));
  std::string huge = "GET /connections " + std::string(1 << 20, 'a');
  EXPECT_EQ(RRPC_RUN_STAT_CONNECTIONS, route(huge));
}

}  // namespace
