// preload_policy_unittest.cc - rrpc-run's selection policy (preload/policy.c):
// which RRPC_RUN_PEERS / RRPC_RUN_ONLY / RRPC_RUN_DEBUG / RRPC_RUN_MODE texts
// parse and which are refused, and which connections each one lets try RDMA
// (IPv4, IPv6, IPv4-mapped, CIDRs, ports and ranges, process names), in
// peers mode and in eBPF mode.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <string>

#include "preload/policy.h"

namespace {

using Env = std::map<std::string, std::string>;
Env g_env;

const char *fake_env(const char *name) {
  auto it = g_env.find(name);
  return it == g_env.end() ? nullptr : it->second.c_str();
}

int enable_ok() { return 0; }
int enable_eperm() { return -EPERM; }
int g_enable_calls;
int enable_counted() {
  g_enable_calls++;
  return 0;
}

struct Addr {
  sockaddr_storage ss{};
  socklen_t len = 0;
  const sockaddr *sa() const { return reinterpret_cast<const sockaddr *>(&ss); }
};

// "1.2.3.4:80" or "[::1]:80".
Addr A(const std::string &text) {
  Addr a;
  size_t colon = text.rfind(':');
  std::string host = text.substr(0, colon);
  int port = std::stoi(text.substr(colon + 1));
  if (host[0] == '[') {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&a.ss);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(1, inet_pton(AF_INET6, host.substr(1, host.size() - 2).c_str(), &in6->sin6_addr)) << text;
    a.len = sizeof *in6;
  } else {
    auto *in = reinterpret_cast<sockaddr_in *>(&a.ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(static_cast<uint16_t>(port));
    EXPECT_EQ(1, inet_pton(AF_INET, host.c_str(), &in->sin_addr)) << text;
    a.len = sizeof *in;
  }
  return a;
}

class Policy {
 public:
  explicit Policy(Env env, int (*enable)(void) = nullptr) {
    g_env = std::move(env);
    rc_ = rrpc__run_policy_parse_ex(fake_env, enable, &p_, &err_);
  }
  ~Policy() {
    if (rc_ == 0) rrpc_run_policy_free(p_);
  }
  int rc() const { return rc_; }
  const char *err() const { return err_; }
  const rrpc_run_policy *get() const { return p_; }
  bool client(const std::string &peer, const char *comm = "prog") const {
    Addr a = A(peer);
    return rrpc_run_policy_client_may(p_, a.sa(), a.len, comm) == 1;
  }
  bool server(const std::string &local, const std::string &peer, const char *comm = "prog") const {
    Addr l = A(local), r = A(peer);
    return rrpc_run_policy_server_may(p_, l.sa(), r.sa(), std::max(l.len, r.len), comm) == 1;
  }

