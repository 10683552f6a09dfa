/* transport/tcp/tcp_internal.h - private to the TCP transport: pieces shared
 * between tcp.c (I/O) and clc_sniff.c (declining SMC-R proposals). */
#ifndef RRPC_TRANSPORT_TCP_TCP_INTERNAL_H
#define RRPC_TRANSPORT_TCP_TCP_INTERNAL_H

#include "rrpc/transport.h"

/* rrpc__tcp_sniff_clc - server side, before the first read: if the client
 * opened with an SMC-R CLC message (it asked for RDMA and this server does
 * not offer it), consume it and, unless it was a Decline, answer with a
 * Decline so the client falls back to TCP on this connection.
 * Returns 1 when sniffing is over (go on reading normally), 0 when more bytes
 * are needed, or a negative code (the socket must fail). Loop thread. */
int rrpc__tcp_sniff_clc(rrpc__socket *s);

#endif /* RRPC_TRANSPORT_TCP_TCP_INTERNAL_H */
