// idle_conns.cc - what N idle RDMA connections cost, measured on each side
// (issue 12's "before" numbers and the harness for its "after").
//
// One command (inside the Soft-RoCE VM, or on a host with an RDMA port):
//   build/bench/idle_conns --n=1000 [--rdma_ring_size=16384 --rdma_sq_size=16 --rdma_rq_size=16]
// forks a server process (use_rdma) and, in the parent, a client that opens
// N channels (use_rdma, one connection each), makes one Echo call on each
// and checks the controller's used_rdma. The costs are read on each side
// from its own /proc/self (VmPin, VmRSS, fds, maps lines, the RSS of the
// provider's queue mappings from smaps), malloc's bytes in use, rrpc_rdma_get_stats
// (pool bytes, RDMA connections, messages: writes, CDCs, completions,
// wake-ups, grants, background jobs), the process's CPU time (getrusage:
// per_conn_cpu_ms is what setting up one connection cost that side) and
// `rdma resource show qp|cq|mr|pd`
// (counted by pid; when the rdma tool is missing those fields are -1 and
// res_src=none). The server measures itself inside an "idle.Report" call.
//
// Baseline: a control connection (RDMA too) is up before anything is
// measured, so the runtime's fixed costs (the registered pool, loops,
// device context) are in the baseline and per_conn_* = (after - before) / N
// is what one more idle connection costs that side.
//
// Output: one key=value line per run, starting "idle_conns ", keys of the
// server prefixed "s_", of the client "c_". Exit status 0 only if all N
// calls succeeded over RDMA. --server=ip:port measures against a server
// started separately with --role=server (then the s_ fields are its).
//
// Two modes after the setup (issue 12's other "Done when" points):
// --traffic_seconds=S runs S one-second waves; in each a fresh random
// --traffic_percent of the connections make back-to-back echo calls of
// --traffic_min_size..--traffic_max_size bytes (log-uniform), each answer
// checked byte for byte; the traffic_* fields say sent/answered/failed and
// whether any connection was set up again (test/rdma/thousand-conns.sh).
// --idle_probe_seconds=N, on one more connection: the first 64 B call after
// N idle seconds vs warm calls, and the first second of 1 MiB calls after N
// idle seconds vs warm seconds (idle_probe lines with the ratios), beside a
// raw socketpair echo's first round trip after idle (what the machine alone
// adds); --idle_probe_busy_loops=2 keeps a VM's vCPUs from halting meanwhile;
// --idle_probe_background=N has N other connections make paced 64 B calls
// throughout, so that only the probe's connection idles.
#include <fcntl.h>
#include <gflags/gflags.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dirent.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/detail.h"
#include "rrpc/cxx/flags.h"
#include "rrpc/rrpc.h"

DEFINE_int32(n, 100, "idle connections to open");
DEFINE_string(role, "both", "both: fork a server, run the client; server: serve only (for --server)");
DEFINE_string(server, "", "ip:port of a running `idle_conns --role=server` (default: fork one)");
DEFINE_string(listen, "", "server address (ip or ip:port); default $RXE_VM_ADDR, "
              "$RRPC_TEST_RDMA_ADDR or 127.0.0.1, port 0");
DEFINE_int32(concurrency, 1, "connections being set up at once (client threads)");
DEFINE_int32(call_timeout_ms, 10000, "timeout of each call (the first one includes the handshake)");
DEFINE_int32(report_timeout_ms, 300000, "timeout of the idle.Report calls: the server lists its "
             "rdma resources there, which takes seconds per thousand connections under emulation");
DEFINE_int32(hold_seconds, 0, "after reporting, keep the connections open this long (to look at "
             "them with rrpc_stat or `rdma resource show`)");
DEFINE_int32(max_seconds, 300, "bound on the setup phase: past it no more connections are opened "
             "and the run reports how far it got (stopped=time)");
DEFINE_bool(list_resources, true, "count QPs/CQs/MRs/PDs with `rdma resource show` (seconds per "
            "thousand connections under emulation; false: those fields are -1)");
DEFINE_int32(traffic_seconds, 0, "after setup, this many one-second waves: in each, a fresh random "
             "--traffic_percent of the connections make back-to-back checked echo calls");
DEFINE_int32(traffic_percent, 10, "share of the connections that carry traffic in each wave");
DEFINE_int32(traffic_min_size, 64, "smallest request of the traffic waves (bytes)");
DEFINE_int32(traffic_max_size, 256 * 1024, "largest request of the traffic waves (bytes; sizes are "
             "log-uniform in between)");
DEFINE_uint64(traffic_seed, 0, "seed of the waves' choices (0: from the clock; printed)");
DEFINE_int32(idle_probe_seconds, 0, "after setup, on one more connection: warm 64 B latency and "
             "1 MiB throughput, then this many seconds idle, then the first call's latency and the "
             "first second's throughput, and their ratios to the warm ones");
DEFINE_int32(idle_probe_busy_loops, 0, "during the idle probe, this many nice-19 busy-loop processes: they keep "
             "the machine's CPUs out of their idle halt (a VM's vCPUs halt when idle, which alone "
             "makes any first round trip after idle slow) and give way to everything else");
DEFINE_int32(idle_probe_background, 0, "during the idle probe, this many other connections each make a 64 B "
             "call every --idle_probe_background_gap_us: only the probe's connection idles, as on a "
             "server whose other clients keep it busy (and the machine's CPUs out of their idle halt)");
