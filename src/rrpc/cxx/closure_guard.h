// rrpc/cxx/closure_guard.h - rrpc::ClosureGuard, brpc's RAII holder of a
// service method's `done`: it runs done->Run() when the guard goes out of
// scope, so every return path of a method responds exactly once. A method
// that answers later (from another thread, after a nested async call) takes
// the closure out with release() and runs it itself.
//
// [thread-compatible]: a guard belongs to the scope that made it.
#ifndef RRPC_CXX_CLOSURE_GUARD_H
#define RRPC_CXX_CLOSURE_GUARD_H

#include <google/protobuf/stubs/callback.h>

namespace rrpc {

class ClosureGuard {
 public:
  ClosureGuard() = default;
  explicit ClosureGuard(google::protobuf::Closure* done) : done_(done) {}
  ~ClosureGuard() {
    if (done_ != nullptr) done_->Run();
  }
  ClosureGuard(const ClosureGuard&) = delete;
  ClosureGuard& operator=(const ClosureGuard&) = delete;

  // The closure, no longer run by this guard (nullptr if it held none).
  google::protobuf::Closure* release() {
    google::protobuf::Closure* done = done_;
    done_ = nullptr;
    return done;
  }
  // Run the closure held now (if any) and hold `done` instead.
  void reset(google::protobuf::Closure* done) {
    if (done_ != nullptr && done_ != done) done_->Run();
    done_ = done;
  }
  // true if it holds no closure.
  bool empty() const { return done_ == nullptr; }
  void swap(ClosureGuard& other) {
    google::protobuf::Closure* done = done_;
    done_ = other.done_;
    other.done_ = done;
  }

 private:
  google::protobuf::Closure* done_ = nullptr;
};

}  // namespace rrpc

#endif  // RRPC_CXX_CLOSURE_GUARD_H
