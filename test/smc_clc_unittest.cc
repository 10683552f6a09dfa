// smc_clc_unittest.cc - SMC-R CLC codec (transport/smc/clc.h): decodes
// the Linux 6.1 captures in test/data/smc-r, rrpc's v1 encoders, the rrpc
// extension bytes, the decline policy, and hostile input.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "test/common/test_util.h"

extern "C" {
#include "rrpc/errors.h"
#include "transport/smc/clc.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

std::string DataDir() { return rrpc_test::smc_data_dir(); }
Bytes LoadHex(const std::string& rel) { return rrpc_test::load_smc_hex(rel); }

// index.tsv rows: case, file, direction, bytes, message, key_fields.
struct IndexRow {
  std::string path;
  size_t bytes;
  std::string message;
  std::map<std::string, std::string> keys;
};

std::vector<IndexRow> LoadIndex() {
  std::ifstream f(DataDir() + "index.tsv");
  EXPECT_TRUE(f.good());
  std::vector<IndexRow> rows;
  std::string line;
  std::getline(f, line);  // header
  while (std::getline(f, line)) {
    std::vector<std::string> col;
    std::istringstream in(line);
    std::string c;
    while (std::getline(in, c, '\t')) col.push_back(c);
    if (col.size() < 5) continue;
    IndexRow r;
    r.path = col[0] + "/" + col[1];
    r.bytes = std::stoul(col[3]);
    r.message = col[4];
    if (col.size() > 5) {
      std::istringstream kv(col[5]);
      std::string item;
      while (std::getline(kv, item, ';')) {
        size_t b = item.find_first_not_of(' ');
        if (b == std::string::npos) continue;
        item = item.substr(b);
        size_t eq = item.find('=');
        if (eq != std::string::npos) r.keys[item.substr(0, eq)] = item.substr(eq + 1);
      }
    }
    rows.push_back(r);
  }
  return rows;
}

std::string Trim(const uint8_t* s, size_t n) {
  std::string out(reinterpret_cast<const char*>(s), n);
  while (!out.empty() && (out.back() == ' ' || out.back() == '\0')) out.pop_back();
  return out;
}

// "::ffff:a.b.c.d" -> the 16-byte GID.
Bytes MappedGid(const std::string& s) {
  Bytes g(16, 0);
  g[10] = g[11] = 0xff;
  unsigned a, b, c, d;
  EXPECT_EQ(4, std::sscanf(s.c_str(), "::ffff:%u.%u.%u.%u", &a, &b, &c, &d)) << s;
  g[12] = static_cast<uint8_t>(a);
  g[13] = static_cast<uint8_t>(b);
  g[14] = static_cast<uint8_t>(c);
  g[15] = static_cast<uint8_t>(d);
  return g;
}

Bytes B(const uint8_t* p, size_t n) { return Bytes(p, p + n); }

const char kFcProposal[] = "smc-r-first-contact/03-f006-c2s-clc-proposal-v2.hex";
const char kFcAccept[] = "smc-r-first-contact/04-f008-s2c-clc-accept-v2.hex";
const char kFcConfirm[] = "smc-r-first-contact/05-f010-c2s-clc-confirm-v2.hex";
const char kScAccept[] = "smc-r-second-conn/07-f010-s2c-clc-accept-v2.hex";
const char kScConfirm[] = "smc-r-second-conn/10-f016-c2s-clc-confirm-v2.hex";
const char kDeclineV2[] = "smc-fallback-server-decline/04-f006-s2c-clc-decline-v2.hex";
const char kDeclineV1[] = "smc-fallback-client-nodev/03-f004-c2s-clc-decline-v1.hex";
const char kTcpData[] = "smc-fallback-server-decline/05-f008-c2s-tcp-data-fallback.hex";

const uint8_t kServerPeerId[8] = {0x12, 0xe3, 0x52, 0x54, 0x00, 0x77, 0x00, 0x01};
const uint8_t kClientPeerId[8] = {0xb8, 0xc2, 0x52, 0x54, 0x00, 0x77, 0x00, 0x02};
const uint8_t kServerMac[6] = {0x52, 0x54, 0x00, 0x77, 0x00, 0x01};
const uint8_t kClientMac[6] = {0x52, 0x54, 0x00, 0x77, 0x00, 0x02};
const char kEid[] = "SMCR-TEST-EID.77";

// ---- the captures, field by field ----------------------------------------

TEST(ClcCapture, ProposalV2) {
  const char* files[] = {kFcProposal, "smc-r-second-conn/03-f004-c2s-clc-proposal-v2.hex",
                         "smc-fallback-server-decline/03-f004-c2s-clc-proposal-v2.hex"};
  for (const char* file : files) {
    SCOPED_TRACE(file);
    Bytes m = LoadHex(file);
    ASSERT_EQ(156u, m.size());
    rrpc__clc_proposal p;
    ASSERT_EQ(0, rrpc__clc_decode_proposal(m.data(), m.size(), &p));
    EXPECT_EQ(RRPC_CLC_PROPOSAL, p.hdr.type);
    EXPECT_EQ(156, p.hdr.length);
    EXPECT_EQ(2, p.hdr.version);
    EXPECT_EQ(RRPC_CLC_SMC_N, p.hdr.typev1);  // "v1 type N"
    EXPECT_EQ(RRPC_CLC_SMC_R, p.hdr.typev2);  // "v2 type R"
    EXPECT_EQ(0, p.hdr.smcd);
    EXPECT_EQ(Bytes(8, 0), B(p.peer_id, 8));
    EXPECT_EQ(Bytes(16, 0), B(p.gid, 16));
    EXPECT_EQ(0, p.iparea_offset);
    EXPECT_EQ(0, p.has_ip_area);  // no v1 offer, so no prefix area
    ASSERT_EQ(1, p.has_v2_ext);
    EXPECT_EQ(MappedGid("::ffff:10.77.0.2"), B(p.roce_v2_gid, 16));
    EXPECT_EQ(0, p.v2_release);
    EXPECT_EQ(0, p.v2_seid);
    EXPECT_EQ(0, p.ism_gid_count);
    ASSERT_EQ(1, p.eid_count);
    EXPECT_EQ(kEid, Trim(p.eids[0], RRPC_CLC_EID_LEN));
    // Blank padded, as SMC wants it.
    EXPECT_EQ(' ', p.eids[0][RRPC_CLC_EID_LEN - 1]);
    // A Linux v2-only offer: rrpc answers v1 only, so it declines.
    EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_VERSMISMAT),
              rrpc__clc_proposal_decline_code(&p));

    rrpc__clc_msg any;
    ASSERT_EQ(0, rrpc__clc_decode(m.data(), m.size(), &any));
    EXPECT_EQ(RRPC_CLC_PROPOSAL, any.hdr.type);
    EXPECT_EQ(1, any.u.proposal.eid_count);
  }
}

