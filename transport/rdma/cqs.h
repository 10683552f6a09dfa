/* transport/rdma/cqs.h - private to the RDMA transport: the completion
 * queues shared by every rrpc-dialect connection of one loop on one device.
 *
 * One completion channel (one fd on the loop) and as few send/receive CQ
 * pairs as the connections' queues need, instead of a channel and two CQs
 * per connection. Completions are dispatched by `qp_num` (the only
 * connection identifier a shared CQ gives on RC; ../shared/specs/
 * rxe-srq-shared-cq.md) through a per-loop table; a miss (a QP destroyed
 * with completions still queued) is dropped and counted.
 *
 * Capacity: a member reserves its send and receive depths in one pair
 * (grown with ibv_resize_cq, or a new pair on the same channel when the
 * device's max_cqe is reached), so no CQ can overflow. A member that
 * leaves keeps its reservation until the CQs have been drained once more:
 * its destroyed QP's completions may still sit there.
 *
 * Lifetime: refcounted by members; the last member to leave destroys the
 * CQs, the channel and the watcher (or poller). Join, add and the poll run
 * on the loop thread; leave may also run on the thread that stops a loop. */
#ifndef RRPC_TRANSPORT_RDMA_CQS_H
#define RRPC_TRANSPORT_RDMA_CQS_H

#include <infiniband/verbs.h>
#include <stdint.h>

#include "rrpc/iobuf.h"
#include "rrpc/internal/loop.h"
#include "transport/rdma/device.h"

/* C++ (the RDMA tests) includes this header too. */
#ifdef __cplusplus
extern "C" {
#endif

typedef struct rrpc__rdma_cqs rrpc__rdma_cqs;
struct rrpc__cq_pair;

/* What the shared poll calls back, on the loop thread. `ref`/`unref` keep
 * the member's owner alive from its first completion of a poll until its
 * `after` ran (an `after` may close other connections of the loop).
 * `drop` gathers the references a completion frees (sent blocks); the
 * poll drops them once the CQs are drained, holding no lock, before any
 * `after`. */
struct rrpc__cq_user_ops {
  void (*on_wc)(void *user, const struct ibv_wc *wc, int is_send, rrpc_iobuf *drop);
  void (*after)(void *user); /* once per poll, for each member that had completions */
  void (*ref)(void *user);
  void (*unref)(void *user);
};

/* A connection's membership, embedded in its endpoint. */
struct rrpc__cq_member {
  rrpc__rdma_cqs *cqs;        /* NULL while not joined */
  struct rrpc__cq_pair *pair; /* where its depths are reserved */
  struct ibv_cq *scq, *rcq;   /* that pair's CQs: for ibv_create_qp */
  uint32_t sq, rq;            /* reserved depths */
  uint32_t qp_num;
  int in_table;
  void *user;
  const struct rrpc__cq_user_ops *ops;
  struct rrpc__cq_member *hnext; /* the qp_num table's chain */
  struct rrpc__cq_member *tnext; /* this poll's list of members with completions */
  int touched;
};

/* Join the shared CQs of `loop` on `dev` (created on first use: the
 * channel, a pair, the watcher or, with `polling`, a poller), reserving
 * sq send and rq receive completions. 0, -errno of the failing verbs call
 * (EMFILE: out of fds) or -RRPC_ERDMA. Loop thread. */
int rrpc__cqs_join(rrpc__loop *loop, rrpc__rdma_dev *dev, int polling, uint32_t sq, uint32_t rq,
                   void *user, const struct rrpc__cq_user_ops *ops, struct rrpc__cq_member *m);
/* Route completions of `qp_num` to m (after the QP exists). 0 or -ENOMEM. */
int rrpc__cqs_add(struct rrpc__cq_member *m, uint32_t qp_num);
/* Stop routing completions to m: call before destroying its QP. */
void rrpc__cqs_remove(struct rrpc__cq_member *m);
/* Leave (after the QP is destroyed): the reservation is freed after the
 * next drain, the CQs with the last member. Safe on a member never joined. */
void rrpc__cqs_leave(struct rrpc__cq_member *m);

/* For tests and describe: shared CQ sets alive, pairs, members, and
 * completions that named no known QP (process-wide, relaxed). */
struct rrpc__cqs_stats {
  uint64_t sets, pairs, members, misses, resizes;
};
void rrpc__cqs_stats(struct rrpc__cqs_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_TRANSPORT_RDMA_CQS_H */
