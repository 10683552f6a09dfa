/* remote/carriage.h - private: the one-sided carriage a transport offers
 * a remote-memory link (link.c). Over an RDMA connection of the CLC
 * dialects (imm, cursor) the bytes move as RDMA WRITE / READ on the
 * connection's QP, into regions with their own MR and a type-2 window
 * bound to that QP (transport/rdma/remote/); control messages stay in the
 * byte stream. Built without RDMA, rrpc__rmt_car_of always answers NULL
 * and the link carries everything in frames.
 *
 * Piece completions come back through rrpc__rmt_link_on_wc (link.c) on the
 * connection's loop thread, with the wr_id the link chose (its low 62
 * bits). */
#ifndef RRPC_REMOTE_CARRIAGE_H
#define RRPC_REMOTE_CARRIAGE_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rrpc__rmt_car;    /* a connection's carriage (the transport's endpoint) */
struct rrpc__rmt_car_mr; /* a registration: MR, and a window when remote */

enum {
  /* Send-queue entries an RDMA connection keeps for one-sided pieces and
   * window binds, beyond its data path's: the link's in-flight bound. */
  RRPC_RMT_CAR_SQ_RESERVE = 16,
};

/* rrpc__rmt_car_of - s's carriage while s carries data over RDMA in a
 * dialect that has one, else NULL. Any thread. */
struct rrpc__rmt_car *rrpc__rmt_car_of(rrpc__socket *s);

/* rrpc__rmt_car_reg - register [buf, buf + len). rights 0: local use only
 * (*rkey 0); else a window with those rights is bound to the connection's
 * QP and this waits (bounded) for the bind to complete, so the peer can
 * use *rkey at once. 0, -RRPC_ERDMAMEM, -RRPC_ERDMA (the QP is gone or the
 * bind failed), -ETIMEDOUT. Not on a loop thread. */
int rrpc__rmt_car_reg(struct rrpc__rmt_car *c, void *buf, size_t len, uint8_t rights,
                      struct rrpc__rmt_car_mr **out, uint32_t *rkey);
/* rrpc__rmt_car_revoke - the window's one invalidation (later calls do
 * nothing). rrpc__rmt_car_free - revoke and deregister. Any thread but a
 * loop thread (system calls). */
void rrpc__rmt_car_revoke(struct rrpc__rmt_car_mr *m);
void rrpc__rmt_car_free(struct rrpc__rmt_car_mr *m);
uint32_t rrpc__rmt_car_lkey(const struct rrpc__rmt_car_mr *m);

/* rrpc__rmt_car_post - one signaled RDMA WRITE (is_write) or READ of len
 * bytes between local (lkey) and the peer's raddr (rkey); wr_id < 2^62.
 * 0, or -RRPC_ERDMA (the QP is going: nothing posted). Any thread. */
int rrpc__rmt_car_post(struct rrpc__rmt_car *c, int is_write, void *local, uint32_t lkey, uint32_t len,
                       uint64_t raddr, uint32_t rkey, uint64_t wr_id);

/* link.c: a piece's completion (status 0 or a negative code). Loop thread. */
void rrpc__rmt_link_on_wc(rrpc__socket *s, uint64_t wr_id, int status);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_CARRIAGE_H */
