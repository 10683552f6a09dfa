// baidu_std_unittest.cc - tests of the RpcMeta codec (against the C++
// protobuf library, both ways) and of baidu_std frame cut/pack over iobufs.
#include <gtest/gtest.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "rrpc/errors.h"
#include "rrpc/internal/baidu_std.h"
#include "test/rpc_meta.pb.h"

namespace {

using brpc::policy::RpcMeta;

// ---- helpers ----------------------------------------------------------------

std::string S(rrpc__str s) { return s.len ? std::string(s.ptr, s.len) : std::string(); }

rrpc__str Str(const std::string &s) { return rrpc__str{s.data(), s.size()}; }

int Decode(const std::string &bytes, rrpc__rpc_meta *m) {
  return rrpc__rpc_meta_decode(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size(), m);
}

std::string Encode(const rrpc__rpc_meta &m) {
  std::string out(rrpc__rpc_meta_size(&m), '\0');
  size_t n = rrpc__rpc_meta_encode(&m, reinterpret_cast<uint8_t *>(&out[0]));
  EXPECT_EQ(n, out.size());
  return out;
}

// Random metas for the randomized tests: random has-bits, numbers drawn
// from `edge` or random bits, strings of random bytes (usually up to
// short_len, one in four up to long_len). The meta borrows the strings,
// which live here.
struct RandomMeta {
  std::string svc, method, text;
  rrpc__rpc_meta m;
  template <size_t N>
  void Draw(std::mt19937_64 &rng, const int64_t (&edge)[N], size_t short_len, size_t long_len) {
    auto val = [&]() -> int64_t {
      return (rng() & 1) ? edge[rng() % N] : static_cast<int64_t>(rng() >> (rng() % 64));
    };
    auto str = [&]() {
      size_t len = (rng() % 4 == 0) ? rng() % long_len : rng() % short_len;
      std::string s(len, '\0');
      for (auto &ch : s) ch = static_cast<char>(rng());
      return s;
    };
    svc = str();
    method = str();
    text = str();
    memset(&m, 0, sizeof(m));
    m.has = static_cast<uint32_t>(rng()) & 0x1ffu;
    m.service_name = Str(svc);
    m.method_name = Str(method);
    m.error_text = Str(text);
    m.log_id = val();
    m.timeout_ms = static_cast<int32_t>(val());
    m.error_code = static_cast<int32_t>(val());
    m.compress_type = static_cast<int32_t>(val());
    m.correlation_id = val();
    m.attachment_size = static_cast<int32_t>(val());
  }
};

// The C++ message with exactly the fields whose has-bits are set.
RpcMeta ToPb(const rrpc__rpc_meta &m) {
  RpcMeta pb;
  if (m.has & RRPC_META_HAS_REQUEST) {
    auto *r = pb.mutable_request();
    r->set_service_name(S(m.service_name));
    r->set_method_name(S(m.method_name));
    if (m.has & RRPC_META_HAS_LOG_ID) r->set_log_id(m.log_id);
    if (m.has & RRPC_META_HAS_TIMEOUT_MS) r->set_timeout_ms(m.timeout_ms);
  }
  if (m.has & RRPC_META_HAS_RESPONSE) {
    auto *r = pb.mutable_response();
    if (m.has & RRPC_META_HAS_ERROR_CODE) r->set_error_code(m.error_code);
    if (m.has & RRPC_META_HAS_ERROR_TEXT) r->set_error_text(S(m.error_text));
  }
  if (m.has & RRPC_META_HAS_COMPRESS_TYPE) pb.set_compress_type(m.compress_type);
  if (m.has & RRPC_META_HAS_CORRELATION_ID) pb.set_correlation_id(m.correlation_id);
  if (m.has & RRPC_META_HAS_ATTACHMENT_SIZE) pb.set_attachment_size(m.attachment_size);
  return pb;
}

// Checks that the decoded struct holds the same known fields as `pb`.
void ExpectSame(const RpcMeta &pb, const rrpc__rpc_meta &m) {
  EXPECT_EQ(pb.has_request(), !!(m.has & RRPC_META_HAS_REQUEST));
  EXPECT_EQ(pb.has_response(), !!(m.has & RRPC_META_HAS_RESPONSE));
  if (pb.has_request()) {
    const auto &r = pb.request();
    EXPECT_EQ(r.service_name(), S(m.service_name));
    EXPECT_EQ(r.method_name(), S(m.method_name));
    EXPECT_EQ(r.has_log_id(), !!(m.has & RRPC_META_HAS_LOG_ID));
    if (r.has_log_id()) {
      EXPECT_EQ(r.log_id(), m.log_id);
    }
    EXPECT_EQ(r.has_timeout_ms(), !!(m.has & RRPC_META_HAS_TIMEOUT_MS));
    if (r.has_timeout_ms()) {
      EXPECT_EQ(r.timeout_ms(), m.timeout_ms);
    }
  } else {
    EXPECT_FALSE(m.has & (RRPC_META_HAS_LOG_ID | RRPC_META_HAS_TIMEOUT_MS));
  }
  if (pb.has_response()) {
    const auto &r = pb.response();
    EXPECT_EQ(r.has_error_code(), !!(m.has & RRPC_META_HAS_ERROR_CODE));
    if (r.has_error_code()) {
      EXPECT_EQ(r.error_code(), m.error_code);
    }
    EXPECT_EQ(r.has_error_text(), !!(m.has & RRPC_META_HAS_ERROR_TEXT));
    if (r.has_error_text()) {
      EXPECT_EQ(r.error_text(), S(m.error_text));
    }
  } else {
    EXPECT_FALSE(m.has & (RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT));
  }
  EXPECT_EQ(pb.has_compress_type(), !!(m.has & RRPC_META_HAS_COMPRESS_TYPE));
  if (pb.has_compress_type()) {
    EXPECT_EQ(pb.compress_type(), m.compress_type);
  }
  EXPECT_EQ(pb.has_correlation_id(), !!(m.has & RRPC_META_HAS_CORRELATION_ID));
  if (pb.has_correlation_id()) {
    EXPECT_EQ(pb.correlation_id(), m.correlation_id);
  }
  EXPECT_EQ(pb.has_attachment_size(), !!(m.has & RRPC_META_HAS_ATTACHMENT_SIZE));
  if (pb.has_attachment_size()) {
    EXPECT_EQ(pb.attachment_size(), m.attachment_size);
  }
}

// The fields an encoder writes: sub-message bits only count inside their
// message (see rrpc__rpc_meta_encode).
rrpc__rpc_meta Normalized(rrpc__rpc_meta m) {
  if (!(m.has & RRPC_META_HAS_REQUEST)) {
    m.has &= ~(uint32_t)(RRPC_META_HAS_LOG_ID | RRPC_META_HAS_TIMEOUT_MS);
  }
  if (!(m.has & RRPC_META_HAS_RESPONSE)) {
    m.has &= ~(uint32_t)(RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT);
  }
  return m;
}

// C++ -> rrpc: serialize with the library, decode with rrpc, compare.
void CheckCxxToRrpc(const RpcMeta &pb) {
  std::string bytes;
  ASSERT_TRUE(pb.SerializeToString(&bytes));
  rrpc__rpc_meta m;
  ASSERT_EQ(0, Decode(bytes, &m));
  ExpectSame(pb, m);
}

// rrpc -> C++: encode with rrpc; the library must parse it to equal values,
// and its own serialization of the same fields must be the same bytes.
void CheckRrpcToCxx(const rrpc__rpc_meta &raw) {
  const rrpc__rpc_meta m = Normalized(raw);
  std::string ours = Encode(raw);
  EXPECT_EQ(Encode(m), ours);
  RpcMeta parsed;
  ASSERT_TRUE(parsed.ParseFromString(ours));
  ExpectSame(parsed, m);
  RpcMeta expected = ToPb(m);
  EXPECT_EQ(expected.SerializeAsString(), ours);
  // And ours decodes back to the same values.
  rrpc__rpc_meta back;
  ASSERT_EQ(0, Decode(ours, &back));
  ExpectSame(expected, back);
}

// Embedded iobuf with RAII, for the frame tests.
struct Buf {
  rrpc_iobuf b;
  Buf() { rrpc__iobuf_init(&b); }
  ~Buf() { rrpc__iobuf_destroy(&b); }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  size_t size() const { return rrpc_iobuf_length(&b); }
  std::string str() const {
    std::string s(size(), '\0');
    if (!s.empty()) {
      EXPECT_EQ(s.size(), rrpc_iobuf_copy_out(&b, 0, &s[0], s.size()));
    }
    return s;
  }
  void add(const std::string &s) {
    if (!s.empty()) {
      ASSERT_EQ(0, rrpc_iobuf_append(&b, s.data(), s.size()));
    }
  }
};

struct Msg {
  rrpc__baidu_msg m;
  Msg() { rrpc__baidu_msg_init(&m); }
  ~Msg() { rrpc__baidu_msg_destroy(&m); }
  Msg(const Msg &) = delete;
  Msg &operator=(const Msg &) = delete;
};

std::string Be32(uint32_t v) {
  std::string s(4, '\0');
  s[0] = static_cast<char>(v >> 24);
  s[1] = static_cast<char>(v >> 16);
  s[2] = static_cast<char>(v >> 8);
  s[3] = static_cast<char>(v);
  return s;
}

std::string Header(uint32_t body, uint32_t meta, const char *magic = "PRPC") {
  return std::string(magic, 4) + Be32(body) + Be32(meta);
}

// A frame built by hand from the C++ library's meta bytes.
std::string CxxFrame(const RpcMeta &pb, const std::string &payload, const std::string &att) {
  std::string meta = pb.SerializeAsString();
  return Header(static_cast<uint32_t>(meta.size() + payload.size() + att.size()),
                static_cast<uint32_t>(meta.size())) +
         meta + payload + att;
}

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; i++) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

rrpc__rpc_meta RequestMeta(const std::string &svc, const std::string &method, int64_t cid) {
  rrpc__rpc_meta m;
  memset(&m, 0, sizeof(m));
  m.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID | RRPC_META_HAS_LOG_ID;
  m.service_name = Str(svc);
  m.method_name = Str(method);
  m.log_id = 77;
  m.correlation_id = cid;
  return m;
}

// ---- RpcMeta: C++ library -> rrpc ------------------------------------------