TEST(ClcCapture, AcceptV2FirstContact) {
  Bytes m = LoadHex(kFcAccept);
  ASSERT_EQ(160u, m.size());
  rrpc__clc_accept a;
  ASSERT_EQ(0, rrpc__clc_decode_accept(m.data(), m.size(), &a));
  EXPECT_EQ(RRPC_CLC_ACCEPT, a.type);
  EXPECT_EQ(2, a.hdr.version);
  EXPECT_EQ(1, a.first_contact);
  EXPECT_EQ(B(kServerPeerId, 8), B(a.peer_id, 8));
  EXPECT_EQ(MappedGid("::ffff:10.77.0.1"), B(a.gid, 16));
  EXPECT_EQ(B(kServerMac, 6), B(a.mac, 6));
  EXPECT_EQ(0x000011u, a.qpn);
  EXPECT_EQ(0x0000031du, a.rkey);
  EXPECT_EQ(1, a.rmbe_idx);
  EXPECT_EQ(1u, a.token);
  EXPECT_EQ(2, a.ring_code);
  EXPECT_EQ(65536u, rrpc__clc_ring_size(a.ring_code));
  EXPECT_EQ(3, a.mtu);
  EXPECT_EQ(1024u, rrpc__clc_mtu_bytes(a.mtu));
  EXPECT_EQ(0, a.rq_depth_log2);  // reserved byte: Linux sends 0
  EXPECT_EQ(0, a.rrpc_features);
  EXPECT_EQ(0xffff89a9833c0000ull, a.ring_addr);
  EXPECT_EQ(0x532625u, a.psn);
  EXPECT_EQ(kEid, Trim(a.eid, RRPC_CLC_EID_LEN));
  ASSERT_EQ(1, a.has_fce);
  EXPECT_EQ(1, a.v2_direct);
  EXPECT_EQ(2, a.os_type);  // Linux
  EXPECT_EQ(0, a.release);
  EXPECT_EQ("vmA", Trim(a.hostname, RRPC_CLC_HOSTNAME_LEN));
  EXPECT_EQ(1, a.has_fce_v2x);
  EXPECT_EQ(0, a.max_conns);
  EXPECT_EQ(0, a.feature_mask);
  EXPECT_EQ(0, a.gid_count);  // only a Confirm carries the GID list
  // A kernel peer: no write-with-immediate flag.
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_VERSMISMAT),
            rrpc__clc_accept_decline_code(&a));
}

TEST(ClcCapture, ConfirmV2FirstContactWithGidList) {
  Bytes m = LoadHex(kFcConfirm);
  ASSERT_EQ(180u, m.size());
  rrpc__clc_accept c;
  ASSERT_EQ(0, rrpc__clc_decode_accept(m.data(), m.size(), &c));
  EXPECT_EQ(RRPC_CLC_CONFIRM, c.type);
  EXPECT_EQ(1, c.first_contact);
  EXPECT_EQ(B(kClientPeerId, 8), B(c.peer_id, 8));
  EXPECT_EQ(MappedGid("::ffff:10.77.0.2"), B(c.gid, 16));
  EXPECT_EQ(B(kClientMac, 6), B(c.mac, 6));
  EXPECT_EQ(0x11u, c.qpn);
  EXPECT_EQ(0x30fu, c.rkey);
  EXPECT_EQ(1u, c.token);
  EXPECT_EQ(0x4fc0dbu, c.psn);
  EXPECT_EQ(2, c.ring_code);
  EXPECT_EQ(3, c.mtu);
  EXPECT_EQ(0xffff8b77839a0000ull, c.ring_addr);
  EXPECT_EQ("vmB", Trim(c.hostname, RRPC_CLC_HOSTNAME_LEN));
  EXPECT_EQ(1, c.has_fce_v2x);
  ASSERT_EQ(1, c.gid_count);
  EXPECT_EQ(MappedGid("::ffff:10.77.0.2"), B(c.gids[0], 16));
}

TEST(ClcCapture, AcceptConfirmV2Reuse) {
  struct {
    const char* file;
    uint8_t type;
    uint32_t rkey, psn;
  } cases[] = {{kScAccept, RRPC_CLC_ACCEPT, 0x31d, 0x532625},
               {kScConfirm, RRPC_CLC_CONFIRM, 0x30f, 0x4fc0db}};
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.file);
    Bytes m = LoadHex(tc.file);
    ASSERT_EQ(108u, m.size());
    rrpc__clc_accept a;
    ASSERT_EQ(0, rrpc__clc_decode_accept(m.data(), m.size(), &a));
    EXPECT_EQ(tc.type, a.type);
    EXPECT_EQ(0, a.first_contact);
    EXPECT_EQ(0x11u, a.qpn);
    EXPECT_EQ(tc.rkey, a.rkey);
    EXPECT_EQ(2u, a.token);  // second connection on the link group
    EXPECT_EQ(tc.psn, a.psn);
    EXPECT_EQ(kEid, Trim(a.eid, RRPC_CLC_EID_LEN));
    EXPECT_EQ(0, a.has_fce);
    EXPECT_EQ(0, a.gid_count);
  }
}