DEFINE_int32(idle_probe_background_gap_us, 1000, "pause between two background calls on one connection "
             "(--idle_probe_background)");
DEFINE_int32(idle_probe_rounds, 3, "idle periods of --idle_probe_seconds, one after the other");

namespace {

using Clock = std::chrono::steady_clock;
using Metrics = std::map<std::string, long long>;

// ---- what one process costs -------------------------------------------------------------

long long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long v = -1;
  size_t klen = strlen(key);
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      v = atoll(line + klen + 1);
      break;
    }
  }
  fclose(f);
  return v;
}

long long count_fds() {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  long long n = 0;
  while (struct dirent *e = readdir(d)) {
    if (e->d_name[0] != '.') n++;
  }
  closedir(d);
  return n - 1;  // the directory stream's own fd
}

long long count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  long long n = 0;
  int c;
  while ((c = fgetc(f)) != EOF) n += (c == '\n');
  fclose(f);
  return n;
}

// RSS of the verbs provider's mappings (/dev/infiniband/uverbs*: the
// queues rxe maps into the process): what of the RSS is queue buffers.
long long uverbs_rss_kib() {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) return -1;
  char line[512];
  bool in = false;
  long long sum = 0, v;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) in = strstr(line, "uverbs") != nullptr;
    else if (in && sscanf(line, "Rss: %lld kB", &v) == 1) sum += v;
  }
  fclose(f);
  return sum;
}

// The thread ids of this process: the rdma tool names the thread that created
// an object ("pid" is its tid), usually a loop thread.
std::set<long> own_tids() {
  std::set<long> t;
  DIR *d = opendir("/proc/self/task");
  if (!d) return t;
  while (struct dirent *e = readdir(d)) {
    if (e->d_name[0] != '.') t.insert(atol(e->d_name));
  }
  closedir(d);
  return t;
}

// Objects of one `rdma resource show KIND` listing created by a thread of
// this process. -1 when the tool is missing or fails.
long long rdma_res_count(const char *kind, const std::set<long> &tids) {
  std::string cmd = std::string("rdma resource show ") + kind + " 2>/dev/null";
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char line[1024];
  long long n = 0;
  while (fgets(line, sizeof line, p)) {
    const char *at = strstr(line, " pid ");
    if (at && tids.count(atol(at + 5))) n++;
  }
  int st = pclose(p);
  return (st == 0) ? n : -1;
}

Metrics measure() {
  Metrics m;
  struct rusage ru;  // first: what the measuring below costs is not the connections'
  if (getrusage(RUSAGE_SELF, &ru) == 0)  // the process's CPU, all threads
    m["cpu_ms"] = (long long)(ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000 +
                              ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000);
  m["pin_kib"] = status_kib("VmPin");
  m["lck_kib"] = status_kib("VmLck");
  m["rss_kib"] = status_kib("VmRSS");
  m["queues_kib"] = uverbs_rss_kib();
  m["heap_kib"] = (long long)(mallinfo2().uordblks / 1024);  // malloc'd and in use
  m["fds"] = count_fds();
  m["maps"] = count_lines("/proc/self/maps");
  std::set<long> tids = own_tids();
  for (const char *k : {"qp", "cq", "mr", "pd"}) m[k] = FLAGS_list_resources ? rdma_res_count(k, tids) : -1;
  m["res_src"] = m["qp"] >= 0 ? 1 : 0;  // 1: rdma tool, 0: none
  rrpc_rdma_stats st;
  if (rrpc_rdma_get_stats(&st) == 0) {
    m["pool_bytes"] = (long long)st.pool_bytes;
    m["rdma_conns"] = (long long)st.connections_rdma;
    m["fallbacks"] = (long long)st.connections_fallback;
    // What one connection's setup costs in messages and verbs work:
    m["writes"] = (long long)st.writes;
    m["cdcs"] = (long long)st.cdc_sent;
    m["cqes"] = (long long)st.completions;
    m["wakeups"] = (long long)st.wakeups;
    m["grants"] = (long long)st.piece_grants;
    m["bg_jobs"] = (long long)st.bg_jobs_queued;
  }
  return m;
}

std::string serialize(const Metrics &m) {
  std::string s;
  for (auto &kv : m) s += kv.first + "=" + std::to_string(kv.second) + " ";
  return s;
}

Metrics parse(const std::string &s) {
  Metrics m;
  std::istringstream in(s);
  std::string kv;
  while (in >> kv) {
    size_t eq = kv.find('=');
    if (eq != std::string::npos) m[kv.substr(0, eq)] = atoll(kv.c_str() + eq + 1);
  }
  return m;
}

// ---- limits -------------------------------------------------------------------------------

// N connections need ~2N fds a side today, and every ring is pinned: raise
// the soft limits to the hard ones (and the hard ones where we may).
void raise_limits(int n) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    rlim_t want = (rlim_t)n * 4 + 4096;
    if (r.rlim_max != RLIM_INFINITY && r.rlim_max < want) {
      struct rlimit h = {want, want};
      if (setrlimit(RLIMIT_NOFILE, &h) == 0) r = h;
    }
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_MEMLOCK, &inf) != 0 && getrlimit(RLIMIT_MEMLOCK, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_MEMLOCK, &r);
  }
}

