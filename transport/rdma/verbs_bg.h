/* transport/rdma/verbs_bg.h - private to the RDMA transport: one background
 * thread per process for verbs work that must not run on a loop thread
 * (destroying a QP, deallocating a window, deregistering memory: under
 * QEMU's TCG a single close cost 0.3 - 0.7 s of guest CPU in rxe).
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

/* Run job->fn(job) on the background thread, or here at once when the
 * queue is full or the thread cannot start. Any thread. */
void rrpc__verbs_bg_submit(struct rrpc__bg_job *job);

/* Wait until every job submitted so far has run, at most timeout_ms.
 * 0, or -ETIMEDOUT. Returns at once on the background thread itself. */
int rrpc__verbs_bg_drain(int timeout_ms);

/* 1 on the background thread (a job may need to know where it runs). */
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