TEST(ClcCapture, Declines) {
  Bytes v2 = LoadHex(kDeclineV2);
  ASSERT_EQ(44u, v2.size());
  rrpc__clc_decline d;
  ASSERT_EQ(0, rrpc__clc_decode_decline(v2.data(), v2.size(), &d));
  EXPECT_EQ(2, d.hdr.version);
  EXPECT_EQ(0x03030000u, d.diag);
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_NOSMCDEV), d.diag);
  EXPECT_EQ(0, d.out_of_sync);
  EXPECT_EQ(2, d.os_type);
  EXPECT_EQ(B(kServerPeerId, 8), B(d.peer_id, 8));
  for (uint32_t x : d.diag_v2) EXPECT_EQ(0u, x);
  EXPECT_STREQ("no SMC device", rrpc__clc_decline_text(d.diag));

  Bytes v1 = LoadHex(kDeclineV1);
  ASSERT_EQ(28u, v1.size());
  ASSERT_EQ(0, rrpc__clc_decode_decline(v1.data(), v1.size(), &d));
  EXPECT_EQ(1, d.hdr.version);
  EXPECT_EQ(0x03030000u, d.diag);
  EXPECT_EQ(0, d.os_type);
  EXPECT_EQ(B(kClientPeerId, 8), B(d.peer_id, 8));
}

// Every CLC row of index.tsv, checked against the fields it lists.
TEST(ClcCapture, IndexFieldValues) {
  int checked = 0;
  for (const IndexRow& r : LoadIndex()) {
    if (r.message.compare(0, 4, "clc-") != 0) continue;
    SCOPED_TRACE(r.path);
    Bytes m = LoadHex(r.path);
    ASSERT_EQ(r.bytes, m.size());
    rrpc__clc_msg msg;
    ASSERT_EQ(0, rrpc__clc_decode(m.data(), m.size(), &msg));
    EXPECT_EQ(r.bytes, msg.hdr.length);
    if (r.message.find("proposal") != std::string::npos) {
      EXPECT_EQ(RRPC_CLC_PROPOSAL, msg.hdr.type);
      const rrpc__clc_proposal& p = msg.u.proposal;
      EXPECT_EQ(MappedGid(r.keys.at("gid")), B(p.roce_v2_gid, 16));
      ASSERT_GE(p.eid_count, 1);
      EXPECT_EQ(r.keys.at("eid"), Trim(p.eids[0], RRPC_CLC_EID_LEN));
    } else if (r.message.find("decline") != std::string::npos) {
      EXPECT_EQ(RRPC_CLC_DECLINE, msg.hdr.type);
      uint32_t diag = static_cast<uint32_t>(std::stoul(r.keys.at("diag"), nullptr, 16));
      EXPECT_EQ(diag, msg.u.decline.diag);
      EXPECT_EQ(r.message.find("-v2") != std::string::npos ? 2 : 1, msg.hdr.version);
    } else {
      const rrpc__clc_accept& a = msg.u.accept;
      EXPECT_EQ(r.message.find("accept") != std::string::npos ? RRPC_CLC_ACCEPT
                                                              : RRPC_CLC_CONFIRM,
                msg.hdr.type);
      EXPECT_EQ(std::stoul(r.keys.at("qpn"), nullptr, 16), a.qpn);
      EXPECT_EQ(std::stoul(r.keys.at("rkey"), nullptr, 16), a.rkey);
      EXPECT_EQ(std::stoul(r.keys.at("token"), nullptr, 16), a.token);
      EXPECT_EQ(std::stoul(r.keys.at("psn"), nullptr, 16), a.psn);
      EXPECT_EQ(std::stoul(r.keys.at("fc")), a.first_contact);
      if (r.keys.count("host")) {
        EXPECT_EQ(r.keys.at("host"), Trim(a.hostname, RRPC_CLC_HOSTNAME_LEN));
      }
      EXPECT_EQ(65536u, rrpc__clc_ring_size(a.ring_code));
      EXPECT_EQ(1024u, rrpc__clc_mtu_bytes(a.mtu));
    }
    checked++;
  }
  EXPECT_EQ(9, checked);  // 3 proposals, 4 accepts/confirms, 2 declines
}

// ---- rrpc's v1 encoders --------------------------------------------------

rrpc__clc_proposal RrpcProposal() {
  rrpc__clc_proposal p;
  std::memset(&p, 0, sizeof(p));
  std::memcpy(p.peer_id, kClientPeerId, 8);
  Bytes gid = MappedGid("::ffff:10.77.0.2");
  std::memcpy(p.gid, gid.data(), 16);
  std::memcpy(p.mac, kClientMac, 6);
  p.ipv4_subnet = 0x0a4d0000;  // 10.77.0.0/24
  p.ipv4_prefix_len = 24;
  p.rrpc_features = RRPC_CLC_FEAT_WWI;
  p.rrpc_version = RRPC_CLC_WIRE_VERSION;
  return p;
}

rrpc__clc_accept RrpcAccept(uint8_t type) {
  rrpc__clc_accept a;
  std::memset(&a, 0, sizeof(a));
  a.type = type;
  a.first_contact = 1;
  std::memcpy(a.peer_id, kServerPeerId, 8);
  Bytes gid = MappedGid("::ffff:10.77.0.1");
  std::memcpy(a.gid, gid.data(), 16);
  std::memcpy(a.mac, kServerMac, 6);
  a.qpn = 0x123456;
  a.rkey = 0xdeadbeef;
  a.rmbe_idx = 1;
  a.token = 0x01020304;
  a.ring_code = 4;  // 256 KiB
  a.mtu = 3;
  a.rq_depth_log2 = 7;  // 128 receives
  a.ring_addr = 0x00007f1234560000ull;
  a.rrpc_features = RRPC_CLC_FEAT_WWI;
  a.psn = 0xabcdef;
  return a;
}