TEST(RpcMetaDecode, RequestAllFields) {
  RpcMeta pb;
  auto *r = pb.mutable_request();
  r->set_service_name("example.EchoService");
  r->set_method_name("Echo");
  r->set_log_id(123456789012345LL);
  r->set_timeout_ms(2500);
  pb.set_compress_type(1);
  pb.set_correlation_id(0x123456789abcdefLL);
  pb.set_attachment_size(4096);
  CheckCxxToRrpc(pb);
}

TEST(RpcMetaDecode, Response) {
  RpcMeta pb;
  pb.mutable_response()->set_error_code(1002);
  pb.mutable_response()->set_error_text("no such method");
  pb.set_correlation_id(9);
  CheckCxxToRrpc(pb);
}

TEST(RpcMetaDecode, NegativeAndExtremeValues) {
  const int32_t i32s[] = {-1, INT32_MIN, INT32_MAX, 0, 1, 127, 128, -2001};
  const int64_t i64s[] = {-1, INT64_MIN, INT64_MAX, 0, 1LL << 35, (1LL << 62) + 12345, -(1LL << 40)};
  for (int32_t v : i32s) {
    for (int64_t w : i64s) {
      RpcMeta pb;
      pb.mutable_response()->set_error_code(v);
      pb.set_compress_type(v);
      pb.set_attachment_size(v);
      pb.set_correlation_id(w);
      SCOPED_TRACE(testing::Message() << v << " " << w);
      CheckCxxToRrpc(pb);
      RpcMeta req;
      req.mutable_request()->set_service_name("s");
      req.mutable_request()->set_method_name("m");
      req.mutable_request()->set_log_id(w);
      req.mutable_request()->set_timeout_ms(v);
      CheckCxxToRrpc(req);
    }
  }
}

TEST(RpcMetaDecode, EmptyStringsAndEmptyMessages) {
  RpcMeta pb;
  pb.mutable_request()->set_service_name("");
  pb.mutable_request()->set_method_name("");
  pb.mutable_response()->set_error_text("");
  CheckCxxToRrpc(pb);

  RpcMeta only_empty_response;
  only_empty_response.mutable_response();
  CheckCxxToRrpc(only_empty_response);

  CheckCxxToRrpc(RpcMeta());  // zero bytes: a valid, empty meta
}

TEST(RpcMetaDecode, StringsWithAnyBytes) {
  google::protobuf::LogSilencer quiet;  // proto2 strings: UTF-8 and required-field logs
  RpcMeta pb;
  std::string nul("a\0b\xff\x80", 5);
  pb.mutable_request()->set_service_name(nul);
  pb.mutable_request()->set_method_name(std::string(300, 'x'));  // 2-byte length
  pb.mutable_response()->set_error_text(std::string(20000, 'e'));  // 3-byte length
  CheckCxxToRrpc(pb);
}

TEST(RpcMetaDecode, SkipsUnknownFieldsOfEveryWireType) {
  RpcMeta pb;
  auto *r = pb.mutable_request();
  r->set_service_name("svc");
  r->set_method_name("m");
  r->set_trace_id(-5);
  r->set_span_id(1LL << 60);
  r->set_parent_span_id(3);
  r->set_request_id("req-42");
  r->set_timeout_ms(-1);
  r->mutable_unknown_fields()->AddFixed32(9, 0xdeadbeef);
  r->mutable_unknown_fields()->AddFixed64(10, 0x0123456789abcdefULL);
  pb.set_correlation_id(-2);
  pb.mutable_chunk_info()->set_stream_id(1);
  pb.mutable_chunk_info()->set_chunk_id(2);
  pb.set_authentication_data(std::string("tok\0en", 6));
  auto *ss = pb.mutable_stream_settings();
  ss->set_stream_id(77);
  ss->set_need_feedback(true);
  ss->set_writable(true);
  ss->add_extra_stream_ids(1);
  ss->add_extra_stream_ids(-1);
  (*pb.mutable_user_fields())["k1"] = "v1";
  (*pb.mutable_user_fields())[""] = std::string(200, 'z');
  pb.set_content_type(brpc::policy::CONTENT_TYPE_PROTO_JSON);
  pb.set_checksum_type(1);
  pb.set_checksum_value("\x01\x02\x03\x04");
  pb.set_checksum_with_attachment(true);
  pb.set_attachment_size(3);
  auto *u = pb.mutable_unknown_fields();
  u->AddFixed32(100, 1);                 // reserved for Hulu
  u->AddFixed64(101, ~0ULL);             // reserved for Sofa
  u->AddVarint(536870911, ~0ULL);        // largest field number, 10-byte varint
  u->AddLengthDelimited(2000, "nested"); // two-byte tag
  auto *group_free_nested = u->AddLengthDelimited(14);
  RpcMeta inner;
  inner.mutable_request()->set_service_name("inner");
  inner.mutable_request()->set_method_name("inner");
  *group_free_nested = inner.SerializeAsString();
  CheckCxxToRrpc(pb);
}

TEST(RpcMetaDecode, ResponseWithUnknownFields) {
  RpcMeta pb;
  pb.mutable_response()->set_error_code(-1);
  pb.mutable_response()->mutable_unknown_fields()->AddLengthDelimited(3, "x");
  pb.mutable_response()->mutable_unknown_fields()->AddFixed32(4, 7);
  pb.mutable_response()->mutable_unknown_fields()->AddFixed64(5, 8);
  pb.mutable_response()->mutable_unknown_fields()->AddVarint(6, 9);
  CheckCxxToRrpc(pb);
}

// Protobuf semantics the C++ parser has, checked on hand-made bytes.
TEST(RpcMetaDecode, LastScalarWinsAndSubMessagesMerge) {
  // correlation_id twice, request in two pieces (service, then method + log).
  std::string bytes("\x20\x05\x20\x07", 4);
  bytes += std::string("\x0a\x05\x0a\x03svc", 7);
  bytes += std::string("\x0a\x05\x12\x01m\x18\x03", 7);
  RpcMeta pb;
  ASSERT_TRUE(pb.ParseFromString(bytes));
  rrpc__rpc_meta m;
  ASSERT_EQ(0, Decode(bytes, &m));
  ExpectSame(pb, m);
  EXPECT_EQ(7, m.correlation_id);
  EXPECT_TRUE(rrpc__str_eq(m.service_name, "svc"));
  EXPECT_TRUE(rrpc__str_eq(m.method_name, "m"));
}

TEST(RpcMetaDecode, Int32KeepsLow32BitsOfLongVarints) {
  // attachment_size as a 5-byte 0xffffffff (not sign-extended) and
  // compress_type as a 10-byte varint whose last byte carries extra bits.
  std::string bytes("\x28\xff\xff\xff\xff\x0f", 6);
  bytes += std::string("\x18\x81\x80\x80\x80\x80\x80\x80\x80\x80\x7f", 11);
  RpcMeta pb;
  ASSERT_TRUE(pb.ParseFromString(bytes));
  rrpc__rpc_meta m;
  ASSERT_EQ(0, Decode(bytes, &m));
  ExpectSame(pb, m);
  EXPECT_EQ(-1, m.attachment_size);
  EXPECT_EQ(1, m.compress_type);
}

// Every varint length, at both edges of each (2^(7k) - 1 and 2^(7k)), as the
// meta's last field (a response's correlation_id): both ways against the C++
// library, and each truncation of it (the short forms check the bytes left
// before reading a second or third byte) rejected as C++ rejects it.
TEST(RpcMetaDecode, VarintsOfEveryLengthAndTheirTruncations) {
  google::protobuf::LogSilencer quiet;
  for (int k = 1; k <= 9; k++) {
    const uint64_t edge = uint64_t{1} << (7 * k);
    for (uint64_t v : {edge - 1, edge, edge + 1}) {
      SCOPED_TRACE(v);
      rrpc__rpc_meta m;
      memset(&m, 0, sizeof(m));
      m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
      m.correlation_id = static_cast<int64_t>(v);
      CheckRrpcToCxx(m);
      CheckCxxToRrpc(ToPb(m));
      const std::string bytes = Encode(m);
      ASSERT_EQ(bytes.size(), 3u + static_cast<size_t>(k) + (v >= edge ? 1u : 0u));
      for (size_t n = 0; n < bytes.size(); n++) {
        std::vector<uint8_t> exact(bytes.begin(), bytes.begin() + n);
        rrpc__rpc_meta d;
        int rc = rrpc__rpc_meta_decode(exact.data(), n, &d);
        RpcMeta cxx;
        EXPECT_EQ(cxx.ParseFromArray(exact.data(), static_cast<int>(n)), rc == 0) << "prefix " << n;
        if (rc == 0) ExpectSame(cxx, d);
      }
    }
  }
  CheckCxxToRrpc(ToPb(RequestMeta("s", "m", INT64_MAX)));
  CheckCxxToRrpc(ToPb(RequestMeta("s", "m", -1)));
}

// Malformed input: -RRPC_EPARSE, *out zeroed. Where the C++ parser also
// rejects the bytes, check that it does (groups and wrong wire types of our
// own fields are stricter on purpose; see internal/baidu_std.h).
struct BadCase {
  const char *name;
  std::string bytes;
  bool cxx_rejects;
};

TEST(RpcMetaDecode, RejectsMalformed) {
  google::protobuf::LogSilencer quiet;  // proto2 strings: UTF-8 and required-field logs
  const std::vector<BadCase> cases = {
      {"truncated varint", std::string("\x20\x80", 2), true},
      {"truncated tag", std::string("\x80", 1), true},
      {"11-byte varint", std::string("\x20") + std::string(10, '\x80') + std::string("\x01", 1), true},
      {"length past end", std::string("\x0a\x05\x0a\x01s", 5), true},
      {"huge length", std::string("\x3a\xff\xff\xff\xff\x0f", 6), true},
      {"field number 0", std::string("\x00\x01", 2), true},
      {"field number 0, wire 2", std::string("\x02\x00", 2), true},
      {"tag over 32 bits", std::string("\x80\x80\x80\x80\x80\x01\x00", 7), true},
      {"end group", std::string("\x74", 1), true},
      {"start group", std::string("\x73\x74", 2), false},
      {"wire type 6", std::string("\x76\x00", 2), true},
      {"wire type 7", std::string("\x77\x00", 2), true},
      {"truncated fixed32", std::string("\x75\x01\x02\x03", 4), true},
      {"truncated fixed64", std::string("\x71\x01\x02\x03\x04\x05\x06\x07", 8), true},
      {"request missing method", std::string("\x0a\x03\x0a\x01s", 5), true},
      {"request missing service", std::string("\x0a\x03\x12\x01m", 5), true},
      {"empty request", std::string("\x0a\x00", 2), true},
      {"bad request body", std::string("\x0a\x02\x08\x80", 4), true},
      {"bad response body", std::string("\x12\x02\x12\x05", 4), true},
      {"request as varint", std::string("\x08\x01", 2), false},
      {"correlation_id as bytes", std::string("\x22\x01x", 3), false},
      {"error_text as varint", std::string("\x12\x02\x10\x01", 4), false},
  };
  for (const auto &c : cases) {
    SCOPED_TRACE(c.name);
    rrpc__rpc_meta m;
    memset(&m, 0xab, sizeof(m));
    EXPECT_EQ(-RRPC_EPARSE, Decode(c.bytes, &m));
    EXPECT_EQ(0u, m.has);
    EXPECT_EQ(nullptr, m.service_name.ptr);
    if (c.cxx_rejects) {
      RpcMeta pb;
      EXPECT_FALSE(pb.ParseFromString(c.bytes));
    }
  }
}

