/* remote/table.h - private: one connection's remote-memory state, shared by
 * every carriage (RDMA dialects, TCP fallback). Not thread-safe: the
 * connection's lock or loop thread serializes every call.
 *
 * Two tables per connection:
 *  - owner: the regions this side registered on the connection, by entry id.
 *    Ids go up from 1 and are never reused on the connection, so a stale
 *    id or token can only miss. Revoking answers 1 exactly once per entry:
 *    the caller invalidates the entry's window then and never again (a
 *    second invalidation panics Soft-RoCE, docs/remote-memory.md).
 *  - peer: the entries the other side announced, the "remote MR table".
 *    Accesses are checked here first, so a bad one fails on the accessing
 *    side with a clear code before anything is posted.
 * Incoming control messages pass rrpc__rmt_conn_rx, which checks the
 * sequence and routes ANNOUNCE/REVOKE/HELLO to the peer table and NOTIFY to
 * the owner table. A -RRPC_EPARSE from it is a protocol violation: the
 * caller fails the connection. */
#ifndef RRPC_REMOTE_TABLE_H
#define RRPC_REMOTE_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/remote/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_RMT_MAX_ENTRIES_DEFAULT = 4096, /* per connection and table */
};

/* An entry of the peer table: what the owner announced. */
struct rrpc__rmt_entry {
  uint32_t id, generation;
  uint8_t rights;
  uint32_t rkey;
  uint64_t addr, length;
};

/* An entry of the owner table. ctx is the carriage's (MR, window, region). */
struct rrpc__rmt_region {
  uint32_t id, generation;
  uint8_t rights;
  uint64_t length;
  void *ctx;
};

struct rrpc__rmt_stats {
  uint64_t refused_full;    /* registrations or announcements over max_entries */
  uint64_t bad_notify;      /* NOTIFY for no live region or out of its range: dropped */
  uint64_t protocol_errors; /* messages that failed the connection */
};

struct rrpc__rmt_conn {
  uint64_t conn_id;      /* mine: the tokens I issue carry it (!= 0) */
  uint64_t peer_conn_id; /* the peer's, from its HELLO; 0 before */
  uint32_t max_entries;
  uint16_t tx_seq;       /* last sequence sent */
  uint16_t rx_seq;       /* last sequence received */
  int hello_sent;
  /* owner table: sorted by id (ids only grow, so adding appends) */
  struct rrpc__rmt_region *own;
  uint32_t n_own, cap_own, next_id, next_gen;
  /* peer table: sorted by id likewise; max_peer_id: the highest id ever
   * announced, so a missing id at or under it reads "revoked" */
  struct rrpc__rmt_entry *peer;
  uint32_t n_peer, cap_peer, max_peer_id;
  struct rrpc__rmt_stats stats;
};

/* rrpc__rmt_in_range - [off, off + len) within length bytes, without
 * overflow; len 0 fits at off <= length. */
static inline int rrpc__rmt_in_range(uint64_t length, uint64_t off, uint64_t len) {
  return off <= length && len <= length - off;
}

/* rrpc__rmt_conn_init - empty state. conn_id != 0 (random: it names the
 * connection in tokens), gen_seed: first generation, max_entries 0 =
 * default. Returns 0 or -EINVAL. */
int rrpc__rmt_conn_init(struct rrpc__rmt_conn *c, uint64_t conn_id, uint32_t gen_seed,
                        uint32_t max_entries);
/* rrpc__rmt_conn_fini - free the tables (the caller revoked what it owns). */
void rrpc__rmt_conn_fini(struct rrpc__rmt_conn *c);

/* ---- owner side ---- */
/* rrpc__rmt_own_add - a new region of rights (RRPC_REMOTE_*) and length >= 1.
 * *out gets its id and generation (ctx as given). Returns 0, -EINVAL, or
 * -ENOSPC (max_entries live, or ids exhausted; counted in refused_full). */
int rrpc__rmt_own_add(struct rrpc__rmt_conn *c, uint8_t rights, uint64_t length, void *ctx,
                      struct rrpc__rmt_region *out);
/* rrpc__rmt_own_find - the live region id, or NULL. */
const struct rrpc__rmt_region *rrpc__rmt_own_find(const struct rrpc__rmt_conn *c, uint32_t id);
/* rrpc__rmt_own_revoke - remove region id. Returns 1 (removed now: *out
 * gets it, the caller invalidates its window once and sends REVOKE) or
 * -ENOENT (unknown or already revoked: the caller does nothing). */
int rrpc__rmt_own_revoke(struct rrpc__rmt_conn *c, uint32_t id, struct rrpc__rmt_region *out);
/* rrpc__rmt_own_revoke_all - the connection closes: fn once per live
 * region, in id order, then the table is empty. Returns how many. */
