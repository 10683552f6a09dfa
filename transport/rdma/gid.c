/* gid.c - the GID choice as a pure function over a GID table (gid.h); the
 * verbs queries that build the table live in device.c. */
#include "transport/rdma/gid.h"

#include <netinet/in.h>
#include <string.h>

#include "rrpc/errors.h"

static int gid_is_zero(const uint8_t raw[16]) {
  for (int i = 0; i < 16; i++)
    if (raw[i]) return 0;
  return 1;
}

/* The 16 bytes a RoCE v2 GID has when it stands for `local`: ::ffff:a.b.c.d
 * for IPv4 (and for v4-mapped IPv6 addresses), the address itself for other
 * IPv6 addresses. 1 on success, 0 when there is no usable address. */
static int local_as_gid(const struct sockaddr_storage *local, uint8_t out[16]) {
  if (local == NULL) return 0;
  if (local->ss_family == AF_INET) {
    const struct sockaddr_in *sin = (const struct sockaddr_in *)local;
    memset(out, 0, 10);
    out[10] = 0xff;
    out[11] = 0xff;
    memcpy(out + 12, &sin->sin_addr.s_addr, 4);
    return 1;
  }
  if (local->ss_family == AF_INET6) {
    const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)local;
    memcpy(out, sin6->sin6_addr.s6_addr, 16);
    return !gid_is_zero(out);
  }
  return 0;
}

/* Lowest-index non-zero entry accepted by `want`, or n if none. */
typedef int (*entry_pred)(const rrpc__rdma_gid_entry *e, const uint8_t *key);

static size_t lowest(const rrpc__rdma_gid_entry *t, size_t n, entry_pred want, const uint8_t *key) {
  size_t best = n;
  for (size_t i = 0; i < n; i++) {
    if (gid_is_zero(t[i].raw) || !want(&t[i], key)) continue;
    if (best == n || t[i].index < t[best].index) best = i;
  }
  return best;
}

static int is_v2_equal(const rrpc__rdma_gid_entry *e, const uint8_t *key) {
  return e->type == RRPC_RDMA_GID_ROCE_V2 && memcmp(e->raw, key, 16) == 0;
}
static int is_v2(const rrpc__rdma_gid_entry *e, const uint8_t *key) {
  (void)key;
  return e->type == RRPC_RDMA_GID_ROCE_V2;
}
static int is_not_v2(const rrpc__rdma_gid_entry *e, const uint8_t *key) {
  (void)key;
  return e->type != RRPC_RDMA_GID_ROCE_V2;
}
static int has_index(const rrpc__rdma_gid_entry *e, const uint8_t *key) {
  uint32_t idx;
  memcpy(&idx, key, sizeof idx);
  return e->index == idx;
}
static int any_entry(const rrpc__rdma_gid_entry *e, const uint8_t *key) {
  (void)e;
  (void)key;
  return 1;
}

int rrpc__rdma_gid_choose(const rrpc__rdma_gid_entry *table, size_t n, int link_is_ib,
                          int forced_index_plus1, const struct sockaddr_storage *local,
                          size_t *pos) {
  size_t got = n;
  uint8_t key[16];

  if (forced_index_plus1 > 0) {
    uint32_t idx = (uint32_t)(forced_index_plus1 - 1);
    memcpy(key, &idx, sizeof idx);
    got = lowest(table, n, has_index, key);
  } else if (link_is_ib) {
    memset(key, 0, sizeof key);
    got = lowest(table, n, has_index, key);
    if (got == n) got = lowest(table, n, any_entry, NULL);
  } else {
    if (local_as_gid(local, key)) got = lowest(table, n, is_v2_equal, key);
    if (got == n) got = lowest(table, n, is_v2, NULL);
    if (got == n) got = lowest(table, n, is_not_v2, NULL);
  }
  if (got == n) return -RRPC_ENODEV;
  *pos = got;
  return 0;
}
