// builtin_unittest.cc - the builtin pages over real TCP: every page fetched
// with curl and with tools/rrpc_stat from a server with live connections;
// figures that must move (a failing call raises its method's error count, a
// fallback shows its decline reason); malformed and oversized requests get
// 400/413 and close only their own connection; /metrics passes promtool
// (or, where it is missing, the text-format check below).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <tuple>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <cctype>
#include <initializer_list>
#include <sstream>
#include <string>

#include "rrpc/rrpc.h"
#include "test/common/hostile.h"
#include "test/common/test_util.h"

extern "C" {
#include "transport/clc_decline.h"
#include "transport/smc/clc.h"
}

namespace {

void echo_handler(void *, rrpc_server_call *call) {
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

void fail_handler(void *, rrpc_server_call *call) {
  rrpc_controller_set_failed(rrpc_server_call_controller(call), -RRPC_EREQUEST, "told to fail");
  rrpc_server_call_respond(call, nullptr);
}

// ---- a raw HTTP client: one request, read until the server closes or the
// Content-Length is complete. Bounded in time by SO_RCVTIMEO.
struct Reply {
  int status = 0;
  std::string head, body;
  bool closed_by_server = false;
};

int connect_to(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

Reply raw_request(int port, const std::string &bytes) {
  Reply r;
  int fd = connect_to(port);
  if (fd < 0) return r;
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  std::string all;
  char buf[65536];
  for (;;) {
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n == 0) r.closed_by_server = true;
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));  // to EOF: every answer ends the connection
  }
  close(fd);
  size_t he = all.find("\r\n\r\n");
  if (he == std::string::npos) return r;
  r.head = all.substr(0, he);
  r.body = all.substr(he + 4);
  sscanf(r.head.c_str(), "HTTP/1.1 %d", &r.status);
  return r;
}

std::string run(const std::string &cmd, int *rc = nullptr) { return rrpc_test::command_output(cmd, rc); }

std::string curl(int port, const std::string &path, int *rc = nullptr) {
  return run("curl -sS -m 5 'http://127.0.0.1:" + std::to_string(port) + path + "'", rc);
}

// tools/rrpc_stat next to this test binary's build directory.
std::string rrpc_stat_path() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return "rrpc_stat";
  self[n] = '\0';
  std::string p(self);
  p = p.substr(0, p.rfind('/'));  // build/test
  p = p.substr(0, p.rfind('/'));  // build
  return p + "/tools/rrpc_stat";
}

class Builtin : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, rrpc_server_new(nullptr, &srv_));
    ASSERT_EQ(0, rrpc_server_add_method(srv_, "test.Svc", "Echo", echo_handler, nullptr));
    ASSERT_EQ(0, rrpc_server_add_method(srv_, "test.Svc", "Fail", fail_handler, nullptr));
    ASSERT_EQ(0, rrpc_server_start(srv_, "127.0.0.1:0"));
    port_ = rrpc_server_port(srv_);
    ASSERT_EQ(0, rrpc_channel_new(("127.0.0.1:" + std::to_string(port_)).c_str(), nullptr, &ch_));
  }
  void TearDown() override {
    rrpc_channel_free(ch_);
    rrpc_server_free(srv_);
  }
  int call(rrpc_channel *ch, const char *method) {
    rrpc_controller *c;
    rrpc_iobuf *req;
    rrpc_controller_new(&c);
    rrpc_iobuf_new(&req);
    rrpc_iobuf_append(req, "hello", 5);
    int rc = rrpc_channel_call(ch, "test.Svc", method, c, req, nullptr, nullptr, nullptr);
    rrpc_iobuf_free(req);
    rrpc_controller_free(c);
    return rc;
  }
  rrpc_server *srv_ = nullptr;
  rrpc_channel *ch_ = nullptr;
  int port_ = 0;
};

// The first integer after "key": in a JSON text, or -1. (No std::regex:
// GCC 12 warns inside it under ASan.)
long long json_num(const std::string &json, const std::string &key, size_t from = 0) {
  size_t at = json.find("\"" + key + "\":", from);
  if (at == std::string::npos) return -1;
  return std::strtoll(json.c_str() + at + key.size() + 3, nullptr, 10);
}