uint32_t rrpc__rmt_own_revoke_all(struct rrpc__rmt_conn *c,
                                  void (*fn)(const struct rrpc__rmt_region *r, void *arg),
                                  void *arg);
/* rrpc__rmt_own_token - the token of live region id with the window's rkey
 * and addr (0 over TCP). Returns 0, -RRPC_EREMOTEREVOKED or -EINVAL. */
int rrpc__rmt_own_token(const struct rrpc__rmt_conn *c, uint32_t id, uint32_t rkey, uint64_t addr,
                        uint8_t out[RRPC_RMT_TOKEN_LEN]);
/* rrpc__rmt_own_check - may the peer access [off, off + len) of region id
 * with rights? (the TCP carriage's owner-side check; on RDMA the window
 * does it). 0 or -RRPC_EREMOTE{NOENT,REVOKED,RANGE,RIGHTS}. */
int rrpc__rmt_own_check(const struct rrpc__rmt_conn *c, uint32_t id, uint32_t generation,
                        uint64_t off, uint64_t len, uint8_t rights,
                        const struct rrpc__rmt_region **out);

/* ---- outgoing control messages ---- */
/* rrpc__rmt_tx_* - build one message from the arguments with the next
 * sequence number and encode it into out; the caller sends the bytes in the
 * order they were built. rrpc__rmt_tx_announce also writes the connection's
 * HELLO into out_hello the first time, and then returns 2 (send out_hello,
 * then out), else 1. The others return 0. Negative: -EINVAL (nothing built,
 * no sequence spent). */
int rrpc__rmt_tx_announce(struct rrpc__rmt_conn *c, const struct rrpc__rmt_region *r,
                          uint32_t rkey, uint64_t addr, uint8_t out_hello[RRPC_RMT_MSG_LEN],
                          uint8_t out[RRPC_RMT_MSG_LEN]);
int rrpc__rmt_tx_revoke(struct rrpc__rmt_conn *c, const struct rrpc__rmt_region *r,
                        uint8_t out[RRPC_RMT_MSG_LEN]);
int rrpc__rmt_tx_notify(struct rrpc__rmt_conn *c, const struct rrpc__rmt_entry *e, uint64_t off,
                        uint64_t len, uint32_t tag, uint8_t out[RRPC_RMT_MSG_LEN]);

/* ---- incoming control messages ---- */
/* rrpc__rmt_conn_rx - one received message (buf, len). Returns 0 (applied;
 * for a NOTIFY, *notified is the live region and *m the message: the caller
 * tells the application), 1 (a NOTIFY that was dropped and counted: no live
 * region or out of its range - a write may race a revoke), or -RRPC_EPARSE
 * (malformed, out of sequence, an ANNOUNCE that does not raise the id, an
 * ANNOUNCE before HELLO, a second HELLO, a REVOKE of an unknown id, or the
 * peer table full; counted in protocol_errors). */
int rrpc__rmt_conn_rx(struct rrpc__rmt_conn *c, const uint8_t *buf, size_t len,
                      struct rrpc__rmt_msg *m, const struct rrpc__rmt_region **notified);

/* ---- accessing side ---- */
/* rrpc__rmt_peer_check - may this side access [off, off + len) of the
 * peer's entry id with rights (RRPC_REMOTE_READ or _WRITE)? len 0 is in
 * range at off <= length. 0 (*out = the entry) or -RRPC_EREMOTENOENT
 * (never announced), -RRPC_EREMOTEREVOKED, -RRPC_EREMOTERIGHTS,
 * -RRPC_EREMOTERANGE, checked in that order. */
int rrpc__rmt_peer_check(const struct rrpc__rmt_conn *c, uint32_t id, uint64_t off, uint64_t len,
                         uint8_t rights, struct rrpc__rmt_entry *out);
/* rrpc__rmt_peer_check_token - the same through a token: -RRPC_EPARSE for a
 * malformed one, -RRPC_EREMOTECONN when it names another connection (or no
 * HELLO came yet), -RRPC_EREMOTEREVOKED when its generation is not the live
 * entry's. Rights, bounds, rkey and address come from the table, never from
 * the token, so a forged token grants nothing the owner did not announce. */
int rrpc__rmt_peer_check_token(const struct rrpc__rmt_conn *c, const uint8_t *tok, size_t tok_len,
                               uint64_t off, uint64_t len, uint8_t rights,
                               struct rrpc__rmt_entry *out);
/* Used by the control-message code (ctl.c): apply a decoded ANNOUNCE /
 * REVOKE to the peer table. 0 or -RRPC_EPARSE. */
int rrpc__rmt_peer_add(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m);
int rrpc__rmt_peer_remove(struct rrpc__rmt_conn *c, const struct rrpc__rmt_msg *m);
/* rrpc__rmt_peer_clear - the connection closed: every entry is revoked. */
void rrpc__rmt_peer_clear(struct rrpc__rmt_conn *c);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_TABLE_H */
