// http_parse_unittest.cc - the builtin pages' HTTP head parser and the
// metrics recorder, as pure functions: what is sniffed as HTTP, every
// refusal status, limits, query decoding, and percentiles over a window.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "rrpc/builtin/http_parse.h"
#include "rrpc/internal/metrics.h"
}

namespace {

int parse(const std::string &s, size_t max, rrpc__http_req *r) {
  return rrpc__http_parse(s.data(), s.size(), max, r);
}

TEST(HttpSniff, TellsHttpFromBaiduStd) {
  auto sniff = [](const std::string &s) {
    return rrpc__http_sniff(reinterpret_cast<const uint8_t *>(s.data()), s.size());
  };
  EXPECT_EQ(1, sniff("GET / HTTP/1.1\r\n"));
  EXPECT_EQ(1, sniff("HEAD "));
  EXPECT_EQ(1, sniff("POST /x"));
  EXPECT_EQ(0, sniff("PRPC\0\0\0\0"));
  EXPECT_EQ(0, sniff(std::string("\x02\x00\x00\x01", 4)));  // a CLC-like start
  EXPECT_EQ(-EAGAIN, sniff("GE"));
  EXPECT_EQ(-EAGAIN, sniff("P"));
  EXPECT_EQ(-EAGAIN, sniff(""));
  EXPECT_EQ(0, sniff("GETX"));
}

TEST(HttpParse, GoodHeads) {
  rrpc__http_req r;
  EXPECT_EQ(1, parse("GET /status?format=json&x=1 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n", 8192, &r));
  EXPECT_STREQ("/status", r.path);
  EXPECT_STREQ("format=json&x=1", r.query);
  EXPECT_EQ(1, r.minor);
  EXPECT_EQ(0, r.is_head);
  EXPECT_EQ(1, parse("HEAD / HTTP/1.0\r\n\r\ntrailing", 8192, &r));
  EXPECT_EQ(1, r.is_head);
  EXPECT_EQ(19u, r.head_len);
  EXPECT_EQ(1, parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n", 8192, &r));
  // Bytes after the head do not change the answer about the head (found by
  // http_parse_fuzzer: a control byte after it used to give 400).
  EXPECT_EQ(1, parse(std::string("GET / HTTP/1.1\r\n\r\n\x01junk", 23), 8192, &r));
  EXPECT_EQ(18u, r.head_len);
}

// A browser names text/html in Accept and gets the HTML pages; curl, probes
// and rrpc_stat (*/* or no Accept) keep the text.
TEST(HttpParse, AcceptTextHtmlMarksABrowser) {
  rrpc__http_req r;
  EXPECT_EQ(1, parse("GET / HTTP/1.1\r\naccept: text/html,application/xhtml+xml,*/*;q=0.8\r\n\r\n", 8192, &r));
  EXPECT_EQ(1, r.accepts_html);
  EXPECT_EQ(1, parse("GET / HTTP/1.1\r\nAccept: */*\r\nX-Note: text/html\r\n\r\n", 8192, &r));
  EXPECT_EQ(0, r.accepts_html);
  EXPECT_EQ(1, parse("GET / HTTP/1.1\r\nAccept: text/htm\r\n\r\n", 8192, &r));
  EXPECT_EQ(0, r.accepts_html);
  EXPECT_EQ(1, parse("GET / HTTP/1.1\r\n\r\n", 8192, &r));
  EXPECT_EQ(0, r.accepts_html);
}

TEST(HttpParse, Incomplete) {
  rrpc__http_req r;
  EXPECT_EQ(0, parse("GET /status HTTP/1.1\r\nHost: a\r\n", 8192, &r));
  EXPECT_EQ(0, parse("GET", 8192, &r));
  EXPECT_EQ(0, parse("", 8192, &r));
}

TEST(HttpParse, Malformed400) {
  rrpc__http_req r;
  for (const char *bad : {"GET /x HTTP/1.1\r\nNoColon\r\n\r\n", "GET /x HTTP/1.1\r\n folded: x\r\n\r\n",
                          "GET x HTTP/1.1\r\n\r\n", "GET /x HTTP/2.0\r\n\r\n", "GET /x\r\n\r\n",
                          "GET  /x HTTP/1.1\r\n\r\n", "get /x HTTP/1.1\r\n\r\n", "GET /x HTTP/1.1 \r\n\r\n",
                          "GET /x HTTP/1.1\nHost: a\r\n\r\n", "GET /x HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
                          "GET /x HTTP/1.1\r\nContent-Length:\r\n\r\n", "GETTINGLONG /x HTTP/1.1\r\n\r\n"})
    EXPECT_EQ(400, parse(bad, 8192, &r)) << bad;
  EXPECT_EQ(400, parse(std::string("GET /\0 HTTP/1.1\r\n\r\n", 19), 8192, &r));
  // A control byte is refused before the head is complete.
  EXPECT_EQ(400, parse(std::string("GET /\x01", 6), 8192, &r));
}

TEST(HttpParse, Refusals405And413) {
  rrpc__http_req r;
  EXPECT_EQ(405, parse("POST /status HTTP/1.1\r\n\r\n", 8192, &r));
  EXPECT_EQ(405, parse("DELETE / HTTP/1.1\r\n\r\n", 8192, &r));
  EXPECT_EQ(413, parse("GET / HTTP/1.1\r\nContent-Length: 10\r\n\r\n", 8192, &r));
  EXPECT_EQ(413, parse("GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 8192, &r));
  EXPECT_EQ(413, parse("GET /" + std::string(RRPC_HTTP_PATH_MAX, 'a') + " HTTP/1.1\r\n\r\n", 8192, &r));
  EXPECT_EQ(413, parse("GET /?" + std::string(RRPC_HTTP_QUERY_MAX, 'a') + " HTTP/1.1\r\n\r\n", 8192, &r));
  // The limit counts the head, final CRLFCRLF included.
  std::string h = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  EXPECT_EQ(1, parse(h, h.size(), &r));
  EXPECT_EQ(413, parse(h, h.size() - 1, &r));
  // Bytes past the limit are never looked at: junk there changes nothing.
  EXPECT_EQ(413, parse(std::string(64, 'G') + std::string("\x01"), 64, &r));
}

TEST(HttpQuery, GetAndDecode) {
  char v[16];
  EXPECT_EQ(1, rrpc__http_query_get("a=1&prefix=rrpc%5Fx+y&b", "prefix", v, sizeof v));
  EXPECT_STREQ("rrpc_x y", v);
  EXPECT_EQ(1, rrpc__http_query_get("a=1&b", "b", v, sizeof v));
  EXPECT_STREQ("", v);
  EXPECT_EQ(0, rrpc__http_query_get("ab=1", "a", v, sizeof v));
  EXPECT_EQ(1, rrpc__http_query_get("a=%zz%4", "a", v, sizeof v));
  EXPECT_STREQ("%zz%4", v);
  EXPECT_EQ(1, rrpc__http_query_get("a=0123456789abcdefXYZ", "a", v, sizeof v));
  EXPECT_EQ(15u, strlen(v));  // truncated, terminated
}

TEST(CallStats, PercentilesWithinABucket) {
  rrpc__call_stats *s;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  for (int i = 1; i <= 1000; i++) {
    rrpc__call_stats_begin(s);
    rrpc__call_stats_end(s, i, i % 100 == 0 ? -1008 : 0);
  }
  rrpc_call_stats st;
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(1000u, st.calls);
  EXPECT_EQ(10u, st.errors);
  EXPECT_EQ(0, st.in_flight);
  EXPECT_EQ(1000u, st.window_calls);
  EXPECT_EQ(500u, st.latency_avg_us);  // 500500 / 1000
  auto near = [](uint64_t got, double want) { return got >= want * 15 / 16 && got <= want * 17 / 16; };
  EXPECT_TRUE(near(st.latency_p50_us, 500)) << st.latency_p50_us;
  EXPECT_TRUE(near(st.latency_p90_us, 900)) << st.latency_p90_us;
  EXPECT_TRUE(near(st.latency_p99_us, 990)) << st.latency_p99_us;
  EXPECT_EQ(1000u, st.latency_max_us);
  EXPECT_EQ(10u, rrpc__call_stats_error_count(s, -1008));
  EXPECT_EQ(0u, rrpc__call_stats_error_count(s, -1));
  rrpc__call_stats_begin(s);
  rrpc__call_stats_read(s, &st);
  EXPECT_EQ(1, st.in_flight);
  rrpc__call_stats_free(s);
}

TEST(CallStats, ManyDistinctErrorCodesAreBounded) {
  rrpc__call_stats *s;
  ASSERT_EQ(0, rrpc__call_stats_new(&s));
  for (int i = 1; i <= 100; i++) rrpc__call_stats_end(s, 1, -i);
  int codes = 0;
  uint64_t total = 0;
  std::pair<int *, uint64_t *> ctx(&codes, &total);
  rrpc__call_stats_errors(
      s,
      [](void *c, int, uint64_t n) {
        auto *p = static_cast<std::pair<int *, uint64_t *> *>(c);
        (*p->first)++;
        *p->second += n;
      },
      &ctx);
  EXPECT_EQ(17, codes);  // 16 codes + "other"
  EXPECT_EQ(100u, total);
  rrpc__call_stats_free(s);
}

}  // namespace
