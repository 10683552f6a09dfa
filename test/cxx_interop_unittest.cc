// cxx_interop_unittest.cc - the C++ face and the plain C API talk to each
// other: a C++ client (rrpc::Channel + stub) against a server written with
// rrpc_server_add_method, and a C client (rrpc_channel_call with hand-made
// protobuf bytes) against an rrpc::Server.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>

#include "rrpc/cxx/rrpc.h"
#include "rrpc/rrpc.h"
#include "test/cxx_echo.pb.h"
#include "test/cxx_echo_service.h"

namespace {

using cxxtest::EchoRequest;
using cxxtest::EchoResponse;
using cxxtest::Pattern;

// protobuf wire helpers, as a C program would write them.
void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void PutString(std::string* out, int field, const std::string& s) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | 2);
  PutVarint(out, s.size());
  out->append(s);
}
void PutInt(std::string* out, int field, uint64_t v) {
  PutVarint(out, static_cast<uint64_t>(field) << 3);
  PutVarint(out, v);
}

std::string CopyOut(const rrpc_iobuf* buf) {
  std::string s(rrpc_iobuf_length(buf), '\0');
  rrpc_iobuf_copy_out(buf, 0, &s[0], s.size());
  return s;
}

// ---- a plain-C server, a C++ client ------------------------------------------------

struct CServer {
  std::atomic<int> calls{0};
  std::string last_service, last_method;  // written by the handler, read after the call
};

// The handler uses only the C API. It parses the request with protobuf only
// to check what the C++ client put on the wire.
void CEchoHandler(void* arg, rrpc_server_call* call) {
  auto* st = static_cast<CServer*>(arg);
  st->calls++;
  st->last_service = rrpc_server_call_service(call);
  st->last_method = rrpc_server_call_method(call);
  rrpc_controller* cntl = rrpc_server_call_controller(call);
  EchoRequest req;
  if (!req.ParseFromString(CopyOut(rrpc_server_call_request(call)))) {
    rrpc_controller_set_failed(cntl, RRPC_EREQUEST, "C server: unparsable request");
    rrpc_server_call_respond(call, nullptr);
    return;
  }
  if (req.fail_code() != 0) {
    rrpc_controller_set_failed(cntl, req.fail_code(), req.fail_text().c_str());
    rrpc_server_call_respond(call, nullptr);
    return;
  }
  std::string bytes;
  if (req.message() == "garbage") {
    bytes = "\xff\xff\xff";  // not an EchoResponse
  } else {
    PutString(&bytes, 1, "c:" + req.message());
  }
  rrpc_iobuf* resp = nullptr;
  if (rrpc_iobuf_new(&resp) != 0 || rrpc_iobuf_append(resp, bytes.data(), bytes.size()) != 0) {
    ADD_FAILURE() << "out of memory in the C handler";
    rrpc_controller_set_failed(cntl, RRPC_EINTERNAL, "out of memory");
  }
  if (req.echo_attachment()) {
    rrpc_iobuf_append_iobuf(rrpc_controller_response_attachment(cntl),
                            rrpc_controller_request_attachment(cntl));
  }
  rrpc_server_call_respond(call, resp);
  rrpc_iobuf_free(resp);
}

class CServerCxxClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, rrpc_server_new(nullptr, &server_));
    ASSERT_EQ(0, rrpc_server_add_method(server_, "cxxtest.EchoService", "Echo", CEchoHandler, &st_));
    ASSERT_EQ(0, rrpc_server_start(server_, "127.0.0.1:0"));
    ASSERT_EQ(0, channel_.Init("127.0.0.1", rrpc_server_port(server_), nullptr));
  }
  void TearDown() override { rrpc_server_free(server_); }

  CServer st_;
  rrpc_server* server_ = nullptr;
  rrpc::Channel channel_;
};

TEST_F(CServerCxxClientTest, SyncWithAttachments) {
  cxxtest::EchoService_Stub stub(&channel_);
  for (size_t n : {size_t(0), size_t(10), size_t(70000), size_t(2) << 20}) {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("from c++");
    req.set_echo_attachment(true);
    cntl.request_attachment().append(Pattern(n, 3));
    stub.Echo(&cntl, &req, &resp, nullptr);
    ASSERT_FALSE(cntl.Failed()) << cntl.ErrorText();
    EXPECT_EQ("c:from c++", resp.message());
    EXPECT_TRUE(cxxtest::MatchesPattern(cntl.response_attachment(), n, 3)) << n;
  }
  EXPECT_EQ("cxxtest.EchoService", st_.last_service);
  EXPECT_EQ("Echo", st_.last_method);
}

TEST_F(CServerCxxClientTest, AsyncCall) {
  rrpc::Controller cntl;
  EchoRequest req;
  EchoResponse resp;
  req.set_message("async");
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::string seen;
  struct Ctx {
    std::mutex* mu;
    std::condition_variable* cv;
    bool* done;
    std::string* seen;
    EchoResponse* resp;
  } ctx{&mu, &cv, &done, &seen, &resp};
  cxxtest::EchoService_Stub(&channel_).Echo(&cntl, &req, &resp,
                                            google::protobuf::NewCallback(+[](Ctx* c) {
                                              std::lock_guard<std::mutex> lk(*c->mu);
                                              *c->seen = c->resp->message();
                                              *c->done = true;
                                              c->cv->notify_all();
                                            }, &ctx));
  std::unique_lock<std::mutex> lk(mu);
  cv.wait(lk, [&] { return done; });
  EXPECT_FALSE(cntl.Failed()) << cntl.ErrorText();
  EXPECT_EQ("c:async", seen);
}

