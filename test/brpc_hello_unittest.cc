// brpc_hello_unittest.cc - brpc's RDMA hello and ACK codec
// (transport/rdma/wire/brpc_hello.h): the v2 40-byte layout byte by byte,
// the v3 protobuf form, every validity rule of the spec (fallback) against
// the framing rules (hard errors), and hostile input.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

extern "C" {
#include "rrpc/errors.h"
#include "transport/rdma/wire/brpc_hello.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

rrpc__brpc_hello ValidV2() {
  rrpc__brpc_hello h;
  memset(&h, 0, sizeof h);
  h.version = 2;
  h.hello_ver = 2;
  h.impl_ver = 1;
  h.block_size = 8160;
  h.sq_size = 128;
  h.rq_size = 128;
  h.lid = 0;
  for (int i = 0; i < 16; i++) h.gid[i] = (uint8_t)(0xA0 + i);
  h.gid_len = 16;
  h.qp_num = 0x123456;
  return h;
}

rrpc__brpc_hello ValidV3() {
  rrpc__brpc_hello h = ValidV2();
  h.version = 3;
  h.hello_ver = h.impl_ver = 0;
  return h;
}

Bytes Encode(const rrpc__brpc_hello& h) {
  Bytes b(RRPC_BRPC_HELLO_MAX);
  size_t n = 0;
  EXPECT_EQ(0, rrpc__brpc_hello_encode(&h, b.data(), b.size(), &n));
  b.resize(n);
  return b;
}

int Frame(const Bytes& b, size_t* len) { return rrpc__brpc_hello_frame(b.data(), b.size(), len); }

// "RDM3" + pb_size + the given protobuf body.
Bytes V3(const Bytes& pb) {
  Bytes b = {'R', 'D', 'M', '3', 0, 0, (uint8_t)(pb.size() >> 8), (uint8_t)pb.size()};
  b.insert(b.end(), pb.begin(), pb.end());
  return b;
}

// The required fields of a v3 hello, as a protobuf body, without field `skip`.
Bytes V3Body(int skip = 0) {
  Bytes b;
  const uint8_t u32s[][3] = {{1 << 3, 0xE0, 0x3F}, {2 << 3, 0x80, 0x01}, {3 << 3, 0x80, 0x01}, {4 << 3, 0x00, 0xFF}};
  for (int f = 1; f <= 4; f++) {
    if (f == skip) continue;
    b.push_back(u32s[f - 1][0]);
    b.push_back(u32s[f - 1][1]);
    if (u32s[f - 1][2] != 0xFF) b.push_back(u32s[f - 1][2]);
  }
  if (skip != 5) {
    b.push_back(5 << 3 | 2);
    b.push_back(16);
    for (int i = 0; i < 16; i++) b.push_back((uint8_t)i);
  }
  if (skip != 6) {
    b.push_back(6 << 3);
    b.push_back(7);
  }
  return b;
}

TEST(BrpcHello, V2LayoutIsTheSpecsByteForByte) {
  Bytes b = Encode(ValidV2());
  ASSERT_EQ(40u, b.size());
  const uint8_t want[20] = {'R', 'D', 'M', 'A', 0, 40, 0, 2, 0, 1, 0, 0, 0x1F, 0xE0, 0, 128, 0, 128, 0, 0};
  EXPECT_EQ(0, memcmp(want, b.data(), sizeof want));
  EXPECT_EQ(0xA0, b[20]);
  EXPECT_EQ(0xAF, b[35]);
  EXPECT_EQ(0x00, b[36]);
  EXPECT_EQ(0x12, b[37]);
  EXPECT_EQ(0x34, b[38]);
  EXPECT_EQ(0x56, b[39]);
  size_t len = 0;
  ASSERT_EQ(RRPC_BRPC_WHOLE, Frame(b, &len));
  EXPECT_EQ(40u, len);
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), len, &d));
  EXPECT_EQ(2, d.version);
  EXPECT_EQ(8160u, d.block_size);
  EXPECT_EQ(128u, d.sq_size);
  EXPECT_EQ(128u, d.rq_size);
  EXPECT_EQ(0x123456u, d.qp_num);
  EXPECT_EQ(0, memcmp(ValidV2().gid, d.gid, 16));
  EXPECT_EQ(1, rrpc__brpc_hello_valid(&d));
}

