/* transport/rdma/verbs_bg.h - private to the RDMA transport: background
 * threads (one for setup, one for teardown, per process) for verbs work that
 * must not run on a loop thread (creating or destroying a QP, registering or
 * deregistering memory: under QEMU's TCG a single close cost 0.3 - 0.7 s of
 * guest CPU in rxe).
 *
 * Jobs are embedded in what they release (no allocation on the way in), run
 * in submission order, one at a time. The queue is bounded
 * (rrpc_rdma_options.bg_queue_max, --rdma_bg_queue_max): a submission over
 * it runs on the caller's thread (counted), so nothing ever waits for room.
 * Started on first use; drained (bounded) at process exit and when a loop
 * with RDMA connections stops. */
#ifndef RRPC_TRANSPORT_RDMA_VERBS_BG_H
#define RRPC_TRANSPORT_RDMA_VERBS_BG_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__bg_job {
  struct rrpc__bg_job *next;
  void (*fn)(struct rrpc__bg_job *job);
};

/* Run job->fn(job) on the lane's background thread, or here at once when
 * the queues are full or the thread cannot start. Any thread. Setup jobs
 * (a new connection's QP and ring) have a thread of their own, so they
 * never wait behind teardowns; rrpc__verbs_bg_submit is the teardown lane. */
enum { RRPC_BG_SETUP = 0, RRPC_BG_TEARDOWN = 1, RRPC_BG_LANES = 2 };
void rrpc__verbs_bg_submit_lane(int lane, struct rrpc__bg_job *job);
void rrpc__verbs_bg_submit(struct rrpc__bg_job *job);

/* Wait until every job submitted so far (both lanes) has run, at most
 * timeout_ms. 0, or -ETIMEDOUT. Returns at once on a background thread. */
int rrpc__verbs_bg_drain(int timeout_ms);

/* 1 on a background thread (a job may need to know where it runs). */
int rrpc__verbs_bg_on_thread(void);

/* Process-wide, for rrpc_rdma_get_stats and tests. */
struct rrpc__verbs_bg_stats {
  uint64_t queued;    /* jobs handed to the thread */
  uint64_t done;      /* of those, finished */
  uint64_t inline_run; /* jobs run on the caller: queue full or no thread */
  uint64_t depth;     /* queued - done, now */
  uint64_t max_depth; /* the deepest the queue has been */
};
void rrpc__verbs_bg_stats(struct rrpc__verbs_bg_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_TRANSPORT_RDMA_VERBS_BG_H */
