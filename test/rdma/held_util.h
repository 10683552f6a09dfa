// held_util.h - a server handler that keeps every request attachment (its
// blocks shared, not copied: zero-copy slices of the pieces they landed in,
// docs/elastic-rings.md) and a releaser thread that lets each go after a
// hold time: the application that holds received bytes for seconds while
// traffic continues (held_attachments_rdma_test, held_pieces_rdma_test).
#ifndef RRPC_TEST_RDMA_HELD_UTIL_H
#define RRPC_TEST_RDMA_HELD_UTIL_H

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <string>
#include <utility>

#include "rrpc/rrpc.h"
#include "test/rdma/rdma_test_util.h"

namespace rrpc_held {

using Clock = std::chrono::steady_clock;

// What the handler keeps, and when it came.
struct Holder {
  explicit Holder(Clock::duration h) : hold(h) {}
  const Clock::duration hold;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<Clock::time_point, rrpc_iobuf *>> kept;
  bool stop = false;
};

// The server method: keep the request attachment, answer with the request.
inline void keep_handler(void *arg, rrpc_server_call *call) {
  Holder *h = static_cast<Holder *>(arg);
  rrpc_controller *c = rrpc_server_call_controller(call);
  rrpc_iobuf *b;
  rrpc_iobuf_new(&b);
  rrpc_iobuf_append_iobuf(b, rrpc_controller_request_attachment(c));
  {
    std::lock_guard<std::mutex> g(h->mu);
    h->kept.emplace_back(Clock::now(), b);
  }
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

// Releases what is older than the hold time, or everything once stopped.
inline void releaser(Holder *h) {
  std::unique_lock<std::mutex> g(h->mu);
  for (;;) {
    while (!h->kept.empty() && (h->stop || Clock::now() - h->kept.front().first >= h->hold)) {
      rrpc_iobuf_free(h->kept.front().second);
      h->kept.pop_front();
    }
    if (h->stop) return;
    h->cv.wait_for(g, std::chrono::milliseconds(50));
  }
}

// Ends the releaser: it frees everything still kept.
inline void stop_releaser(Holder *h) {
  {
    std::lock_guard<std::mutex> g(h->mu);
    h->stop = true;
  }
  h->cv.notify_all();
}

// Calls made in a loop and what they came to.
struct CallRun {
  int calls = 0, failed = 0, rdma = 0;
  double worst_ms = 0;
};

// One echo carrying `att`, timed and counted into *r.
inline void timed_echo(rrpc_channel *ch, const char *body, const std::string &att, CallRun *r) {
  auto t0 = Clock::now();
  int used = 0;
  std::string err;
  int rc = rrpc_rdma_test::echo(ch, body, att, nullptr, &used, &err);
  double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (ms > r->worst_ms) r->worst_ms = ms;
  if (rc != 0) {
    r->failed++;
    printf("call %d failed: %d %s\n", r->calls, rc, err.c_str());
  }
  r->rdma += used;
  r->calls++;
}

// The pieces' counters between two snapshots, printed on one line after `what`.
inline void print_pieces(const char *what, const CallRun &r, const rrpc_rdma_stats &a, const rrpc_rdma_stats &b) {
  printf("%s: %d calls, worst %.1f ms, retires_held %llu, retire_refused %llu, table_full %llu, grants %llu, "
         "copied recv %llu bytes\n",
         what, r.calls, r.worst_ms, (unsigned long long)(b.piece_retires_held - a.piece_retires_held),
         (unsigned long long)(b.piece_retire_refused - a.piece_retire_refused),
         (unsigned long long)(b.piece_table_full - a.piece_table_full),
         (unsigned long long)(b.piece_grants - a.piece_grants),
         (unsigned long long)(b.bytes_copied_recv - a.bytes_copied_recv));
}

}  // namespace rrpc_held

#endif  // RRPC_TEST_RDMA_HELD_UTIL_H