TEST(ClcEncode, ProposalV1Layout) {
  rrpc__clc_proposal p = RrpcProposal();
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, buf, sizeof(buf), &len));
  ASSERT_EQ(92u, len);
  const uint8_t head[8] = {0xe2, 0xd4, 0xc3, 0xd9, 0x01, 0x00, 92, 0x10};
  EXPECT_EQ(B(head, 8), B(buf, 8));
  EXPECT_EQ(B(kClientPeerId, 8), B(buf + 8, 8));
  EXPECT_EQ(MappedGid("::ffff:10.77.0.2"), B(buf + 16, 16));
  EXPECT_EQ(B(kClientMac, 6), B(buf + 32, 6));
  EXPECT_EQ(0, buf[38]);  // ip-area offset 40: a zeroed SMC-D area first
  EXPECT_EQ(40, buf[39]);
  EXPECT_EQ(Bytes(40, 0), B(buf + 40, 40));
  const uint8_t ip[8] = {10, 77, 0, 0, 24, RRPC_CLC_FEAT_WWI, RRPC_CLC_WIRE_VERSION, 0};
  EXPECT_EQ(B(ip, 8), B(buf + 80, 8));
  EXPECT_EQ(B(head, 4), B(buf + 88, 4));

  rrpc__clc_proposal q;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(buf, len, &q));
  EXPECT_EQ(1, q.hdr.version);
  EXPECT_EQ(RRPC_CLC_SMC_R, q.hdr.typev1);
  EXPECT_EQ(1, q.has_ip_area);
  EXPECT_EQ(0, q.has_v2_ext);
  EXPECT_EQ(0x0a4d0000u, q.ipv4_subnet);
  EXPECT_EQ(24, q.ipv4_prefix_len);
  EXPECT_EQ(RRPC_CLC_FEAT_WWI, q.rrpc_features);
  EXPECT_EQ(RRPC_CLC_WIRE_VERSION, q.rrpc_version);
  EXPECT_EQ(0u, rrpc__clc_proposal_decline_code(&q));
  EXPECT_EQ(40, q.iparea_offset);
  EXPECT_EQ(ENOSPC, -rrpc__clc_encode_proposal(&p, buf, 91, &len));

  // The legacy v1 layout (IP area right after the local area, 52 bytes)
  // from other stacks still decodes.
  uint8_t legacy[52];
  std::memcpy(legacy, buf, 38);
  legacy[6] = 52;
  legacy[38] = legacy[39] = 0;
  std::memcpy(legacy + 40, buf + 80, 8);
  std::memcpy(legacy + 48, buf, 4);
  ASSERT_EQ(0, rrpc__clc_decode_proposal(legacy, sizeof(legacy), &q));
  EXPECT_EQ(0, q.iparea_offset);
  EXPECT_EQ(0x0a4d0000u, q.ipv4_subnet);
  EXPECT_EQ(RRPC_CLC_FEAT_WWI, q.rrpc_features);
  EXPECT_EQ(0u, rrpc__clc_proposal_decline_code(&q));
}

TEST(ClcEncode, ProposalWithIpv6Prefixes) {
  rrpc__clc_proposal p = RrpcProposal();
  p.ipv4_subnet = 0;
  p.ipv4_prefix_len = 0;
  p.ipv6_count = 2;
  for (int i = 0; i < 2; i++) {
    for (int j = 0; j < 16; j++) p.ipv6[i].prefix[j] = static_cast<uint8_t>(0x20 + i + j);
    p.ipv6[i].len = static_cast<uint8_t>(64 + i);
  }
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, buf, sizeof(buf), &len));
  ASSERT_EQ(92u + 2 * 17, len);
  rrpc__clc_proposal q;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(buf, len, &q));
  ASSERT_EQ(2, q.ipv6_count);
  for (int i = 0; i < 2; i++) {
    EXPECT_EQ(B(p.ipv6[i].prefix, 16), B(q.ipv6[i].prefix, 16));
    EXPECT_EQ(p.ipv6[i].len, q.ipv6[i].len);
  }
  p.ipv6_count = RRPC_CLC_MAX_IPV6_PREFIXES + 1;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_proposal(&p, buf, sizeof(buf), &len));
}

