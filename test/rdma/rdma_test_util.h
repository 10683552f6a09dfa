// rdma_test_util.h - scaffolding the RDMA test binaries share: an echo
// method and a server with it, a channel to a test server, one checked echo call,
// a raw HTTP GET of a builtin page, the TCP bytes on a port, the RDMA counters and a
// millisecond clock. Header-only so
// every binary of test/rdma/ (each its own program, see the Makefile and
// BUILD) takes it without another library. Tests with needs of their own
// (other handlers, hostile peers) keep their own helpers.
#ifndef RRPC_TEST_RDMA_RDMA_TEST_UTIL_H
#define RRPC_TEST_RDMA_RDMA_TEST_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cstdint>
#include <mutex>
#include <string>

#include <gtest/gtest.h>

#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

namespace rrpc_rdma_test {

// A log sink for rrpc_log_set_sink(log_capture_sink, nullptr): prints every
// line and keeps it, for a case to find its reason in (log_mark, then
// logged_since). Never destroyed: loop threads still log (a rogue's QP
// timing out) while static destructors run at exit, and TSan saw a sink
// append to a freed string there.
struct LogCapture {
  std::mutex mu;
  std::string text;
};
inline LogCapture &log_capture() {
  static LogCapture *c = new LogCapture;
  return *c;
}
inline void log_capture_sink(void *, rrpc_log_level, const char *file, int line, const char *msg) {
  LogCapture &c = log_capture();
  std::lock_guard<std::mutex> g(c.mu);
  fprintf(stderr, "%s:%d] %s\n", file, line, msg);
  c.text += msg;
  c.text += '\n';
}
inline bool logged_since(size_t from, const std::string &what) {
  LogCapture &c = log_capture();
  std::lock_guard<std::mutex> g(c.mu);
  return c.text.find(what, std::min(from, c.text.size())) != std::string::npos;
}
inline size_t log_mark() {
  LogCapture &c = log_capture();
  std::lock_guard<std::mutex> g(c.mu);
  return c.text.size();
}

// test.Echo/Echo: answers with the request and the request attachment.
inline void echo_handler(void *, rrpc_server_call *call) {
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(c), rrpc_controller_request_attachment(c));
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

// A server with use_rdma on rdma_test_addr():0 whose test.Echo/Echo is `fn`
// (echo_handler unless said) with `arg`; started, or nullptr on failure.
inline rrpc_server *start_echo_server(rrpc_handler_fn fn = echo_handler, void *arg = nullptr) {
  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *s = nullptr;
  if (rrpc_server_new(&so, &s) != 0) return nullptr;
  if (rrpc_server_add_method(s, "test.Echo", "Echo", fn, arg) != 0 ||
      rrpc_server_start(s, (rrpc_test::rdma_test_addr() + ":0").c_str()) != 0) {
    rrpc_server_free(s);
    return nullptr;
  }
  return s;
}

// start_echo_server's server for one test's scope: stopped and freed when it
// goes. `init` runs first (a binary's own rrpc_rdma_global_init options);
// port is 0 when the server did not start.
struct EchoServer {
  rrpc_server *s = nullptr;
  int port = 0;
  explicit EchoServer(void (*init)() = nullptr, rrpc_handler_fn fn = echo_handler) {
    if (init) init();
    s = start_echo_server(fn);
    if (s) port = rrpc_server_port(s);
  }
  ~EchoServer() {
    if (!s) return;
    rrpc_server_stop(s);
    rrpc_server_free(s);
  }
  EchoServer(const EchoServer &) = delete;
  EchoServer &operator=(const EchoServer &) = delete;
};

// A channel to rdma_test_addr():port; nullptr on failure.
inline rrpc_channel *open_channel(int port, int use_rdma, int timeout_ms = 10000) {
  rrpc_channel_options o = {};
  o.use_rdma = use_rdma;
  o.timeout_ms = timeout_ms;
  o.connect_timeout_ms = 5000;
  rrpc_channel *ch = nullptr;
  std::string target = rrpc_test::rdma_test_addr() + ":" + std::to_string(port);
  return rrpc_channel_new(target.c_str(), &o, &ch) == 0 ? ch : nullptr;
}

// One synchronous call of service.method with `body` and attachment `att`.
// The call's code (-9999 when the echoed body is not `body`); the response
// attachment, used_rdma and error text where asked for.
inline int echo(rrpc_channel *ch, const std::string &body, const std::string &att = "",
                std::string *ratt = nullptr, int *used_rdma = nullptr, std::string *err = nullptr,
                const char *service = "test.Echo", const char *method = "Echo") {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rq, *rs;
  rrpc_iobuf_new(&rq);
  rrpc_iobuf_new(&rs);
  rrpc_iobuf_append(rq, body.data(), body.size());
  rrpc_iobuf_append(rrpc_controller_request_attachment(c), att.data(), att.size());
  int rc = rrpc_channel_call(ch, service, method, c, rq, rs, nullptr, nullptr);
  if (rc == 0 && rrpc_test::iobuf_string(rs) != body) rc = -9999;
  if (ratt) *ratt = rrpc_test::iobuf_string(rrpc_controller_response_attachment(c));
  if (used_rdma) *used_rdma = rrpc_controller_used_rdma(c);
  if (err) *err = rrpc_controller_error_text(c);
  rrpc_iobuf_free(rq);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  return rc;
}

// GET path on rdma_test_addr():port; the body, read to the server's FIN
// (bounded by a 10 s SO_RCVTIMEO), or "".
inline std::string http_get(int port, const std::string &path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, rrpc_test::rdma_test_addr().c_str(), &sa.sin_addr);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string all;
  if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) == 0) {
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: t\r\n\r\n";
    send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    char buf[65536];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) all.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  size_t he = all.find("\r\n\r\n");
  return he == std::string::npos ? "" : all.substr(he + 4);
}

// Bytes the kernel counted on the TCP connections to/from `port` (ss -ti); -1
// when ss cannot run.
inline long long tcp_bytes_on_port(int port) {
  std::string cmd = "ss -tinH '( sport = :" + std::to_string(port) + " )' 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  long long total = 0;
  char line[4096];
  while (fgets(line, sizeof line, p)) {
    for (const char *key : {"bytes_acked:", "bytes_received:"}) {
      const char *k = strstr(line, key);
      if (k) total += atoll(k + strlen(key));
    }
  }
  pclose(p);
  return total;
}

// The process's RDMA counters now (rrpc_rdma_get_stats, checked).
inline rrpc_rdma_stats stats() {
  rrpc_rdma_stats st;
  EXPECT_EQ(0, rrpc_rdma_get_stats(&st));
  return st;
}

// Milliseconds of the monotonic clock.
inline uint64_t now_ms() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace rrpc_rdma_test

#endif  // RRPC_TEST_RDMA_RDMA_TEST_UTIL_H
