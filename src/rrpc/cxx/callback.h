// rrpc/cxx/callback.h - brpc's closure makers under brpc's names:
// rrpc::NewCallback binds a free function or a method and its arguments
// into a google::protobuf::Closure that deletes itself after it ran once
// (the `done` of an async call); NewPermanentCallback makes one that may
// run any number of times and is deleted by its owner; DoNothing() is a
// closure that does nothing (an async call one waits for with Join).
//
// Any number of arguments (brpc has up to five). Unlike protobuf's version,
// an argument only needs to CONVERT to the parameter's type ("text" binds to
// a std::string parameter); it is copied into the closure and the function
// gets that copy (a `T&` parameter modifies the copy, not the caller's).
#ifndef RRPC_CXX_CALLBACK_H
#define RRPC_CXX_CALLBACK_H

#include <google/protobuf/stubs/callback.h>

#include <functional>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

namespace rrpc {

namespace detail {

// F: a function pointer, or a pointer to member whose object pointer is the
// first element of Bound. kOnce: delete itself after the first Run.
template <bool kOnce, typename F, typename... Bound>
class BoundClosure : public google::protobuf::Closure {
 public:
  template <typename... A>
  explicit BoundClosure(F f, A&&... a) : f_(f), bound_(std::forward<A>(a)...) {}
  void Run() override {
    // Deleted after the call, also when it throws: a once-closure is used up
    // either way.
    std::unique_ptr<BoundClosure> self(kOnce ? this : nullptr);
    std::apply([this](Bound&... b) { std::invoke(f_, b...); }, bound_);
  }

 private:
  F f_;
  std::tuple<Bound...> bound_;
};

template <bool kOnce, typename... P, typename... A>
google::protobuf::Closure* BindFunction(void (*fn)(P...), A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "NewCallback: one argument per parameter");
  return new BoundClosure<kOnce, void (*)(P...), std::decay_t<P>...>(fn,
                                                                     std::forward<A>(args)...);
}

template <bool kOnce, typename C, typename M, typename... P, typename... A>
google::protobuf::Closure* BindMethod(C* obj, M method, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "NewCallback: one argument per parameter");
  return new BoundClosure<kOnce, M, C*, std::decay_t<P>...>(method, obj,
                                                            std::forward<A>(args)...);
}

}  // namespace detail

// A closure that calls fn(args...) once, then deletes itself.
template <typename... P, typename... A>
google::protobuf::Closure* NewCallback(void (*fn)(P...), A&&... args) {
  return detail::BindFunction<true>(fn, std::forward<A>(args)...);
}
// A closure that calls (obj->*method)(args...) once, then deletes itself.
template <typename C, typename... P, typename... A>
google::protobuf::Closure* NewCallback(C* obj, void (C::*method)(P...), A&&... args) {
  return detail::BindMethod<true, C, void (C::*)(P...), P...>(obj, method,
                                                              std::forward<A>(args)...);
}
template <typename C, typename... P, typename... A>
google::protobuf::Closure* NewCallback(const C* obj, void (C::*method)(P...) const,
                                       A&&... args) {
  return detail::BindMethod<true, const C, void (C::*)(P...) const, P...>(
      obj, method, std::forward<A>(args)...);
}

// The same, but Run() may be called any number of times; delete it yourself.
template <typename... P, typename... A>
google::protobuf::Closure* NewPermanentCallback(void (*fn)(P...), A&&... args) {
  return detail::BindFunction<false>(fn, std::forward<A>(args)...);
}
template <typename C, typename... P, typename... A>
google::protobuf::Closure* NewPermanentCallback(C* obj, void (C::*method)(P...), A&&... args) {
  return detail::BindMethod<false, C, void (C::*)(P...), P...>(obj, method,
                                                               std::forward<A>(args)...);
}
template <typename C, typename... P, typename... A>
google::protobuf::Closure* NewPermanentCallback(const C* obj, void (C::*method)(P...) const,
                                                A&&... args) {
  return detail::BindMethod<false, const C, void (C::*)(P...) const, P...>(
      obj, method, std::forward<A>(args)...);
}

// A process-wide closure whose Run() does nothing; never delete it. Pass it
// as the `done` of an async call that is waited for with Join(call_id).
google::protobuf::Closure* DoNothing();

}  // namespace rrpc

#endif  // RRPC_CXX_CALLBACK_H