long long limit_of(int res) {
  struct rlimit r;
  if (getrlimit(res, &r) != 0) return -1;
  return r.rlim_cur == RLIM_INFINITY ? -1 : (long long)r.rlim_cur;
}

// The RDMA runtime from the rdma_* flags, as a Server or Channel of the C++
// face starts it (every flag applies, --rdma_elastic too). 0 or -1.
int start_rdma_runtime() { return rrpc::detail::PrepareRdma() == 0 ? 0 : -1; }

// ---- server -------------------------------------------------------------------------------

void echo_handler(void *, rrpc_server_call *call) {
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

// Takes the request, answers nothing: one-way throughput (--idle_probe_seconds).
void sink_handler(void *, rrpc_server_call *call) { rrpc_server_call_respond(call, nullptr); }

// Measures this (the server) process: runs on a pool thread, so the popen of
// the rdma tool blocks no loop.
void report_handler(void *, rrpc_server_call *call) {
  std::string s = serialize(measure());
  rrpc_iobuf *out = nullptr;
  rrpc_iobuf_new(&out);
  rrpc_iobuf_append(out, s.data(), s.size());
  rrpc_server_call_respond(call, out);
  rrpc_iobuf_free(out);
}

std::string default_host() {
  for (const char *v : {"RXE_VM_ADDR", "RRPC_TEST_RDMA_ADDR"}) {
    const char *a = getenv(v);
    if (a && *a) return a;
  }
  return "127.0.0.1";
}

rrpc_server *start_server() {
  if (start_rdma_runtime() != 0) return nullptr;
  rrpc_server_options so;
  memset(&so, 0, sizeof so);
  so.use_rdma = 1;
  rrpc_server *s = nullptr;
  if (rrpc_server_new(&so, &s) != 0) return nullptr;
  rrpc_server_add_method(s, "idle.Bench", "Echo", echo_handler, nullptr);
  rrpc_server_add_method(s, "idle.Bench", "Report", report_handler, nullptr);
  rrpc_server_add_method(s, "idle.Bench", "Sink", sink_handler, nullptr);
  rrpc_server_set_method_mode(s, "idle.Bench", "Echo", RRPC_RUN_IN_LOOP);
  rrpc_server_set_method_mode(s, "idle.Bench", "Sink", RRPC_RUN_IN_LOOP);
  std::string addr = FLAGS_listen.empty() ? default_host() : FLAGS_listen;
  if (addr.find(':') == std::string::npos) addr += ":0";
  int rc = rrpc_server_start(s, addr.c_str());
  if (rc != 0) {
    fprintf(stderr, "idle_conns: server start on %s: %s\n", addr.c_str(), rrpc_strerror(rc));
    rrpc_server_free(s);
    return nullptr;
  }
  return s;
}

// ---- client -------------------------------------------------------------------------------

struct Call {
  rrpc_controller *cntl = nullptr;
  rrpc_iobuf *resp = nullptr;
  Call() {
    rrpc_controller_new(&cntl);
    rrpc_iobuf_new(&resp);
  }
  ~Call() {
    rrpc_iobuf_free(resp);
    rrpc_controller_free(cntl);
  }
  int run(rrpc_channel *ch, const char *method, int timeout_ms = FLAGS_call_timeout_ms) {
    rrpc_controller_reset(cntl);
    rrpc_iobuf_clear(resp);
    rrpc_controller_set_timeout_ms(cntl, timeout_ms);
    static const char kPing[] = "ping";
    rrpc_iobuf *req = nullptr;
    rrpc_iobuf_new(&req);
    rrpc_iobuf_append(req, kPing, sizeof kPing - 1);
    int rc = rrpc_channel_call(ch, "idle.Bench", method, cntl, req, resp, nullptr, nullptr);
    rrpc_iobuf_free(req);
    return rc;
  }
  std::string text() const {
    std::string s(rrpc_iobuf_length(resp), '\0');
    rrpc_iobuf_copy_out(resp, 0, &s[0], s.size());
    return s;
  }
};

rrpc_channel *new_channel(const std::string &addr) {
  rrpc_channel_options co;
  memset(&co, 0, sizeof co);
  co.use_rdma = 1;
  co.timeout_ms = FLAGS_call_timeout_ms;
  co.connect_timeout_ms = FLAGS_call_timeout_ms;
  co.max_retry = -1;  // one connection per channel: a retry would hide a failure
  rrpc_channel *ch = nullptr;
  return rrpc_channel_new(addr.c_str(), &co, &ch) == 0 ? ch : nullptr;
}

struct Setup {
  std::vector<rrpc_channel *> chans;
  std::atomic<int> next{0}, ok{0}, rdma{0};
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::string stopped = "none";
  Clock::time_point deadline;
};

void fail(Setup *st, const std::string &why) {
  std::lock_guard<std::mutex> g(st->mu);
  if (!st->stop.exchange(true)) st->stopped = why;
}

void setup_worker(Setup *st, const std::string &addr) {
  Call c;
  for (;;) {
    if (st->stop.load()) return;
    if (Clock::now() > st->deadline) return fail(st, "time");
    int i = st->next.fetch_add(1);
    if (i >= (int)st->chans.size()) return;
    rrpc_channel *ch = new_channel(addr);
    if (!ch) return fail(st, "channel_new");
    st->chans[i] = ch;
    int rc = c.run(ch, "Echo");
    if (rc != 0) {
      std::string t = rrpc_controller_error_text(c.cntl);
      for (char &x : t) x = (x == ' ' ? '_' : x);
      return fail(st, std::string(rrpc_err_name(rc)) + ":" + t);
    }
    st->ok++;
    if (rrpc_controller_used_rdma(c.cntl)) st->rdma++;
  }
}

std::string fmt(double v) {
  char b[64];
  snprintf(b, sizeof b, "%.3f", v);
  return b;
}

// ---- traffic waves (--traffic_seconds) --------------------------------------------------------

// Requests are slices of one random buffer at a per-call offset, so each
// echoed response is checked against the slice it must equal, no copy kept.
constexpr size_t kTrafficOffsets = 4096;

struct Traffic {
  std::string bytes;
  std::atomic<long long> sent{0};
  long long answered = 0, failed = 0, corrupt = 0, not_rdma = 0, bytes_sent = 0;  // driver thread only
  std::string first_error;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<struct TrafficCall *> done;  // completed calls for the driver, under mu
};

// One connection's call in flight; reissued by the driver until its wave ends.
struct TrafficCall {
  Traffic *t = nullptr;
  rrpc_channel *ch = nullptr;
  Call call;
  rrpc_iobuf *req = nullptr;
  size_t off = 0, len = 0;
  TrafficCall() { rrpc_iobuf_new(&req); }
  ~TrafficCall() { rrpc_iobuf_free(req); }
};

// Loop thread: only hands the call to the driver (nothing here may block).
void traffic_done(void *arg, rrpc_controller *) {
  TrafficCall *c = static_cast<TrafficCall *>(arg);
  std::lock_guard<std::mutex> g(c->t->mu);
  c->t->done.push_back(c);
  c->t->cv.notify_one();
}

size_t traffic_size(std::mt19937_64 &rng) {
  double lo = std::log((double)FLAGS_traffic_min_size), hi = std::log((double)FLAGS_traffic_max_size);
  double v = std::exp(std::uniform_real_distribution<double>(lo, hi)(rng));
  size_t n = (size_t)std::llround(v);
  return std::min<size_t>(std::max<size_t>(n, (size_t)FLAGS_traffic_min_size), (size_t)FLAGS_traffic_max_size);
}

int traffic_issue(TrafficCall *c, std::mt19937_64 &rng) {
  c->len = traffic_size(rng);
  c->off = (size_t)(rng() % kTrafficOffsets);
  rrpc_iobuf_clear(c->req);
  rrpc_iobuf_append(c->req, c->t->bytes.data() + c->off, c->len);
  rrpc_controller_reset(c->call.cntl);
  rrpc_iobuf_clear(c->call.resp);
  rrpc_controller_set_timeout_ms(c->call.cntl, FLAGS_call_timeout_ms);
  c->t->sent++;
  c->t->bytes_sent += (long long)c->len;
  int rc = rrpc_channel_call(c->ch, "idle.Bench", "Echo", c->call.cntl, c->req, c->call.resp, traffic_done, c);
  if (rc != 0) c->t->failed++;  // refused up front: done never runs
  return rc;
}

// Driver thread: the verdict on one completed call.
void traffic_check(TrafficCall *c) {
  Traffic *t = c->t;
  if (rrpc_controller_failed(c->call.cntl)) {
    t->failed++;
    if (t->first_error.empty()) t->first_error = rrpc_controller_error_text(c->call.cntl);
  } else if (!rrpc_controller_used_rdma(c->call.cntl)) {
    t->not_rdma++;
  } else if (rrpc_iobuf_length(c->call.resp) != c->len ||
             c->call.text().compare(0, c->len, t->bytes, c->off, c->len) != 0) {
    t->corrupt++;
  } else {
    t->answered++;
  }
}

// One wave: `picked` connections call back to back until `end`; returns
// once every call came back, or false when one did not within twice the
// call timeout (then the calls still out keep their memory: we exit soon).
bool traffic_wave(Traffic *t, const std::vector<rrpc_channel *> &picked, Clock::time_point end,
                  std::mt19937_64 &rng) {
  std::vector<TrafficCall *> calls;
  for (rrpc_channel *ch : picked) {
    TrafficCall *c = new TrafficCall;
    c->t = t;
    c->ch = ch;
    calls.push_back(c);
  }
  size_t active = 0;
  for (TrafficCall *c : calls) active += traffic_issue(c, rng) == 0;
  auto bound = std::chrono::milliseconds(2 * FLAGS_call_timeout_ms);
  while (active > 0) {
    std::vector<TrafficCall *> ready;
    {
      std::unique_lock<std::mutex> g(t->mu);
      if (!t->cv.wait_for(g, bound, [&] { return !t->done.empty(); })) return false;
      ready.swap(t->done);
    }
    for (TrafficCall *c : ready) {
      traffic_check(c);
      if (Clock::now() >= end || traffic_issue(c, rng) != 0) active--;
    }
  }
  for (TrafficCall *c : calls) delete c;
  return true;
}

// The waves; their key=value fields for the report line. *ok is false when
// any call was lost, failed, fell back to TCP or came back wrong, or when a
// connection was set up again (no reconnect hides a failure).
std::string run_traffic(const std::vector<rrpc_channel *> &chans, bool *ok) {
  uint64_t seed = FLAGS_traffic_seed ? FLAGS_traffic_seed : (uint64_t)Clock::now().time_since_epoch().count();
  std::mt19937_64 rng(seed);
  Traffic t;
  t.bytes.resize((size_t)FLAGS_traffic_max_size + kTrafficOffsets);
  for (char &b : t.bytes) b = (char)(rng() & 0xff);
  size_t per_wave = std::max<size_t>(1, chans.size() * (size_t)FLAGS_traffic_percent / 100);
  std::vector<size_t> idx(chans.size());
  for (size_t i = 0; i < idx.size(); i++) idx[i] = i;
  std::set<size_t> touched;
  rrpc_rdma_stats before, after;
  rrpc_rdma_get_stats(&before);
  auto t0 = Clock::now();
  bool finished = !chans.empty();
  int waves = 0;
  for (; finished && waves < FLAGS_traffic_seconds; waves++) {
    for (size_t i = 0; i < per_wave; i++) std::swap(idx[i], idx[i + rng() % (idx.size() - i)]);
    std::vector<rrpc_channel *> picked;
    for (size_t i = 0; i < per_wave; i++) {
      picked.push_back(chans[idx[i]]);
      touched.insert(idx[i]);
    }
    finished = traffic_wave(&t, picked, t0 + std::chrono::seconds(waves + 1), rng);
  }
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  rrpc_rdma_get_stats(&after);
  long long reconnects = (long long)(after.connections_rdma + after.connections_fallback) -
                         (long long)(before.connections_rdma + before.connections_fallback);
  *ok = finished && t.sent.load() == t.answered && t.failed == 0 && t.corrupt == 0 && t.not_rdma == 0 &&
        reconnects == 0;
  std::string e = t.first_error;
  for (char &x : e) x = (x == ' ' ? '_' : x);
  return " traffic_waves=" + std::to_string(waves) + " traffic_conns_per_wave=" + std::to_string(per_wave) +
         " traffic_conns_touched=" + std::to_string(touched.size()) + " traffic_s=" + fmt(secs) +
         " traffic_sent=" + std::to_string(t.sent.load()) + " traffic_answered=" + std::to_string(t.answered) +
         " traffic_failed=" + std::to_string(t.failed) + " traffic_corrupt=" + std::to_string(t.corrupt) +
         " traffic_not_rdma=" + std::to_string(t.not_rdma) + " traffic_reconnects=" + std::to_string(reconnects) +
         " traffic_mib=" + fmt((double)t.bytes_sent / (1 << 20)) + " traffic_seed=" + std::to_string(seed) +
         " traffic_c_grants=" + std::to_string(after.piece_grants - before.piece_grants) +
         " traffic_c_bind_waits=" + std::to_string(after.piece_bind_waits - before.piece_bind_waits) +
         " traffic_stalled=" + (finished ? "0" : "1") + (e.empty() ? "" : " traffic_first_error=" + e) +
         " traffic_ok=" + (*ok ? "1" : "0");
}

// ---- a busy connection after idle (--idle_probe_seconds) ------------------------------------

// Microseconds of one synchronous call of `req` to `method`; -1 on failure.
double timed_call(rrpc_channel *ch, const char *method, const rrpc_iobuf *req, Call *c) {
  rrpc_controller_reset(c->cntl);
  rrpc_iobuf_clear(c->resp);
  rrpc_controller_set_timeout_ms(c->cntl, FLAGS_call_timeout_ms);
  auto t0 = Clock::now();
  int rc = rrpc_channel_call(ch, "idle.Bench", method, c->cntl, req, c->resp, nullptr, nullptr);
  double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  return rc == 0 && rrpc_controller_used_rdma(c->cntl) ? us : -1;
}

// MiB/s of back-to-back 1 MiB requests for one second; -1 on failure.
double one_second_mib_s(rrpc_channel *ch, const rrpc_iobuf *mib, Call *c) {
  auto t0 = Clock::now(), end = t0 + std::chrono::seconds(1);
  long long n = 0;
  while (Clock::now() < end) {
    if (timed_call(ch, "Sink", mib, c) < 0) return -1;
    n++;
  }
  return (double)n / std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median (us) of 50 timed round trips after 10 not counted; -1 when one
// fails (`one` returns -1).
double warm_median_us(const std::function<double()> &one) {
  std::vector<double> v;
  for (int i = 0; i < 60; i++) {
    double us = one();
    if (us < 0) return -1;
    if (i >= 10) v.push_back(us);
  }
  return median(v);
}

// Median latency (us) of 50 64 B calls, after 10 not counted; -1 on failure.
double warm_latency_us(rrpc_channel *ch, const rrpc_iobuf *small, Call *c) {
  return warm_median_us([&] { return timed_call(ch, "Echo", small, c); });
}

// The raw reference: a forked process echoes 64 B messages over a
// socketpair; both sides block in read between them, as rrpc's loops block
// in epoll. The child only reads, writes and exits (async-signal-safe after
// a fork of a threaded process).
struct RawEcho {
  int fd = -1;
  pid_t pid = -1;
};

bool io_full(int fd, char *p, size_t n, bool wr) {
  while (n > 0) {
    ssize_t k = wr ? write(fd, p, n) : read(fd, p, n);
    if (k <= 0 && !(k < 0 && errno == EINTR)) return false;
    if (k > 0) p += k, n -= (size_t)k;
  }
  return true;
}

bool raw_start(RawEcho *r) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return false;
  r->pid = fork();
  if (r->pid == 0) {
    close(sv[0]);
    char m[64];
    while (io_full(sv[1], m, sizeof m, false) && io_full(sv[1], m, sizeof m, true)) {
    }
    _exit(0);
  }
  close(sv[1]);
  r->fd = sv[0];
  return r->pid > 0;
}

void raw_stop(RawEcho *r) {
  if (r->fd >= 0) close(r->fd);  // the child sees EOF and exits
  if (r->pid > 0) waitpid(r->pid, nullptr, 0);
}

// Microseconds of one raw round trip; -1 on failure.
double raw_rtt_us(RawEcho *r) {
  char m[64];
  memset(m, 'r', sizeof m);
  auto t0 = Clock::now();
  bool ok = io_full(r->fd, m, sizeof m, true) && io_full(r->fd, m, sizeof m, false);
  return ok ? std::chrono::duration<double, std::micro>(Clock::now() - t0).count() : -1;
}

// As warm_latency_us, for the raw reference.
double raw_warm_us(RawEcho *r) {
  return warm_median_us([r] { return raw_rtt_us(r); });
}

// Per round: after an idle period, the first 64 B call's latency; after
// another, the first second's 1 MiB throughput. Each against the warm
// figure taken just before and just after it (their mean), so that a host
// whose load drifts during the round moves the reference too. One
// "idle_probe" line per round and a summary with the medians.
// --idle_probe_busy_loops: children that only spin, at the lowest
// priority; killed when the probe ends. A forked child of this threaded
// process makes nothing but system calls.
std::vector<pid_t> start_busy_loops(int n) {
  std::vector<pid_t> pids;
  pid_t self = getpid();
  for (int i = 0; i < n; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      // Dies with us, and holds none of our fds: neither the pipe whose
      // closing ends the forked server nor whoever reads our output.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != self) _exit(0);  // we died before the line above (the new parent may not be pid 1)
      int null = open("/dev/null", O_RDWR);
      if (null >= 0) {
        dup2(null, 1);
        dup2(null, 2);
      }
      syscall(SYS_close_range, 3u, ~0u, 0u);
      setpriority(PRIO_PROCESS, 0, 19);
      for (volatile unsigned long x = 0;; x++) {
      }
    }
    if (pid > 0) pids.push_back(pid);
  }
  return pids;
}

