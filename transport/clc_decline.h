/* transport/clc_decline.h - private to the transports: sending SMC-R CLC
 * messages on a connection's TCP fd - the Decline both the TCP transport (a
 * server that does not offer RDMA) and the RDMA transport (fallback) send,
 * and the RDMA handshake's other messages. */
#ifndef RRPC_TRANSPORT_CLC_DECLINE_H
#define RRPC_TRANSPORT_CLC_DECLINE_H

#include <stddef.h>
#include <stdint.h>

/* rrpc__clc_send_all - send one CLC message (< 1 KiB) on the non-blocking
 * TCP `fd` in a single send: the connection is idle while CLC messages go,
 * so a short write means it is broken. 0, -errno, or -RRPC_ECLOSE (short). */
int rrpc__clc_send_all(int fd, const uint8_t *buf, size_t len);

/* rrpc__clc_send_decline - send a 28-byte v1 CLC Decline with diagnosis
 * `code` on the non-blocking TCP `fd`. 0, or a negative code when the
 * connection could not take it (a short write means it is broken: the
 * message is far smaller than an idle socket's buffer). Any thread. */
int rrpc__clc_send_decline(int fd, uint32_t code);

#endif /* RRPC_TRANSPORT_CLC_DECLINE_H */
