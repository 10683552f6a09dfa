// remote_link_cases.h - the remote-memory tests on real rrpc channels and
// servers (rrpc/remote.h), shared by the host binary (TCP:
// remote_link_unittest) and the Soft-RoCE one (remote_link_rdma_test), which
// include this after defining kUseRdma. The server owns regions registered on
// the connection a call came in on and answers with their token; the
// client's link sees the announcement before the answer (the stream is
// ordered) and writes/reads through the token or the id.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/rrpc.h"
#include "test/common/test_util.h"

namespace remote_cases {

constexpr size_t kBig = 64u << 20;

// ---- the server side -------------------------------------------------------

// What the next "Reg" call registers, and what it made (one at a time: the
// tests call it synchronously).
struct Owner {
  std::mutex mu;
  std::condition_variable cv;
  uint8_t *buf = nullptr;
  size_t len = 0;
  unsigned rights = 0;
  rrpc_remote_link *link = nullptr;
  std::vector<rrpc_remote_region *> regions;
  struct Note {
    uint64_t off, len;
    uint32_t tag;
    bool landed;  // the bytes were in place when the callback ran
  };
  std::vector<Note> notes;
  std::vector<uint8_t> expect_at_note;  // per tag: the byte the write carried
};

inline Owner &owner() {
  static Owner *o = new Owner;
  return *o;
}

inline void on_notify(void *, rrpc_remote_region *r, uint64_t off, uint64_t len, uint32_t tag) {
  Owner &o = owner();
  std::lock_guard<std::mutex> g(o.mu);
  (void)r;
  // The write's first and last byte and one per 64 KiB: a loop callback
  // stays short (a full scan of 1.5 MiB ran over the loop watchdog under
  // TSan), and a piece not yet placed would show.
  bool landed = true;
  if (tag < o.expect_at_note.size() && len > 0) {
    for (uint64_t i = 0; i < len; i += 65536) landed = landed && o.buf[off + i] == o.expect_at_note[tag];
    landed = landed && o.buf[off + len - 1] == o.expect_at_note[tag];
  }
  o.notes.push_back({off, len, tag, landed});
  o.cv.notify_all();
}

inline void reg_handler(void *, rrpc_server_call *call) {
  Owner &o = owner();
  rrpc_iobuf *resp;
  rrpc_iobuf_new(&resp);
  {
    std::lock_guard<std::mutex> g(o.mu);
    if (o.link == nullptr) {
      rrpc_server_call_remote_link(call, &o.link);
      rrpc_remote_link_set_notify(o.link, on_notify, nullptr);
    }
    rrpc_remote_region *r = nullptr;
    int rc = rrpc_remote_region_register(o.link, o.buf, o.len, o.rights, &r);
    if (rc == 0) {
      o.regions.push_back(r);
      rrpc_remote_token t;
      rrpc_remote_region_token(r, &t);
      rrpc_iobuf_append(resp, t.bytes, sizeof t.bytes);
    } else {
      rrpc_controller_set_failed(rrpc_server_call_controller(call), 1, "register failed");
    }
  }
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

// Revokes the last region, then answers: the REVOKE is ahead of the answer.
inline void revoke_handler(void *, rrpc_server_call *call) {
  Owner &o = owner();
  {
    std::lock_guard<std::mutex> g(o.mu);
    if (!o.regions.empty()) rrpc_remote_region_revoke(o.regions.back());
  }
  rrpc_server_call_respond(call, nullptr);
}

inline void owner_reset() {
  Owner &o = owner();
  std::lock_guard<std::mutex> g(o.mu);
  for (auto *r : o.regions) rrpc_remote_region_free(r);
  o.regions.clear();
  rrpc_remote_link_release(o.link);
  o.link = nullptr;
  o.notes.clear();
  o.expect_at_note.clear();
}

// Where servers listen: over RDMA the rig's device address (loopback has no
// RDMA device behind it).
inline std::string host() { return kUseRdma ? rrpc_test::rdma_test_addr() : std::string("127.0.0.1"); }

inline int start_server(bool rdma, rrpc_server **out) {
  rrpc_server_options so = {};
  so.use_rdma = rdma ? 1 : 0;
  int rc = rrpc_server_new(&so, out);
  if (rc != 0) return rc;
  rrpc_server_add_method(*out, "test.Remote", "Reg", reg_handler, nullptr);
  rrpc_server_add_method(*out, "test.Remote", "Revoke", revoke_handler, nullptr);
  return rrpc_server_start(*out, (host() + ":0").c_str());
}

// ---- the client side -------------------------------------------------------

// Completions of transfers: each tagged one counted once.
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int> status;  // per transfer index
  std::vector<int> times;
  std::vector<int> order;   // completion order
  explicit Waiter(size_t n) : status(n, 1), times(n, 0) {}
  struct Arg {
    Waiter *w;
    size_t i;
  };
  std::vector<Arg> args;
  static void done(void *a, int st) {
    Arg *p = static_cast<Arg *>(a);
    std::lock_guard<std::mutex> g(p->w->mu);
    p->w->status[p->i] = st;
    p->w->times[p->i]++;
    p->w->order.push_back(static_cast<int>(p->i));
    p->w->cv.notify_all();
  }
  bool wait_all(int seconds) {
    std::unique_lock<std::mutex> g(mu);
    return cv.wait_for(g, std::chrono::seconds(seconds), [&] { return order.size() >= times.size(); });
  }
};

inline int call(rrpc_channel *ch, const char *method, std::string *resp) {
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_controller_set_timeout_ms(c, 20000);
  rrpc_iobuf *rs;
  rrpc_iobuf_new(&rs);
  int rc = rrpc_channel_call(ch, "test.Remote", method, c, nullptr, rs, nullptr, nullptr);
  if (resp) *resp = rrpc_test::iobuf_string(rs);
  // The RDMA binary tests RDMA connections: one that fell back tests nothing new.
  if (rc == 0 && kUseRdma && !rrpc_controller_used_rdma(c)) rc = -EPROTONOSUPPORT;
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  return rc;
}

// A region of the server, registered on ch's connection: its token.
inline int server_region(rrpc_channel *ch, uint8_t *buf, size_t len, unsigned rights, rrpc_remote_token *tok) {
  {
    Owner &o = owner();
    std::lock_guard<std::mutex> g(o.mu);
    o.buf = buf;
    o.len = len;
    o.rights = rights;
  }
  std::string resp;
  int rc = call(ch, "Reg", &resp);
  if (rc != 0) return rc;
  if (resp.size() != sizeof tok->bytes) return -EPROTO;
  memcpy(tok->bytes, resp.data(), sizeof tok->bytes);
  return 0;
}

inline uint32_t token_id(const rrpc_remote_token &t) {
  rrpc_remote_token_info info;
  return rrpc_remote_token_inspect(t.bytes, sizeof t.bytes, &info) == 0 ? info.id : 0;
}

inline void fill(uint8_t *p, size_t n, uint32_t seed) {
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    p[i] = uint8_t(x >> 16);
  }
}

