/* transport/fallback_codes.h - private to the transports: the reasons a
 * connection goes on over TCP that are not SMC-R decline codes. They share
 * the decline codes' 32-bit space (/connections, the per-reason counters)
 * in a range SMC-R does not use (first byte 0x0B), so one counter table and
 * one text function serve both. */
#ifndef RRPC_TRANSPORT_FALLBACK_CODES_H
#define RRPC_TRANSPORT_FALLBACK_CODES_H

#include <stdint.h>

/* A brpc client's RDMA hello was valid, but this server does not serve
 * brpc's RDMA dialect (no RDMA, or not for brpc): refused, TCP goes on. */
#define RRPC_FB_BRPC_NOT_SERVED 0x0B000001u
/* A brpc client's RDMA hello failed brpc's own validity rules. */
#define RRPC_FB_BRPC_INVALID_HELLO 0x0B000002u
/* Client: the server closed the connection during the RDMA handshake (it
 * predates CLC); the call went again over plain TCP. */
#define RRPC_FB_PEER_CLOSED_HANDSHAKE 0x0B000003u
/* Client: the server is remembered as TCP-only (rrpc_rdma_tcp_only_ttl_s),
 * so no RDMA handshake was tried. */
#define RRPC_FB_PEER_TCP_ONLY 0x0B000004u

/* Text for the codes above, or NULL for any other code. */
const char *rrpc__fallback_code_text(uint32_t code);

#endif /* RRPC_TRANSPORT_FALLBACK_CODES_H */
