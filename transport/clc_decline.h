/* transport/clc_decline.h - private to the transports: sending an SMC-R CLC
 * Decline on a connection's TCP fd, which both the TCP transport (a server
 * that does not offer RDMA) and the RDMA transport (fallback) do. */
#ifndef RRPC_TRANSPORT_CLC_DECLINE_H
#define RRPC_TRANSPORT_CLC_DECLINE_H

#include <stdint.h>

/* rrpc__clc_send_decline - send a 28-byte v1 CLC Decline with diagnosis
 * `code` on the non-blocking TCP `fd`. 0, or a negative code when the
 * connection could not take it (a short write means it is broken: the
 * message is far smaller than an idle socket's buffer). Any thread. */
int rrpc__clc_send_decline(int fd, uint32_t code);

#endif /* RRPC_TRANSPORT_CLC_DECLINE_H */