 private:
  rrpc_run_policy *p_ = nullptr;
  const char *err_ = nullptr;
  int rc_;
};

TEST(PolicyParse, NothingSetIsPeersModeWithNothingListed) {
  Policy p(Env{});
  ASSERT_EQ(0, p.rc());
  EXPECT_STREQ("peers", rrpc_run_policy_mode(p.get()));
  EXPECT_EQ(0, rrpc_run_policy_debug(p.get()));
  EXPECT_FALSE(p.client("10.99.0.1:6379"));
  EXPECT_FALSE(p.server("10.99.0.1:6379", "10.99.0.2:40000"));
  EXPECT_NE(nullptr, strstr(rrpc_run_policy_note(p.get()), "plain TCP"));
}

TEST(PolicyParse, RefusesMalformedPeers) {
  for (const char *bad : {"10.0.0.1:0", "10.0.0.1:65536", "10.0.0.1:", "10.0.0.0/33", "10.0.0.0/", "300.1.1.1",
                          "[::1", "[::1]x", "[::1]:", "[10.0.0.1]", "[]", "::1/129", ":", ":abc", ":5-1",
                          "10.0.0.1,", ",10.0.0.1", "10.0.0.1,,10.0.0.2", "host.example:80", "10.0.0.1:80:90",
                          ":123456", "1.2.3.4/8/8", ":1-"}) {
    Policy p(Env{{"RRPC_RUN_PEERS", bad}});
    EXPECT_EQ(-EINVAL, p.rc()) << bad;
    ASSERT_NE(nullptr, p.err()) << bad;
    EXPECT_NE(nullptr, strstr(p.err(), "RRPC_RUN_PEERS")) << bad;
  }
}

TEST(PolicyParse, RefusesMalformedOnlyDebugAndMode) {
  for (const char *bad : {"addr", "addr=", "host=1.2.3.4", "port=0", "port=x", "comm=", "comm=a*b", "addr=1.2.3.4,",
                          ";;", "", "port=80;bogus"}) {
    Policy p(Env{{"RRPC_RUN_ONLY", bad}});
    EXPECT_EQ(-EINVAL, p.rc()) << bad;
    EXPECT_NE(nullptr, strstr(p.err(), "RRPC_RUN_ONLY")) << bad;
  }
  Policy dbg(Env{{"RRPC_RUN_DEBUG", "yes"}});
  EXPECT_EQ(-EINVAL, dbg.rc());
  EXPECT_NE(nullptr, strstr(dbg.err(), "RRPC_RUN_DEBUG"));
  Policy mode(Env{{"RRPC_RUN_MODE", "smc"}});
  EXPECT_EQ(-EINVAL, mode.rc());
  EXPECT_NE(nullptr, strstr(mode.err(), "RRPC_RUN_MODE"));
}

TEST(PolicyParse, DebugValues) {
  EXPECT_EQ(1, rrpc_run_policy_debug(Policy(Env{{"RRPC_RUN_DEBUG", "1"}}).get()));
  EXPECT_EQ(0, rrpc_run_policy_debug(Policy(Env{{"RRPC_RUN_DEBUG", "0"}}).get()));
  EXPECT_EQ(0, rrpc_run_policy_debug(Policy(Env{{"RRPC_RUN_DEBUG", ""}}).get()));
}

TEST(PolicyPeers, AddressPortCidrAndPortOnly) {
  Policy p(Env{{"RRPC_RUN_PEERS", " 10.99.0.1:6379, 192.168.0.0/16 ,:5201, 172.16.0.7, 10.1.0.0/16:8000-8010"}});
  ASSERT_EQ(0, p.rc()) << p.err();
  EXPECT_TRUE(p.client("10.99.0.1:6379"));
  EXPECT_FALSE(p.client("10.99.0.1:6380"));
  EXPECT_FALSE(p.client("10.99.0.2:6379"));
  EXPECT_TRUE(p.client("192.168.200.3:1"));
  EXPECT_FALSE(p.client("192.169.0.1:1"));
  EXPECT_TRUE(p.client("8.8.8.8:5201"));
  EXPECT_TRUE(p.client("[2001:db8::1]:5201"));
  EXPECT_TRUE(p.client("172.16.0.7:22"));
  EXPECT_FALSE(p.client("172.16.0.8:22"));
  EXPECT_TRUE(p.client("10.1.255.255:8000"));
  EXPECT_TRUE(p.client("10.1.0.1:8010"));
  EXPECT_FALSE(p.client("10.1.0.1:8011"));
  EXPECT_FALSE(p.client("10.1.0.1:7999"));
}

TEST(PolicyPeers, ServerMatchesPeerAddressAndItsOwnPort) {
  Policy p(Env{{"RRPC_RUN_PEERS", "10.99.0.2:6379,:5201"}});
  ASSERT_EQ(0, p.rc());
  // The entry's port is the service port: the server's local one, never
  // the client's ephemeral port.
  EXPECT_TRUE(p.server("10.99.0.1:6379", "10.99.0.2:40000"));
  EXPECT_FALSE(p.server("10.99.0.1:6380", "10.99.0.2:6379"));
  EXPECT_FALSE(p.server("10.99.0.1:6379", "10.99.0.3:40000"));
  EXPECT_TRUE(p.server("10.99.0.1:5201", "1.2.3.4:5"));
}

TEST(PolicyPeers, Ipv6AndMappedAddresses) {
  Policy p(Env{{"RRPC_RUN_PEERS", "[::1]:80,fd00::/8,[2001:db8::/32]:443,::ffff:10.5.0.0/112,10.9.9.9"}});
  ASSERT_EQ(0, p.rc()) << p.err();
  EXPECT_TRUE(p.client("[::1]:80"));
  EXPECT_FALSE(p.client("[::1]:81"));
  EXPECT_FALSE(p.client("[::2]:80"));
  EXPECT_TRUE(p.client("[fd12:3456::1]:9"));
  EXPECT_FALSE(p.client("[fe80::1]:9"));
  EXPECT_TRUE(p.client("[2001:db8:1::5]:443"));
  EXPECT_FALSE(p.client("[2001:db9::5]:443"));
  // A mapped network is the IPv4 network; a mapped address is the IPv4 one.
  EXPECT_TRUE(p.client("10.5.1.2:1"));
  EXPECT_TRUE(p.client("[::ffff:10.5.1.2]:1"));
  EXPECT_TRUE(p.client("[::ffff:10.9.9.9]:1"));
  EXPECT_FALSE(p.client("[::ffff:10.9.9.8]:1"));
  // An IPv4 address is not an IPv6 one outside the mapped range.
  EXPECT_FALSE(p.client("253.0.0.1:1"));
}

TEST(PolicyPeers, V6NetworkCoveringMappedRangeMatchesIpv4) {
  Policy p(Env{{"RRPC_RUN_PEERS", "::/0"}});
  ASSERT_EQ(0, p.rc());
  EXPECT_TRUE(p.client("1.2.3.4:5"));
  EXPECT_TRUE(p.client("[::9]:5"));
}

TEST(PolicyPeers, EmptyListMatchesNothing) {
  Policy p(Env{{"RRPC_RUN_PEERS", ""}});
  ASSERT_EQ(0, p.rc());
  EXPECT_FALSE(p.client("127.0.0.1:1"));
  EXPECT_EQ(nullptr, strstr(rrpc_run_policy_note(p.get()), "unset"));
}

TEST(PolicyOnly, AllGivenKeysMustMatch) {
  Policy p(Env{{"RRPC_RUN_PEERS", "0.0.0.0/0,::/0"},
            {"RRPC_RUN_ONLY", " addr=10.0.0.0/8, ::1 ; port=6379,5201-5202; comm=redis-*,iperf3;"}});
  ASSERT_EQ(0, p.rc()) << p.err();
  EXPECT_TRUE(p.client("10.99.0.1:6379", "redis-benchmark"));
  EXPECT_TRUE(p.client("10.99.0.1:6379", "redis-server"));
  EXPECT_TRUE(p.client("[::1]:5202", "iperf3"));
  EXPECT_FALSE(p.client("10.99.0.1:6379", "iperf"));    // comm
  EXPECT_FALSE(p.client("10.99.0.1:6379", "iperf33"));  // comm, exact
  EXPECT_FALSE(p.client("10.99.0.1:6379", nullptr));    // comm unknown
  EXPECT_FALSE(p.client("11.0.0.1:6379", "iperf3"));    // addr
  EXPECT_FALSE(p.client("10.0.0.1:6380", "iperf3"));    // port
  EXPECT_TRUE(p.server("10.0.0.1:5201", "10.0.0.2:33333", "iperf3"));
  EXPECT_FALSE(p.server("10.0.0.1:33333", "10.0.0.2:5201", "iperf3"));
}

TEST(PolicyOnly, LongNamesCompareWhatTheKernelKeeps) {
  Policy p(Env{{"RRPC_RUN_PEERS", ":1"}, {"RRPC_RUN_ONLY", "comm=a-very-long-program-name"}});
  ASSERT_EQ(0, p.rc());
  EXPECT_TRUE(p.client("1.1.1.1:1", "a-very-long-pro"));
  EXPECT_FALSE(p.client("1.1.1.1:1", "a-very-long-pr"));
  Policy star(Env{{"RRPC_RUN_PEERS", ":1"}, {"RRPC_RUN_ONLY", "comm=*"}});
  ASSERT_EQ(0, star.rc());
  EXPECT_TRUE(star.client("1.1.1.1:1", "anything"));
}

TEST(PolicyOnly, RepeatedKeysAddToTheList) {
  Policy p(Env{{"RRPC_RUN_PEERS", ":1-65535"}, {"RRPC_RUN_ONLY", "port=1,2;port=3;port=4,5,6;addr=1.1.1.1;addr=2.2.2.2"}});
  ASSERT_EQ(0, p.rc()) << p.err();
  EXPECT_TRUE(p.client("1.1.1.1:6"));
  EXPECT_TRUE(p.client("2.2.2.2:3"));
  EXPECT_FALSE(p.client("2.2.2.2:7"));
}

TEST(PolicyMode, AutoUsesEbpfWhenItLoads) {
  g_enable_calls = 0;
  Policy p(Env{{"RRPC_RUN_ONLY", "port=6379"}}, enable_counted);
  ASSERT_EQ(0, p.rc());
  EXPECT_EQ(1, g_enable_calls);
  EXPECT_STREQ("ebpf", rrpc_run_policy_mode(p.get()));
  // No RRPC_RUN_PEERS: in eBPF mode the SYN options decide, the selection
  // still applies.
  EXPECT_TRUE(p.client("8.8.8.8:6379"));
  EXPECT_FALSE(p.client("8.8.8.8:6380"));
  EXPECT_TRUE(p.server("10.0.0.1:6379", "10.0.0.2:1000"));
}

TEST(PolicyMode, EbpfWithPeersListRestrictsToTheList) {
  Policy p(Env{{"RRPC_RUN_PEERS", "10.99.0.0/24"}}, enable_ok);
  ASSERT_EQ(0, p.rc());
  EXPECT_STREQ("ebpf", rrpc_run_policy_mode(p.get()));
  EXPECT_TRUE(p.client("10.99.0.1:1"));
  EXPECT_FALSE(p.client("10.98.0.1:1"));
}

TEST(PolicyMode, AutoFallsBackToPeersAndSaysWhy) {
  Policy p(Env{{"RRPC_RUN_PEERS", ":6379"}}, enable_eperm);
  ASSERT_EQ(0, p.rc());
  EXPECT_STREQ("peers", rrpc_run_policy_mode(p.get()));
  EXPECT_NE(nullptr, strstr(rrpc_run_policy_note(p.get()), "EPERM")) << rrpc_run_policy_note(p.get());
  EXPECT_TRUE(p.client("1.2.3.4:6379"));
  EXPECT_FALSE(p.client("1.2.3.4:6378"));
}

TEST(PolicyMode, PeersModeNeverLoads) {
  g_enable_calls = 0;
  Policy p(Env{{"RRPC_RUN_MODE", "peers"}}, enable_counted);
  ASSERT_EQ(0, p.rc());
  EXPECT_EQ(0, g_enable_calls);
  EXPECT_STREQ("peers", rrpc_run_policy_mode(p.get()));
}

TEST(PolicyMode, EbpfModeFailsWhenItCannotLoad) {
  Policy p(Env{{"RRPC_RUN_MODE", "ebpf"}}, enable_eperm);
  EXPECT_EQ(-EPERM, p.rc());
  EXPECT_NE(nullptr, strstr(p.err(), "RRPC_RUN_MODE=ebpf"));
}

TEST(PolicyMode, MalformedVariableLoadsNothing) {
  g_enable_calls = 0;
  Policy p(Env{{"RRPC_RUN_PEERS", "nonsense"}}, enable_counted);
  EXPECT_EQ(-EINVAL, p.rc());
  EXPECT_EQ(0, g_enable_calls);
}

TEST(PolicyMode, RealParseInPeersModeLoadsNothing) {
  // The public entry point, kept off the kernel: whether this machine may
  // load eBPF is test/preload/policy_smcopt_test's business.
  g_env = {{"RRPC_RUN_PEERS", ":1"}, {"RRPC_RUN_MODE", "peers"}};
  rrpc_run_policy *p = nullptr;
  const char *err = nullptr;
  ASSERT_EQ(0, rrpc_run_policy_parse(fake_env, &p, &err));
  EXPECT_STREQ("peers", rrpc_run_policy_mode(p));
  EXPECT_NE(nullptr, strstr(rrpc_run_policy_note(p), "RRPC_RUN_MODE=peers"));
  rrpc_run_policy_free(p);
}

TEST(PolicyQuery, NonIpAndShortAddressesNeverMatch) {
  Policy p(Env{{"RRPC_RUN_PEERS", "0.0.0.0/0,::/0"}});
  ASSERT_EQ(0, p.rc());
  Addr a = A("1.2.3.4:5");
  EXPECT_EQ(1, rrpc_run_policy_client_may(p.get(), a.sa(), a.len, "x"));
  EXPECT_EQ(0, rrpc_run_policy_client_may(p.get(), a.sa(), a.len - 1, "x"));
  EXPECT_EQ(0, rrpc_run_policy_client_may(p.get(), nullptr, 0, "x"));
  sockaddr_storage un{};
  un.ss_family = AF_UNIX;
  EXPECT_EQ(0, rrpc_run_policy_client_may(p.get(), reinterpret_cast<sockaddr *>(&un), sizeof un, "x"));
  EXPECT_EQ(0, rrpc_run_policy_server_may(p.get(), nullptr, a.sa(), a.len, "x"));
}

}  // namespace