TEST(ClcEncode, AcceptConfirmV1Layout) {
  for (uint8_t type : {static_cast<uint8_t>(RRPC_CLC_ACCEPT), static_cast<uint8_t>(RRPC_CLC_CONFIRM)}) {
    rrpc__clc_accept a = RrpcAccept(type);
    uint8_t buf[RRPC_CLC_MAX_LEN];
    size_t len = 0;
    ASSERT_EQ(0, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
    ASSERT_EQ(68u, len);
    EXPECT_EQ(type, buf[4]);
    EXPECT_EQ(0, buf[5]);
    EXPECT_EQ(68, buf[6]);
    EXPECT_EQ(0x18, buf[7]);  // v1, first contact, SMC-R
    const uint8_t qpn[3] = {0x12, 0x34, 0x56};
    EXPECT_EQ(B(qpn, 3), B(buf + 38, 3));
    const uint8_t rkey[4] = {0xde, 0xad, 0xbe, 0xef};
    EXPECT_EQ(B(rkey, 4), B(buf + 41, 4));
    EXPECT_EQ(1, buf[45]);
    const uint8_t token[4] = {1, 2, 3, 4};
    EXPECT_EQ(B(token, 4), B(buf + 46, 4));
    EXPECT_EQ(0x43, buf[50]);  // size code 4, MTU 3
    EXPECT_EQ(7, buf[51]);     // rrpc: log2 receive depth
    const uint8_t addr[8] = {0, 0, 0x7f, 0x12, 0x34, 0x56, 0, 0};
    EXPECT_EQ(B(addr, 8), B(buf + 52, 8));
    EXPECT_EQ(RRPC_CLC_FEAT_WWI, buf[60]);  // rrpc: feature flags
    const uint8_t psn[3] = {0xab, 0xcd, 0xef};
    EXPECT_EQ(B(psn, 3), B(buf + 61, 3));
    EXPECT_EQ(B(buf, 4), B(buf + 64, 4));

    rrpc__clc_accept b;
    ASSERT_EQ(0, rrpc__clc_decode_accept(buf, len, &b));
    EXPECT_EQ(type, b.type);
    EXPECT_EQ(1, b.hdr.version);
    EXPECT_EQ(1, b.first_contact);
    EXPECT_EQ(a.qpn, b.qpn);
    EXPECT_EQ(a.rkey, b.rkey);
    EXPECT_EQ(a.token, b.token);
    EXPECT_EQ(a.ring_code, b.ring_code);
    EXPECT_EQ(a.mtu, b.mtu);
    EXPECT_EQ(a.rq_depth_log2, b.rq_depth_log2);
    EXPECT_EQ(a.ring_addr, b.ring_addr);
    EXPECT_EQ(a.rrpc_features, b.rrpc_features);
    EXPECT_EQ(a.psn, b.psn);
    EXPECT_EQ(0, b.has_fce);
    EXPECT_EQ(0u, rrpc__clc_accept_decline_code(&b));

    // Without first contact the flag bit is clear.
    a.first_contact = 0;
    ASSERT_EQ(0, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
    EXPECT_EQ(0x10, buf[7]);
  }
}

TEST(ClcEncode, AcceptRejectsFieldsBeyondWireWidth) {
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len = 0;
  rrpc__clc_accept a = RrpcAccept(RRPC_CLC_ACCEPT);
  a.qpn = 0x1000000;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  a = RrpcAccept(RRPC_CLC_ACCEPT);
  a.psn = 0x1000000;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  a = RrpcAccept(RRPC_CLC_ACCEPT);
  a.ring_code = 16;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  a = RrpcAccept(RRPC_CLC_ACCEPT);
  a.mtu = 16;
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  a = RrpcAccept(RRPC_CLC_PROPOSAL);
  EXPECT_EQ(-EINVAL, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  a = RrpcAccept(RRPC_CLC_ACCEPT);
  EXPECT_EQ(-ENOSPC, rrpc__clc_encode_accept(&a, buf, 67, &len));
  // The largest ring rrpc peers accept: code 15 = 512 MiB.
  a.ring_code = 15;
  ASSERT_EQ(0, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  rrpc__clc_accept b;
  ASSERT_EQ(0, rrpc__clc_decode_accept(buf, len, &b));
  EXPECT_EQ(512ull << 20, rrpc__clc_ring_size(b.ring_code));
}

TEST(ClcEncode, DeclineV1) {
  rrpc__clc_decline d;
  std::memset(&d, 0, sizeof(d));
  std::memcpy(d.peer_id, kServerPeerId, 8);
  d.diag = RRPC_CLC_DECL_VERSMISMAT;
  uint8_t buf[64];
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_decline(&d, buf, sizeof(buf), &len));
  ASSERT_EQ(28u, len);
  const uint8_t want[28] = {0xe2, 0xd4, 0xc3, 0xd9, 0x04, 0x00, 0x1c, 0x10,
                            0x12, 0xe3, 0x52, 0x54, 0x00, 0x77, 0x00, 0x01,
                            0x03, 0x0c, 0x00, 0x00, 0,    0,    0,    0,
                            0xe2, 0xd4, 0xc3, 0xd9};
  EXPECT_EQ(B(want, 28), B(buf, 28));
  rrpc__clc_decline e;
  ASSERT_EQ(0, rrpc__clc_decode_decline(buf, len, &e));
  EXPECT_EQ(d.diag, e.diag);
  d.out_of_sync = 1;
  ASSERT_EQ(0, rrpc__clc_encode_decline(&d, buf, sizeof(buf), &len));
  EXPECT_EQ(0x18, buf[7]);
  EXPECT_EQ(-ENOSPC, rrpc__clc_encode_decline(&d, buf, 27, &len));
}

// The Linux v1 Decline from the capture re-encodes to the same bytes.
TEST(ClcEncode, LinuxV1DeclineRoundTrip) {
  Bytes m = LoadHex(kDeclineV1);
  rrpc__clc_decline d;
  ASSERT_EQ(0, rrpc__clc_decode_decline(m.data(), m.size(), &d));
  uint8_t buf[64];
  size_t len = 0;
  ASSERT_EQ(0, rrpc__clc_encode_decline(&d, buf, sizeof(buf), &len));
  EXPECT_EQ(m, B(buf, len));
}

// ---- policy ---------------------------------------------------------------

TEST(ClcPolicy, ProposalDeclineCodes) {
  rrpc__clc_proposal p = RrpcProposal();
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len;
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, buf, sizeof(buf), &len));
  rrpc__clc_proposal q;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(buf, len, &q));
  EXPECT_EQ(0u, rrpc__clc_proposal_decline_code(&q));

  // A kernel v1 stack: reserved bytes zero.
  rrpc__clc_proposal k = q;
  k.rrpc_features = 0;
  k.rrpc_version = 0;
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_VERSMISMAT), rrpc__clc_proposal_decline_code(&k));
  k = q;
  k.rrpc_version = 0;
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_VERSMISMAT), rrpc__clc_proposal_decline_code(&k));
  // SMC-D only.
  buf[7] = 0x11;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(buf, len, &k));
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_MODEUNSUPP), rrpc__clc_proposal_decline_code(&k));
  // Both R and D offered: fine.
  buf[7] = 0x13;
  ASSERT_EQ(0, rrpc__clc_decode_proposal(buf, len, &k));
  EXPECT_EQ(0u, rrpc__clc_proposal_decline_code(&k));
}