TEST(RpcMetaDecode, NeverReadsPastTheEnd) {
  google::protobuf::LogSilencer quiet;  // proto2 strings: UTF-8 and required-field logs
  // Every proper prefix of a valid meta either decodes or fails cleanly; the
  // copy into an exact-size heap buffer lets ASan catch any over-read.
  RpcMeta pb;
  pb.mutable_request()->set_service_name("svc.Name");
  pb.mutable_request()->set_method_name("Method");
  pb.mutable_request()->set_log_id(-1);
  pb.mutable_response()->set_error_text("text");
  pb.set_correlation_id(INT64_MIN);
  std::string full = pb.SerializeAsString();
  for (size_t n = 0; n <= full.size(); n++) {
    std::vector<uint8_t> exact(full.begin(), full.begin() + n);
    rrpc__rpc_meta m;
    int rc = rrpc__rpc_meta_decode(exact.data(), n, &m);
    RpcMeta cxx;
    bool cxx_ok = cxx.ParseFromArray(exact.data(), static_cast<int>(n));
    EXPECT_EQ(cxx_ok, rc == 0) << "prefix " << n;
    if (rc == 0) ExpectSame(cxx, m);
  }
}

// ---- RpcMeta: the fast path against the general decoder -----------------------

bool Identical(const rrpc__rpc_meta &a, const rrpc__rpc_meta &b) {
  // Every field, pointers included: both paths borrow from the same bytes.
  return a.has == b.has && a.service_name.ptr == b.service_name.ptr &&
         a.service_name.len == b.service_name.len && a.method_name.ptr == b.method_name.ptr &&
         a.method_name.len == b.method_name.len && a.log_id == b.log_id && a.timeout_ms == b.timeout_ms &&
         a.error_code == b.error_code && a.error_text.ptr == b.error_text.ptr &&
         a.error_text.len == b.error_text.len && a.compress_type == b.compress_type &&
         a.correlation_id == b.correlation_id && a.attachment_size == b.attachment_size;
}

struct PathCounts {
  int fast = 0;      // the fast path decoded it
  int valid = 0;     // it declined; the general decoder accepted
  int rejected = 0;  // it declined; the general decoder rejected
};

// One input, on an exact-size heap copy (ASan sees over-reads): decode (fast
// path, then general) must answer exactly as the general decoder alone, and
// the fast path alone either agrees or declines with -EAGAIN, zeroed.
void ExpectPathsAgree(const std::string &bytes, PathCounts *counts) {
  std::vector<uint8_t> exact(bytes.begin(), bytes.end());
  const uint8_t *p = exact.empty() ? nullptr : exact.data();
  rrpc__rpc_meta general, both, fast, zero;
  memset(&zero, 0, sizeof(zero));
  memset(&general, 0xab, sizeof(general));
  memset(&both, 0xcd, sizeof(both));
  memset(&fast, 0xef, sizeof(fast));
  int rc_g = rrpc__rpc_meta_decode_general(p, exact.size(), &general);
  int rc_d = rrpc__rpc_meta_decode(p, exact.size(), &both);
  int rc_f = rrpc__rpc_meta_decode_fast(p, exact.size(), &fast);
  EXPECT_EQ(rc_g, rc_d);
  EXPECT_TRUE(Identical(general, both));
  if (rc_f == 0) {
    EXPECT_EQ(0, rc_g);
    EXPECT_TRUE(Identical(general, fast));
    counts->fast++;
  } else {
    EXPECT_EQ(-EAGAIN, rc_f);
    EXPECT_TRUE(Identical(zero, fast));
    (rc_g == 0 ? counts->valid : counts->rejected)++;
  }
}

// The metas rrpc's encoder writes (the C++ library writes the same bytes,
// RandomizedAgainstCxx) all take the fast path; every prefix, byte change,
// deletion, insertion and concatenation of them, and hand-made oddities,
// give the general decoder's answer, rejections included.
// A plain response's meta (an empty RpcResponseMeta and a correlation id:
// rpc_meta.c matches it whole) decodes as the general decoder does for
// every id size around the 1 - 3 byte limits, in non-minimal forms, and in
// every near miss: each byte changed, cut short, one byte more.
TEST(RpcMetaDecode, PlainResponseShapeAgreesWithTheGeneralDecoder) {
  PathCounts counts;
  std::vector<std::string> shapes;
  for (int64_t cid : {0LL, 1LL, 127LL, 128LL, 16383LL, 16384LL, 2097151LL, 2097152LL, -1LL}) {
    rrpc__rpc_meta m;
    memset(&m, 0, sizeof(m));
    m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
    m.correlation_id = cid;
    shapes.push_back(Encode(m));
  }
  shapes.push_back(std::string("\x12\x00\x20\x80\x00", 5));          // 0 in two bytes
  shapes.push_back(std::string("\x12\x00\x20\x80\x80\x00", 6));      // and in three
  shapes.push_back(std::string("\x12\x00\x20\x80\x80\x80\x00", 7));  // four: the decoders' way
  shapes.push_back(std::string("\x12\x00\x20\x81", 4));              // continuation at the end
  shapes.push_back(std::string("\x12\x00\x20\x01\x01", 5));          // a byte after the id
  shapes.push_back(std::string("\x12\x01\x20\x05", 4));              // the sub-message swallows the tag
  shapes.push_back(std::string("\x12\x00\x18\x05", 4));              // compress_type, not an id
  for (const std::string &v : shapes) {
    SCOPED_TRACE(testing::PrintToString(v));
    ExpectPathsAgree(v, &counts);
    for (size_t n = 0; n < v.size(); n++) ExpectPathsAgree(v.substr(0, n), &counts);
    for (size_t at = 0; at < v.size(); at++) {
      for (int x : {0x00, 0x01, 0x7f, 0x80, 0xff, v[at] ^ 0x80}) {
        std::string w = v;
        w[at] = static_cast<char>(x);
        ExpectPathsAgree(w, &counts);
      }
    }
    ExpectPathsAgree(v + std::string(1, '\x28'), &counts);
  }
  rrpc__rpc_meta m;
  ASSERT_EQ(0, Decode(std::string("\x12\x00\x20\xd2\x09", 5), &m));
  EXPECT_EQ(RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID, m.has);
  EXPECT_EQ(1234, m.correlation_id);
  EXPECT_EQ(0u, m.error_text.len);
}

