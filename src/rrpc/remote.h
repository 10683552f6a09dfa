/* rrpc/remote.h - one-sided access to a peer's memory (SMC-ERM style):
 * regions, their rights, and the token that names a region in an RPC.
 *
 * A region is memory its owner registers for remote READ, WRITE or both on
 * one connection. The owner announces it to the peer over that connection
 * (the peer keeps it in its remote table under the owner's entry id) and
 * may export a token: 40 opaque bytes to put in an RPC. A token is bound to
 * the connection it was issued for; the connection's other side may use it,
 * nobody else. docs/remote-memory.md gives the model, the wire formats and
 * how each transport carries the calls below.
 */
#ifndef RRPC_REMOTE_H
#define RRPC_REMOTE_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/channel.h"
#include "rrpc/server.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a peer may do with a region. Any other bit is invalid. */
enum rrpc_remote_rights {
  RRPC_REMOTE_READ = 1,  /* the peer may read it (one-sided READ) */
  RRPC_REMOTE_WRITE = 2, /* the peer may write it (one-sided WRITE) */
};

enum {
  RRPC_REMOTE_TOKEN_LEN = 40, /* bytes of a serialized token */
};

/* A token as it travels: copy it into a request or response field as
 * bytes; it contains no pointer of this process. */
typedef struct rrpc_remote_token {
  uint8_t bytes[RRPC_REMOTE_TOKEN_LEN];
} rrpc_remote_token;

/* What a token says, without the device addressing it also carries. */
typedef struct rrpc_remote_token_info {
  uint32_t id;         /* the owner's entry id (>= 1) */
  uint32_t generation; /* the entry's generation: a revoked id never comes back
                          with the same generation */
  uint64_t conn_id;    /* the connection it was issued for (owner-chosen, random) */
  uint64_t length;     /* bytes of the region (>= 1) */
  unsigned rights;     /* RRPC_REMOTE_READ | RRPC_REMOTE_WRITE, at least one */
} rrpc_remote_token_info;

/* rrpc_remote_token_inspect - check that buf (len bytes, e.g. a field of a
 * received RPC) is a well-formed token and describe it. Says nothing about
 * whether the region still exists: only a transfer through it can tell.
 * Returns 0 (*out written), -RRPC_EPARSE (len is not RRPC_REMOTE_TOKEN_LEN,
 * wrong magic or version, unknown rights bits, id or length 0, a region
 * that would wrap the address space) or -EINVAL (a NULL argument).
 * Thread-safe, non-blocking. */
int rrpc_remote_token_inspect(const void *buf, size_t len, rrpc_remote_token_info *out);

/* ---- connections, regions, transfers ------------------------------------ */

/* A connection's remote-memory face (a "link"): its owner table (regions
 * this side registered), its peer table (what the other side announced)
 * and its queue of transfers. One per connection; every handle to it holds
 * the connection open (not alive: a failed connection's link answers
 * every call with its error). */
typedef struct rrpc_remote_link rrpc_remote_link;
/* Memory this side registered on a link. */
typedef struct rrpc_remote_region rrpc_remote_region;

/* rrpc_channel_remote_link - the link of a single-connection channel's
 * current connection (made if there is none; the channel's first call may
 * be still on its way). 0 (*out: a handle, release it), -EINVAL (NULL, a
 * pooled/short or cluster channel), -RRPC_ECLOSE, or a connect error. Any
 * thread. */
int rrpc_channel_remote_link(rrpc_channel *ch, rrpc_remote_link **out);
/* rrpc_server_call_remote_link - the link of the connection a server call
 * came in on. 0 or -EINVAL. Any thread, while the call is held. */
int rrpc_server_call_remote_link(rrpc_server_call *call, rrpc_remote_link **out);
/* rrpc_remote_link_release - drop a handle (NULL: nothing). */
void rrpc_remote_link_release(rrpc_remote_link *l);
/* rrpc_remote_link_failed - 0 while the connection works, else its error. */
int rrpc_remote_link_failed(const rrpc_remote_link *l);

/* The owner hears of a NOTIFY write (ERM's REMOTE_COMPL): [offset, offset +
 * length) of region r landed, tag as the writer gave it. Once per such
 * write, in the order the writer issued them; on the connection's loop
 * thread: keep it short, never block. */
typedef void (*rrpc_remote_notify_fn)(void *arg, rrpc_remote_region *r, uint64_t offset,
                                      uint64_t length, uint32_t tag);
/* rrpc_remote_link_set_notify - install the callback (NULL: notifications
 * are counted and dropped). Any thread. */
void rrpc_remote_link_set_notify(rrpc_remote_link *l, rrpc_remote_notify_fn fn, void *arg);

/* rrpc_remote_region_register - make [buf, buf + len) (len >= 1) a region
 * of link l. rights: RRPC_REMOTE_READ and/or _WRITE - the region is
 * announced to the peer, which finds it under rrpc_remote_region_id and
 * may be given rrpc_remote_region_token - or 0: local only, the source or
 * target of this side's own transfers. The memory must stay valid until
 * rrpc_remote_region_free. Returns 0 (*out), -EINVAL, -ENOSPC (the link's
 * max_entries live regions), -RRPC_ERDMAMEM (not registrable), or the
 * connection's error. Any thread but a loop thread (registering memory
 * with a device is a system call; over RDMA it waits for the window's
 * bind). */
int rrpc_remote_region_register(rrpc_remote_link *l, void *buf, size_t len, unsigned rights,
                                rrpc_remote_region **out);