void stop_busy_loops(const std::vector<pid_t> &pids) {
  for (pid_t p : pids) kill(p, SIGKILL);
  for (pid_t p : pids) waitpid(p, nullptr, 0);
}

// --idle_probe_background: other connections of this client that make
// paced 64 B calls while the probe's connection idles (and while the warm
// figures are taken: the reference sees the same load). Each thread has its
// own channel, so its own connection; failures are counted and fail the probe.
class Background {
 public:
  Background(const std::string &addr, int n, int gap_us) {
    for (int i = 0; i < n; i++) {
      rrpc_channel *ch = new_channel(addr);
      if (ch == nullptr) {
        failed_++;
        continue;
      }
      threads_.emplace_back([this, ch, gap_us] { run(ch, gap_us); });
    }
  }
  ~Background() { stop(); }
  void stop() {
    stop_ = true;
    for (auto &t : threads_) t.join();
    threads_.clear();
  }
  long long calls() const { return calls_; }
  long long failed() const { return failed_; }

 private:
  void run(rrpc_channel *ch, int gap_us) {
    Call c;
    rrpc_iobuf *small = nullptr;
    rrpc_iobuf_new(&small);
    std::string s64(64, 'b');
    rrpc_iobuf_append(small, s64.data(), s64.size());
    while (!stop_) {
      (timed_call(ch, "Echo", small, &c) >= 0 ? calls_ : failed_)++;
      if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));  // pacing, not sync
    }
    rrpc_iobuf_free(small);
    rrpc_channel_free(ch);
  }
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<long long> calls_{0}, failed_{0};
};