// One transfer, waited for: its status.
inline int xfer_sync(rrpc_remote_link *l, bool write, rrpc_remote_region *local, uint64_t loff,
                     const rrpc_remote_token *tok, uint32_t id, uint64_t roff, uint64_t len, unsigned flags = 0,
                     uint32_t tag = 0) {
  Waiter w(1);
  w.args.push_back({&w, 0});
  rrpc_remote_xfer x = {};
  x.local = local;
  x.local_offset = loff;
  x.token = tok;
  x.remote_id = id;
  x.remote_offset = roff;
  x.length = len;
  x.flags = flags;
  x.tag = tag;
  x.done = Waiter::done;
  x.arg = &w.args[0];
  int rc = write ? rrpc_remote_write(l, &x) : rrpc_remote_read(l, &x);
  if (rc != 0) return rc;
  if (!w.wait_all(60)) return -ETIMEDOUT;
  EXPECT_EQ(1, w.times[0]);
  return w.status[0];
}

inline rrpc_channel *open_channel(const std::string &addr) {
  rrpc_channel_options co = {};
  co.timeout_ms = 20000;
  co.use_rdma = kUseRdma ? 1 : 0;
  rrpc_channel *ch = nullptr;
  if (rrpc_channel_new(addr.c_str(), &co, &ch) != 0) return nullptr;
  return ch;
}

