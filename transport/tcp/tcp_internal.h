/* transport/tcp/tcp_internal.h - private to the TCP transport: pieces shared
 * between tcp.c (I/O) and clc_sniff.c (declining SMC-R proposals). */
#ifndef RRPC_TRANSPORT_TCP_TCP_INTERNAL_H
#define RRPC_TRANSPORT_TCP_TCP_INTERNAL_H

#include "rrpc/transport.h"

/* Server side, before the first bytes are handed to the protocol: if the
 * client opened with an SMC-R CLC message (it asked for RDMA and this server
 * does not offer it), consume it and, unless it was a Decline, answer with a
 * Decline so the client falls back to TCP on this connection.
 * rrpc__tcp_sniff_begin hangs the sniff state on the socket's tstate (0 or
 * -ENOMEM); while tstate is set, sniffing is pending.
 * rrpc__tcp_sniff_check looks at the read buffer: 1 when sniffing is over
 * (deliver what is left), 0 when more bytes are needed (a deadline is then
 * running), or a negative code (the socket must fail).
 * rrpc__tcp_sniff_end releases the state (idempotent). All: loop thread. */
int rrpc__tcp_sniff_begin(rrpc__socket *s);
int rrpc__tcp_sniff_check(rrpc__socket *s);
void rrpc__tcp_sniff_end(rrpc__socket *s);

#endif /* RRPC_TRANSPORT_TCP_TCP_INTERNAL_H */