TEST(RpcMetaDecode, FastPathAgreesWithTheGeneralDecoder) {
  std::mt19937_64 rng(20251123);
  const int64_t edge[] = {0, 1, -1, 127, 128, 16383, 16384, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
  PathCounts counts;
  std::vector<std::string> valid;
  RandomMeta r;
  for (int iter = 0; iter < 400; iter++) {
    r.Draw(rng, edge, 12, 200);
    valid.push_back(Encode(r.m));
  }
  // What the encoder writes is the fast path's shape.
  for (const auto &v : valid) {
    SCOPED_TRACE(testing::PrintToString(v));
    int before = counts.fast;
    ExpectPathsAgree(v, &counts);
    EXPECT_EQ(before + 1, counts.fast);  // the empty meta too
  }
  // Mutations: prefixes, byte changes, a byte out, a byte in, two metas in a
  // row (repeated fields: last wins, sub-messages merge).
  for (size_t i = 0; i < valid.size() && !HasFailure(); i++) {
    const std::string &v = valid[i];
    for (size_t n = 0; n < v.size(); n++) ExpectPathsAgree(v.substr(0, n), &counts);
    for (size_t at = 0; at < v.size(); at++) {
      const uint8_t b = static_cast<uint8_t>(v[at]);
      const uint8_t subs[] = {0x00, 0xff, static_cast<uint8_t>(b ^ 0x80), static_cast<uint8_t>(b + 1),
                              static_cast<uint8_t>(b - 1), static_cast<uint8_t>(rng())};
      for (uint8_t x : subs) {
        std::string w = v;
        w[at] = static_cast<char>(x);
        ExpectPathsAgree(w, &counts);
      }
      ExpectPathsAgree(v.substr(0, at) + v.substr(at + 1), &counts);
      ExpectPathsAgree(v.substr(0, at) + static_cast<char>(rng()) + v.substr(at), &counts);
    }
    ExpectPathsAgree(v + valid[(i + 1) % valid.size()], &counts);
  }
  // Hand-made: other orders, unknown fields, non-minimal tags and lengths.
  const std::string odd[] = {
      std::string("\x0a\x05\x12\x01m\x0a\x00", 7),                   // method before service
      std::string("\x20\x05\x0a\x05\x0a\x01s\x12\x00", 9),           // correlation_id first
      std::string("\x0a\x07\x0a\x01s\x12\x00\x40\x01\x18\x02", 10),  // timeout before log_id
      std::string("\x0a\x04\x0a\x00\x12\x00\x30\x01", 8),            // unknown top-level field 6
      std::string("\x0a\x06\x0a\x00\x12\x00\x20\x01", 8),            // unknown request field 4
      std::string("\x12\x02\x18\x01", 4),                            // unknown response field 3
      std::string("\xa0\x00\x07", 3),                                // a two-byte tag of field 4
      std::string("\x0a\x84\x00\x0a\x00\x12\x00", 7),                // a two-byte length
      std::string("\x0a\x04\x0a\x00\x12\x00\x0a\x04\x0a\x00\x12\x00", 12),  // request twice
      std::string("\x28\x01\x28\x02", 4),                            // attachment_size twice
      std::string("\x28\xff\xff\xff\xff\x0f", 6),                    // int32 from 5 bytes
      std::string("\x18\x81\x80\x80\x80\x80\x80\x80\x80\x80\x7f", 11),  // 10-byte varint, extra bits
      std::string("\x20") + std::string(10, '\x80') + std::string("\x01", 1),  // 11-byte varint
      std::string("\x12\x00\x0a\x04\x0a\x00\x12\x00", 8),            // response before request
      std::string("\x0a\x04\x0a\x00\x12\x00\x12\x00", 8),            // request and response
  };
  for (const auto &o : odd) {
    SCOPED_TRACE(testing::PrintToString(o));
    ExpectPathsAgree(o, &counts);
  }
  ExpectPathsAgree(std::string(), &counts);
  // Each way through was taken many times.
  EXPECT_GT(counts.fast, 1000);
  EXPECT_GT(counts.valid, 500);
  EXPECT_GT(counts.rejected, 1000);
  RecordProperty("fast", counts.fast);
  RecordProperty("general_valid", counts.valid);
  RecordProperty("general_rejected", counts.rejected);
}

// ---- RpcMeta: rrpc -> C++ library ------------------------------------------

TEST(RpcMetaEncode, RequestResponseAndExtremes) {
  std::string svc = "example.EchoService", method = "Echo", text = "boom";
  rrpc__rpc_meta m = RequestMeta(svc, method, INT64_MAX);
  m.has |= RRPC_META_HAS_TIMEOUT_MS | RRPC_META_HAS_ATTACHMENT_SIZE | RRPC_META_HAS_COMPRESS_TYPE;
  m.timeout_ms = -1;
  m.attachment_size = INT32_MAX;
  m.compress_type = 4;
  CheckRrpcToCxx(m);

  rrpc__rpc_meta r;
  memset(&r, 0, sizeof(r));
  r.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT |
          RRPC_META_HAS_CORRELATION_ID;
  r.error_code = INT32_MIN;
  r.error_text = Str(text);
  r.correlation_id = -1;
  CheckRrpcToCxx(r);
  EXPECT_EQ(1 + 1 + (1 + 10) + (1 + 1 + 4) + (1 + 10), Encode(r).size());

  rrpc__rpc_meta empty;
  memset(&empty, 0, sizeof(empty));
  EXPECT_EQ(0u, rrpc__rpc_meta_size(&empty));
  CheckRrpcToCxx(empty);

  // Empty required strings are still written; a bare response is 2 bytes.
  rrpc__rpc_meta bare;
  memset(&bare, 0, sizeof(bare));
  bare.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_RESPONSE;
  CheckRrpcToCxx(bare);
  EXPECT_EQ(std::string("\x0a\x04\x0a\x00\x12\x00\x12\x00", 8), Encode(bare));
}

// The encoder copies names of up to 32 bytes with word loads and stores
// (rpc_meta.c copy_short): every length around its size classes, from
// names in heap blocks of exactly their size (AddressSanitizer sees a read
// past either end), encodes as the C++ library does.
TEST(RpcMetaEncode, NamesOfEveryShortLength) {
  for (size_t n = 0; n <= 40; n++) {
    std::unique_ptr<char[]> svc(new char[n ? n : 1]), method(new char[n < 40 ? 40 - n : 1]);
    for (size_t i = 0; i < n; i++) svc[i] = static_cast<char>('A' + i % 26);
    for (size_t i = 0; i < 40 - n; i++) method[i] = static_cast<char>('a' + i % 26);
    rrpc__rpc_meta m;
    memset(&m, 0, sizeof(m));
    m.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
    m.service_name = rrpc__str{svc.get(), n};
    m.method_name = rrpc__str{method.get(), 40 - n};
    m.correlation_id = static_cast<int64_t>(n);
    SCOPED_TRACE(n);
    CheckRrpcToCxx(m);
  }
}

// Names encoded once (rrpc_method) and copied per request give the bytes
// the two names give, for names of every short length and a long one, with
// and without the other request fields.
TEST(RpcMetaEncode, PreparedNamesEncodeAsTheNames) {
  for (size_t n = 0; n <= 70; n++) {
    std::string svc(n, 'S'), method = n < 70 ? std::string(70 - n, 'm') : std::string();
    for (size_t i = 0; i < n; i++) svc[i] = static_cast<char>('A' + i % 26);
    if (n == 70) svc = std::string(300, 'L');  // two-byte lengths
    rrpc__str s = Str(svc), m = Str(method);
    std::string names(rrpc__rpc_meta_names_size(s, m), '\0');
    ASSERT_EQ(names.size(), rrpc__rpc_meta_names_encode(s, m, reinterpret_cast<uint8_t *>(&names[0])));
    for (int extra = 0; extra < 2; extra++) {
      rrpc__rpc_meta plain;
      memset(&plain, 0, sizeof(plain));
      plain.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
      plain.service_name = s;
      plain.method_name = m;
      plain.correlation_id = static_cast<int64_t>(n) * 1000;
      if (extra) {
        plain.has |= RRPC_META_HAS_LOG_ID | RRPC_META_HAS_TIMEOUT_MS | RRPC_META_HAS_ATTACHMENT_SIZE;
        plain.log_id = 77;
        plain.timeout_ms = 1500;
        plain.attachment_size = 64;
      }
      rrpc__rpc_meta prepared = plain;
      prepared.service_name = prepared.method_name = rrpc__str{nullptr, 0};  // never read
      prepared.has |= RRPC_META_HAS_NAMES_ENCODED;
      prepared.names_encoded = Str(names);
      SCOPED_TRACE(n);
      EXPECT_EQ(rrpc__rpc_meta_size(&plain), rrpc__rpc_meta_size(&prepared));
      EXPECT_EQ(Encode(plain), Encode(prepared));
      CheckRrpcToCxx(plain);
    }
  }
}

TEST(RpcMetaEncode, SubFieldBitsNeedTheirMessage) {
  rrpc__rpc_meta m;
  memset(&m, 0, sizeof(m));
  m.has = RRPC_META_HAS_LOG_ID | RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_CORRELATION_ID;
  m.log_id = 5;
  m.error_code = 6;
  m.correlation_id = 7;
  EXPECT_EQ(std::string("\x20\x07", 2), Encode(m));
}

// Randomized both-ways check: many random metas, same values and same bytes
// as the C++ library.
TEST(RpcMetaEncode, RandomizedAgainstCxx) {
  google::protobuf::LogSilencer quiet;  // proto2 strings: UTF-8 and required-field logs
  std::mt19937_64 rng(20240611);
  const int64_t edge[] = {0, 1, -1, 127, 128, 16383, 16384, INT32_MAX, INT32_MIN,
                          INT64_MAX, INT64_MIN, 1LL << 49};
  RandomMeta r;
  for (int iter = 0; iter < 3000; iter++) {
    r.Draw(rng, edge, 20, 300);
    SCOPED_TRACE(iter);
    CheckRrpcToCxx(r.m);
    CheckCxxToRrpc(ToPb(r.m));
    if (HasFailure()) break;
  }
}

// The one-pass encoder (pack's small frames): for random metas, either it
// declines (0: a sub-message that may reach 128 bytes, or both of them) or
// it writes what the general encoder writes, within its stated bound; and
// it takes every meta whose sub-message is short for any integer values.
TEST(RpcMetaEncode, ShortEncoderWritesTheGeneralBytesOrDeclines) {
  std::mt19937_64 rng(20261129);
  const int64_t edge[] = {0, 1, -1, 127, 128, 16383, 16384, INT32_MAX, INT32_MIN,
                          INT64_MAX, INT64_MIN, 1LL << 49};
  RandomMeta r;
  int taken = 0;
  for (int iter = 0; iter < 5000; iter++) {
    r.Draw(rng, edge, 40, 200);
    if (rng() & 1) r.m.has &= ~(uint32_t)(rng() & 1 ? RRPC_META_HAS_REQUEST : RRPC_META_HAS_RESPONSE);
    SCOPED_TRACE(iter);
    uint8_t buf[RRPC_META_SHORT_MAX + 16];
    memset(buf, 0xEE, sizeof buf);
    size_t n = rrpc__rpc_meta_encode_short(&r.m, buf);
    const uint32_t has = r.m.has;
    const bool req = has & RRPC_META_HAS_REQUEST, resp = has & RRPC_META_HAS_RESPONSE;
    size_t req_max = r.svc.size() + r.method.size() + 4 + (has & RRPC_META_HAS_LOG_ID ? 11 : 0) +
                     (has & RRPC_META_HAS_TIMEOUT_MS ? 11 : 0);
    size_t resp_max = (has & RRPC_META_HAS_ERROR_CODE ? 11 : 0) +
                      (has & RRPC_META_HAS_ERROR_TEXT ? r.text.size() + 2 : 0);
    bool fits = !(req && resp) && (!req || req_max < 124) && (!resp || resp_max < 126);
    const std::string want = Encode(r.m);
    if (fits && !want.empty()) {  // 0 bytes to write (no field counts) reads as declined
      ASSERT_NE(0u, n);
    }
    if (n == 0) continue;
    taken++;
    ASSERT_LE(n, static_cast<size_t>(RRPC_META_SHORT_MAX));
    EXPECT_EQ(want, std::string(reinterpret_cast<char *>(buf), n));
    EXPECT_EQ(0xEE, buf[n]);  // nothing past its end
  }
  EXPECT_GT(taken, 1000);
}

// The sub-message's length byte at its limit: a request whose names make
// the body 127 bytes still goes through the short encoder or the general
// one with the same bytes, and pack gives the general path's frame for
// every name length around it, with and without the integers.
TEST(BaiduPack, SmallFramesAroundTheShortMetaLimit) {
  for (size_t n = 90; n <= 140; n++) {
    for (int extra = 0; extra < 2; extra++) {
      SCOPED_TRACE(n * 10 + extra);
      std::string svc(n, 'S'), method = "M";
      rrpc__rpc_meta m;
      memset(&m, 0, sizeof(m));
      m.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
      m.service_name = Str(svc);
      m.method_name = Str(method);
      m.correlation_id = 300000;
      if (extra) {
        m.has |= RRPC_META_HAS_LOG_ID | RRPC_META_HAS_TIMEOUT_MS;
        m.log_id = -1;
        m.timeout_ms = 1;
      }
      std::string payload = Pattern(64, static_cast<uint32_t>(n));
      // With an attachment (extra), shared behind the copied payload.
      std::string attachment = extra ? Pattern(300, static_cast<uint32_t>(n) + 1) : "";
      RpcMeta pb = ToPb(m);
      if (extra) pb.set_attachment_size(300);
      const std::string want = CxxFrame(pb, payload, attachment);
      Buf pay, att, direct, behind;
      pay.add(payload);
      att.add(attachment);
      ASSERT_EQ(0, rrpc__baidu_pack(&direct.b, &m, &pay.b, &att.b));
      EXPECT_EQ(want, direct.str());
      EXPECT_EQ(extra ? 2u : 1u, rrpc_iobuf_piece_count(&direct.b));
      behind.add("x");  // not empty: the general path
      ASSERT_EQ(0, rrpc__baidu_pack(&behind.b, &m, &pay.b, &att.b));
      EXPECT_EQ("x" + want, behind.str());
    }
  }
  // A response with an error text around the limit, and one with both
  // sub-messages (the general path only).
  for (size_t n : {size_t(0), size_t(100), size_t(112), size_t(113), size_t(114), size_t(126),
                   size_t(127), size_t(128), size_t(300)}) {
    SCOPED_TRACE(n);
    std::string text(n, 't');
    rrpc__rpc_meta m;
    memset(&m, 0, sizeof(m));
    m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID | RRPC_META_HAS_ERROR_CODE |
            RRPC_META_HAS_ERROR_TEXT;
    m.error_code = INT32_MIN;
    m.error_text = Str(text);
    m.correlation_id = 1;
    Buf out, pay;
    pay.add("p");
    ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
    EXPECT_EQ(CxxFrame(ToPb(m), "p", ""), out.str());
    m.has |= RRPC_META_HAS_REQUEST;
    Buf both;
    ASSERT_EQ(0, rrpc__baidu_pack(&both.b, &m, nullptr, nullptr));
    EXPECT_EQ(CxxFrame(ToPb(m), "", ""), both.str());
  }
}

// A small payload in several pieces (a caller's iobuf built from shared
// blocks) is still copied whole behind the meta, in one pass.
TEST(BaiduPack, SmallPayloadInSeveralPiecesIsCopiedWhole) {
  std::string svc = "bench.Echo", method = "Echo";
  rrpc__rpc_meta m = RequestMeta(svc, method, 3);
  Buf a, b, c, pay, out;
  a.add(Pattern(10, 1));
  b.add(Pattern(20, 2));
  c.add(Pattern(34, 3));
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&pay.b, &a.b));
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&pay.b, &b.b));
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&pay.b, &c.b));
  ASSERT_EQ(3u, rrpc_iobuf_piece_count(&pay.b));
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
  EXPECT_EQ(CxxFrame(ToPb(m), a.str() + b.str() + c.str(), ""), out.str());
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(&out.b));
  EXPECT_EQ(64u, pay.size());  // the caller's payload is left as it was
}