TEST(ClcPolicy, AcceptDeclineCodes) {
  rrpc__clc_accept a = RrpcAccept(RRPC_CLC_ACCEPT);
  EXPECT_EQ(0u, rrpc__clc_accept_decline_code(&a));
  rrpc__clc_accept b = a;
  b.rrpc_features = 0;
  EXPECT_EQ(static_cast<uint32_t>(RRPC_CLC_DECL_VERSMISMAT), rrpc__clc_accept_decline_code(&b));
  const uint32_t cnf = RRPC_CLC_DECL_CNFERR;
  b = a; b.mtu = 0;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.mtu = 6;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.rmbe_idx = 0;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.qpn = 1;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  // Through rdma_cm the QPN is not used to connect, and iWARP (siw) hands
  // out QPN 1 to a process's first QP.
  b = a; b.qpn = 1; b.rrpc_features |= RRPC_CLC_FEAT_CM;
  EXPECT_EQ(0u, rrpc__clc_accept_decline_code(&b));
  b = a; b.rq_depth_log2 = 0;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.rq_depth_log2 = 1;  // 2 receives: too few for the window rules
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.rq_depth_log2 = RRPC_CLC_RQ_DEPTH_LOG2_MIN;
  EXPECT_EQ(0u, rrpc__clc_accept_decline_code(&b));
  b = a; b.rq_depth_log2 = RRPC_CLC_RQ_DEPTH_LOG2_MAX + 1;
  EXPECT_EQ(cnf, rrpc__clc_accept_decline_code(&b));
  b = a; b.rq_depth_log2 = RRPC_CLC_RQ_DEPTH_LOG2_MAX;
  EXPECT_EQ(0u, rrpc__clc_accept_decline_code(&b));
}

TEST(ClcPolicy, DeclineTexts) {
  const uint32_t known[] = {
      RRPC_CLC_DECL_MEM,       RRPC_CLC_DECL_TIMEOUT_CL, RRPC_CLC_DECL_TIMEOUT_AL,
      RRPC_CLC_DECL_CNFERR,    RRPC_CLC_DECL_PEERNOSMC,  RRPC_CLC_DECL_IPSEC,
      RRPC_CLC_DECL_NOSMCDEV,  RRPC_CLC_DECL_NOSMCRDEV,  RRPC_CLC_DECL_MODEUNSUPP,
      RRPC_CLC_DECL_RMBE_EC,   RRPC_CLC_DECL_DIFFPREFIX, RRPC_CLC_DECL_NOSRVLINK,
      RRPC_CLC_DECL_VERSMISMAT, RRPC_CLC_DECL_SYNCERR,   RRPC_CLC_DECL_PEERDECL};
  std::map<std::string, uint32_t> seen;
  for (uint32_t c : known) {
    const char* t = rrpc__clc_decline_text(c);
    ASSERT_NE(nullptr, t);
    EXPECT_TRUE(seen.emplace(t, c).second) << "duplicate text " << t;
  }
  EXPECT_STREQ("internal error", rrpc__clc_decline_text(0x09990003));
  EXPECT_STREQ("timeout", rrpc__clc_decline_text(0x02990000));
  EXPECT_STREQ("unknown decline code", rrpc__clc_decline_text(0x7f000000));
  EXPECT_STREQ("CONFIRM", rrpc__clc_type_name(RRPC_CLC_CONFIRM));
  EXPECT_STREQ("UNKNOWN", rrpc__clc_type_name(9));
}

TEST(ClcPolicy, RingAndMtuCodes) {
  uint8_t code = 99;
  for (unsigned n = 0; n <= 15; n++) {
    EXPECT_EQ(16384ull << n, rrpc__clc_ring_size(n));
    ASSERT_EQ(0, rrpc__clc_ring_code(16384ull << n, &code));
    EXPECT_EQ(n, code);
  }
  EXPECT_EQ(0u, rrpc__clc_ring_size(16));
  EXPECT_EQ(-EINVAL, rrpc__clc_ring_code(0, &code));
  EXPECT_EQ(-EINVAL, rrpc__clc_ring_code(16384 * 3, &code));
  EXPECT_EQ(-EINVAL, rrpc__clc_ring_code(8192, &code));
  EXPECT_EQ(-EINVAL, rrpc__clc_ring_code(1ull << 30, &code));
  EXPECT_EQ(0u, rrpc__clc_mtu_bytes(0));
  EXPECT_EQ(256u, rrpc__clc_mtu_bytes(1));
  EXPECT_EQ(4096u, rrpc__clc_mtu_bytes(5));
  EXPECT_EQ(0u, rrpc__clc_mtu_bytes(6));
}

// ---- framing and hostile input -------------------------------------------

TEST(ClcHostile, PeekHeader) {
  rrpc__clc_hdr h;
  Bytes m = LoadHex(kFcAccept);
  for (size_t k = 0; k < 8; k++)
    EXPECT_EQ(-EAGAIN, rrpc__clc_peek_header(m.data(), k, &h)) << k;
  ASSERT_EQ(0, rrpc__clc_peek_header(m.data(), 8, &h));
  EXPECT_EQ(RRPC_CLC_ACCEPT, h.type);
  EXPECT_EQ(160, h.length);
  EXPECT_EQ(-EAGAIN, rrpc__clc_peek_header(nullptr, 0, &h));

  // Application bytes instead of CLC: the server falls back to plain TCP.
  Bytes tcp = LoadHex(kTcpData);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_peek_header(tcp.data(), 1, &h));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_peek_header(tcp.data(), tcp.size(), &h));
  const uint8_t http[] = "GET / HTTP/1.1\r\n";
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_peek_header(http, sizeof(http) - 1, &h));
  // Wrong byte in a partial eyecatcher.
  const uint8_t partial[3] = {0xe2, 0xd4, 0x00};
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_peek_header(partial, 3, &h));

  auto hdr = [](uint8_t type, uint16_t len, uint8_t b7) {
    Bytes b = {0xe2, 0xd4, 0xc3, 0xd9, type, static_cast<uint8_t>(len >> 8),
               static_cast<uint8_t>(len), b7};
    return b;
  };
  struct {
    uint8_t type;
    uint16_t len;
    uint8_t b7;
    int rc;
  } cases[] = {
      {0, 52, 0x10, -RRPC_EPARSE},    {5, 52, 0x10, -RRPC_EPARSE},
      {1, 52, 0x00, -RRPC_EPARSE},    // version 0
      {1, 51, 0x10, -RRPC_EPARSE},    {1, 52, 0x10, 0},
      {1, 83, 0x22, -RRPC_EPARSE},    {1, 84, 0x22, 0},
      {1, 1024, 0x22, 0},             {1, 1025, 0x22, -RRPC_EPARSE},
      {2, 67, 0x18, -RRPC_EPARSE},    {2, 68, 0x18, 0},
      {2, 69, 0x18, -RRPC_EPARSE},    {3, 107, 0x28, -RRPC_EPARSE},
      {3, 108, 0x28, 0},              {4, 28, 0x10, 0},
      {4, 44, 0x20, 0},               {4, 36, 0x10, -RRPC_EPARSE},
      {4, 0xffff, 0x10, -RRPC_EPARSE}, {3, 0, 0x10, -RRPC_EPARSE},
  };
  for (const auto& c : cases) {
    Bytes b = hdr(c.type, c.len, c.b7);
    EXPECT_EQ(c.rc, rrpc__clc_peek_header(b.data(), b.size(), &h))
        << "type " << int(c.type) << " len " << c.len;
  }
  // The SMC-D eyecatcher is a CLC header too (declined later).
  Bytes d = hdr(4, 28, 0x10);
  d[3] = 0xc4;
  ASSERT_EQ(0, rrpc__clc_peek_header(d.data(), d.size(), &h));
  EXPECT_EQ(1, h.smcd);
}