TEST_F(CServerCxxClientTest, ErrorsFromTheCServer) {
  cxxtest::EchoService_Stub stub(&channel_);
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("x");
    req.set_fail_code(4242);
    req.set_fail_text("from C");
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(4242, cntl.ErrorCode());
    EXPECT_EQ("from C", cntl.ErrorText());
  }
  {
    rrpc::Controller cntl;
    EchoRequest req;
    EchoResponse resp;
    req.set_message("garbage");
    stub.Echo(&cntl, &req, &resp, nullptr);
    EXPECT_EQ(rrpc::ERESPONSE, cntl.ErrorCode()) << cntl.ErrorText();
  }
  {
    rrpc::Controller cntl;
    cxxtest::Empty req, resp;
    stub.Nothing(&cntl, &req, &resp, nullptr);  // not registered on the C server
    EXPECT_EQ(rrpc::ENOMETHOD, cntl.ErrorCode()) << cntl.ErrorText();
  }
}

// ---- an rrpc::Server, a plain-C client -----------------------------------------------

class CxxServerCClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(0, server_.AddService(&service_, rrpc::SERVER_DOESNT_OWN_SERVICE));
    ASSERT_EQ(0, server_.Start("127.0.0.1:0", nullptr));
    std::string addr = "127.0.0.1:" + std::to_string(server_.listen_port());
    ASSERT_EQ(0, rrpc_channel_new(addr.c_str(), nullptr, &ch_));
    ASSERT_EQ(0, rrpc_controller_new(&cntl_));
    ASSERT_EQ(0, rrpc_iobuf_new(&req_));
    ASSERT_EQ(0, rrpc_iobuf_new(&resp_));
  }
  void TearDown() override {
    rrpc_iobuf_free(req_);
    rrpc_iobuf_free(resp_);
    rrpc_controller_free(cntl_);
    rrpc_channel_free(ch_);
  }

  cxxtest::EchoServiceImpl service_;
  rrpc::Server server_;
  rrpc_channel* ch_ = nullptr;
  rrpc_controller* cntl_ = nullptr;
  rrpc_iobuf* req_ = nullptr;
  rrpc_iobuf* resp_ = nullptr;
};

TEST_F(CxxServerCClientTest, SyncCallWithHandMadeBytes) {
  std::string bytes;
  PutString(&bytes, 1, "from C");  // message
  PutInt(&bytes, 3, 1);            // echo_attachment
  ASSERT_EQ(0, rrpc_iobuf_append(req_, bytes.data(), bytes.size()));
  std::string att = Pattern(100000, 4);
  ASSERT_EQ(0, rrpc_iobuf_append(rrpc_controller_request_attachment(cntl_), att.data(), att.size()));
  ASSERT_EQ(0, rrpc_channel_call(ch_, "cxxtest.EchoService", "Echo", cntl_, req_, resp_, nullptr,
                                 nullptr))
      << rrpc_controller_error_text(cntl_);
  EchoResponse resp;
  ASSERT_TRUE(resp.ParseFromString(CopyOut(resp_)));
  EXPECT_EQ("from C", resp.message());
  EXPECT_EQ(1, rrpc_iobuf_equals(rrpc_controller_response_attachment(cntl_), att.data(), att.size()));
}

TEST_F(CxxServerCClientTest, AsyncCall) {
  std::string bytes;
  PutString(&bytes, 1, "async from C");
  ASSERT_EQ(0, rrpc_iobuf_append(req_, bytes.data(), bytes.size()));
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int code = 1;
  } w;
  ASSERT_EQ(0, rrpc_channel_call(ch_, "cxxtest.EchoService", "Echo", cntl_, req_, resp_,
                                 +[](void* arg, rrpc_controller* c) {
                                   auto* w = static_cast<Wait*>(arg);
                                   std::lock_guard<std::mutex> lk(w->mu);
                                   w->code = rrpc_controller_error_code(c);
                                   w->done = true;
                                   w->cv.notify_all();
                                 },
                                 &w));
  std::unique_lock<std::mutex> lk(w.mu);
  w.cv.wait(lk, [&] { return w.done; });
  EXPECT_EQ(0, w.code);
  EchoResponse resp;
  ASSERT_TRUE(resp.ParseFromString(CopyOut(resp_)));
  EXPECT_EQ("async from C", resp.message());
}

TEST_F(CxxServerCClientTest, ErrorsReachTheCClient) {
  std::string bytes;
  PutString(&bytes, 1, "x");
  PutInt(&bytes, 7, 777);  // fail_code
  PutString(&bytes, 8, "nope");
  ASSERT_EQ(0, rrpc_iobuf_append(req_, bytes.data(), bytes.size()));
  EXPECT_EQ(-777, rrpc_channel_call(ch_, "cxxtest.EchoService", "Echo", cntl_, req_, resp_,
                                    nullptr, nullptr));
  EXPECT_STREQ("nope", rrpc_controller_error_text(cntl_));

  rrpc_iobuf_clear(req_);
  ASSERT_EQ(0, rrpc_iobuf_append(req_, "\xff\xff", 2));  // not an EchoRequest
  EXPECT_EQ(-RRPC_EREQUEST, rrpc_channel_call(ch_, "cxxtest.EchoService", "Echo", cntl_, req_,
                                              resp_, nullptr, nullptr));
  EXPECT_EQ(-RRPC_ENOMETHOD, rrpc_channel_call(ch_, "cxxtest.EchoService", "Nope", cntl_, req_,
                                               resp_, nullptr, nullptr));
  EXPECT_EQ(-RRPC_ENOSERVICE, rrpc_channel_call(ch_, "EchoService", "Echo", cntl_, req_, resp_,
                                                nullptr, nullptr));
}

}  // namespace