bool run_idle_probe(const std::string &addr) {
  std::vector<pid_t> busy = start_busy_loops(FLAGS_idle_probe_busy_loops);
  Background background(addr, FLAGS_idle_probe_background, FLAGS_idle_probe_background_gap_us);
  rrpc_channel *ch = new_channel(addr);
  Call c;
  rrpc_iobuf *small = nullptr, *mib = nullptr;
  rrpc_iobuf_new(&small);
  rrpc_iobuf_new(&mib);
  std::string s64(64, 'p'), s1m(size_t{1} << 20, 'm');
  rrpc_iobuf_append(small, s64.data(), s64.size());
  rrpc_iobuf_append(mib, s1m.data(), s1m.size());
  bool ok = ch && timed_call(ch, "Echo", small, &c) >= 0;
  std::vector<double> lat_ratio, tput_ratio, raw_ratio;
  RawEcho raw;
  ok = ok && raw_start(&raw);
  auto idle = [] { std::this_thread::sleep_for(std::chrono::seconds(FLAGS_idle_probe_seconds)); };  // measured
  for (int r = 0; ok && r < FLAGS_idle_probe_rounds; r++) {
    double lat_before = warm_latency_us(ch, small, &c);
    idle();
    double first_us = timed_call(ch, "Echo", small, &c);
    double lat_after = warm_latency_us(ch, small, &c);
    double mib_before = one_second_mib_s(ch, mib, &c);
    idle();
    double first_mib = one_second_mib_s(ch, mib, &c);
    double mib_after = one_second_mib_s(ch, mib, &c);
    double raw_before = raw_warm_us(&raw);
    idle();
    double raw_first = raw_rtt_us(&raw);
    double raw_after = raw_warm_us(&raw);
    ok = lat_before > 0 && first_us > 0 && lat_after > 0 && mib_before > 0 && first_mib > 0 && mib_after > 0 &&
         raw_before > 0 && raw_first > 0 && raw_after > 0;
    double warm_us = (lat_before + lat_after) / 2, warm_mib = (mib_before + mib_after) / 2;
    lat_ratio.push_back(ok ? first_us / warm_us : -1);
    tput_ratio.push_back(ok ? first_mib / warm_mib : -1);
    raw_ratio.push_back(ok ? raw_first / ((raw_before + raw_after) / 2) : -1);
    printf("idle_probe round=%d idle_s=%d warm_lat_us=%.1f/%.1f first_lat_us=%.1f lat_ratio=%.2f "
           "warm_mib_s=%.1f/%.1f first_second_mib_s=%.1f tput_ratio=%.2f "
           "raw_warm_us=%.1f/%.1f raw_first_us=%.1f raw_lat_ratio=%.2f\n",
           r, FLAGS_idle_probe_seconds, lat_before, lat_after, first_us, lat_ratio.back(), mib_before, mib_after,
           first_mib, tput_ratio.back(), raw_before, raw_after, raw_first, raw_ratio.back());
    fflush(stdout);
  }
  raw_stop(&raw);
  stop_busy_loops(busy);
  background.stop();
  ok = ok && background.failed() == 0;
  printf("idle_probe_summary idle_s=%d busy_loops=%d background=%d background_gap_us=%d background_calls=%lld "
         "background_failed=%lld rounds=%zu median_lat_ratio=%.2f median_tput_ratio=%.2f "
         "median_raw_lat_ratio=%.2f ok=%d\n",
         FLAGS_idle_probe_seconds, FLAGS_idle_probe_busy_loops, FLAGS_idle_probe_background,
         FLAGS_idle_probe_background_gap_us, background.calls(), background.failed(), lat_ratio.size(),
         median(lat_ratio), median(tput_ratio), median(raw_ratio), ok ? 1 : 0);
  fflush(stdout);
  rrpc_iobuf_free(small);
  rrpc_iobuf_free(mib);
  return ok;
}

