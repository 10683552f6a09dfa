/* rrpc/remote.h - one-sided access to a peer's memory (SMC-ERM style):
 * regions, their rights, and the token that names a region in an RPC.
 *
 * A region is memory its owner registers for remote READ, WRITE or both on
 * one connection. The owner announces it to the peer over that connection
 * (the peer keeps it in its remote table under the owner's entry id) and
 * may export a token: 40 opaque bytes to put in an RPC. A token is bound to
 * the connection it was issued for; the connection's other side may use it,
 * nobody else. docs/remote-memory.md gives the model, the wire formats and
 * what is implemented today: this header holds the parts every transport
 * shares (rights, token layout, inspection); the calls that register
 * regions and move bytes are added with the transports that carry them.
 */
#ifndef RRPC_REMOTE_H
#define RRPC_REMOTE_H

#include <stddef.h>
#include <stdint.h>

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

#ifdef __cplusplus
}
#endif
#endif /* RRPC_REMOTE_H */