TEST(BrpcHello, PrefixesWaitOtherMagicsAreNotHellos) {
  Bytes b = Encode(ValidV2());
  size_t len = 0;
  for (size_t n = 0; n < 40; n++)
    EXPECT_EQ(RRPC_BRPC_WAIT, rrpc__brpc_hello_frame(b.data(), n, &len)) << n;
  for (const char* m : {"PRPC", "RDMX", "GET ", "rdma", "XDMA", "RDM4"}) {
    Bytes o(m, m + 4);
    o.resize(40);
    EXPECT_EQ(RRPC_BRPC_NOT, Frame(o, &len)) << m;
  }
  Bytes one = {'P'};
  EXPECT_EQ(RRPC_BRPC_NOT, Frame(one, &len));
  Bytes r3 = {'R', 'D', 'M', '3', 0, 0};
  EXPECT_EQ(RRPC_BRPC_WAIT, Frame(r3, &len));
}

TEST(BrpcHello, V2MsgLenOutside40To4096IsAHardError) {
  Bytes b = Encode(ValidV2());
  size_t len = 0;
  for (unsigned ml : {0u, 1u, 38u, 39u, 4097u, 65535u}) {
    b[4] = (uint8_t)(ml >> 8);
    b[5] = (uint8_t)ml;
    EXPECT_EQ(-RRPC_EPARSE, Frame(b, &len)) << ml;
  }
}

TEST(BrpcHello, V2BytesBeyond40AreFramedSoTheReaderDrainsThem) {
  Bytes b = Encode(ValidV2());
  b[4] = 4096 >> 8;
  b[5] = 0;
  size_t len = 0;
  EXPECT_EQ(RRPC_BRPC_WAIT, Frame(b, &len)); // 40 of 4096 bytes
  b.resize(4096, 0xEE);
  b.push_back('P'); // the next message starts right after
  ASSERT_EQ(RRPC_BRPC_WHOLE, Frame(b, &len));
  EXPECT_EQ(4096u, len);
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), len, &d));
  EXPECT_EQ(1, rrpc__brpc_hello_valid(&d));
  EXPECT_EQ(0x123456u, d.qp_num);
}

TEST(BrpcHello, V2ValidityRulesMeanFallbackNotErrors) {
  struct Case {
    const char* what;
    void (*edit)(rrpc__brpc_hello*);
  } cases[] = {
      {"hello_ver 1", [](rrpc__brpc_hello* h) { h->hello_ver = 1; }},
      {"hello_ver 3", [](rrpc__brpc_hello* h) { h->hello_ver = 3; }},
      {"impl_ver 0", [](rrpc__brpc_hello* h) { h->impl_ver = 0; }},
      {"impl_ver 2", [](rrpc__brpc_hello* h) { h->impl_ver = 2; }},
      {"block 1023", [](rrpc__brpc_hello* h) { h->block_size = 1023; }},
      {"sq 15", [](rrpc__brpc_hello* h) { h->sq_size = 15; }},
      {"rq 15", [](rrpc__brpc_hello* h) { h->rq_size = 15; }},
  };
  for (const auto& c : cases) {
    rrpc__brpc_hello h = ValidV2();
    c.edit(&h);
    Bytes b = Encode(h);
    rrpc__brpc_hello d;
    ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), b.size(), &d)) << c.what;
    EXPECT_EQ(0, rrpc__brpc_hello_valid(&d)) << c.what;
  }
  rrpc__brpc_hello edge = ValidV2();
  edge.block_size = 1024;
  edge.sq_size = edge.rq_size = 16;
  EXPECT_EQ(1, rrpc__brpc_hello_valid(&edge));
}