// The line of `text` that holds every one of `parts`, or "".
std::string line_with(const std::string &text, std::initializer_list<const char *> parts) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    bool all = true;
    for (const char *p : parts) all = all && line.find(p) != std::string::npos;
    if (all) return line;
  }
  return "";
}

// /vars value of one sample line: name{labels} : value
double var_value(const std::string &vars, const std::string &key) {
  size_t at = vars.find(key + " : ");
  if (at == std::string::npos) return -1;
  return std::stod(vars.substr(at + key.size() + 3));
}

TEST_F(Builtin, EveryPageAnswersWithCurl) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  for (const char *p : {"/", "/status", "/vars", "/connections", "/rdma", "/flags", "/metrics"}) {
    int rc = -1;
    std::string text = curl(port_, p, &rc);
    EXPECT_EQ(0, rc) << p;
    EXPECT_FALSE(text.empty()) << p;
    if (std::string(p) == "/" || std::string(p) == "/metrics") continue;
    std::string json = curl(port_, std::string(p) + "?format=json", &rc);
    EXPECT_EQ(0, rc) << p;
    ASSERT_FALSE(json.empty()) << p;
    EXPECT_EQ('{', json[0]) << p << ": " << json;
    // Well-formed enough for python's json module.
    int prc = -1;
    run("printf '%s' '" + json + "' | python3 -c 'import json,sys; json.load(sys.stdin)'", &prc);
    EXPECT_EQ(0, prc) << p << ": " << json;
  }
  std::string status = curl(port_, "/status");
  EXPECT_NE(std::string::npos, status.find("test.Svc.Echo")) << status;
  // The channel's connection is live and listed, with bytes both ways.
  std::string conns = curl(port_, "/connections?format=json");
  EXPECT_NE(std::string::npos, conns.find("\"transport\":\"TCP\"")) << conns;
  // The first row is the RPC connection (the page's own is listed too).
  size_t rpc_row = conns.find("\"bytes_in\":");
  bool found = false;
  for (size_t at = rpc_row; at != std::string::npos; at = conns.find("\"peer\":", at + 1))
    found = found || (json_num(conns, "bytes_in", at) > 0 && json_num(conns, "bytes_out", at) > 0);
  EXPECT_TRUE(found) << conns;
}

// The worker pools' counters are on /vars, summed over every server's pool:
// the fixture's server runs its handlers on its pool, so a call woke one.
TEST_F(Builtin, VarsCountTheWorkerPools) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  std::string vars = curl(port_, "/vars?prefix=rrpc_workers_");
  EXPECT_LE(1, var_value(vars, "rrpc_workers_wakeups_total")) << vars;
  EXPECT_LE(0, var_value(vars, "rrpc_workers_rescues_total")) << vars;
  EXPECT_LE(0, var_value(vars, "rrpc_workers_rejected_total")) << vars;
  EXPECT_LE(0, var_value(vars, "rrpc_workers_left_to_busy_total")) << vars;
}

// The iobuf block cache's counters are on /vars and agree with the C API:
// a call's frames took default-size blocks, malloc'ed or cached.
TEST_F(Builtin, VarsShowTheBlockCache) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  std::string vars = curl(port_, "/vars?prefix=rrpc_iobuf_block_cache");
  rrpc_iobuf_block_cache_stats st;
  rrpc_iobuf_block_cache_stats_get(&st);
  double hits = var_value(vars, "rrpc_iobuf_block_cache_hits_total");
  double misses = var_value(vars, "rrpc_iobuf_block_cache_misses_total");
  EXPECT_LE(1, hits + misses) << vars;
  EXPECT_LE(hits, static_cast<double>(st.hits)) << vars;
  EXPECT_LE(misses, static_cast<double>(st.misses)) << vars;
  EXPECT_LE(0, var_value(vars, "rrpc_iobuf_block_cache_overflows_total")) << vars;
  EXPECT_LE(0, var_value(vars, "rrpc_iobuf_block_cache_blocks")) << vars;
}