TEST(ClcHostile, TruncatedAndTrailer) {
  const char* files[] = {kFcProposal, kFcAccept, kFcConfirm, kScAccept, kDeclineV1, kDeclineV2};
  for (const char* f : files) {
    SCOPED_TRACE(f);
    Bytes m = LoadHex(f);
    rrpc__clc_msg msg;
    for (size_t k = 0; k < m.size(); k++) {
      // Exactly-sized heap copies so ASan sees any read past the end.
      Bytes t(m.begin(), m.begin() + static_cast<long>(k));
      int rc = rrpc__clc_decode(t.data(), t.size(), &msg);
      EXPECT_TRUE(rc == -EAGAIN) << "k=" << k << " rc=" << rc;
    }
    // Extra bytes after the message are not part of it.
    Bytes longer = m;
    longer.push_back(0x55);
    EXPECT_EQ(0, rrpc__clc_decode(longer.data(), longer.size(), &msg));
  }
  // A broken trailer is rejected, except on a Decline (Linux ignores it).
  Bytes a = LoadHex(kFcAccept);
  a[a.size() - 1] ^= 1;
  rrpc__clc_msg msg;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode(a.data(), a.size(), &msg));
  Bytes d = LoadHex(kDeclineV1);
  d[d.size() - 1] = 0;
  EXPECT_EQ(0, rrpc__clc_decode(d.data(), d.size(), &msg));
}

TEST(ClcHostile, WrongTypeForDecoder) {
  Bytes p = LoadHex(kFcProposal);
  Bytes a = LoadHex(kFcAccept);
  Bytes d = LoadHex(kDeclineV1);
  rrpc__clc_proposal pp;
  rrpc__clc_accept aa;
  rrpc__clc_decline dd;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(a.data(), a.size(), &pp));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_accept(p.data(), p.size(), &aa));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_accept(d.data(), d.size(), &aa));
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_decline(a.data(), a.size(), &dd));
}

TEST(ClcHostile, MalformedProposals) {
  rrpc__clc_proposal p = RrpcProposal();
  uint8_t good[RRPC_CLC_MAX_LEN];
  size_t len;
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, good, sizeof(good), &len));
  rrpc__clc_proposal q;
  Bytes b(good, good + len);

  // v1 length must match the prefix count exactly.
  Bytes x = b;
  x[87] = 1;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  // Too many IPv6 prefixes, even with a matching length.
  p.ipv6_count = 8;
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, good, sizeof(good), &len));
  x.assign(good, good + len);
  ASSERT_EQ(0, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x[87] = 9;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  // An ip-area offset pointing past the end.
  x = b;
  x[39] = 200;  // 240: past the end
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x[38] = 0xff;
  x[39] = 0xff;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  // v1 path "neither" does not exist.
  x = b;
  x[7] = 0x12;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));

  // v2: the extension offset, EID count and ISM GID count are checked.
  Bytes v2 = LoadHex(kFcProposal);
  x = v2;
  x[50] = 0x10;  // offset 0x101c: far outside
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x = v2;
  x[51] = 0x3d;  // extension at 113: its 40 fixed bytes run into the trailer
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x = v2;
  x[80] = 2;  // 2 EIDs claimed, 1 present
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x[80] = 9;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x = v2;
  x[81] = 9;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x = v2;
  x[7] = 0x2a;  // v2 type N, v1 type N: offers nothing
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  x = v2;
  x[7] = 0x20;  // now claims a v1 SMC-R offer: the IP area at 40+0 is read
  ASSERT_EQ(0, rrpc__clc_decode_proposal(x.data(), x.size(), &q));
  EXPECT_EQ(1, q.has_ip_area);
  EXPECT_EQ(1, q.has_v2_ext);
}

