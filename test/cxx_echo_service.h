// cxx_echo_service.h - the echo service and helpers shared by the C++ face
// tests (test/cxx_*_unittest.cc). Header-only: included by the tests that
// need it, not linked into every test.
#ifndef RRPC_TEST_CXX_ECHO_SERVICE_H
#define RRPC_TEST_CXX_ECHO_SERVICE_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "rrpc/cxx/channel.h"
#include "rrpc/cxx/controller.h"
#include "rrpc/cxx/iobuf.h"
#include "test/cxx_echo.pb.h"

namespace cxxtest {

// The byte at index i of a test pattern; seeds give different patterns.
inline uint8_t PatternByte(uint64_t i, uint32_t seed) {
  return static_cast<uint8_t>(i * 131u + seed * 7u + (i >> 8));
}

inline std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i++) s[i] = static_cast<char>(PatternByte(i, seed));
  return s;
}

// Checks every byte piece by piece (no flattening), as a receiver would.
inline bool MatchesPattern(const rrpc::IOBuf& buf, size_t n, uint32_t seed) {
  if (buf.size() != n) return false;
  uint64_t i = 0;
  for (size_t b = 0; b < buf.backing_block_num(); b++) {
    std::string_view piece = buf.backing_block(b);
    for (char c : piece) {
      if (static_cast<uint8_t>(c) != PatternByte(i++, seed)) return false;
    }
  }
  return i == n;
}

// Does what each request asks (see cxx_echo.proto).
class EchoServiceImpl : public EchoService {
 public:
  ~EchoServiceImpl() override {
    for (std::thread& t : threads_) t.join();
  }

  void Echo(google::protobuf::RpcController* cntl_base, const EchoRequest* req,
            EchoResponse* resp, google::protobuf::Closure* done) override {
    auto* cntl = static_cast<rrpc::Controller*>(cntl_base);
    if (req->throw_exception()) {
      // Keep done, then throw: rrpc answers EINTERNAL now, and the done the
      // test runs later (ReleaseHeld) must be harmless and free the call.
      std::lock_guard<std::mutex> lk(mu_);
      held_.push_back(done);
      cv_.notify_all();
      throw std::runtime_error("echo threw on purpose");
    }
    std::string forwarded;
    if (req->has_forward_port()) {
      // A blocking call from inside a method: only fine on a worker pool.
      rrpc::Channel ch;
      EchoResponse fresp;
      rrpc::Controller fcntl;
      rrpc::ChannelOptions opts;
      opts.timeout_ms = 10000;  // generous: the test machine may be busy
      if (ch.Init("127.0.0.1", req->forward_port(), &opts) == 0) {
        EchoRequest freq;
        freq.set_message("forwarded:" + req->message());
        EchoService_Stub(&ch).Echo(&fcntl, &freq, &fresp, nullptr);
      }
      forwarded = fcntl.Failed() ? "error:" + fcntl.ErrorText() : fresp.message();
    }
    if (!req->leave_response_empty()) resp->set_message(forwarded.empty() ? req->message() : forwarded);
    if (req->has_payload()) resp->set_payload(req->payload());
    resp->set_remote_side(cntl->remote_side());
    if (req->has_expect_attachment_size()) {
      resp->set_attachment_ok(MatchesPattern(cntl->request_attachment(),
                                             static_cast<size_t>(req->expect_attachment_size()),
                                             req->attachment_seed()));
    }
    if (req->echo_attachment()) cntl->response_attachment().append(cntl->request_attachment());
    if (req->response_attachment_size() > 0) {
      cntl->response_attachment().append(
          Pattern(static_cast<size_t>(req->response_attachment_size()), req->attachment_seed() + 1));
    }
    if (req->fail_with_string()) {
      cntl->SetFailed(req->fail_text());
    } else if (req->fail_code() != 0) {
      cntl->SetFailed(req->fail_code(), "%s", req->fail_text().c_str());
    }
    if (req->hold()) {
      std::lock_guard<std::mutex> lk(mu_);
      held_.push_back(done);
      cv_.notify_all();
      return;
    }
    if (req->respond_from_thread()) {
      std::lock_guard<std::mutex> lk(mu_);
      threads_.emplace_back([done] { done->Run(); });
      return;
    }
    done->Run();
  }

  void Nothing(google::protobuf::RpcController*, const Empty*, Empty*,
               google::protobuf::Closure* done) override {
    done->Run();
  }

  // Blocks until at least n calls are held.
  void WaitHeld(size_t n) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return held_.size() >= n; });
  }
  // Runs the done of every held call.
  void ReleaseHeld() {
    std::deque<google::protobuf::Closure*> held;
    {
      std::lock_guard<std::mutex> lk(mu_);
      held.swap(held_);
    }
    for (google::protobuf::Closure* d : held) d->Run();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<google::protobuf::Closure*> held_;
  std::vector<std::thread> threads_;
};

}  // namespace cxxtest

#endif  // RRPC_TEST_CXX_ECHO_SERVICE_H