TEST_F(Builtin, FailingCallRaisesItsMethodsErrorCount) {
  const std::string key = "rrpc_method_errors_total{port=\"" + std::to_string(port_) +
                          "\",service=\"test.Svc\",method=\"Fail\"}";
  std::string before = curl(port_, "/vars?prefix=rrpc_method_errors");
  EXPECT_EQ(0, var_value(before, key)) << before;
  EXPECT_EQ(-RRPC_EREQUEST, call(ch_, "Fail"));
  std::string after = curl(port_, "/vars?prefix=rrpc_method_errors");
  EXPECT_EQ(1, var_value(after, key)) << after;
  // By code, on /status and through the C API.
  std::string status = curl(port_, "/status?format=json");
  EXPECT_NE(std::string::npos, status.find("\"errors_by_code\":{\"EREQUEST\":1}")) << status;
  EXPECT_EQ(1u, rrpc_server_method_error_count(srv_, "test.Svc", "Fail", -RRPC_EREQUEST));
  // The prefix filter keeps only what it names.
  EXPECT_EQ(std::string::npos, after.find("rrpc_process_")) << after;
  // The channel counted it too.
  rrpc_call_stats cs;
  ASSERT_EQ(0, rrpc_channel_stats(ch_, &cs));
  EXPECT_EQ(1u, cs.errors);
}

TEST_F(Builtin, MethodFiguresFollowCalls) {
  for (int i = 0; i < 20; i++) ASSERT_EQ(0, call(ch_, "Echo"));
  rrpc_call_stats st;
  ASSERT_EQ(0, rrpc_server_method_stats(srv_, "test.Svc", "Echo", &st));
  EXPECT_EQ(20u, st.calls);
  EXPECT_EQ(0u, st.errors);
  EXPECT_EQ(0, st.in_flight);
  EXPECT_EQ(20u, st.window_calls);
  EXPECT_GT(st.qps, 0);
  // An inline echo answers within a microsecond on the server; the
  // channel sees the round trip.
  EXPECT_LE(st.latency_p50_us, st.latency_p99_us);
  EXPECT_LE(st.latency_p99_us, st.latency_p999_us);
  EXPECT_LE(st.latency_p999_us, st.latency_max_us + st.latency_max_us / 8 + 1);
  rrpc_call_stats cs;
  ASSERT_EQ(0, rrpc_channel_stats(ch_, &cs));
  EXPECT_EQ(20u, cs.calls);
  EXPECT_GT(cs.latency_p50_us, 0u);
  EXPECT_LE(cs.latency_p50_us, cs.latency_p99_us);
  EXPECT_EQ(-ENOENT, rrpc_server_method_stats(srv_, "test.Svc", "Nope", &st));
  // Switched off, calls are not counted.
  rrpc_metrics_set_enabled(0);
  ASSERT_EQ(0, call(ch_, "Echo"));
  rrpc_metrics_set_enabled(1);
  ASSERT_EQ(0, rrpc_server_method_stats(srv_, "test.Svc", "Echo", &st));
  EXPECT_EQ(20u, st.calls);
  EXPECT_EQ(0, st.in_flight);
  ASSERT_EQ(0, rrpc_channel_stats(ch_, &cs));
  EXPECT_EQ(20u, cs.calls);
  EXPECT_EQ(0, cs.in_flight);
  // And on again, counted again on both sides.
  ASSERT_EQ(0, call(ch_, "Echo"));
  ASSERT_EQ(0, rrpc_server_method_stats(srv_, "test.Svc", "Echo", &st));
  EXPECT_EQ(21u, st.calls);
  ASSERT_EQ(0, rrpc_channel_stats(ch_, &cs));
  EXPECT_EQ(21u, cs.calls);
}