/* rrpc_remote_region_id - the id the peer knows the region by (0 for a
 * local-only one). */
uint32_t rrpc_remote_region_id(const rrpc_remote_region *r);
/* rrpc_remote_region_token - the token of the region for the link's peer.
 * 0, -EINVAL (local only) or -RRPC_EREMOTEREVOKED. */
int rrpc_remote_region_token(const rrpc_remote_region *r, rrpc_remote_token *out);
/* rrpc_remote_region_revoke - end the peer's access now (REVOKE is sent;
 * over RDMA the window is invalidated, once). The memory stays registered
 * for local use. 1 if this call revoked it, 0 if it was already (or the
 * connection closed, which revokes every region). Any thread. */
int rrpc_remote_region_revoke(rrpc_remote_region *r);
/* rrpc_remote_region_free - revoke, deregister, free r. The caller's
 * transfers using r as their local side must have completed. */
void rrpc_remote_region_free(rrpc_remote_region *r);

enum rrpc_remote_flags {
  RRPC_REMOTE_NOTIFY = 1, /* write only: the owner's notify callback runs once the bytes landed */
};

/* One transfer: local region + offset <-> the peer's region (by id, or by
 * a token when token is not NULL) + offset, length bytes (0 allowed). */
typedef struct rrpc_remote_xfer {
  rrpc_remote_region *local;
  uint64_t local_offset;
  uint32_t remote_id;               /* used when token is NULL */
  const rrpc_remote_token *token;   /* copied by the call */
  uint64_t remote_offset, length;
  unsigned flags;                   /* RRPC_REMOTE_NOTIFY */
  uint32_t tag;                     /* NOTIFY: passed to the owner's callback */
  /* exactly once, with 0 or a negative code, on the connection's loop
   * thread; never from inside rrpc_remote_write/_read */
  void (*done)(void *arg, int status);
  void *arg;
} rrpc_remote_xfer;

/* rrpc_remote_write / rrpc_remote_read - start a transfer: write the local
 * bytes to the peer's region, or read the peer's into the local region.
 * Any size (split as the transport needs); transfers of one link complete
 * in the order they were started. Returns 0 (done will run once) or, with
 * done never called: -EINVAL (NULL, a bad flag, the local range outside
 * its region), -RRPC_EREMOTE{NOENT,REVOKED,RIGHTS,RANGE,CONN} (checked
 * against what the peer announced, before anything is sent), or the
 * connection's error. A transfer in flight when the connection fails
 * completes with an error. Any thread. */
int rrpc_remote_write(rrpc_remote_link *l, const rrpc_remote_xfer *x);
int rrpc_remote_read(rrpc_remote_link *l, const rrpc_remote_xfer *x);

/* What a link counted. */
typedef struct rrpc_remote_link_stats {
  uint64_t ops_ok, ops_failed;    /* transfers completed */
  uint64_t pieces;                /* what they were split into */
  uint64_t notified;              /* notify callbacks run */
  uint64_t bad_notify;            /* NOTIFYs dropped (region gone, out of range) */
  uint64_t refused_full;          /* registrations over max_entries */
  uint64_t protocol_errors;       /* malformed or out-of-order messages (they fail the connection) */
  uint64_t served_bytes;          /* owner, TCP carriage: bytes copied for the peer's transfers */
  uint32_t live_regions, peer_regions;
  int rdma;                       /* 1: one-sided RDMA; 0: carried in the byte stream */
  uint64_t bind_timeouts;         /* registrations failed after bind_wait_ms (RDMA) */
} rrpc_remote_link_stats;
void rrpc_remote_link_get_stats(rrpc_remote_link *l, rrpc_remote_link_stats *out);

/* Process-wide limits of remote memory (flags remote_*, docs/remote-memory.md).
 * Zero means default for every field. A link takes them when it is made;
 * links made earlier keep theirs. */
typedef struct rrpc_remote_limits {
  /* piece_size (flag remote_piece_size): bytes per piece a transfer is
   * split into - one frame over TCP, one work request over RDMA. 4096 ..
   * 1 MiB (a peer accepts frames of at most 1 MiB). 0 = 1 MiB. */
  size_t piece_size;
  /* max_inflight (flag remote_max_inflight): pieces of one link sent and
   * not completed; the rest wait in the link's queue. 1 .. 8 (an RDMA QP reserves send
   * entries for 8). 0 = 8. */
  int max_inflight;
  /* max_regions (flag remote_max_regions): live regions per link and
   * table - this side's own, and the peer's it accepts. A registration
   * over it fails with -ENOSPC, an announcement over it fails the
   * connection; both count in refused_full. Give both sides the same
   * value, or an owner within its own limit can pass its peer's.
   * 1 .. 1048576. 0 = 4096. */
  uint32_t max_regions;
  /* bind_wait_ms (flag remote_bind_wait_ms): RDMA only - how long a
   * registration waits for its window's bind to complete; past it the
   * registration fails with -ETIMEDOUT, counted in bind_timeouts. Read at
   * each registration. 1 .. 600000. 0 = 10000. */
  int bind_wait_ms;
} rrpc_remote_limits;

/* rrpc_remote_limits_set - replace the limits (copied; NULL = defaults).
 * 0, or -EINVAL with nothing changed when a field is out of its range.
 * Any thread. */
int rrpc_remote_limits_set(const rrpc_remote_limits *l);
/* rrpc_remote_limits_get - the limits in force, defaults filled in. */
void rrpc_remote_limits_get(rrpc_remote_limits *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_H */