TEST(ClcHostile, MalformedAccepts) {
  rrpc__clc_accept a;
  Bytes v1(RRPC_CLC_ACCEPT_V1_LEN);
  size_t len;
  rrpc__clc_accept src = RrpcAccept(RRPC_CLC_ACCEPT);
  ASSERT_EQ(0, rrpc__clc_encode_accept(&src, v1.data(), v1.size(), &len));
  Bytes x = v1;
  x[7] = 0x19;  // SMC-D
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_accept(x.data(), x.size(), &a));
  x = v1;
  x[3] = 0xc4;  // SMCD eyecatcher at both ends
  x[67] = 0xc4;
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_accept(x.data(), x.size(), &a));

  // Confirm GID list: a count that does not add up leaves no list; a count
  // above the cap that adds up is rejected.
  Bytes c = LoadHex(kFcConfirm);
  x = c;
  x[156] = 2;
  ASSERT_EQ(0, rrpc__clc_decode_accept(x.data(), x.size(), &a));
  EXPECT_EQ(0, a.gid_count);
  Bytes big(RRPC_CLC_MAX_LEN, 0);
  size_t n = 9;
  size_t blen = 160 + 16 * n + 4;
  std::memcpy(big.data(), c.data(), 156);
  big[5] = static_cast<uint8_t>(blen >> 8);
  big[6] = static_cast<uint8_t>(blen);
  big[156] = static_cast<uint8_t>(n);
  std::memcpy(big.data() + blen - 4, c.data(), 4);
  big.resize(blen);
  EXPECT_EQ(-RRPC_EPARSE, rrpc__clc_decode_accept(big.data(), big.size(), &a));
  big[156] = 8;  // 8 GIDs, 144 bytes: now the count does not add up
  ASSERT_EQ(0, rrpc__clc_decode_accept(big.data(), big.size(), &a));
  EXPECT_EQ(0, a.gid_count);

  // An older kernel's Confirm: GID list straight after the hostname.
  Bytes old(148 + 16 + 0, 0);
  std::memcpy(old.data(), c.data(), 140);
  old[5] = 0;
  old[6] = static_cast<uint8_t>(old.size());
  old[140] = 1;
  std::memcpy(old.data() + 144, c.data() + 160, 16);
  std::memcpy(old.data() + old.size() - 4, c.data(), 4);
  ASSERT_EQ(0, rrpc__clc_decode_accept(old.data(), old.size(), &a));
  EXPECT_EQ(1, a.has_fce);
  EXPECT_EQ(0, a.has_fce_v2x);
  ASSERT_EQ(1, a.gid_count);
  EXPECT_EQ(MappedGid("::ffff:10.77.0.2"), B(a.gids[0], 16));
}

// Every single-bit flip and every length rewrite of every vector: decoding
// must stay in bounds (ASan/UBSan builds) and either fail cleanly or yield a
// message whose own length matches.
TEST(ClcHostile, BitFlipsAndLengthRewrites) {
  const char* files[] = {kFcProposal, kFcAccept, kFcConfirm, kScAccept, kScConfirm,
                         kDeclineV1, kDeclineV2};
  for (const char* f : files) {
    SCOPED_TRACE(f);
    Bytes m = LoadHex(f);
    rrpc__clc_msg msg;
    for (size_t i = 0; i < m.size(); i++) {
      for (int bit = 0; bit < 8; bit++) {
        Bytes x = m;
        x[i] ^= static_cast<uint8_t>(1 << bit);
        int rc = rrpc__clc_decode(x.data(), x.size(), &msg);
        ASSERT_TRUE(rc == 0 || rc == -RRPC_EPARSE || rc == -EAGAIN) << rc;
        if (rc == 0) {
          EXPECT_LE(msg.hdr.length, x.size());
        }
      }
    }
    for (unsigned len = 0; len <= 0xffff; len += (len < 400 ? 1 : 97)) {
      Bytes x = m;
      x[5] = static_cast<uint8_t>(len >> 8);
      x[6] = static_cast<uint8_t>(len);
      int rc = rrpc__clc_decode(x.data(), x.size(), &msg);
      ASSERT_TRUE(rc == 0 || rc == -RRPC_EPARSE || rc == -EAGAIN) << rc;
      if (len > x.size() && rc != -RRPC_EPARSE) {
        EXPECT_EQ(-EAGAIN, rc);
      }
    }
  }
}

// Writes rrpc-encoded messages for test/tshark/check.sh when
// RRPC_CLC_TSHARK_OUT names a file: one line per message,
// "<name> <c2s|s2c> <hex>". Without the variable it still checks that each
// message decodes.
TEST(ClcTshark, ExportEncodedMessages) {
  struct Out {
    std::string name, dir;
    Bytes bytes;
  };
  std::vector<Out> outs;
  uint8_t buf[RRPC_CLC_MAX_LEN];
  size_t len;
  rrpc__clc_proposal p = RrpcProposal();
  ASSERT_EQ(0, rrpc__clc_encode_proposal(&p, buf, sizeof(buf), &len));
  outs.push_back({"proposal", "c2s", B(buf, len)});
  rrpc__clc_accept a = RrpcAccept(RRPC_CLC_ACCEPT);
  ASSERT_EQ(0, rrpc__clc_encode_accept(&a, buf, sizeof(buf), &len));
  outs.push_back({"accept", "s2c", B(buf, len)});
  rrpc__clc_accept c = RrpcAccept(RRPC_CLC_CONFIRM);
  std::memcpy(c.peer_id, kClientPeerId, 8);
  Bytes gid = MappedGid("::ffff:10.77.0.2");
  std::memcpy(c.gid, gid.data(), 16);
  std::memcpy(c.mac, kClientMac, 6);
  c.qpn = 0x000017;
  c.rkey = 0x00000420;
  c.token = 0x0a0b0c0d;
  c.ring_code = 15;  // 512 MiB: beyond Linux's cap, allowed between rrpc peers
  c.psn = 0x00beef;
  ASSERT_EQ(0, rrpc__clc_encode_accept(&c, buf, sizeof(buf), &len));
  outs.push_back({"confirm", "c2s", B(buf, len)});
  rrpc__clc_decline d;
  std::memset(&d, 0, sizeof(d));
  std::memcpy(d.peer_id, kServerPeerId, 8);
  d.diag = RRPC_CLC_DECL_VERSMISMAT;
  ASSERT_EQ(0, rrpc__clc_encode_decline(&d, buf, sizeof(buf), &len));
  outs.push_back({"decline", "s2c", B(buf, len)});

  for (const Out& o : outs) {
    rrpc__clc_msg msg;
    EXPECT_EQ(0, rrpc__clc_decode(o.bytes.data(), o.bytes.size(), &msg)) << o.name;
  }
  const char* path = std::getenv("RRPC_CLC_TSHARK_OUT");
  if (path == nullptr || *path == '\0') return;
  std::ofstream f(path);
  ASSERT_TRUE(f.good()) << path;
  for (const Out& o : outs) {
    f << o.name << ' ' << o.dir << ' ';
    for (uint8_t byte : o.bytes) {
      char h[3];
      std::snprintf(h, sizeof(h), "%02x", byte);
      f << h;
    }
    f << '\n';
  }
  ASSERT_TRUE(f.good());
}

}  // namespace