TEST(RpcMeta, StrEq) {
  EXPECT_TRUE(rrpc__str_eq(rrpc__str{nullptr, 0}, ""));
  EXPECT_TRUE(rrpc__str_eq(rrpc__str{"abc", 3}, "abc"));
  EXPECT_FALSE(rrpc__str_eq(rrpc__str{"abc", 2}, "abc"));
  EXPECT_FALSE(rrpc__str_eq(rrpc__str{"abd", 3}, "abc"));
  EXPECT_FALSE(rrpc__str_eq(rrpc__str{"abc", 3}, ""));
}

// rrpc__bytes_eq (the method lookup's name compare, inline words instead
// of memcmp) agrees with memcmp at every length and every differing byte,
// and reads only [0, n): each buffer is a heap block of exactly n bytes, so
// AddressSanitizer (make SAN=1) reports a read past either end.
TEST(RpcMeta, BytesEqAgreesWithMemcmp) {
  for (size_t n = 0; n <= 40; n++) {
    std::unique_ptr<char[]> a(new char[n ? n : 1]), b(new char[n ? n : 1]);
    for (size_t i = 0; i < n; i++) a[i] = b[i] = static_cast<char>('a' + i % 26);
    EXPECT_TRUE(rrpc__bytes_eq(a.get(), b.get(), n)) << n;
    for (size_t i = 0; i < n; i++) {
      for (int bit = 0; bit < 8; bit += 7) {  // a low bit and the sign bit
        b[i] = static_cast<char>(a[i] ^ (1 << bit));
        EXPECT_FALSE(rrpc__bytes_eq(a.get(), b.get(), n)) << n << " at " << i << " bit " << bit;
        EXPECT_EQ(memcmp(a.get(), b.get(), n) == 0, rrpc__bytes_eq(a.get(), b.get(), n) != 0);
        b[i] = a[i];
      }
    }
  }
  EXPECT_TRUE(rrpc__str_eqn(rrpc__str{nullptr, 0}, "", 0));
  EXPECT_TRUE(rrpc__str_eqn(rrpc__str{"test.PerfTestService", 20}, "test.PerfTestService", 20));
  EXPECT_FALSE(rrpc__str_eqn(rrpc__str{"test.PerfTestServicf", 20}, "test.PerfTestService", 20));
  EXPECT_FALSE(rrpc__str_eqn(rrpc__str{"Test", 4}, "Tesu", 4));
  EXPECT_FALSE(rrpc__str_eqn(rrpc__str{"Test", 4}, "Tests", 5));
}

// ---- frames: pack ------------------------------------------------------------

TEST(BaiduPack, BytesMatchAHandBuiltFrameAndShareBlocks) {
  std::string svc = "example.EchoService", method = "Echo";
  rrpc__rpc_meta m = RequestMeta(svc, method, 42);
  std::string payload = Pattern(10000, 1), att = Pattern(3000, 2);
  Buf pay, at, out;
  pay.add(payload);
  at.add(att);
  out.add("prefix");
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, &at.b));
  EXPECT_TRUE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);
  EXPECT_EQ(3000, m.attachment_size);

  RpcMeta pb;
  pb.mutable_request()->set_service_name(svc);
  pb.mutable_request()->set_method_name(method);
  pb.mutable_request()->set_log_id(77);
  pb.set_correlation_id(42);
  pb.set_attachment_size(3000);
  EXPECT_EQ("prefix" + CxxFrame(pb, payload, att), out.str());

  // Payload and attachment are shared: their block memory appears in `out`.
  std::vector<const void *> pieces;
  for (size_t i = 0; i < rrpc_iobuf_piece_count(&out.b); i++) {
    const void *d;
    size_t len;
    void *region;
    ASSERT_EQ(0, rrpc_iobuf_piece(&out.b, i, &d, &len, &region));
    pieces.push_back(d);
  }
  for (const Buf *src : {&pay, &at}) {
    for (size_t i = 0; i < rrpc_iobuf_piece_count(&src->b); i++) {
      const void *d;
      size_t len;
      void *region;
      ASSERT_EQ(0, rrpc_iobuf_piece(&src->b, i, &d, &len, &region));
      EXPECT_NE(pieces.end(), std::find(pieces.begin(), pieces.end(), d));
    }
  }
  EXPECT_EQ(payload, pay.str());  // sources unchanged
  EXPECT_EQ(att, at.str());
}

TEST(BaiduPack, EmptyAttachmentClearsTheField) {
  rrpc__rpc_meta m;
  memset(&m, 0, sizeof(m));
  m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_ATTACHMENT_SIZE | RRPC_META_HAS_CORRELATION_ID;
  m.attachment_size = 99;  // stale value from a previous use
  m.correlation_id = 3;
  Buf out, empty;
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, nullptr, &empty.b));
  EXPECT_FALSE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);
  RpcMeta pb;
  pb.mutable_response();
  pb.set_correlation_id(3);
  EXPECT_EQ(CxxFrame(pb, "", ""), out.str());
}

TEST(BaiduPack, BodyLimitsAndTheFourGibBoundary) {
  // Gigabytes of payload made of shared references to one 1 MiB block.
  Buf big, tmp;
  big.add(Pattern(1 << 20, 3));
  for (int i = 0; i < 13; i++) {
    rrpc_iobuf_clear(&tmp.b);
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&tmp.b, &big.b));
    ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&big.b, &tmp.b));
  }
  ASSERT_EQ(8ull << 30, big.size());

  std::string svc = "s", method = "m";
  rrpc__rpc_meta m = RequestMeta(svc, method, 1);
  size_t meta_len = rrpc__rpc_meta_size(&m);
  Buf out;
  out.add("keep");
  EXPECT_EQ(-RRPC_ETOOBIG, rrpc__baidu_pack(&out.b, &m, &big.b, nullptr));
  EXPECT_EQ("keep", out.str());

  // An attachment over INT32_MAX cannot be described by attachment_size.
  Buf att;
  ASSERT_EQ(static_cast<long>(1ull << 31), rrpc_iobuf_cut(&big.b, 1ull << 31, &att.b));
  EXPECT_EQ(-RRPC_ETOOBIG, rrpc__baidu_pack(&out.b, &m, nullptr, &att.b));
  EXPECT_EQ("keep", out.str());
  EXPECT_FALSE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);  // caller's meta untouched

  // body = meta + payload + attachment: one byte over UINT32_MAX fails ...
  Buf small_att;
  small_att.add("0123456789");
  size_t meta_with_att = meta_len + 2;  // attachment_size=10 adds 2 bytes
  rrpc_iobuf_pop_front(&big.b, big.size() - (UINT32_MAX - meta_with_att - 10 + 1));
  Buf pay;
  ASSERT_EQ(0, rrpc_iobuf_append_iobuf(&pay.b, &big.b));
  EXPECT_EQ(-RRPC_ETOOBIG, rrpc__baidu_pack(&out.b, &m, &pay.b, &small_att.b));
  EXPECT_EQ("keep", out.str());
  // pack set attachment_size to size this one: put back on the failure
  EXPECT_FALSE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);
  EXPECT_EQ(0, m.attachment_size);
  // ... and exactly UINT32_MAX is a valid frame that cuts again.
  rrpc_iobuf_pop_front(&pay.b, 1);
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, &small_att.b));
  EXPECT_EQ(4 + RRPC_BAIDU_HEADER_SIZE + static_cast<size_t>(UINT32_MAX), out.size());
  rrpc_iobuf_pop_front(&out.b, 4);
  std::string head(RRPC_BAIDU_HEADER_SIZE, '\0');
  rrpc_iobuf_copy_out(&out.b, 0, &head[0], head.size());
  EXPECT_EQ(Header(UINT32_MAX, static_cast<uint32_t>(meta_with_att)), head);
  Msg msg;
  EXPECT_EQ(-RRPC_ETOOBIG, rrpc__baidu_cut(&out.b, UINT32_MAX - 1, &msg.m));
  ASSERT_EQ(1, rrpc__baidu_cut(&out.b, UINT32_MAX, &msg.m));
  EXPECT_EQ(pay.size(), rrpc_iobuf_length(&msg.m.payload));
  EXPECT_TRUE(rrpc_iobuf_equals(&msg.m.attachment, "0123456789", 10));
  EXPECT_EQ(0u, out.size());
}