TEST_F(Builtin, FallbackShowsItsDeclineReason) {
  rrpc_channel_options o{};
  o.use_rdma = 1;
  rrpc_channel *rch = nullptr;
  int rc = rrpc_channel_new(("127.0.0.1:" + std::to_string(port_)).c_str(), &o, &rch);
  if (rc == -RRPC_ENORDMA) GTEST_SKIP() << "a build without RDMA";
  ASSERT_EQ(0, rc);
  // This server offers no RDMA and this host has no device: the client
  // falls back before sending a byte (no Decline: a server that speaks
  // neither would close on it), counted process-wide.
  ASSERT_EQ(0, call(rch, "Echo"));
  // A peer that does decline (a Linux SMC client without a device): the
  // server shows the Decline's reason on the connection.
  int fd = rrpc_test::raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(0, rrpc__clc_send_decline(fd, RRPC_CLC_DECL_NOSMCDEV));
  std::string conns;
  EXPECT_TRUE(rrpc_test::wait_until([&] {
    conns = curl(port_, "/connections");
    return line_with(conns, {"server", "TCP", "0x0303000", "no SMC"}) != "";
  }, 5000)) << conns;
  std::string json = curl(port_, "/connections?format=json");
  bool code_seen = false;
  for (size_t at = json.find("\"fallback_code\":"); at != std::string::npos;
       at = json.find("\"fallback_code\":", at + 1)) {
    long long code = json_num(json, "fallback_code", at);
    code_seen = code_seen || code == 0x03030000 || code == 0x03030002;
  }
  EXPECT_TRUE(code_seen) << json;
  close(fd);
  std::string vars = curl(port_, "/vars?prefix=rrpc_fallbacks_by_reason_total");
  EXPECT_NE(std::string::npos, vars.find("no SMC")) << vars;
  rrpc_channel_free(rch);
}