class RemoteLink : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kUseRdma && !rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
    ASSERT_EQ(0, start_server(kUseRdma, &server_));
    addr_ = host() + ":" + std::to_string(rrpc_server_port(server_));
    ch_ = open(addr_);
    ASSERT_NE(nullptr, ch_);
    ASSERT_EQ(0, rrpc_channel_remote_link(ch_, &link_));
    remote_.assign(kBig, 0);
    local_.assign(kBig, 0);
    ASSERT_EQ(0, rrpc_remote_region_register(link_, local_.data(), local_.size(), 0, &lreg_));
  }
  void TearDown() override {
    if (server_ == nullptr) return;
    rrpc_remote_region_free(lreg_);
    rrpc_remote_link_release(link_);
    owner_reset();
    rrpc_channel_free(ch_);
    rrpc_server_free(server_);
  }
  static rrpc_channel *open(const std::string &addr) { return open_channel(addr); }
  rrpc_server *server_ = nullptr;
  std::string addr_;
  rrpc_channel *ch_ = nullptr;
  rrpc_remote_link *link_ = nullptr;
  rrpc_remote_region *lreg_ = nullptr;
  std::vector<uint8_t> remote_, local_;
};

TEST_F(RemoteLink, WritesAndReadsAreByteExactAtEverySizeUpToTheLastByte) {
  rrpc_remote_token tok;
  ASSERT_EQ(0, server_region(ch_, remote_.data(), remote_.size(), RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, &tok));
  uint32_t id = token_id(tok);
  {
    std::lock_guard<std::mutex> g(owner().mu);  // the server's handler filled it
    ASSERT_EQ(id, rrpc_remote_region_id(owner().regions.back()));
  }
  struct Case {
    uint64_t len, roff;
  } cases[] = {{0, 0},      {0, kBig},          {1, 0},          {1, kBig - 1},
               {4096, 777}, {4096, kBig - 4096}, {1u << 20, 12345}, {kBig, 0}};
  // Two patterns made once (a byte loop over 64 MiB is slow under TSan and
  // TCG): the region's baseline, and what the writes carry. A write's range
  // must hold its bytes, the 64 KiB on each side the baseline (the whole
  // region is compared once at the end); then the range gets the baseline
  // back, and reads must return it.
  std::vector<uint8_t> base(kBig), data(kBig);
  fill(base.data(), kBig, 1);
  fill(data.data(), kBig, 2);
  memcpy(remote_.data(), base.data(), kBig);
  const uint64_t margin = 64 << 10;
  for (const Case &c : cases) {
    SCOPED_TRACE("len " + std::to_string(c.len) + " at " + std::to_string(c.roff));
    memcpy(local_.data(), data.data() + (c.len < kBig ? 3 : 0), c.len);
    // Writes by token, reads by id: both ways name the same entry.
    ASSERT_EQ(0, xfer_sync(link_, true, lreg_, 0, &tok, 0, c.roff, c.len));
    ASSERT_EQ(0, memcmp(remote_.data() + c.roff, local_.data(), c.len));
    uint64_t lo = c.roff > margin ? c.roff - margin : 0, end = c.roff + c.len;
    uint64_t hi = kBig - end > margin ? end + margin : kBig;
    ASSERT_EQ(0, memcmp(remote_.data() + lo, base.data() + lo, c.roff - lo)) << "bytes before the write changed";
    ASSERT_EQ(0, memcmp(remote_.data() + end, base.data() + end, hi - end)) << "bytes after the write changed";
    memcpy(remote_.data() + c.roff, base.data() + c.roff, c.len);
    memset(local_.data(), 0xEE, c.len < 8192 ? c.len + 1 : 8192);
    uint64_t loff = c.len < kBig ? 1 : 0;  // the local side at an offset too
    ASSERT_EQ(0, xfer_sync(link_, false, lreg_, loff, nullptr, id, c.roff, c.len));
    ASSERT_EQ(0, memcmp(local_.data() + loff, base.data() + c.roff, c.len));
  }
  EXPECT_EQ(0, memcmp(remote_.data(), base.data(), kBig));
  rrpc_remote_link_stats st;
  rrpc_remote_link_get_stats(link_, &st);
  EXPECT_EQ(16u, st.ops_ok);
  EXPECT_EQ(0u, st.ops_failed);
  EXPECT_EQ(1u, st.peer_regions);
  // Over RDMA the bytes moved one-sided: the owner copied none of them.
  rrpc_remote_link_stats ost;
  rrpc_remote_link_get_stats(owner().link, &ost);
  EXPECT_EQ(kUseRdma ? 1 : 0, st.rdma);
  EXPECT_EQ(kUseRdma ? 1 : 0, ost.rdma);
  if (kUseRdma) {
    EXPECT_EQ(0u, ost.served_bytes);
  } else {
    EXPECT_EQ(2 * (kBig + (1u << 20) + 2 * 4096 + 2), ost.served_bytes);
  }
}