// A block allocator that fails, to drive pack's error path.
int FailAlloc(void *, size_t, void **, size_t *, void **) { return -ENOMEM; }
void NoFree(void *, void *, size_t, void *) {}

TEST(BaiduPack, AllocatorFailureLeavesOutputUnchanged) {
  std::string svc = "s", method = "m";
  rrpc__rpc_meta m = RequestMeta(svc, method, 1);
  Buf out, pay;
  // "keep" in a block with no free tail (user memory), so that the frame
  // behind it needs a block of its own, which the allocator refuses.
  static char keep[] = "keep";
  ASSERT_EQ(0, rrpc_iobuf_append_user(&out.b, keep, 4, nullptr, nullptr, nullptr));
  pay.add("payload");
  // A stale attachment_size, which pack clears for a frame without one:
  // the failure must leave it as the caller had it.
  m.has |= RRPC_META_HAS_ATTACHMENT_SIZE;
  m.attachment_size = 99;
  rrpc_block_allocator failing = {"failing", FailAlloc, NoFree, nullptr};
  rrpc_block_allocator_set(&failing);
  int rc = rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr);
  rrpc_block_allocator_set(nullptr);
  EXPECT_EQ(-ENOMEM, rc);
  EXPECT_EQ("keep", out.str());
  EXPECT_TRUE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);
  EXPECT_EQ(99, m.attachment_size);
  // Into an empty output (pack's direct path) as well.
  Buf empty;
  rrpc_block_allocator_set(&failing);
  rc = rrpc__baidu_pack(&empty.b, &m, &pay.b, nullptr);
  rrpc_block_allocator_set(nullptr);
  EXPECT_EQ(-ENOMEM, rc);
  EXPECT_EQ(0u, empty.size());
  EXPECT_EQ(99, m.attachment_size);
  EXPECT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
  EXPECT_FALSE(m.has & RRPC_META_HAS_ATTACHMENT_SIZE);
  EXPECT_EQ(4 + RRPC_BAIDU_HEADER_SIZE + rrpc__rpc_meta_size(&m) + 7, out.size());
}

// Behind bytes whose last block has a free tail (a socket's pending
// output), a small frame goes into that tail: no block of its own, the
// same bytes as into an empty output. A tail too short for the longest
// small frame, or a shared last block, gets a new block instead.
TEST(BaiduPack, SmallFrameBehindPendingBytesSharesTheirBlock) {
  std::string svc = "s", method = "m";
  rrpc__rpc_meta m = RequestMeta(svc, method, 7);
  Buf alone, pay, att;
  pay.add("payload");
  att.add("attached");
  ASSERT_EQ(0, rrpc__baidu_pack(&alone.b, &m, &pay.b, &att.b));
  const std::string frame = alone.str();
  Buf out;
  out.add("keep");
  ASSERT_EQ(1u, rrpc_iobuf_piece_count(&out.b));
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
  EXPECT_EQ(1u, rrpc_iobuf_piece_count(&out.b));  // header, meta and payload joined "keep"'s block
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, &att.b));
  // The second frame's head went into the same block; its attachment is shared.
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(&out.b));
  Buf noatt;
  ASSERT_EQ(0, rrpc__baidu_pack(&noatt.b, &m, &pay.b, nullptr));
  EXPECT_EQ("keep" + noatt.str() + frame, out.str());
  // Behind the shared attachment the next frame needs a block of its own.
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
  EXPECT_EQ(3u, rrpc_iobuf_piece_count(&out.b));
  EXPECT_EQ("keep" + noatt.str() + frame + noatt.str(), out.str());
  // A tail shorter than the longest small frame (header, short meta, 128
  // bytes) is left: the frame starts a new block.
  Buf full;
  full.add(std::string(RRPC_IOBUF_DEFAULT_BLOCK_SIZE - 100, 'x'));
  ASSERT_EQ(1u, rrpc_iobuf_piece_count(&full.b));
  ASSERT_EQ(0, rrpc__baidu_pack(&full.b, &m, &pay.b, nullptr));
  EXPECT_EQ(2u, rrpc_iobuf_piece_count(&full.b));
  EXPECT_EQ(std::string(RRPC_IOBUF_DEFAULT_BLOCK_SIZE - 100, 'x') + noatt.str(), full.str());
  // A meta too long for the one-pass shape behind pending bytes: the
  // general path, same bytes as into an empty output.
  std::string long_svc(150, 'S');
  rrpc__rpc_meta lm = RequestMeta(long_svc, method, 8);
  Buf lone, behind;
  ASSERT_EQ(0, rrpc__baidu_pack(&lone.b, &lm, &pay.b, nullptr));
  behind.add("keep");
  ASSERT_EQ(0, rrpc__baidu_pack(&behind.b, &lm, &pay.b, nullptr));
  EXPECT_EQ("keep" + lone.str(), behind.str());
}

// Packed into an empty output (the channel's and server's case): a small
// payload is copied behind the meta in the header's block (one piece less),
// a payload over the copy limit and the attachment stay shared, the bytes
// are those of a hand-built frame either way; a failure leaves it empty.
// Every size the header's block takes by copy (1 - 128 bytes: each class of
// the inline copy, words, 16-byte moves and their overlapping tail), into an
// empty output and behind an earlier frame: the C++ library's bytes exactly,
// and nothing written past the frame's end.
TEST(BaiduPack, EveryCopiedPayloadSizeIsExact) {
  std::string svc = "example.EchoService", method = "Echo";
  for (size_t n = 1; n <= 128; n++) {
    SCOPED_TRACE(n);
    rrpc__rpc_meta m = RequestMeta(svc, method, 7);
    std::string payload = Pattern(n, static_cast<int>(n));
    RpcMeta pb;
    pb.mutable_request()->set_service_name(svc);
    pb.mutable_request()->set_method_name(method);
    pb.mutable_request()->set_log_id(77);
    pb.set_correlation_id(7);
    const std::string want = CxxFrame(pb, payload, "");
    Buf pay, out, behind;
    pay.add(payload);
    ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
    EXPECT_EQ(want, out.str());
    EXPECT_EQ(1u, rrpc_iobuf_piece_count(&out.b));
    behind.add("x");
    ASSERT_EQ(0, rrpc__baidu_pack(&behind.b, &m, &pay.b, nullptr));
    ASSERT_EQ(0, rrpc_iobuf_append(&behind.b, "yz", 2));
    EXPECT_EQ("x" + want + "yz", behind.str());
  }
}

TEST(BaiduPack, SmallPayloadIsCopiedIntoTheHeaderBlockLargeOneShared) {
  std::string svc = "example.EchoService", method = "Echo";
  for (size_t n : {size_t(1), size_t(128), size_t(129), size_t(5000)}) {
    rrpc__rpc_meta m = RequestMeta(svc, method, 7);
    std::string payload = Pattern(n, 4), att = Pattern(64, 5);
    Buf pay, at, out;
    pay.add(payload);
    at.add(att);
    ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, &at.b));
    RpcMeta pb;
    pb.mutable_request()->set_service_name(svc);
    pb.mutable_request()->set_method_name(method);
    pb.mutable_request()->set_log_id(77);
    pb.set_correlation_id(7);
    pb.set_attachment_size(64);
    EXPECT_EQ(CxxFrame(pb, payload, att), out.str()) << n;
    const void *pay_data, *att_data, *d;
    size_t len;
    void *region;
    ASSERT_EQ(0, rrpc_iobuf_piece(&pay.b, 0, &pay_data, &len, &region));
    ASSERT_EQ(0, rrpc_iobuf_piece(&at.b, 0, &att_data, &len, &region));
    bool pay_shared = false, att_shared = false;
    for (size_t i = 0; i < rrpc_iobuf_piece_count(&out.b); i++) {
      ASSERT_EQ(0, rrpc_iobuf_piece(&out.b, i, &d, &len, &region));
      pay_shared |= d == pay_data;
      att_shared |= d == att_data;
    }
    EXPECT_EQ(n > 128, pay_shared) << n;
    EXPECT_TRUE(att_shared) << n;
    EXPECT_EQ(n > 128 ? 3u : 2u, rrpc_iobuf_piece_count(&out.b)) << n;
    EXPECT_EQ(payload, pay.str());
  }
  rrpc__rpc_meta m = RequestMeta(svc, method, 1);
  Buf out, pay;
  pay.add("payload");
  rrpc_block_allocator failing = {"failing", FailAlloc, NoFree, nullptr};
  rrpc_block_allocator_set(&failing);
  int rc = rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr);
  rrpc_block_allocator_set(nullptr);
  EXPECT_EQ(-ENOMEM, rc);
  EXPECT_EQ(0u, out.size());
  EXPECT_EQ(0u, rrpc_iobuf_piece_count(&out.b));
}

// ---- frames: cut -------------------------------------------------------------

struct Expected {
  rrpc__rpc_meta meta;
  std::string payload, att;
};

void ExpectMsg(const Expected &e, const rrpc__baidu_msg &got) {
  ExpectSame(ToPb(e.meta), got.meta);
  EXPECT_EQ(0, got.bad_attachment);
  std::string p(rrpc_iobuf_length(&got.payload), '\0');
  if (!p.empty()) rrpc_iobuf_copy_out(&got.payload, 0, &p[0], p.size());
  std::string a(rrpc_iobuf_length(&got.attachment), '\0');
  if (!a.empty()) rrpc_iobuf_copy_out(&got.attachment, 0, &a[0], a.size());
  EXPECT_TRUE(p == e.payload) << "payload of " << p.size() << " bytes, want " << e.payload.size();
  EXPECT_TRUE(a == e.att) << "attachment of " << a.size() << " bytes, want " << e.att.size();
}