TEST(BrpcHello, RefusalsAreValidSyntaxThatFailsValidation) {
  for (int tcp_mode : {0, 1}) {
    rrpc__brpc_hello r;
    rrpc__brpc_hello_refusal(2, tcp_mode, &r);
    Bytes b = Encode(r);
    ASSERT_EQ(40u, b.size());
    EXPECT_EQ(40, b[5]); // msg_len stays 40
    EXPECT_EQ(tcp_mode ? 0xFF : 0, b[6]);
    EXPECT_EQ(tcp_mode ? 0xFF : 0, b[7]);
    for (size_t i = 8; i < 40; i++) EXPECT_EQ(0, b[i]) << i;
    rrpc__brpc_hello d;
    ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), b.size(), &d));
    EXPECT_EQ(0, rrpc__brpc_hello_valid(&d));
  }
  rrpc__brpc_hello r;
  rrpc__brpc_hello_refusal(3, 1, &r);
  Bytes b = Encode(r);
  size_t len = 0;
  ASSERT_EQ(RRPC_BRPC_WHOLE, Frame(b, &len));
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), len, &d));
  EXPECT_EQ(0u, d.block_size);
  EXPECT_EQ(0u, d.gid_len);
  EXPECT_EQ(0, rrpc__brpc_hello_valid(&d));
}

TEST(BrpcHello, V3RoundTripsWithAndWithoutEce) {
  for (int ece : {0, 1}) {
    rrpc__brpc_hello h = ValidV3();
    h.has_ece = ece;
    h.ece_vendor_id = 0x15b3;
    h.ece_options = 0xFFFFFFFFu;
    h.ece_comp_mask = 7;
    Bytes b = Encode(h);
    EXPECT_EQ('3', b[3]);
    size_t len = 0;
    ASSERT_EQ(RRPC_BRPC_WHOLE, Frame(b, &len));
    EXPECT_EQ(b.size(), len);
    rrpc__brpc_hello d;
    ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), len, &d));
    EXPECT_EQ(3, d.version);
    EXPECT_EQ(8160u, d.block_size);
    EXPECT_EQ(16u, d.gid_len);
    EXPECT_EQ(0, memcmp(h.gid, d.gid, 16));
    EXPECT_EQ(0x123456u, d.qp_num);
    EXPECT_EQ(ece, d.has_ece);
    if (ece) {
      EXPECT_EQ(0x15b3u, d.ece_vendor_id);
      EXPECT_EQ(0xFFFFFFFFu, d.ece_options);
      EXPECT_EQ(7u, d.ece_comp_mask);
    }
    EXPECT_EQ(1, rrpc__brpc_hello_valid(&d));
  }
}

TEST(BrpcHello, V3HandBuiltBodyDecodesAndUnknownFieldsAreSkipped) {
  Bytes pb = V3Body();
  // unknown fields of every wire type: 9 varint, 10 fixed64, 11 bytes, 12 fixed32
  const uint8_t extra[] = {9 << 3, 0x81, 0x01, 10 << 3 | 1, 1, 2, 3, 4, 5, 6, 7, 8, 11 << 3 | 2, 2, 'x', 'y',
                           12 << 3 | 5, 1, 2, 3, 4};
  pb.insert(pb.end(), extra, extra + sizeof extra);
  Bytes b = V3(pb);
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), b.size(), &d));
  EXPECT_EQ(8160u, d.block_size);
  EXPECT_EQ(128u, d.sq_size);
  EXPECT_EQ(0u, d.lid);
  EXPECT_EQ(7u, d.qp_num);
  EXPECT_EQ(1, rrpc__brpc_hello_valid(&d));
}

TEST(BrpcHello, V3MissingRequiredFieldOrGarbageIsAHardError) {
  for (int skip = 1; skip <= 6; skip++) {
    Bytes b = V3(V3Body(skip));
    rrpc__brpc_hello d;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__brpc_hello_decode(b.data(), b.size(), &d)) << skip;
  }
  const Bytes bad[] = {
      {0xFF},                               // truncated varint tag
      {0x08, 0x80},                         // truncated varint value
      {0x2A, 0x20, 0x00},                   // gid longer than the body
      {0x0B},                               // start-group wire type
      {0x00, 0x01},                         // field number 0
      {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}, // 11-byte varint
      {0x3A, 0x02, 0x08, 0x01},             // ECE without its required fields
  };
  for (const auto& pb : bad) {
    Bytes body = V3Body();
    body.insert(body.end(), pb.begin(), pb.end());
    Bytes b = V3(body);
    rrpc__brpc_hello d;
    EXPECT_EQ(-RRPC_EPARSE, rrpc__brpc_hello_decode(b.data(), b.size(), &d)) << pb.size();
  }
}

