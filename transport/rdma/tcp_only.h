/* transport/rdma/tcp_only.h - private to the RDMA transport: servers a
 * client remembers as TCP-only. A server that closed the connection during
 * the RDMA handshake (one that predates CLC and brpc's hello, such as brpc
 * <= 1.17 in TCP mode, or a brpc server that does not parse a CLC Proposal)
 * is not asked again for a while (--rrpc_rdma_tcp_only_ttl_s): new
 * connections to it start as plain TCP, with no handshake bytes at all.
 *
 * A small fixed table (TCP_ONLY_SLOTS peers, address and port), the oldest
 * entry replaced when full; any thread (one mutex, held for a scan). */
#ifndef RRPC_TRANSPORT_RDMA_TCP_ONLY_H
#define RRPC_TRANSPORT_RDMA_TCP_ONLY_H

#include <stdint.h>
#include <sys/socket.h>

/* Remember `peer` as TCP-only until now + ttl_s. ttl_s <= 0: do nothing. */
void rrpc__tcp_only_note(const struct sockaddr_storage *peer, int ttl_s, uint64_t now_us);
/* 1 while `peer` is remembered (an expired entry is forgotten here). */
int rrpc__tcp_only_check(const struct sockaddr_storage *peer, uint64_t now_us);
/* Forget every peer (tests). */
void rrpc__tcp_only_clear(void);

#endif /* RRPC_TRANSPORT_RDMA_TCP_ONLY_H */
