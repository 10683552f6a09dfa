// remote_rogue_rdma_test.cc - a rogue peer at the rrpc level, against an
// rrpc server in another process (Soft-RoCE, tools/run-rdma-tests). The
// rogue is an ordinary rrpc client: it asks the server for a region on its
// connection and gets the token (the server's ANNOUNCE arrives first). Then,
// instead of rrpc_remote_write/read (whose checks would refuse it on its own
// side), it posts raw RDMA WRITE/READ work requests on that connection's own
// QP (rrpc__rmt_car_post, the carriage's post) with the rkey and address of
// the token, and watches their completions (car_observe.h). Each bad access
// - at or across the end, across the start, against the region's rights,
// after the revoke, with another connection's key - must complete with
// REM_ACCESS_ERR on the rogue's side and fail the connection (its QP is in
// error: the next case connects anew), and the owner's memory must stay
// byte-identical: the server hashes its buffer - the region and 4 KiB of
// guard on each side - on request (test.Rogue/Sum) after each case. Two
// controls show that the raw path reaches the owner's memory when the
// access is legitimate.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/rdma.h"
#include "rrpc/remote.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

extern "C" {
#include "rrpc/remote/carriage.h"
#include "rrpc/remote/link.h"
#include "transport/rdma/remote/car_observe.h"
}