// Feeds `wire` into a read iobuf in chunks chosen by `next_chunk`, cutting
// after every chunk, and checks the frames come out as `want`.
template <typename F>
void FeedAndCut(const std::string &wire, const std::vector<Expected> &want, F next_chunk) {
  Buf in;
  size_t got = 0, pos = 0;
  while (pos < wire.size()) {
    size_t n = std::min(next_chunk(), wire.size() - pos);
    in.add(wire.substr(pos, n));
    pos += n;
    for (;;) {
      Msg msg;
      size_t before = in.size();
      int rc = rrpc__baidu_cut(&in.b, 0, &msg.m);
      ASSERT_GE(rc, 0) << "at byte " << pos;
      if (rc == 0) {
        ASSERT_EQ(before, in.size());  // nothing consumed
        break;
      }
      ASSERT_LT(got, want.size());
      ExpectMsg(want[got], msg.m);
      got++;
    }
  }
  EXPECT_EQ(want.size(), got);
  EXPECT_EQ(0u, in.size());
}

TEST(BaiduCut, RoundTripAttachmentSizes) {
  const size_t sizes[] = {0, 1, 2, 11, 12, 13, 4095, 8191, 8192, 8193, 65536 + 3,
                          (1 << 20) + 17, 8u << 20};
  std::mt19937 rng(7);
  std::string svc = "pkg.Service", method = "Method";
  uint32_t seed = 10;
  for (size_t att_size : sizes) {
    for (size_t pay_size : {size_t(0), size_t(5), att_size / 3 + 1}) {
      SCOPED_TRACE(testing::Message() << "att " << att_size << " payload " << pay_size);
      Expected e;
      e.meta = RequestMeta(svc, method, static_cast<int64_t>(att_size) * 1000 + pay_size);
      e.payload = Pattern(pay_size, seed++);
      e.att = Pattern(att_size, seed++);
      Buf out, pay, at;
      pay.add(e.payload);
      at.add(e.att);
      ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &e.meta, &pay.b, &at.b));
      std::string wire = out.str();
      ASSERT_EQ(RRPC_BAIDU_HEADER_SIZE + rrpc__rpc_meta_size(&e.meta) + pay_size + att_size,
                wire.size());

      // Straight from the packed iobuf (blocks shared end to end).
      {
        Msg msg;
        ASSERT_EQ(1, rrpc__baidu_cut(&out.b, 0, &msg.m));
        ExpectMsg(e, msg.m);
        EXPECT_EQ(0u, out.size());
      }
      // Byte by byte (small frames only: each byte is one cut attempt).
      if (wire.size() <= 70000) FeedAndCut(wire, {e}, [] { return size_t(1); });
      // Random chunk sizes, small and large.
      FeedAndCut(wire, {e}, [&] { return size_t(1 + rng() % 37); });
      FeedAndCut(wire, {e}, [&] { return size_t(1 + rng() % 100000); });
      if (HasFatalFailure()) return;
    }
  }
}

// A frame into an empty output is built in a block of its own (pack's
// direct path, no reserve): a meta larger than a default block gets a
// block that holds it, into an empty output and behind other bytes alike,
// with a copied payload behind it.
TEST(BaiduPack, MetaLargerThanABlockIntoEmptyAndNonEmptyOutput) {
  std::string svc(3 * RRPC_IOBUF_DEFAULT_BLOCK_SIZE + 5, 'S'), method = "M";
  for (const char *before : {"", "xyz"}) {
    SCOPED_TRACE(before);
    Expected e;
    e.meta = RequestMeta(svc, method, 42);
    e.payload = Pattern(40, 3);
    e.att = Pattern(100, 4);
    Buf out, pay, at;
    out.add(before);
    pay.add(e.payload);
    at.add(e.att);
    ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &e.meta, &pay.b, &at.b));
    ASSERT_EQ(strlen(before) + RRPC_BAIDU_HEADER_SIZE + rrpc__rpc_meta_size(&e.meta) + 40 + 100,
              out.size());
    EXPECT_EQ(strlen(before), rrpc_iobuf_pop_front(&out.b, strlen(before)));
    Msg msg;
    ASSERT_EQ(1, rrpc__baidu_cut(&out.b, 0, &msg.m));
    ExpectMsg(e, msg.m);
    EXPECT_EQ(0u, out.size());
  }
}

TEST(BaiduCut, SeveralFramesBackToBack) {
  std::mt19937 rng(99);
  std::vector<std::string> names = {"a.B", "c", "Method", "x.y.Z", ""};
  std::vector<Expected> want;
  Buf out;
  for (int i = 0; i < 40; i++) {
    Expected e;
    memset(&e.meta, 0, sizeof(e.meta));
    if (i % 2) {
      e.meta = RequestMeta(names[i % 5], names[(i + 1) % 5], i);
    } else {
      e.meta.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID | RRPC_META_HAS_ERROR_CODE;
      e.meta.correlation_id = -i;
      e.meta.error_code = i % 3 ? 0 : -1;
    }
    e.payload = Pattern(rng() % 3000, i);
    e.att = (i % 3 == 0) ? std::string() : Pattern(rng() % 20000, 1000 + i);
    Buf pay, at;
    pay.add(e.payload);
    at.add(e.att);
    ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &e.meta, &pay.b, &at.b));
    want.push_back(e);
  }
  std::string wire = out.str();
  FeedAndCut(wire, want, [] { return size_t(1); });
  FeedAndCut(wire, want, [&] { return size_t(1 + rng() % 500); });
  FeedAndCut(wire, want, [&] { return size_t(1 + rng() % 50000); });
  FeedAndCut(wire, want, [&] { return wire.size(); });
}

TEST(BaiduCut, DecodesCxxBuiltFrames) {
  RpcMeta pb;
  pb.mutable_request()->set_service_name("svc");
  pb.mutable_request()->set_method_name("m");
  pb.mutable_request()->set_trace_id(5);
  pb.set_correlation_id(1LL << 40);
  pb.set_attachment_size(4);
  (*pb.mutable_user_fields())["k"] = "v";
  Buf in;
  in.add(CxxFrame(pb, "payload", "atta"));
  Msg msg;
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m));
  ExpectSame(pb, msg.m.meta);
  EXPECT_TRUE(rrpc_iobuf_equals(&msg.m.payload, "payload", 7));
  EXPECT_TRUE(rrpc_iobuf_equals(&msg.m.attachment, "atta", 4));
  // Header and meta lay in one piece: read in place, no copy.
  EXPECT_EQ(nullptr, msg.m.meta_bytes);
  EXPECT_EQ(0u, in.size());
}

// The meta is read in place from the input's block; its strings must stay
// valid for the message's life whatever happens to the input and to the
// payload (ASan reports a freed block here).
// Blocks from plain malloc, poisoned when freed: a block that goes too
// early shows even without ASan (the default allocator caches blocks).
int PoisonAlloc(void *, size_t size, void **data, size_t *cap, void **region) {
  *data = malloc(size);
  *cap = size;
  *region = nullptr;
  return *data ? 0 : -ENOMEM;
}
void PoisonFree(void *, void *data, size_t cap, void *) {
  memset(data, 0xdd, cap);
  // Keep the compiler from dropping the memset as a dead store before free.
  __asm__ __volatile__("" : : "r"(data) : "memory");
  free(data);
}

TEST(BaiduCut, InPlaceMetaOutlivesTheInputAndThePayload) {
  rrpc_block_allocator poison{};
  poison.name = "poison";
  poison.alloc = PoisonAlloc;
  poison.free = PoisonFree;
  rrpc_block_allocator_set(&poison);
  std::string svc(40, 's'), method(30, 'm');
  struct Case {
    const char *name;
    std::string payload, attachment;
  } cases[] = {{"payload in the block", "payload", ""},
               {"header and meta alone", "", ""},
               {"attachment only", "", "atta"}};
  for (const Case &k : cases) {
    rrpc__rpc_meta m = RequestMeta(svc, method, 7);
    Buf wire, pay, att;
    pay.add(k.payload);
    att.add(k.attachment);
    ASSERT_EQ(0, rrpc__baidu_pack(&wire.b, &m, &pay.b, &att.b)) << k.name;
    Buf in;
    in.add(wire.str()); // one block: header and meta lie in its first piece
    Msg msg;
    ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m)) << k.name;
    EXPECT_EQ(nullptr, msg.m.meta_bytes) << k.name;
    rrpc_iobuf_clear(&in.b);
    rrpc_iobuf_clear(&msg.m.payload);
    rrpc_iobuf_clear(&msg.m.attachment);
    EXPECT_EQ(svc, std::string(msg.m.meta.service_name.ptr, msg.m.meta.service_name.len)) << k.name;
    EXPECT_EQ(method, std::string(msg.m.meta.method_name.ptr, msg.m.meta.method_name.len)) << k.name;
    EXPECT_EQ(7, msg.m.meta.correlation_id) << k.name;
  }
  rrpc_block_allocator_set(nullptr);
}

// A response's error text read in place outlives the input and the payload
// as the request's names do; a response without strings holds no reference
// to the read block (nothing in its meta points there), and the block goes
// with the input and the payload.
TEST(BaiduCut, InPlaceResponseHoldsItsBlockOnlyForAnErrorText) {
  rrpc_block_allocator poison{};
  poison.name = "poison";
  poison.alloc = PoisonAlloc;
  poison.free = PoisonFree;
  rrpc_block_allocator_set(&poison);
  std::string text(50, 'e');
  for (int with_text = 0; with_text < 2; with_text++) {
    SCOPED_TRACE(with_text);
    rrpc__rpc_meta m;
    memset(&m, 0, sizeof(m));
    m.has = RRPC_META_HAS_RESPONSE | RRPC_META_HAS_CORRELATION_ID;
    m.correlation_id = 9;
    if (with_text) {
      m.has |= RRPC_META_HAS_ERROR_CODE | RRPC_META_HAS_ERROR_TEXT;
      m.error_code = 1004;
      m.error_text = Str(text);
    }
    Buf wire, pay;
    pay.add("payload");
    ASSERT_EQ(0, rrpc__baidu_pack(&wire.b, &m, &pay.b, nullptr));
    Buf in;
    in.add(wire.str());
    Msg msg;
    ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m));
    EXPECT_EQ(nullptr, msg.m.meta_bytes);
    EXPECT_EQ(with_text ? rrpc__iobuf_ref_at(&msg.m.payload, 0)->block : nullptr, msg.m.meta_block);
    rrpc_iobuf_clear(&in.b);
    rrpc_iobuf_clear(&msg.m.payload);
    EXPECT_EQ(9, msg.m.meta.correlation_id);
    if (with_text) {
      EXPECT_EQ(1004, msg.m.meta.error_code);
      EXPECT_EQ(text, S(msg.m.meta.error_text));
    }
  }
  rrpc_block_allocator_set(nullptr);
}

