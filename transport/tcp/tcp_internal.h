/* transport/tcp/tcp_internal.h - private to the TCP transport: pieces shared
 * between tcp.c (I/O) and clc_sniff.c (declining SMC-R proposals). */
#ifndef RRPC_TRANSPORT_TCP_TCP_INTERNAL_H
#define RRPC_TRANSPORT_TCP_TCP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/transport.h"

/* rrpc__tcp_sniff_classify - what the first `n` bytes of a connection are
 * (pure; fuzzed by test/fuzz/tcp_sniff_fuzzer.c): RRPC_SNIFF_WAIT (they may
 * still become a CLC message), RRPC_SNIFF_PLAIN (not CLC), or RRPC_SNIFF_CLC
 * (a whole CLC message of *clc_len <= n bytes; *is_decline set). */
enum { RRPC_SNIFF_WAIT = 0, RRPC_SNIFF_PLAIN = 1, RRPC_SNIFF_CLC = 2 };
int rrpc__tcp_sniff_classify(const uint8_t *buf, size_t n, size_t *clc_len, int *is_decline);

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
int rrpc__tcp_sniff_begin(rrpc__socket *s, int offers_rdma);
int rrpc__tcp_sniff_check(rrpc__socket *s);
/* A peer that asked for RDMA goes on over TCP with `code`: /connections shows
 * it; rrpc_rdma_fallbacks_total counts it only when this server offers RDMA
 * (a plain server that declines a Proposal has nothing of its own falling
 * back). Loop thread, while sniffing. */
void rrpc__tcp_sniff_note_fallback(rrpc__socket *s, uint32_t code);
void rrpc__tcp_sniff_end(rrpc__socket *s);

/* brpc_sniff.c: after the CLC check found no CLC message, the same for a
 * brpc RDMA hello: refuse it with brpc's "won't do RDMA" hello, then read
 * the client's 4-byte ACK (*waiting_ack, kept by the caller, says which).
 * 1 when done (deliver what is left), 0 when more bytes are needed, or a
 * negative code (a hard error: the socket must fail). Loop thread. */
int rrpc__tcp_brpc_sniff_check(rrpc__socket *s, int *waiting_ack);

#endif /* RRPC_TRANSPORT_TCP_TCP_INTERNAL_H */