namespace {

constexpr size_t kLen = 1u << 20;  // each of the owner's buffers
// The region is the middle of its buffer: the guard bytes on each side are
// hashed too, so an access that went past the region's ends would show.
constexpr size_t kGuard = 4096, kRegion = kLen - 2 * kGuard;
constexpr uint64_t kRogueTag = 1ull << 61;  // above every wr_id a link uses

uint64_t Fnv(const uint8_t *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

void Pattern(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u | 1;
  for (size_t i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    p[i] = static_cast<uint8_t>(x);
  }
}

// ---- the owner: a server process ------------------------------------------

struct Owner {
  std::mutex mu;
  std::vector<uint8_t> victim, scratch;
  struct Reg {
    rrpc_remote_link *link;
    rrpc_remote_region *region;
  };
  std::vector<Reg> regs;
};

Owner &owner() {
  static Owner *o = new Owner;
  return *o;
}

void Answer(rrpc_server_call *call, const std::string &text, bool failed) {
  if (failed) rrpc_controller_set_failed(rrpc_server_call_controller(call), 1, text.c_str());
  rrpc_iobuf *resp = nullptr;
  rrpc_iobuf_new(&resp);
  if (!failed) rrpc_iobuf_append(resp, text.data(), text.size());
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

// "victim R" / "scratch R" (R: rights): that buffer, registered on the
// caller's connection; answers the token. Regions of connections that
// closed are freed first (a rogue's bad access ends its connection).
void RegHandler(void *, rrpc_server_call *call) {
  Owner &o = owner();
  std::string req = rrpc_test::iobuf_string(rrpc_server_call_request(call));
  char which[16] = "";
  unsigned rights = 0;
  if (sscanf(req.c_str(), "%15s %u", which, &rights) != 2) return Answer(call, "bad request", true);
  std::lock_guard<std::mutex> g(o.mu);
  for (size_t i = 0; i < o.regs.size();) {
    if (rrpc_remote_link_failed(o.regs[i].link) == 0) {
      i++;
      continue;
    }
    rrpc_remote_region_free(o.regs[i].region);
    rrpc_remote_link_release(o.regs[i].link);
    o.regs.erase(o.regs.begin() + static_cast<long>(i));
  }
  std::vector<uint8_t> &buf = strcmp(which, "victim") == 0 ? o.victim : o.scratch;
  Owner::Reg r = {};
  if (rrpc_server_call_remote_link(call, &r.link) != 0) return Answer(call, "no link", true);
  rrpc_remote_token t;
  if (rrpc_remote_region_register(r.link, buf.data() + kGuard, kRegion, rights, &r.region) != 0 ||
      rrpc_remote_region_token(r.region, &t) != 0) {
    if (r.region) rrpc_remote_region_free(r.region);
    rrpc_remote_link_release(r.link);
    return Answer(call, "register failed", true);
  }
  o.regs.push_back(r);
  Answer(call, std::string(reinterpret_cast<const char *>(t.bytes), sizeof t.bytes), false);
}

// Revokes the last region registered; the REVOKE goes ahead of the answer.
void RevokeHandler(void *, rrpc_server_call *call) {
  Owner &o = owner();
  int did;
  {
    std::lock_guard<std::mutex> g(o.mu);
    did = o.regs.empty() ? 0 : rrpc_remote_region_revoke(o.regs.back().region);
  }
  Answer(call, std::to_string(did), false);
}

// "<victim hash> <scratch hash>", FNV-1a over each whole buffer, guards
// included.
void SumHandler(void *, rrpc_server_call *call) {
  Owner &o = owner();
  char text[64];
  {
    std::lock_guard<std::mutex> g(o.mu);
    snprintf(text, sizeof text, "%016llx %016llx", static_cast<unsigned long long>(Fnv(o.victim.data(), kLen)),
             static_cast<unsigned long long>(Fnv(o.scratch.data(), kLen)));
  }
  Answer(call, text, false);
}

__attribute__((constructor)) void MaybeOwnerChild() {
  if (getenv("RRPC_TEST_ROGUE_OWNER") == nullptr) return;
  Owner &o = owner();
  o.victim.resize(kLen);
  o.scratch.resize(kLen);
  Pattern(o.victim.data(), kLen, 1);
  Pattern(o.scratch.data(), kLen, 2);
  rrpc_server_options so = {};
  so.use_rdma = 1;
  rrpc_server *s;
  if (rrpc_server_new(&so, &s) != 0) _exit(3);
  rrpc_server_add_method(s, "test.Rogue", "Reg", RegHandler, nullptr);
  rrpc_server_add_method(s, "test.Rogue", "Revoke", RevokeHandler, nullptr);
  rrpc_server_add_method(s, "test.Rogue", "Sum", SumHandler, nullptr);
  if (rrpc_server_start(s, (rrpc_test::rdma_test_addr() + ":0").c_str()) != 0) _exit(4);
  printf("%d\n", rrpc_server_port(s));
  fflush(stdout);
  for (;;) pause();
}

// ---- the rogue -------------------------------------------------------------

// Completions of the rogue's raw work requests, by wr_id.
struct Seen {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint64_t, int>> wcs;
};

Seen &seen() {
  static Seen *s = new Seen;
  return *s;
}

void Observe(uint64_t wr_id, int status) {
  if (!(wr_id & kRogueTag)) return;  // a piece of rrpc's own
  Seen &s = seen();
  std::lock_guard<std::mutex> g(s.mu);
  s.wcs.push_back({wr_id, status});
  s.cv.notify_all();
}

// The status of wr_id's completion; -1 if none came within 30 s.
int WaitWc(uint64_t wr_id) {
  Seen &s = seen();
  std::unique_lock<std::mutex> g(s.mu);
  int status = -1;
  s.cv.wait_for(g, std::chrono::seconds(30), [&] {
    for (auto &w : s.wcs)
      if (w.first == wr_id) status = w.second;
    return status != -1;
  });
  return status;
}

uint32_t Be32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
uint64_t Be64(const uint8_t *p) { return uint64_t(Be32(p)) << 32 | Be32(p + 4); }

// One rrpc connection of the rogue: a channel, its link, the raw path's
// local buffer registered on it.
struct Rogue {
  rrpc_channel *ch = nullptr;
  rrpc_remote_link *link = nullptr;
  rrpc__rmt_car *car = nullptr;
  rrpc__rmt_car_mr *mr = nullptr;
  std::vector<uint8_t> local = std::vector<uint8_t>(kLen + 4096);

  ~Rogue() {
    if (mr) rrpc__rmt_car_free(mr);
    rrpc_remote_link_release(link);
    rrpc_channel_free(ch);
  }
  // Connects; "" or what went wrong.
  std::string Up(const std::string &addr) {
    rrpc_channel_options co = {};
    co.timeout_ms = 20000;
    co.use_rdma = 1;
    if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) return "channel";
    std::string out;
    if (Call("Sum", "", &out) != 0) return "first call";
    if (rrpc_channel_remote_link(ch, &link) != 0) return "link";
    car = rrpc__rmt_car_of(rrpc__rmt_link_socket(link));
    if (car == nullptr) return "the connection has no one-sided carriage";
    uint32_t unused;
    if (rrpc__rmt_car_reg(car, local.data(), local.size(), 0, &mr, &unused) != 0) return "local MR";
    return "";
  }
  int Call(const char *method, const std::string &req, std::string *resp) {
    rrpc_controller *c;
    rrpc_controller_new(&c);
    rrpc_controller_set_timeout_ms(c, 20000);
    rrpc_iobuf *rq, *rs;
    rrpc_iobuf_new(&rq);
    rrpc_iobuf_new(&rs);
    rrpc_iobuf_append(rq, req.data(), req.size());
    int rc = rrpc_channel_call(ch, "test.Rogue", method, c, rq, rs, nullptr, nullptr);
    if (rc == 0 && !rrpc_controller_used_rdma(c)) rc = -EPROTONOSUPPORT;
    if (resp) *resp = rrpc_test::iobuf_string(rs);
    rrpc_iobuf_free(rq);
    rrpc_iobuf_free(rs);
    rrpc_controller_free(c);
    return rc;
  }
  // A region of the owner's on this connection: its rkey and address (the
  // token's bytes 28 and 32, docs/remote-memory.md).
  bool Region(const char *which, unsigned rights, uint32_t *rkey, uint64_t *addr) {
    std::string tok;
    if (Call("Reg", std::string(which) + " " + std::to_string(rights), &tok) != 0) return false;
    if (tok.size() != RRPC_REMOTE_TOKEN_LEN) return false;
    const uint8_t *t = reinterpret_cast<const uint8_t *>(tok.data());
    *rkey = Be32(t + 28);
    *addr = Be64(t + 32);
    return *rkey != 0 && *addr != 0;
  }
  // One raw WRITE or READ of len bytes at the owner's raddr with rkey, on
  // this connection's QP: its completion status (an ibv_wc_status), or -1.
  int Raw(bool write, uint64_t raddr, uint32_t rkey, uint32_t len) {
    static uint64_t n = 0;
    uint64_t id = kRogueTag | ++n;
    if (rrpc__rmt_car_post(car, write, local.data(), rrpc__rmt_car_lkey(mr), len, raddr, rkey, id) != 0) return -1;
    return WaitWc(id);
  }
  // The connection failed (bounded wait): its QP went to error.
  bool Fails() {
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < end) {
      if (rrpc_remote_link_failed(link) != 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
};

// One owner process for the suite (a test's bad access ends only its own
// connection), and one auditor connection that asks for the hashes and
// never misbehaves.
class RemoteRogue : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!rrpc_rdma_available()) return;
    rrpc__rmt_car_observe(Observe);
    child_ = rrpc_test::spawn_self({"RRPC_TEST_ROGUE_OWNER=1"});
    if (child_.pid <= 0) return;
    addr_ = rrpc_test::rdma_test_addr() + ":" + std::to_string(atoi(child_.first_output.c_str()));
    std::vector<uint8_t> v(kLen);
    Pattern(v.data(), kLen, 1);
    victim_sum_ = Fnv(v.data(), kLen);
    scratch_.resize(kLen);
    Pattern(scratch_.data(), kLen, 2);
  }
  static void TearDownTestSuite() {
    delete auditor_;
    auditor_ = nullptr;
    rrpc__rmt_car_observe(nullptr);
    if (child_.pid > 0) {
      kill(child_.pid, SIGKILL);
      rrpc_test::wait_child(child_);
    }
  }
  void SetUp() override {
    if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
    ASSERT_GT(child_.pid, 0) << "the owner process did not start";
    ASSERT_EQ(Sums(), Expect()) << "the owner's buffers are not what the test expects";
  }
  // The owner's hashes, asked on the auditor's connection.
  static std::string Sums() {
    std::string out;
    if (auditor_ == nullptr) {
      auditor_ = new Rogue;
      std::string err = auditor_->Up(addr_);
      if (!err.empty()) {
        delete auditor_;
        auditor_ = nullptr;
        return err;
      }
    }
    return auditor_->Call("Sum", "", &out) == 0 ? out : "Sum failed";
  }
  static std::string Expect() {
    char text[64];
    snprintf(text, sizeof text, "%016llx %016llx", static_cast<unsigned long long>(victim_sum_),
             static_cast<unsigned long long>(Fnv(scratch_.data(), kLen)));
    return text;
  }
  // One bad access on a fresh connection: it fails on the rogue's side,
  // the connection ends, the owner's memory is as it was.
  void Refused(const char *what, unsigned rights, bool write, uint64_t off, uint32_t len) {
    SCOPED_TRACE(what);
    Rogue r;
    ASSERT_EQ("", r.Up(addr_));
    uint32_t rkey;
    uint64_t addr;
    ASSERT_TRUE(r.Region("victim", rights, &rkey, &addr));
    Pattern(r.local.data(), len, 9);
    int st = r.Raw(write, addr + off, rkey, len);
    EXPECT_NE(-1, st) << "no completion";
    EXPECT_NE(IBV_WC_SUCCESS, st) << "the access went through";
    EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
    EXPECT_TRUE(r.Fails()) << "the connection outlived its QP's error";
    EXPECT_EQ(Expect(), Sums());
  }
  static rrpc_test::Child child_;
  static std::string addr_;
  static uint64_t victim_sum_;
  static std::vector<uint8_t> scratch_;  // what the owner's scratch buffer holds
  static Rogue *auditor_;
};
rrpc_test::Child RemoteRogue::child_;
std::string RemoteRogue::addr_;
uint64_t RemoteRogue::victim_sum_;
std::vector<uint8_t> RemoteRogue::scratch_;
Rogue *RemoteRogue::auditor_;

TEST_F(RemoteRogue, RawAccessesWithinTheRightsReachTheOwnersMemory) {
  Rogue r;
  ASSERT_EQ("", r.Up(addr_));
  uint32_t rkey;
  uint64_t addr;
  // A READ of the victim region's last 4 KiB returns its bytes.
  ASSERT_TRUE(r.Region("victim", RRPC_REMOTE_READ, &rkey, &addr));
  ASSERT_EQ(IBV_WC_SUCCESS, r.Raw(false, addr + kRegion - 4096, rkey, 4096));
  std::vector<uint8_t> v(kLen);
  Pattern(v.data(), kLen, 1);
  EXPECT_EQ(0, memcmp(v.data() + kGuard + kRegion - 4096, r.local.data(), 4096));
  // A WRITE of 4 KiB ending at the scratch region's last byte lands there
  // (and the hash sees it).
  ASSERT_TRUE(r.Region("scratch", RRPC_REMOTE_WRITE, &rkey, &addr));
  Pattern(r.local.data(), 4096, 5);
  ASSERT_EQ(IBV_WC_SUCCESS, r.Raw(true, addr + kRegion - 4096, rkey, 4096));
  memcpy(scratch_.data() + kGuard + kRegion - 4096, r.local.data(), 4096);
  EXPECT_EQ(Expect(), Sums());
  EXPECT_EQ(0, rrpc_remote_link_failed(r.link));
}

TEST_F(RemoteRogue, WritePastTheEndFails) { Refused("write at the end", RRPC_REMOTE_WRITE, true, kRegion, 1); }
TEST_F(RemoteRogue, WriteAcrossTheEndFails) {
  Refused("write across the end", RRPC_REMOTE_WRITE, true, kRegion - 16, 32);
}
TEST_F(RemoteRogue, WriteBeforeTheStartFails) {
  Refused("write before the start", RRPC_REMOTE_WRITE, true, uint64_t(0) - 16, 32);
}
TEST_F(RemoteRogue, ReadPastTheEndFails) { Refused("read at the end", RRPC_REMOTE_READ, false, kRegion, 1); }
TEST_F(RemoteRogue, ReadAcrossTheEndFails) {
  Refused("read across the end", RRPC_REMOTE_READ, false, kRegion - 16, 32);
}
TEST_F(RemoteRogue, WriteToAReadOnlyRegionFails) {
  Refused("write, read-only", RRPC_REMOTE_READ, true, 4096, 4096);
}
TEST_F(RemoteRogue, ReadFromAWriteOnlyRegionFails) {
  Refused("read, write-only", RRPC_REMOTE_WRITE, false, 4096, 4096);
}

TEST_F(RemoteRogue, WriteAfterTheRevokeFails) {
  Rogue r;
  ASSERT_EQ("", r.Up(addr_));
  uint32_t rkey;
  uint64_t addr;
  ASSERT_TRUE(r.Region("victim", RRPC_REMOTE_WRITE, &rkey, &addr));
  std::string did;
  ASSERT_EQ(0, r.Call("Revoke", "", &did));
  ASSERT_EQ("1", did);
  Pattern(r.local.data(), 4096, 9);
  int st = r.Raw(true, addr, rkey, 4096);
  EXPECT_NE(-1, st) << "no completion";
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
  EXPECT_TRUE(r.Fails());
  EXPECT_EQ(Expect(), Sums());
}

TEST_F(RemoteRogue, AnotherConnectionsKeyFails) {
  Rogue a, b;
  ASSERT_EQ("", a.Up(addr_));
  ASSERT_EQ("", b.Up(addr_));
  uint32_t rkey_a, rkey_b;
  uint64_t addr_a, addr_b;
  ASSERT_TRUE(a.Region("victim", RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, &rkey_a, &addr_a));
  ASSERT_TRUE(b.Region("victim", RRPC_REMOTE_READ, &rkey_b, &addr_b));
  ASSERT_NE(rkey_a, rkey_b);
  // b's connection, a's window: bound to a's QP, refused on b's.
  Pattern(b.local.data(), 4096, 9);
  int st = b.Raw(true, addr_a, rkey_a, 4096);
  EXPECT_NE(-1, st) << "no completion";
  EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, st) << ibv_wc_status_str(ibv_wc_status(st));
  EXPECT_TRUE(b.Fails());
  EXPECT_EQ(Expect(), Sums());
  // a's connection was not touched: its window still serves a.
  EXPECT_EQ(0, rrpc_remote_link_failed(a.link));
  EXPECT_EQ(IBV_WC_SUCCESS, a.Raw(false, addr_a, rkey_a, 4096));
}

}  // namespace
