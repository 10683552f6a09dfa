// addr_unittest.cc - the address text channels and servers take (IPv4, IPv6
// in brackets, unix sockets): what parses, what is refused, how addresses
// print; then servers and channels over IPv6 and unix sockets end to end.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "rrpc/internal/addr.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

namespace {

std::string printed(const rrpc__addr &a) {
  char buf[160];
  rrpc__sockaddr_str(reinterpret_cast<const sockaddr *>(&a.ss), a.len, buf, sizeof buf);
  return buf;
}

TEST(AddrParse, AcceptsEachForm) {
  rrpc__addr a;
  ASSERT_EQ(0, rrpc__addr_parse_ex("127.0.0.1:8000", 0, &a));
  EXPECT_EQ(AF_INET, a.ss.ss_family);
  EXPECT_EQ("127.0.0.1:8000", printed(a));
  ASSERT_EQ(0, rrpc__addr_parse_ex(":80", 0, &a));
  EXPECT_EQ("0.0.0.0:80", printed(a));
  EXPECT_TRUE(rrpc__addr_is_any(&a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("65535", 0, &a));
  EXPECT_EQ("0.0.0.0:65535", printed(a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("[::1]:8000", 0, &a));
  EXPECT_EQ(AF_INET6, a.ss.ss_family);
  EXPECT_EQ(sizeof(sockaddr_in6), a.len);
  EXPECT_EQ("[::1]:8000", printed(a));
  EXPECT_FALSE(rrpc__addr_is_any(&a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("[::]:0", 0, &a));
  EXPECT_TRUE(rrpc__addr_is_any(&a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("[::ffff:10.1.2.3]:9", 0, &a));
  EXPECT_EQ("[::ffff:10.1.2.3]:9", printed(a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("unix:/tmp/x.sock", 0, &a));
  EXPECT_EQ(AF_UNIX, a.ss.ss_family);
  EXPECT_EQ("unix:/tmp/x.sock", printed(a));
  EXPECT_FALSE(rrpc__addr_is_any(&a));
  ASSERT_EQ(0, rrpc__addr_parse_ex("unix:relative.sock", 0, &a));
  ASSERT_EQ(0, rrpc__addr_parse_any("localhost:80", &a));  // resolved (to IPv4)
  EXPECT_EQ(AF_INET, a.ss.ss_family);
  // The longest path sun_path holds.
  std::string longest = "unix:/" + std::string(sizeof(sockaddr_un{}.sun_path) - 2, 'p');
  ASSERT_EQ(0, rrpc__addr_parse_ex(longest.c_str(), 0, &a));
  EXPECT_EQ(longest, printed(a));
}

TEST(AddrParse, RefusesMalformedText) {
  const char *bad[] = {
      "", ":", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:99999999999", "1.2.3.4:+80", "1.2.3.4: 80",
      "1.2.3.4:80x", "1.2.3.4:-1", "1.2.3.4:0x50", "::1:80", "fe80::1:80", "[::1]", "[::1]80", "[]:80",
      "[zz]:80", "[::1]:", "[::1]:1:2", "[1.2.3.4]:80", "[::1%lo]:80", "[::1", "unix:", "[::::::::::]:1",
  };
  rrpc__addr a;
  for (const char *s : bad) EXPECT_EQ(-EINVAL, rrpc__addr_parse_ex(s, 0, &a)) << "'" << s << "'";
  EXPECT_EQ(-EINVAL, rrpc__addr_parse_ex(nullptr, 0, &a));
  std::string too_long_path = "unix:/" + std::string(sizeof(sockaddr_un{}.sun_path), 'p');
  EXPECT_EQ(-EINVAL, rrpc__addr_parse_ex(too_long_path.c_str(), 0, &a));
  std::string too_long = std::string(RRPC_ADDR_TEXT_MAX, 'h') + ":80";
  EXPECT_EQ(-EINVAL, rrpc__addr_parse_ex(too_long.c_str(), 0, &a));
  std::string long_host = std::string(260, 'h') + ":80";
  EXPECT_EQ(-EINVAL, rrpc__addr_parse_ex(long_host.c_str(), 0, &a));
  // Names are not looked up without resolve; an unknown one fails with resolve.
  EXPECT_EQ(-EHOSTUNREACH, rrpc__addr_parse_ex("some.host:80", 0, &a));
  EXPECT_EQ(-EHOSTUNREACH, rrpc__addr_parse_any("no-such-host.invalid:80", &a));
}

// The IPv4-only form kept for callers that hold a sockaddr_in.
TEST(AddrParse, IPv4OnlyForm) {
  sockaddr_in in;
  ASSERT_EQ(0, rrpc__addr_parse("127.0.0.1:81", &in));
  EXPECT_EQ(AF_INET, in.sin_family);
  EXPECT_EQ(htons(81), in.sin_port);
  EXPECT_EQ(-EAFNOSUPPORT, rrpc__addr_parse("[::1]:81", &in));
  EXPECT_EQ(-EAFNOSUPPORT, rrpc__addr_parse("unix:/tmp/s", &in));
  EXPECT_EQ(-EINVAL, rrpc__addr_parse("1.2.3.4:x", &in));
}

TEST(AddrParse, ChannelsRefuseWildcards) {
  rrpc_channel *ch;
  EXPECT_EQ(-EINVAL, rrpc_channel_new("0.0.0.0:80", nullptr, &ch));
  EXPECT_EQ(-EINVAL, rrpc_channel_new("[::]:80", nullptr, &ch));
  EXPECT_EQ(-EINVAL, rrpc_channel_new("[::1]", nullptr, &ch));
  EXPECT_EQ(-EINVAL, rrpc_channel_new("unix:", nullptr, &ch));
}

// ---- end to end -----------------------------------------------------------------

void echo_handler(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  char remote[128];
  rrpc_controller_remote_side(c, remote, sizeof remote);
  rrpc_iobuf *b;
  rrpc_iobuf_new(&b);
  rrpc_iobuf_append_iobuf(b, rrpc_server_call_request(call));
  rrpc_iobuf_append(rrpc_controller_response_attachment(c), remote, strlen(remote));
  rrpc_server_call_respond(call, b);
  rrpc_iobuf_free(b);
}

// One echo over `ch`; returns the code, and what the server saw as its peer.
int echo(rrpc_channel *ch, std::string *server_saw, std::string *client_saw, int *used_rdma) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, "hello", 5);
  int rc = rrpc_channel_call(ch, "test.Addr", "Echo", c, rq, rs, nullptr, nullptr);
  if (rc == 0) {
    EXPECT_EQ("hello", rrpc_test::iobuf_string(rs));
  }
  *server_saw = rrpc_test::iobuf_string(rrpc_controller_response_attachment(c));
  char buf[128];
  rrpc_controller_remote_side(c, buf, sizeof buf);
  *client_saw = buf;
  *used_rdma = rrpc_controller_used_rdma(c);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  return rc;
}

bool have_ipv6_loopback() {
  int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 sa = {};
  sa.sin6_family = AF_INET6;
  sa.sin6_addr = in6addr_loopback;
  bool ok = bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0;
  close(fd);
  return ok;
}

TEST(AddrEndToEnd, IPv6ServerAndChannel) {
  if (!have_ipv6_loopback()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(nullptr, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.Addr", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, "[::1]:0"));
  int port = rrpc_server_port(s);
  ASSERT_GT(port, 0);
  std::string addr = "[::1]:" + std::to_string(port);
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), nullptr, &ch));
  std::string server_saw, client_saw;
  int rdma = -1;
  ASSERT_EQ(0, echo(ch, &server_saw, &client_saw, &rdma));
  EXPECT_EQ(addr, client_saw);
  EXPECT_EQ(0u, server_saw.find("[::1]:")) << server_saw;
  rrpc_channel_free(ch);
  rrpc_server_free(s);
}

std::string sock_path(const char *tag) {
  return "/tmp/rrpc-addr-" + std::to_string(getpid()) + "-" + tag + ".sock";
}

bool exists(const std::string &p) {
  struct stat st;
  return lstat(p.c_str(), &st) == 0;
}

// A unix-socket server and channel; use_rdma on both sides is ignored there
// (never RDMA, no handshake); the socket file goes when the server does.
TEST(AddrEndToEnd, UnixSocketServerAndChannel) {
  std::string path = sock_path("e2e");
  std::string addr = "unix:" + path;
  rrpc_server_options so = {};
  so.use_rdma = 1;  // ignored on a unix socket, even in a build without RDMA
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(&so, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.Addr", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, addr.c_str()));
  EXPECT_EQ(0, rrpc_server_port(s));
  EXPECT_TRUE(exists(path));
  rrpc_channel_options co = {};
  co.use_rdma = 1;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  std::string server_saw, client_saw;
  int rdma = -1;
  ASSERT_EQ(0, echo(ch, &server_saw, &client_saw, &rdma));
  EXPECT_EQ(addr, client_saw);
  EXPECT_EQ(0u, server_saw.find("unix:")) << server_saw;
  EXPECT_EQ(0, rdma);
  rrpc_channel_free(ch);

  // A second server cannot take the path of a live one.
  rrpc_server *s2;
  ASSERT_EQ(0, rrpc_server_new(nullptr, &s2));
  ASSERT_EQ(0, rrpc_server_add_method(s2, "test.Addr", "Echo", echo_handler, nullptr));
  EXPECT_EQ(-EADDRINUSE, rrpc_server_start(s2, addr.c_str()));
  rrpc_server_free(s2);
  EXPECT_TRUE(exists(path));  // the refused server did not remove it

  rrpc_server_free(s);
  EXPECT_FALSE(exists(path));
}

// A socket file left by a server that died is replaced; a regular file at
// the path is never removed.
TEST(AddrEndToEnd, UnixSocketStaleFileIsReplaced) {
  std::string path = sock_path("stale");
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un un = {};
  un.sun_family = AF_UNIX;
  snprintf(un.sun_path, sizeof un.sun_path, "%s", path.c_str());
  ASSERT_EQ(0, bind(fd, reinterpret_cast<sockaddr *>(&un), sizeof un));
  close(fd);  // bound, never listened, closed: a stale socket file
  ASSERT_TRUE(exists(path));
  rrpc_server *s;
  ASSERT_EQ(0, rrpc_server_new(nullptr, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.Addr", "Echo", echo_handler, nullptr));
  ASSERT_EQ(0, rrpc_server_start(s, ("unix:" + path).c_str()));
  rrpc_server_free(s);

  std::string file = sock_path("regular");
  FILE *f = fopen(file.c_str(), "w");
  ASSERT_NE(nullptr, f);
  fclose(f);
  ASSERT_EQ(0, rrpc_server_new(nullptr, &s));
  ASSERT_EQ(0, rrpc_server_add_method(s, "test.Addr", "Echo", echo_handler, nullptr));
  EXPECT_EQ(-EADDRINUSE, rrpc_server_start(s, ("unix:" + file).c_str()));
  rrpc_server_free(s);
  EXPECT_TRUE(exists(file));
  unlink(file.c_str());
}

// A channel to a unix path nobody listens on fails like a refused TCP port.
TEST(AddrEndToEnd, UnixSocketNobodyListening) {
  std::string addr = "unix:" + sock_path("none");
  rrpc_channel_options co = {};
  co.max_retry = -1;
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), &co, &ch));
  std::string a, b;
  int rdma;
  int rc = echo(ch, &a, &b, &rdma);
  EXPECT_TRUE(rc == -ENOENT || rc == -ECONNREFUSED) << rc;
  rrpc_channel_free(ch);
}

}  // namespace