// Header and meta split over two pieces: the meta is copied, and the copy
// decodes the same.
TEST(BaiduCut, SplitMetaIsCopied) {
  std::string svc = "svc", method = "method";
  rrpc__rpc_meta m = RequestMeta(svc, method, 9);
  Buf wire, pay;
  pay.add("body");
  ASSERT_EQ(0, rrpc__baidu_pack(&wire.b, &m, &pay.b, nullptr));
  std::string bytes = wire.str();
  for (size_t split = 1; split < bytes.size(); split++) {
    Buf in;
    in.add(bytes.substr(0, split));
    rrpc_block *b;
    ASSERT_EQ(0, rrpc__block_alloc(bytes.size(), &b));
    memcpy(b->data, bytes.data() + split, bytes.size() - split);
    b->size = (uint32_t)(bytes.size() - split);
    ASSERT_EQ(0, rrpc__iobuf_append_block(&in.b, b, 0, b->size)); // a second piece
    rrpc__block_unref(b);
    Msg msg;
    ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m)) << split;
    bool in_place = split >= bytes.size() - 4; // header and meta all in the first piece
    EXPECT_EQ(in_place, msg.m.meta_bytes == nullptr) << split;
    rrpc_iobuf_clear(&in.b);
    EXPECT_TRUE(rrpc__str_eq(msg.m.meta.service_name, "svc")) << split;
    EXPECT_TRUE(rrpc__str_eq(msg.m.meta.method_name, "method")) << split;
    EXPECT_TRUE(rrpc_iobuf_equals(&msg.m.payload, "body", 4)) << split;
  }
}

TEST(BaiduCut, TruncatedHeaderAndBodyNeedMore) {
  std::string svc = "s", method = "m";
  rrpc__rpc_meta m = RequestMeta(svc, method, 1);
  Buf out, pay;
  pay.add("hello");
  ASSERT_EQ(0, rrpc__baidu_pack(&out.b, &m, &pay.b, nullptr));
  std::string wire = out.str();
  for (size_t n = 0; n < wire.size(); n++) {
    Buf in;
    in.add(wire.substr(0, n));
    Msg msg;
    EXPECT_EQ(0, rrpc__baidu_cut(&in.b, 0, &msg.m)) << n;
    EXPECT_EQ(n, in.size());
    EXPECT_EQ(nullptr, msg.m.meta_bytes);
  }
}

int CutString(const std::string &bytes, size_t max_body, size_t *left = nullptr) {
  Buf in;
  in.add(bytes);
  Msg msg;
  int rc = rrpc__baidu_cut(&in.b, max_body, &msg.m);
  if (left) *left = in.size();
  if (rc <= 0) {
    EXPECT_EQ(nullptr, msg.m.meta_bytes);
    EXPECT_EQ(0u, rrpc_iobuf_length(&msg.m.payload));
  }
  return rc;
}

TEST(BaiduCut, BadMagicIsReportedAfterFourBytes) {
  EXPECT_EQ(0, CutString("PRP", 0));
  EXPECT_EQ(0, CutString("XYZ", 0));  // not yet four bytes
  EXPECT_EQ(-RRPC_EPARSE, CutString("PRPX", 0));
  EXPECT_EQ(-RRPC_EPARSE, CutString("STRM", 0));  // streaming frames are not spoken
  EXPECT_EQ(-RRPC_EPARSE, CutString("GET / HTTP/1.1\r\n", 0));
  size_t left;
  EXPECT_EQ(-RRPC_EPARSE, CutString(Header(0, 0, "prpc"), 0, &left));
  EXPECT_EQ(12u, left);  // nothing consumed on error
}

TEST(BaiduCut, BodyOverMaxIsReportedAfterEightBytes) {
  std::string h = Header(1001, 0);
  EXPECT_EQ(0, CutString(h.substr(0, 7), 1000));
  EXPECT_EQ(-RRPC_ETOOBIG, CutString(h.substr(0, 8), 1000));
  EXPECT_EQ(-RRPC_ETOOBIG, CutString(h, 1000));
  EXPECT_EQ(0, CutString(h, 1001));  // at the limit: wait for the body
  // 0 means the default limit.
  EXPECT_EQ(0, CutString(Header(RRPC_BAIDU_DEFAULT_MAX_BODY, 0).substr(0, 8), 0));
  EXPECT_EQ(-RRPC_ETOOBIG, CutString(Header(RRPC_BAIDU_DEFAULT_MAX_BODY + 1, 0).substr(0, 8), 0));
  EXPECT_EQ(-RRPC_ETOOBIG, CutString(Header(UINT32_MAX, UINT32_MAX), 0));
}

TEST(BaiduCut, MetaSizeOverBodySizeIsReportedAfterTwelveBytes) {
  EXPECT_EQ(0, CutString(Header(10, 11).substr(0, 11), 0));
  EXPECT_EQ(-RRPC_EPARSE, CutString(Header(10, 11), 0));
  EXPECT_EQ(-RRPC_EPARSE, CutString(Header(0, 1), 0));
  EXPECT_EQ(0, CutString(Header(10, 10), 0));  // equal is fine: wait for it
}

TEST(BaiduCut, GarbageMeta) {
  std::string garbage("\xff\xff\xff\xff", 4);
  size_t left;
  EXPECT_EQ(-RRPC_EPARSE, CutString(Header(6, 4) + garbage + "xx", 0, &left));
  EXPECT_EQ(18u, left);
  // A request without method_name is garbage too.
  std::string no_method("\x0a\x03\x0a\x01s", 5);
  EXPECT_EQ(-RRPC_EPARSE, CutString(Header(5, 5) + no_method, 0));
}

TEST(BaiduCut, EmptyMetaAndEmptyBody) {
  Buf in;
  in.add(Header(0, 0) + Header(3, 0) + "abc");
  Msg a, b;
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &a.m));
  EXPECT_EQ(0u, a.m.meta.has);
  EXPECT_EQ(0u, rrpc_iobuf_length(&a.m.payload));
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &b.m));
  EXPECT_TRUE(rrpc_iobuf_equals(&b.m.payload, "abc", 3));
  EXPECT_EQ(0u, in.size());
}

TEST(BaiduCut, BadAttachmentKeepsTheStreamInSync) {
  for (int32_t att : {8, INT32_MAX, -1, INT32_MIN}) {
    SCOPED_TRACE(att);
    RpcMeta pb;
    pb.mutable_response()->set_error_code(0);
    pb.set_correlation_id(5);
    pb.set_attachment_size(att);
    std::string meta = pb.SerializeAsString();
    std::string wire = Header(static_cast<uint32_t>(meta.size() + 7), static_cast<uint32_t>(meta.size())) +
                       meta + "1234567";
    RpcMeta next;
    next.mutable_response();
    next.set_correlation_id(6);
    next.set_attachment_size(7);  // exactly the rest: fine
    wire += CxxFrame(next, "", "abcdefg");
    Buf in;
    in.add(wire);
    Msg bad, good;
    ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &bad.m));
    EXPECT_EQ(1, bad.m.bad_attachment);
    EXPECT_EQ(5, bad.m.meta.correlation_id);
    EXPECT_TRUE(rrpc_iobuf_equals(&bad.m.payload, "1234567", 7));
    EXPECT_EQ(0u, rrpc_iobuf_length(&bad.m.attachment));
    ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &good.m));
    EXPECT_EQ(0, good.m.bad_attachment);
    EXPECT_EQ(6, good.m.meta.correlation_id);
    EXPECT_EQ(0u, rrpc_iobuf_length(&good.m.payload));
    EXPECT_TRUE(rrpc_iobuf_equals(&good.m.attachment, "abcdefg", 7));
    EXPECT_EQ(0u, in.size());
  }
}

TEST(BaiduCut, ZeroAttachmentSizeIsNoAttachment) {
  RpcMeta pb;
  pb.mutable_response();
  pb.set_attachment_size(0);
  Buf in;
  in.add(CxxFrame(pb, "body", ""));
  Msg msg;
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m));
  EXPECT_EQ(0, msg.m.bad_attachment);
  EXPECT_TRUE(rrpc_iobuf_equals(&msg.m.payload, "body", 4));
}

// cut_head leaves the body in the input for cut_body to put where the
// caller keeps it (a server's call): the same bytes cut would give, the
// frames behind it untouched, the message's own iobufs left empty.
TEST(BaiduMsg, HeadThenBodyIntoTheCallersIobufs) {
  RpcMeta pb;
  pb.mutable_request()->set_service_name("S");
  pb.mutable_request()->set_method_name("M");
  pb.set_correlation_id(9);
  pb.set_attachment_size(3);
  Buf in;
  in.add(CxxFrame(pb, "payload", "att") + CxxFrame(pb, "second", "xyz"));
  Msg msg;
  ASSERT_EQ(1, rrpc__baidu_cut_head(&in.b, 0, &msg.m));
  EXPECT_EQ(9, msg.m.meta.correlation_id);
  Buf pay, att;
  pay.add("pre-");
  ASSERT_EQ(0, rrpc__baidu_cut_body(&in.b, &msg.m, &pay.b, &att.b));
  EXPECT_TRUE(rrpc_iobuf_equals(&pay.b, "pre-payload", 11));
  EXPECT_TRUE(rrpc_iobuf_equals(&att.b, "att", 3));
  EXPECT_EQ(0u, rrpc_iobuf_length(&msg.m.payload));
  EXPECT_EQ(0u, rrpc_iobuf_length(&msg.m.attachment));
  Msg next;
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &next.m));
  EXPECT_TRUE(rrpc_iobuf_equals(&next.m.payload, "second", 6));
  EXPECT_TRUE(rrpc_iobuf_equals(&next.m.attachment, "xyz", 3));
  EXPECT_EQ(0u, rrpc_iobuf_length(&in.b));
}

TEST(BaiduMsg, DestroyTwiceIsHarmless) {
  Msg msg;
  Buf in;
  in.add(CxxFrame(RpcMeta(), "x", ""));
  ASSERT_EQ(1, rrpc__baidu_cut(&in.b, 0, &msg.m));
  rrpc__baidu_msg_destroy(&msg.m);
  rrpc__baidu_msg_destroy(&msg.m);
  EXPECT_EQ(0u, rrpc_iobuf_length(&msg.m.payload));
}

}  // namespace