TEST(BrpcHello, V3PbSizeOutside1To8192IsAHardError) {
  size_t len = 0;
  Bytes zero = {'R', 'D', 'M', '3', 0, 0, 0, 0};
  EXPECT_EQ(-RRPC_EPARSE, Frame(zero, &len));
  Bytes big = {'R', 'D', 'M', '3', 0, 0, 0x20, 0x01};
  EXPECT_EQ(-RRPC_EPARSE, Frame(big, &len));
  Bytes huge = {'R', 'D', 'M', '3', 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(-RRPC_EPARSE, Frame(huge, &len));
  Bytes max = {'R', 'D', 'M', '3', 0, 0, 0x20, 0x00};
  EXPECT_EQ(RRPC_BRPC_WAIT, Frame(max, &len));
  max.resize(8 + 8192);
  EXPECT_EQ(RRPC_BRPC_WHOLE, Frame(max, &len));
  EXPECT_EQ(8200u, len);
}

TEST(BrpcHello, V3ExtraValidityRules) {
  struct Case {
    const char* what;
    void (*edit)(rrpc__brpc_hello*);
  } cases[] = {
      {"gid 15 bytes", [](rrpc__brpc_hello* h) { h->gid_len = 15; }},
      {"gid empty", [](rrpc__brpc_hello* h) { h->gid_len = 0; }},
      {"sq 65536", [](rrpc__brpc_hello* h) { h->sq_size = 65536; }},
      {"rq 65536", [](rrpc__brpc_hello* h) { h->rq_size = 65536; }},
      {"lid 65536", [](rrpc__brpc_hello* h) { h->lid = 65536; }},
      {"qp_num 0", [](rrpc__brpc_hello* h) { h->qp_num = 0; }},
      {"block 1023", [](rrpc__brpc_hello* h) { h->block_size = 1023; }},
      {"sq 15", [](rrpc__brpc_hello* h) { h->sq_size = 15; }},
  };
  for (const auto& c : cases) {
    rrpc__brpc_hello h = ValidV3();
    c.edit(&h);
    Bytes b = Encode(h);
    rrpc__brpc_hello d;
    ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), b.size(), &d)) << c.what;
    EXPECT_EQ(0, rrpc__brpc_hello_valid(&d)) << c.what;
  }
  // A gid longer than 16 bytes parses (it is bytes) but is not valid.
  Bytes pb = V3Body(5);
  pb.push_back(5 << 3 | 2);
  pb.push_back(17);
  for (int i = 0; i < 17; i++) pb.push_back(1);
  Bytes b = V3(pb);
  rrpc__brpc_hello d;
  ASSERT_EQ(0, rrpc__brpc_hello_decode(b.data(), b.size(), &d));
  EXPECT_EQ(17u, d.gid_len);
  EXPECT_EQ(0, rrpc__brpc_hello_valid(&d));
}

TEST(BrpcHello, EncodeRefusesWhatDoesNotFit) {
  rrpc__brpc_hello h = ValidV2();
  uint8_t buf[64];
  size_t n;
  h.sq_size = 70000;
  EXPECT_EQ(-EINVAL, rrpc__brpc_hello_encode(&h, buf, sizeof buf, &n));
  h = ValidV2();
  EXPECT_EQ(-EINVAL, rrpc__brpc_hello_encode(&h, buf, 39, &n));
  h.version = 4;
  EXPECT_EQ(-EINVAL, rrpc__brpc_hello_encode(&h, buf, sizeof buf, &n));
  h = ValidV3();
  EXPECT_EQ(-EINVAL, rrpc__brpc_hello_encode(&h, buf, 20, &n));
}

TEST(BrpcHello, Ack) {
  uint8_t a[4];
  rrpc__brpc_ack_encode(RRPC_BRPC_ACK_RDMA, a);
  EXPECT_EQ(0, a[0]);
  EXPECT_EQ(1, a[3]);
  EXPECT_EQ(1u, rrpc__brpc_ack_decode(a));
  rrpc__brpc_ack_encode(0, a);
  EXPECT_EQ(0u, rrpc__brpc_ack_decode(a));
}

} // namespace