TEST_F(Builtin, MalformedRequestGets400AndClosesOnlyItsConnection) {
  Reply r = raw_request(port_, "GET /status HTTP/1.1\r\nBad Header\r\n\r\n");
  EXPECT_EQ(400, r.status) << r.head;
  EXPECT_TRUE(r.closed_by_server);
  r = raw_request(port_, std::string("GET /\x01 HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(400, r.status);
  r = raw_request(port_, "GET /status HTTP/2.0\r\n\r\n");
  EXPECT_EQ(400, r.status);
  r = raw_request(port_, "POST /status HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(405, r.status);
  // The server and the RPC connection are untouched.
  EXPECT_EQ(0, call(ch_, "Echo"));
  r = raw_request(port_, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(200, r.status);
  std::string vars = curl(port_, "/vars?prefix=rrpc_builtin_refused");
  EXPECT_LE(3, var_value(vars, "rrpc_builtin_refused_total{status=\"400\"}")) << vars;
}

TEST_F(Builtin, OversizedRequestGets413) {
  std::string big = "GET /status HTTP/1.1\r\nX-Pad: " + std::string(9000, 'a') + "\r\n\r\n";
  Reply r = raw_request(port_, big);
  EXPECT_EQ(413, r.status) << r.head;
  // A head that never ends is cut at the limit too, not buffered.
  r = raw_request(port_, "GET /" + std::string(200, 'p') + " HTTP/1.1\r\n\r\n");
  EXPECT_EQ(413, r.status);
  r = raw_request(port_, "GET /status HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  EXPECT_EQ(413, r.status);
  EXPECT_EQ(0, call(ch_, "Echo"));
}

TEST_F(Builtin, HeadHasNoBodyAndUnknownPageIs404) {
  Reply r = raw_request(port_, "HEAD /status HTTP/1.1\r\n\r\n");
  EXPECT_EQ(200, r.status);
  EXPECT_TRUE(r.body.empty());
  r = raw_request(port_, "GET /nope HTTP/1.0\r\n\r\n");
  EXPECT_EQ(404, r.status);
}

// A handler that holds its loop thread until the test releases it: the
// connection's loop cannot answer a facts request meanwhile.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;
};

void gate_handler(void *arg, rrpc_server_call *call) {
  Gate *g = static_cast<Gate *>(arg);
  std::unique_lock<std::mutex> l(g->mu);
  g->entered = true;
  g->cv.notify_all();
  g->cv.wait(l, [g] { return g->open; });
  l.unlock();
  rrpc_server_call_respond(call, nullptr);
}

std::string read_reply(int fd) {
  std::string all;
  char buf[65536];
  ssize_t n;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) all.append(buf, static_cast<size_t>(n));
  close(fd);
  return all;
}

TEST(BuiltinLimits, ListingsBeyondTheLimitGet503) {
  rrpc_builtin_options bo{};
  bo.max_concurrent_listings = 1;
  ASSERT_EQ(0, rrpc_builtin_set_options(&bo));
  rrpc_server_options so{};
  so.num_threads = 2;  // listener on loop 0; accepted connections alternate 1, 0, 1, 0 ...
  rrpc_server *srv;
  Gate gate;
  ASSERT_EQ(0, rrpc_server_new(&so, &srv));
  ASSERT_EQ(0, rrpc_server_add_method(srv, "test.Svc", "Gate", gate_handler, &gate));
  // On the loop thread, so holding it holds the loop (not a pool worker).
  ASSERT_EQ(0, rrpc_server_set_method_mode(srv, "test.Svc", "Gate", RRPC_RUN_IN_LOOP));
  ASSERT_EQ(0, rrpc_server_start(srv, "127.0.0.1:0"));
  int port = rrpc_server_port(srv);
  rrpc_channel *ch;
  ASSERT_EQ(0, rrpc_channel_new(("127.0.0.1:" + std::to_string(port)).c_str(), nullptr, &ch));
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_controller_set_timeout_ms(c, 30000);
  std::mutex dmu;
  std::condition_variable dcv;
  bool done = false;
  auto on_done = [](void *arg, rrpc_controller *) {
    auto *p = static_cast<std::tuple<std::mutex *, std::condition_variable *, bool *> *>(arg);
    std::lock_guard<std::mutex> l(*std::get<0>(*p));
    *std::get<2>(*p) = true;
    std::get<1>(*p)->notify_all();
  };
  std::tuple<std::mutex *, std::condition_variable *, bool *> dctx(&dmu, &dcv, &done);
  ASSERT_EQ(0, rrpc_channel_call(ch, "test.Svc", "Gate", c, nullptr, nullptr, on_done, &dctx));
  {
    std::unique_lock<std::mutex> l(gate.mu);
    ASSERT_TRUE(gate.cv.wait_for(l, std::chrono::seconds(10), [&] { return gate.entered; }));
  }
  // The RPC connection's loop (1) is held. http1 lands on loop 0: its
  // listing waits for loop 1. http2 would land on loop 1 (held): opened
  // only to keep the alternation. http3 lands on loop 0: one listing too many.
  int http1 = connect_to(port), http2 = connect_to(port), http3 = connect_to(port);
  ASSERT_GE(http1, 0);
  ASSERT_GE(http2, 0);
  ASSERT_GE(http3, 0);
  const std::string get = "GET /connections HTTP/1.1\r\n\r\n";
  send(http1, get.data(), get.size(), MSG_NOSIGNAL);
  // Loopback delivers at send and epoll's ready list is FIFO, so loop 0
  // takes http1's request (and starts its listing) before http3's.
  send(http3, get.data(), get.size(), MSG_NOSIGNAL);
  std::string r3 = read_reply(http3);
  EXPECT_NE(std::string::npos, r3.find("HTTP/1.1 503")) << r3;
  {
    std::lock_guard<std::mutex> l(gate.mu);
    gate.open = true;
    gate.cv.notify_all();
  }
  std::string r1 = read_reply(http1);
  EXPECT_NE(std::string::npos, r1.find("HTTP/1.1 200")) << r1;
  close(http2);
  {
    std::unique_lock<std::mutex> l(dmu);
    ASSERT_TRUE(dcv.wait_for(l, std::chrono::seconds(10), [&] { return done; }));
  }
  // The slot is free again.
  Reply r = raw_request(port, "GET /connections HTTP/1.1\r\n\r\n");
  EXPECT_EQ(200, r.status);
  rrpc_controller_free(c);
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
  ASSERT_EQ(0, rrpc_builtin_set_options(nullptr));
}

TEST(BuiltinOff, ServerOptionTurnsThePagesOff) {
  rrpc_server_options o{};
  o.no_builtin_services = 1;
  rrpc_server *srv;
  ASSERT_EQ(0, rrpc_server_new(&o, &srv));
  ASSERT_EQ(0, rrpc_server_start(srv, "127.0.0.1:0"));
  Reply r = raw_request(rrpc_server_port(srv), "GET /status HTTP/1.1\r\n\r\n");
  EXPECT_EQ(0, r.status);  // not HTTP: the bytes are a bad baidu_std frame
  EXPECT_TRUE(r.closed_by_server);
  rrpc_server_free(srv);
}

// The Prometheus text format, as far as rrpc uses it: every family is one
// HELP, one TYPE and then its samples, contiguous; names and label syntax
// valid; values numbers.
bool valid_name(const std::string &n) {
  if (n.empty() || std::isdigit(static_cast<unsigned char>(n[0]))) return false;
  for (char c : n)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':') return false;
  return true;
}

// name{k="v",...} value  ->  name, or "" when malformed.
std::string sample_name(const std::string &line) {
  size_t i = 0;
  while (i < line.size() && line[i] != '{' && line[i] != ' ') i++;
  std::string name = line.substr(0, i);
  if (!valid_name(name)) return "";
  if (i < line.size() && line[i] == '{') {
    i++;
    for (;;) {
      size_t eq = line.find('=', i);
      if (eq == std::string::npos || !valid_name(line.substr(i, eq - i)) || eq + 1 >= line.size() ||
          line[eq + 1] != '"')
        return "";
      i = eq + 2;
      while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
      if (i >= line.size()) return "";
      i++;
      if (i < line.size() && line[i] == ',') {
        i++;
        continue;
      }
      if (i < line.size() && line[i] == '}') {
        i++;
        break;
      }
      return "";
    }
  }
  if (i >= line.size() || line[i] != ' ') return "";
  const char *v = line.c_str() + i + 1;
  char *end;
  std::strtod(v, &end);
  if (end == v || *end != '\0') return "";
  return name;
}

// A histogram family's samples are <family>_bucket (with le), _sum and
// _count; each series' buckets never decrease, and its +Inf bucket equals
// its _count. Returns the number of histogram series seen.
int check_prometheus_text(const std::string &text) {
  std::istringstream in(text);
  std::string line, family;
  std::set<std::string> done;
  bool histogram = false;
  std::map<std::string, double> last_bucket, inf_bucket, count;  // by series (labels without le)
  int samples = 0;
  while (std::getline(in, line)) {
    if (line.rfind("# HELP ", 0) == 0) {
      std::string name = line.substr(7, line.find(' ', 7) - 7);
      EXPECT_TRUE(valid_name(name)) << line;
      EXPECT_EQ(0u, done.count(name)) << "family split: " << line;
      if (!family.empty()) done.insert(family);
      family = name;
    } else if (line.rfind("# TYPE ", 0) == 0) {
      histogram = line == "# TYPE " + family + " histogram";
      EXPECT_TRUE(histogram || line == "# TYPE " + family + " counter" || line == "# TYPE " + family + " gauge")
          << line;
    } else {
      std::string name = sample_name(line);
      samples++;
      if (!histogram) {
        EXPECT_EQ(family, name) << "bad line: " << line;
        continue;
      }
      double v = std::stod(line.substr(line.rfind(' ') + 1));
      std::string series = family + line.substr(name.size(), line.rfind(' ') - name.size());
      size_t le = series.find("le=\"");
      if (name == family + "_bucket") {
        EXPECT_NE(std::string::npos, le) << line;
        if (le == std::string::npos) continue;
        std::string bound = series.substr(le + 4, series.find('"', le + 4) - le - 4);
        series.erase(le, bound.size() + 5);
        if (series[series.size() - 2] == ',') series.erase(series.size() - 2, 1);
        if (series.size() >= 2 && series.compare(series.size() - 2, 2, "{}") == 0) series.resize(series.size() - 2);
        EXPECT_GE(v, last_bucket.count(series) ? last_bucket[series] : 0.0) << line;
        last_bucket[series] = v;
        if (bound == "+Inf") inf_bucket[series] = v;
      } else if (name == family + "_count") {
        count[series] = v;
      } else {
        EXPECT_EQ(family + "_sum", name) << "bad line: " << line;
      }
    }
  }
  EXPECT_GT(samples, 10);
  EXPECT_EQ(inf_bucket.size(), count.size());
  for (const auto &c : count) EXPECT_EQ(c.second, inf_bucket[c.first]) << c.first;
  return static_cast<int>(count.size());
}

// Probes and load balancers ask /health; operators ask /version.
TEST_F(Builtin, HealthAndVersion) {
  Reply r = raw_request(port_, "GET /health HTTP/1.1\r\n\r\n");
  EXPECT_EQ(200, r.status) << r.head;
  EXPECT_EQ("OK\n", r.body);
  r = raw_request(port_, "GET /health HTTP/1.1\r\nAccept: text/html\r\n\r\n");
  EXPECT_EQ("OK\n", r.body);  // the same for a browser
  r = raw_request(port_, "GET /version HTTP/1.1\r\n\r\n");
  EXPECT_EQ(200, r.status) << r.head;
  EXPECT_EQ(std::string("rrpc ") + rrpc_version_string() + "\n", r.body);
  EXPECT_EQ(std::string("{\"rrpc_version\":\"") + rrpc_version_string() + "\"}\n",
            curl(port_, "/version?format=json"));
}

// /status says which process this is: version, pid, start time, command line.
TEST_F(Builtin, StatusNamesTheProcess) {
  std::string text = curl(port_, "/status");
  EXPECT_NE(std::string::npos, text.find(std::string("rrpc ") + rrpc_version_string() + " server on port")) << text;
  EXPECT_NE(std::string::npos, text.find("pid " + std::to_string(getpid()) + ", started 20")) << text;
  EXPECT_NE(std::string::npos, text.find("command line: ")) << text;
  EXPECT_NE(std::string::npos, text.find("builtin_unittest")) << text;
  std::string json = curl(port_, "/status?format=json");
  EXPECT_EQ(getpid(), json_num(json, "pid")) << json;
  EXPECT_NE(std::string::npos, json.find(std::string("\"version\":\"") + rrpc_version_string() + "\"")) << json;
  EXPECT_NE(std::string::npos, json.find("\"start_time\":\"20")) << json;
  EXPECT_NE(std::string::npos, json.find("\"command_line\":\"")) << json;
}

// A browser (Accept: text/html) gets HTML: the index links every page,
// /connections is a table, the text pages come escaped in <pre>; curl and
// rrpc_stat keep the text.
TEST_F(Builtin, BrowsersGetHtmlWithLinks) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  const std::string html = "Accept: text/html,application/xhtml+xml\r\n";
  Reply r = raw_request(port_, "GET / HTTP/1.1\r\n" + html + "\r\n");
  EXPECT_NE(std::string::npos, r.head.find("Content-Type: text/html")) << r.head;
  for (const char *page : {"/status", "/connections", "/rdma", "/vars", "/flags", "/metrics", "/health", "/version"})
    EXPECT_NE(std::string::npos, r.body.find(std::string("<a href=\"") + page + "\">")) << page << r.body;
  r = raw_request(port_, "GET /connections?detail=1 HTTP/1.1\r\n" + html + "\r\n");
  EXPECT_NE(std::string::npos, r.body.find("<th>Peer</th>")) << r.body;
  EXPECT_NE(std::string::npos, r.body.find("<th>GID</th>")) << r.body;
  EXPECT_NE(std::string::npos, r.body.find("<td>server</td>")) << r.body;
  r = raw_request(port_, "GET /status HTTP/1.1\r\n" + html + "\r\n");
  EXPECT_NE(std::string::npos, r.body.find("<pre>")) << r.body;
  EXPECT_NE(std::string::npos, r.body.find("test.Svc.Echo")) << r.body;
  EXPECT_EQ(std::string::npos, curl(port_, "/").find("<")) << "curl gets text";
  EXPECT_EQ(std::string::npos, curl(port_, "/connections?detail=1").find("<td>"));
}

// handlers_in_pool shows where handlers run (the pool, by default), not the
// compatibility option as given (0 by default).
TEST_F(Builtin, FlagsShowWhereHandlersRun) {
  std::string flags = curl(port_, "/flags");
  EXPECT_NE("", line_with(flags, {"server.handlers_in_pool", " 1 "})) << flags;
  EXPECT_NE("", line_with(flags, {"server.handlers_in_loop", " 0 "})) << flags;
}

TEST_F(Builtin, MetricsPassTheTextFormatCheckAndPromtool) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  EXPECT_EQ(-RRPC_EREQUEST, call(ch_, "Fail"));
  std::string text = curl(port_, "/metrics");
  // Histograms (they add up across instances, unlike the percentiles): the
  // server's, each method's and the channel's.
  EXPECT_GE(check_prometheus_text(text), 4);
  EXPECT_NE(std::string::npos, text.find("# TYPE rrpc_method_latency_seconds histogram\n")) << text;
  std::string echo = "{port=\"" + std::to_string(port_) + "\",service=\"test.Svc\",method=\"Echo\"";
  EXPECT_NE(std::string::npos, text.find("rrpc_method_latency_seconds_bucket" + echo + ",le=\"+Inf\"} 1\n")) << text;
  EXPECT_NE(std::string::npos, text.find("rrpc_method_latency_seconds_count" + echo + "} 1\n")) << text;
  EXPECT_NE(std::string::npos, text.find("rrpc_method_latency_seconds_sum" + echo + "} ")) << text;
  EXPECT_NE(std::string::npos, text.find("rrpc_method_latency_p99_seconds{")) << text;
  EXPECT_NE(std::string::npos, text.find("rrpc_process_resident_memory_bytes ")) << text;
  int has = -1;
  run("command -v promtool >/dev/null", &has);
  if (has != 0) {
    std::printf("promtool not installed: only the text-format check ran\n");
    return;
  }
  int rc = -1;
  std::string out = run("curl -sS -m 5 http://127.0.0.1:" + std::to_string(port_) +
                            "/metrics | promtool check metrics 2>&1",
                        &rc);
  EXPECT_EQ(0, rc) << out;
}