TEST_F(RemoteLink, BadAccessesFailWithTheirCodeAndLeaveTheMemoryIntact) {
  const size_t n = 1 << 20;
  fill(remote_.data(), 4 * n, 99);  // the three regions and a MiB past them
  std::vector<uint8_t> before(remote_);
  rrpc_remote_token ro, wo, gone;
  ASSERT_EQ(0, server_region(ch_, remote_.data(), n, RRPC_REMOTE_READ, &ro));
  ASSERT_EQ(0, server_region(ch_, remote_.data() + n, n, RRPC_REMOTE_WRITE, &wo));
  ASSERT_EQ(0, server_region(ch_, remote_.data() + 2 * n, n, RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, &gone));
  ASSERT_EQ(0, call(ch_, "Revoke", nullptr));
  fill(local_.data(), n, 5);
  // Out of range: one byte past the end, an offset past it, a wrapping one.
  EXPECT_EQ(-RRPC_EREMOTERANGE, xfer_sync(link_, true, lreg_, 0, &wo, 0, 1, n));
  EXPECT_EQ(-RRPC_EREMOTERANGE, xfer_sync(link_, true, lreg_, 0, &wo, 0, n + 1, 0));
  EXPECT_EQ(-RRPC_EREMOTERANGE, xfer_sync(link_, false, lreg_, 0, &ro, 0, UINT64_MAX, 2));
  // Rights.
  EXPECT_EQ(-RRPC_EREMOTERIGHTS, xfer_sync(link_, true, lreg_, 0, &ro, 0, 0, 16));
  EXPECT_EQ(-RRPC_EREMOTERIGHTS, xfer_sync(link_, false, lreg_, 0, &wo, 0, 0, 16));
  // Revoked: by token and by id; an id never announced.
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, xfer_sync(link_, true, lreg_, 0, &gone, 0, 0, 16));
  EXPECT_EQ(-RRPC_EREMOTEREVOKED, xfer_sync(link_, false, lreg_, 0, nullptr, token_id(gone), 0, 16));
  EXPECT_EQ(-RRPC_EREMOTENOENT, xfer_sync(link_, true, lreg_, 0, nullptr, token_id(gone) + 100, 0, 16));
  // The local side out of its region.
  EXPECT_EQ(-EINVAL, xfer_sync(link_, true, lreg_, kBig - 8, &wo, 0, 0, 16));
  // Another connection's token: a second channel to the same server.
  rrpc_channel *ch2 = open(addr_);
  ASSERT_NE(nullptr, ch2);
  rrpc_remote_link *l2;
  ASSERT_EQ(0, rrpc_channel_remote_link(ch2, &l2));
  rrpc_remote_region *lreg2;
  ASSERT_EQ(0, rrpc_remote_region_register(l2, local_.data(), n, 0, &lreg2));
  EXPECT_EQ(-RRPC_EREMOTECONN, xfer_sync(l2, true, lreg2, 0, &wo, 0, 0, 16));
  EXPECT_EQ(-RRPC_EREMOTENOENT, xfer_sync(l2, true, lreg2, 0, nullptr, token_id(wo), 0, 16));
  // The first connection still works after all of that.
  EXPECT_EQ(0, xfer_sync(link_, true, lreg_, 0, &wo, 0, 0, n));
  EXPECT_EQ(0, memcmp(remote_.data() + n, local_.data(), n));
  memcpy(before.data() + n, local_.data(), n);
  EXPECT_TRUE(before == remote_) << "memory outside the one good write changed";
  rrpc_remote_region_free(lreg2);
  rrpc_remote_link_release(l2);
  rrpc_channel_free(ch2);
}