// The line: settings, setup time, both sides' totals and per-connection deltas.
std::string report_line(const Setup &st, double secs, const Metrics &sb, const Metrics &sa,
                        const Metrics &cb, const Metrics &ca) {
  int n = st.ok.load();
  std::string l = "idle_conns n=" + std::to_string(FLAGS_n) + " ok=" + std::to_string(n) +
                  " used_rdma=" + std::to_string(st.rdma.load()) + " stopped=" + st.stopped +
                  " ring_size=" + std::to_string(FLAGS_rdma_ring_size) +
                  " elastic=" + std::to_string(FLAGS_rdma_elastic ? 1 : 0) +
                  " sq=" + std::to_string(FLAGS_rdma_sq_size) + " rq=" + std::to_string(FLAGS_rdma_rq_size) +
                  " concurrency=" + std::to_string(FLAGS_concurrency) + " setup_s=" + fmt(secs) +
                  " per_conn_setup_ms=" + fmt(n ? secs * 1000.0 / n : 0.0) +
                  " nofile=" + std::to_string(limit_of(RLIMIT_NOFILE)) +
                  " memlock=" + std::to_string(limit_of(RLIMIT_MEMLOCK));
  auto side = [&](const char *p, const Metrics &b, const Metrics &a) {
    for (auto &kv : a) l += std::string(" ") + p + kv.first + "=" + std::to_string(kv.second);
    for (const char *k : {"pin_kib", "rss_kib", "queues_kib", "heap_kib", "fds", "maps", "qp", "cq", "mr", "cpu_ms",
                          "writes", "cdcs", "cqes", "wakeups", "grants", "bg_jobs"}) {
      auto ai = a.find(k), bi = b.find(k);
      if (ai == a.end() || bi == b.end() || ai->second < 0 || bi->second < 0 || n == 0) continue;
      l += std::string(" ") + p + "per_conn_" + k + "=" + fmt((double)(ai->second - bi->second) / n);
    }
  };
  side("s_", sb, sa);
  side("c_", cb, ca);
  return l;
}

