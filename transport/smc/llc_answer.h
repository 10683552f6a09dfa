/* transport/smc/llc_answer.h - what one end of a single-link SMC-R link
 * group answers to its peer's LLC requests (the peer being Linux's own
 * SMC-R, docs/kernel-smc.md): CONFIRM_LINK with this end's identity,
 * ADD_LINK with a reject (one link only: rrpc never adds a second), the
 * echoes Linux expects for TEST_LINK, CONFIRM_RKEY and DELETE_RKEY, and a
 * DELETE_LINK ends the link. It decides; the caller sends the answer on the
 * link's QP and acts on the outcome.
 *
 * Pure: thread-safe, non-blocking, no allocation. */
#ifndef RRPC_TRANSPORT_SMC_LLC_ANSWER_H
#define RRPC_TRANSPORT_SMC_LLC_ANSWER_H

#include <stdint.h>

#include "transport/smc/llc.h"

#ifdef __cplusplus
extern "C" {
#endif

/* This end of the link, as CONFIRM_LINK tells it to the peer. */
struct rrpc__llc_self {
  uint8_t mac[6];
  uint8_t gid[RRPC_LLC_GID_LEN];
  uint32_t qpn; /* 24 bits */
};

/* What receiving one LLC message means for the link. */
enum rrpc__llc_outcome {
  RRPC_LLC_IGNORE = 0,     /* nothing to send (a response, or a type a client never gets) */
  RRPC_LLC_ANSWER = 1,     /* send *ans */
  RRPC_LLC_CONFIRMED = 2,  /* send *ans: the link is confirmed and usable from now on */
  RRPC_LLC_LINK_DOWN = 3,  /* the peer deleted the link: send *ans when *send is 1, then
                              tear the link down */
};

/* rrpc__llc_answer - the answer to a decoded request `req`. *ans is written
 * whenever the outcome says to send it (same LLC version as req).
 * *send is 1 when *ans is to be sent, 0 otherwise. */
enum rrpc__llc_outcome rrpc__llc_answer(const struct rrpc__llc_self *self,
                                        const struct rrpc__llc_msg *req,
                                        struct rrpc__llc_msg *ans, int *send);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_SMC_LLC_ANSWER_H */