TEST_F(RemoteLink, NotifyRunsOncePerWriteInOrderAfterTheBytesLanded) {
  const int k = 32;                // writes, kBig / k = 2 MiB apart
  const size_t piece = 256 << 10;  // every fourth write is 1.5 MiB: more than one frame
  rrpc_remote_token tok;
  ASSERT_EQ(0, server_region(ch_, remote_.data(), remote_.size(), RRPC_REMOTE_WRITE, &tok));
  {
    std::lock_guard<std::mutex> g(owner().mu);
    owner().expect_at_note.resize(k + 1);
    for (int i = 1; i <= k; i++) owner().expect_at_note[i] = uint8_t(i);
  }
  Waiter w(k);
  for (int i = 0; i < k; i++) w.args.push_back({&w, size_t(i)});
  for (int i = 0; i < k; i++) {
    // Write i: (i % 4 + 1) pieces' worth of byte i+1, some larger than a frame.
    size_t len = (i % 4 == 3) ? (3u << 20) / 2 : piece * (i % 4 + 1) / 2;
    uint64_t off = uint64_t(i) * (kBig / k);
    memset(local_.data() + off, i + 1, len);
    rrpc_remote_xfer x = {};
    x.local = lreg_;
    x.local_offset = off;
    x.token = &tok;
    x.remote_offset = off;
    x.length = len;
    x.flags = RRPC_REMOTE_NOTIFY;
    x.tag = uint32_t(i + 1);
    x.done = Waiter::done;
    x.arg = &w.args[size_t(i)];
    ASSERT_EQ(0, rrpc_remote_write(link_, &x));
  }
  ASSERT_TRUE(w.wait_all(60));
  for (int i = 0; i < k; i++) {
    EXPECT_EQ(1, w.times[size_t(i)]);
    EXPECT_EQ(0, w.status[size_t(i)]);
    EXPECT_EQ(i, w.order[size_t(i)]) << "completions out of order";
  }
  Owner &o = owner();
  std::unique_lock<std::mutex> g(o.mu);
  ASSERT_TRUE(o.cv.wait_for(g, std::chrono::seconds(30), [&] { return o.notes.size() >= size_t(k); }));
  ASSERT_EQ(size_t(k), o.notes.size());
  for (int i = 0; i < k; i++) {
    const Owner::Note &n = o.notes[size_t(i)];
    EXPECT_EQ(uint32_t(i + 1), n.tag);
    EXPECT_EQ(uint64_t(i) * (kBig / k), n.off);
    EXPECT_EQ((i % 4 == 3) ? (3u << 20) / 2 : piece * (i % 4 + 1) / 2, n.len);
    EXPECT_TRUE(n.landed) << "notify " << i << " ran before its bytes were there";
  }
}