int run_client(const std::string &addr) {
  if (start_rdma_runtime() != 0) return 1;
  rrpc_channel *ctl = new_channel(addr);
  Call c;
  if (!ctl || c.run(ctl, "Echo") != 0) {
    fprintf(stderr, "idle_conns: control call to %s failed: %s\n", addr.c_str(),
            ctl ? rrpc_controller_error_text(c.cntl) : "channel_new");
    return 1;
  }
  if (!rrpc_controller_used_rdma(c.cntl)) {
    fprintf(stderr, "idle_conns: the control connection fell back to TCP: RDMA is not working\n");
    return 1;
  }
  if (c.run(ctl, "Report", FLAGS_report_timeout_ms) != 0) return 1;
  Metrics sb = parse(c.text()), cb = measure();

  Setup st;
  st.chans.assign((size_t)FLAGS_n, nullptr);
  auto t0 = Clock::now();
  st.deadline = t0 + std::chrono::seconds(FLAGS_max_seconds);
  std::vector<std::thread> th;
  for (int i = 0; i < std::max(1, FLAGS_concurrency); i++) th.emplace_back(setup_worker, &st, addr);
  for (auto &t : th) t.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();

  auto m0 = Clock::now();
  Metrics ca = measure();
  if (c.run(ctl, "Report", FLAGS_report_timeout_ms) != 0) {
    fprintf(stderr, "idle_conns: final report call failed: %s\n", rrpc_controller_error_text(c.cntl));
    return 1;
  }
  Metrics sa = parse(c.text());
  sa["measure_ms"] = (long long)std::chrono::duration<double, std::milli>(Clock::now() - m0).count();
  bool setup_ok = st.ok.load() == FLAGS_n && st.rdma.load() == FLAGS_n;
  bool traffic_ok = true, probe_ok = true;
  std::string traffic;
  if (setup_ok && FLAGS_traffic_seconds > 0) traffic = run_traffic(st.chans, &traffic_ok);
  printf("%s%s\n", report_line(st, secs, sb, sa, cb, ca).c_str(), traffic.c_str());
  fflush(stdout);
  if (setup_ok && FLAGS_idle_probe_seconds > 0) probe_ok = run_idle_probe(addr);
  if (FLAGS_hold_seconds > 0) std::this_thread::sleep_for(std::chrono::seconds(FLAGS_hold_seconds));
  // No teardown: closing N connections is not what is measured, and the
  // kernel releases every QP and MR at exit.
  return setup_ok && traffic_ok && probe_ok ? 0 : 1;
}