TEST_F(Builtin, RrpcStatReadsThePages) {
  ASSERT_EQ(0, call(ch_, "Echo"));
  std::string tool = rrpc_stat_path();
  // Bazel runs tests in a sandbox without the make build's tools/ (it
  // builds //:rrpc_stat on its own); make test always has it.
  if (getenv("TEST_SRCDIR") != nullptr && access(tool.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << tool;
  ASSERT_EQ(0, access(tool.c_str(), X_OK)) << tool;
  std::string target = " 127.0.0.1:" + std::to_string(port_);
  int rc = -1;
  std::string out = run(tool + target + " connections", &rc);
  EXPECT_EQ(0, rc) << out;
  EXPECT_NE(std::string::npos, out.find("Transport")) << out;
  EXPECT_NE(std::string::npos, out.find("server TCP")) << out;
  out = run(tool + target + " connections -d", &rc);
  EXPECT_EQ(0, rc);
  EXPECT_NE(std::string::npos, out.find("PeerRing")) << out;
  out = run(tool + target + " status", &rc);
  EXPECT_EQ(0, rc);
  EXPECT_NE(std::string::npos, out.find("test.Svc.Echo")) << out;
  out = run(tool + target + " vars", &rc);
  EXPECT_EQ(0, rc);
  EXPECT_NE(std::string::npos, out.find("rrpc_method_calls_total")) << out;
  out = run(tool + target + " devices", &rc);
  EXPECT_EQ(0, rc) << out;
  out = run(tool + target + " status -j", &rc);
  EXPECT_EQ(0, rc);
  EXPECT_EQ('{', out.empty() ? 0 : out[0]) << out;
  // Two refreshes, bounded by the count.
  out = run(tool + target + " status --watch 1 --count 2", &rc);
  EXPECT_EQ(0, rc);
  size_t first = out.find("test.Svc.Echo");
  ASSERT_NE(std::string::npos, first) << out;
  EXPECT_NE(std::string::npos, out.find("test.Svc.Echo", first + 1)) << out;
  // Errors are reported, not hidden.
  out = run(tool + " 127.0.0.1:1 status 2>&1", &rc);
  EXPECT_NE(0, rc) << out;
  out = run(tool + target + " nosuchpage 2>&1", &rc);
  EXPECT_NE(0, rc) << out;
}

}  // namespace
