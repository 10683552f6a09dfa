/* remote/limits.h - what the remote-memory limits are bounded by inside. */
#ifndef RRPC_REMOTE_LIMITS_H
#define RRPC_REMOTE_LIMITS_H

enum {
  /* a link's tables of pieces in flight are sized for this many, and an
   * RDMA QP reserves send entries for them beside binds and invalidations
   * (RRPC_RMT_CAR_SQ_RESERVE), so max_inflight cannot exceed it */
  RRPC__RMT_INFLIGHT_CAP = 8,
};

#endif /* RRPC_REMOTE_LIMITS_H */