// Forks the server before any thread exists; returns its "ip:port" and the
// write end of a pipe whose closing (our exit) ends it.
std::string fork_server(pid_t *pid) {
  int port_pipe[2], life_pipe[2];
  if (pipe(port_pipe) != 0 || pipe(life_pipe) != 0) return "";
  *pid = fork();
  if (*pid < 0) return "";
  if (*pid == 0) {
    close(port_pipe[0]);
    close(life_pipe[1]);
    rrpc_server *s = start_server();
    int port = s ? rrpc_server_port(s) : -1;
    if (write(port_pipe[1], &port, sizeof port) != (ssize_t)sizeof port) _exit(1);
    char b;
    while (read(life_pipe[0], &b, 1) > 0) {
    }
    _exit(s ? 0 : 1);
  }
  close(port_pipe[1]);
  close(life_pipe[0]);
  fcntl(life_pipe[1], F_SETFD, FD_CLOEXEC);
  int port = -1;
  if (read(port_pipe[0], &port, sizeof port) != (ssize_t)sizeof port || port <= 0) return "";
  close(port_pipe[0]);
  std::string host = FLAGS_listen.empty() ? default_host() : FLAGS_listen;
  host = host.substr(0, host.find(':'));
  return host + ":" + std::to_string(port);
}

int run_server_alone() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before any rrpc thread: all inherit it
  rrpc_server *s = start_server();
  if (!s) return 1;
  printf("idle_conns server port=%d pid=%d\n", rrpc_server_port(s), (int)getpid());
  fflush(stdout);
  int sig;
  sigwait(&set, &sig);
  _exit(0);
}

}  // namespace

int main(int argc, char **argv) {
  gflags::SetUsageMessage("idle_conns --n=N: cost of N idle RDMA connections per side (docs/performance.md)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  if (FLAGS_n < 0 || FLAGS_concurrency < 1) {
    fprintf(stderr, "idle_conns: --n must be >= 0 and --concurrency >= 1\n");
    return 2;
  }
  if (FLAGS_traffic_percent < 1 || FLAGS_traffic_percent > 100 || FLAGS_traffic_min_size < 1 ||
      FLAGS_traffic_min_size > FLAGS_traffic_max_size || FLAGS_idle_probe_seconds < 0 ||
      FLAGS_idle_probe_rounds < 1 || FLAGS_idle_probe_background < 0 || FLAGS_idle_probe_background > 64 ||
      FLAGS_idle_probe_background_gap_us < 0) {
    fprintf(stderr, "idle_conns: --traffic_percent is 1..100, 1 <= --traffic_min_size <= "
            "--traffic_max_size, --idle_probe_rounds >= 1, --idle_probe_background 0..64, "
            "--idle_probe_background_gap_us >= 0\n");
    return 2;
  }
  raise_limits(FLAGS_n);
  if (FLAGS_role == "server") return run_server_alone();
  if (FLAGS_role != "both") {
    fprintf(stderr, "idle_conns: --role is both or server\n");
    return 2;
  }
  if (!FLAGS_server.empty()) return run_client(FLAGS_server);
  pid_t pid = -1;
  std::string addr = fork_server(&pid);
  if (addr.empty()) {
    fprintf(stderr, "idle_conns: the server did not start\n");
    if (pid > 0) waitpid(pid, nullptr, 0);
    return 1;
  }
  int rc = run_client(addr);
  // The server exits when the pipe closes, i.e. at our exit; don't wait for it.
  _exit(rc);
}
