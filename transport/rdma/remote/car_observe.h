/* remote/car_observe.h - private, for tests: watch the completions of the
 * remote-memory carriage's work requests on every connection of the
 * process, and hold its posts and teardowns at known points. A rogue-peer test posts raw RDMA WRITE/READ on an rrpc
 * connection's own QP through rrpc__rmt_car_post, with wr_ids no link ever
 * uses (the link then ignores their completions), and learns each one's
 * work-completion status here. */
#ifndef RRPC_TRANSPORT_RDMA_REMOTE_CAR_OBSERVE_H
#define RRPC_TRANSPORT_RDMA_REMOTE_CAR_OBSERVE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Called on the connection's loop thread for each completion of a piece
 * (not of a window bind), before the link sees it: wr_id as given to
 * rrpc__rmt_car_post, status an enum ibv_wc_status. Keep it short. */
typedef void (*rrpc__rmt_car_wc_observer)(uint64_t wr_id, int status);

/* rrpc__rmt_car_observe - install fn (NULL: none). Any thread; a
 * completion being handled at the time may still reach the previous one. */
void rrpc__rmt_car_observe(rrpc__rmt_car_wc_observer fn);

struct rrpc__rmt_car;
/* Called by every one-sided post (piece or window bind) of connection c
 * while it holds c's QP (the teardown of c waits for it), just before the
 * post: a test may block here, on a condition of its own, to keep that post
 * in flight. Any thread. */
typedef void (*rrpc__rmt_car_post_hook)(struct rrpc__rmt_car *c);
/* Called by the first teardown of connection c (the background verbs
 * thread, or a stopping loop) with the number of c's posts still in flight
 * when it is about to wait for them, and once with 0 when none is left
 * (before c's windows are deallocated and its QP destroyed). A later
 * teardown of c (see carriage.c, posts_drain) waits for nothing and does
 * not call it. */
typedef void (*rrpc__rmt_car_teardown_hook)(struct rrpc__rmt_car *c, unsigned in_flight);

/* Install fn (NULL: none), as rrpc__rmt_car_observe. */
void rrpc__rmt_car_hook_post(rrpc__rmt_car_post_hook fn);
void rrpc__rmt_car_hook_teardown(rrpc__rmt_car_teardown_hook fn);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_REMOTE_CAR_OBSERVE_H */
