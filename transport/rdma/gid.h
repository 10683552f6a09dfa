/* transport/rdma/gid.h - private to the RDMA transport: the GID decision as
 * a pure function over a table of GID entries, kept apart from the verbs
 * queries (device.c builds the table) so it is unit-tested on the host
 * without a device. No verbs types here. */
#ifndef RRPC_TRANSPORT_RDMA_GID_H
#define RRPC_TRANSPORT_RDMA_GID_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The GID types that matter for the choice. The values equal rdma-core's
 * enum ibv_gid_type (IBV_GID_TYPE_IB 0, _ROCE_V1 1, _ROCE_V2 2), so device.c
 * copies the field; anything else reads as "unknown" and is treated like
 * RoCE v1 (the most conservative guess). */
typedef enum rrpc__rdma_gid_type {
  RRPC_RDMA_GID_IB = 0,
  RRPC_RDMA_GID_ROCE_V1 = 1,
  RRPC_RDMA_GID_ROCE_V2 = 2,
} rrpc__rdma_gid_type;

typedef struct rrpc__rdma_gid_entry {
  uint32_t index;  /* index in the port's GID table */
  uint32_t type;   /* rrpc__rdma_gid_type */
  uint32_t ifindex; /* netdev of a RoCE GID (0: unknown); not used by the choice */
  uint8_t raw[16]; /* the GID, network byte order */
} rrpc__rdma_gid_entry;

/* rrpc__rdma_gid_choose - which entry of table[0..n) a connection whose TCP
 * local address is `local` should use. Zero GIDs are never chosen.
 *  - forced_index_plus1 > 0 (--rdma_gid_index): the entry with that index
 *    (minus one), or -RRPC_ENODEV if the table has no such non-zero entry;
 *  - link_is_ib: the entry with index 0 (the port GID; IB addresses by LID),
 *    else the lowest non-zero index;
 *  - RoCE: a RoCE v2 GID equal to the local address (IPv4-mapped for an IPv4
 *    or v4-mapped IPv6 address, the address itself for IPv6), then any RoCE
 *    v2 GID, then any RoCE v1/unknown GID; the lowest index wins each tier.
 *    `local` may be NULL (no address: skip the first tier).
 * Never picks by "highest index", which can be another container's entry.
 * *pos gets the chosen position in `table`. 0 or -RRPC_ENODEV.
 * Pure: no I/O, no globals; thread-safe. */
int rrpc__rdma_gid_choose(const rrpc__rdma_gid_entry *table, size_t n, int link_is_ib,
                          int forced_index_plus1, const struct sockaddr_storage *local,
                          size_t *pos);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_GID_H */