// ---- a connection that fell back from RDMA to TCP ----------------------------

TEST(RemoteLinkFallback, AConnectionThatFellBackCarriesTheSameCallsInItsByteStream) {
  if (!kUseRdma) GTEST_SKIP() << "the RDMA binary's case: an RDMA channel to a server without RDMA";
  if (!rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  rrpc_server *srv;
  ASSERT_EQ(0, start_server(false, &srv));  // declines the client's RDMA proposal
  rrpc_channel *ch = open_channel(host() + ":" + std::to_string(rrpc_server_port(srv)));
  ASSERT_NE(nullptr, ch);
  const size_t n = 1 << 20;
  std::vector<uint8_t> remote(n, 0), local(n);
  fill(local.data(), n, 11);
  {
    Owner &o = owner();
    std::lock_guard<std::mutex> g(o.mu);
    o.buf = remote.data();
    o.len = n;
    o.rights = RRPC_REMOTE_READ | RRPC_REMOTE_WRITE;
  }
  rrpc_controller *c;
  rrpc_controller_new(&c);
  rrpc_iobuf *rs;
  rrpc_iobuf_new(&rs);
  ASSERT_EQ(0, rrpc_channel_call(ch, "test.Remote", "Reg", c, nullptr, rs, nullptr, nullptr));
  EXPECT_EQ(0, rrpc_controller_used_rdma(c)) << "the connection was to fall back";
  std::string resp = rrpc_test::iobuf_string(rs);
  rrpc_iobuf_free(rs);
  rrpc_controller_free(c);
  ASSERT_EQ(size_t(RRPC_REMOTE_TOKEN_LEN), resp.size());
  rrpc_remote_token tok;
  memcpy(tok.bytes, resp.data(), sizeof tok.bytes);
  rrpc_remote_link *l;
  ASSERT_EQ(0, rrpc_channel_remote_link(ch, &l));
  rrpc_remote_region *lr;
  ASSERT_EQ(0, rrpc_remote_region_register(l, local.data(), n, 0, &lr));
  {
    std::lock_guard<std::mutex> g(owner().mu);
    owner().expect_at_note.assign(8, 0);
  }
  ASSERT_EQ(0, xfer_sync(l, true, lr, 0, &tok, 0, 0, n, RRPC_REMOTE_NOTIFY, 9));
  EXPECT_EQ(0, memcmp(remote.data(), local.data(), n));
  std::vector<uint8_t> back(n);
  rrpc_remote_region *br;
  ASSERT_EQ(0, rrpc_remote_region_register(l, back.data(), n, 0, &br));
  ASSERT_EQ(0, xfer_sync(l, false, br, 0, &tok, 0, 0, n));
  EXPECT_EQ(0, memcmp(back.data(), local.data(), n));
  EXPECT_EQ(-RRPC_EREMOTERANGE, xfer_sync(l, true, lr, 0, &tok, 0, 1, n));
  {
    Owner &o = owner();
    std::unique_lock<std::mutex> g(o.mu);
    ASSERT_TRUE(o.cv.wait_for(g, std::chrono::seconds(20), [&] { return !o.notes.empty(); }));
    EXPECT_EQ(1u, o.notes.size());
    EXPECT_EQ(9u, o.notes[0].tag);
    EXPECT_EQ(uint64_t(n), o.notes[0].len);
  }
  rrpc_remote_link_stats st, ost;
  rrpc_remote_link_get_stats(l, &st);
  rrpc_remote_link_get_stats(owner().link, &ost);
  EXPECT_EQ(0, st.rdma);
  EXPECT_EQ(uint64_t(2 * n), ost.served_bytes) << "the owner copies over TCP";
  rrpc_remote_region_free(br);
  rrpc_remote_region_free(lr);
  rrpc_remote_link_release(l);
  owner_reset();
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
}

// ---- a server process killed mid-transfer -----------------------------------

__attribute__((constructor)) inline void maybe_child_owner() {
  if (getenv("RRPC_TEST_REMOTE_CHILD") == nullptr) return;
  static std::vector<uint8_t> mem(kBig);
  owner().buf = mem.data();
  owner().len = mem.size();
  owner().rights = RRPC_REMOTE_READ | RRPC_REMOTE_WRITE;
  rrpc_server *s;
  if (start_server(kUseRdma, &s) != 0) _exit(3);
  printf("%d\n", rrpc_server_port(s));
  fflush(stdout);
  for (;;) pause();
}

TEST(RemoteLinkKill, PeerKilledMidTransferCompletesEveryPendingTransferOnceWithAnError) {
  if (kUseRdma && !rrpc_rdma_available()) GTEST_SKIP() << "no RDMA device here: run through tools/run-rdma-tests";
  rrpc_test::Child child = rrpc_test::spawn_self({"RRPC_TEST_REMOTE_CHILD=1"});
  ASSERT_GT(child.pid, 0);
  std::string addr = host() + ":" + std::to_string(atoi(child.first_output.c_str()));
  rrpc_channel *ch = open_channel(addr);
  ASSERT_NE(nullptr, ch);
  std::string resp;
  ASSERT_EQ(0, call(ch, "Reg", &resp));
  ASSERT_EQ(size_t(RRPC_REMOTE_TOKEN_LEN), resp.size());
  rrpc_remote_token tok;
  memcpy(tok.bytes, resp.data(), sizeof tok.bytes);
  rrpc_remote_link *l;
  ASSERT_EQ(0, rrpc_channel_remote_link(ch, &l));
  std::vector<uint8_t> local(kBig, 7);
  rrpc_remote_region *lr;
  ASSERT_EQ(0, rrpc_remote_region_register(l, local.data(), local.size(), 0, &lr));
  const int k = 32;
  Waiter w(k);
  for (int i = 0; i < k; i++) w.args.push_back({&w, size_t(i)});
  for (int i = 0; i < k; i++) {
    rrpc_remote_xfer x = {};
    x.local = lr;
    x.token = &tok;
    x.length = kBig / 2;
    x.remote_offset = (i % 2) * (kBig / 2);
    x.local_offset = x.remote_offset;
    x.done = Waiter::done;
    x.arg = &w.args[size_t(i)];
    ASSERT_EQ(0, (i % 3 == 2) ? rrpc_remote_read(l, &x) : rrpc_remote_write(l, &x));
  }
  kill(child.pid, SIGKILL);
  rrpc_test::wait_child(child);
  ASSERT_TRUE(w.wait_all(60));
  int failed = 0;
  for (int i = 0; i < k; i++) {
    EXPECT_EQ(1, w.times[size_t(i)]) << "transfer " << i;
    EXPECT_LE(w.status[size_t(i)], 0);
    if (w.status[size_t(i)] < 0) failed++;
    // In order: once one failed, every later one failed too.
    if (i > 0 && w.status[size_t(w.order[size_t(i - 1)])] < 0) {
      EXPECT_LT(w.status[size_t(w.order[size_t(i)])], 0);
    }
  }
  EXPECT_GT(failed, 0) << "every transfer finished before the kill: nothing was tested";
  for (int i = 0; i < k; i++) EXPECT_EQ(i, w.order[size_t(i)]);
  // The link is dead now: a new transfer is refused at once.
  rrpc_remote_xfer x = {};
  x.local = lr;
  x.token = &tok;
  x.length = 1;
  x.done = Waiter::done;
  EXPECT_NE(0, rrpc_remote_write(l, &x));
  EXPECT_NE(0, rrpc_remote_link_failed(l));
  rrpc_remote_region_free(lr);
  rrpc_remote_link_release(l);
  rrpc_channel_free(ch);
}

}  // namespace remote_cases
