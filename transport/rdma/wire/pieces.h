/* wire/pieces.h - private to the RDMA transport: the two sides of the
 * elastic receive ring (docs/elastic-rings.md) as pure logic over integers,
 * like wire/window.h: no verbs, no allocation, no I/O. The endpoint turns
 * the answers into registrations, work requests and control messages
 * (wire/grant.h).
 *
 * One direction of a connection: the RECEIVER owns pieces of memory, each
 * its own MR with a window bound to the QP, and grants them to the SENDER,
 * which RDMA-writes its byte stream into its writable pieces in the order
 * they became writable, each write inside one piece. A piece the sender
 * filled to its end is "full": the sender never writes it again unless the
 * receiver returns it (a count in the elastic immediate, in fill order) -
 * which it does once the application released every byte of it - or
 * forgets it when the receiver retires it (RETIRE: the application still
 * holds bytes of it, or it is not needed). Both sides keep the same two
 * ordered lists, changed by the same messages in the same order (one RC QP
 * delivers in order), so a piece id in the immediate is a check, not a
 * lookup.
 *
 * Thread safety: none; both structs belong to their endpoint, which
 * serializes calls. Nothing blocks. */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_PIECES_H
#define RRPC_TRANSPORT_RDMA_WIRE_PIECES_H

#include <stdint.h>

#include "transport/rdma/wire/grant.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_PIECES_MAX = 64,   /* live granted pieces per direction (both sides) */
  RRPC_PIECES_SLOTS = 128, /* receiver's table: granted + retired-but-held */
  RRPC_PTX_SEGS_MAX = 4,   /* segments one plan may hold */
};

/* ---- control-message sequence numbers (per endpoint, both roles) ------ */

struct rrpc__ctl_seq {
  uint16_t out; /* last sent, 0 before the first */
  uint16_t in;  /* last received */
};

/* rrpc__ctl_seq_next - the sequence number of the next message sent. */
uint16_t rrpc__ctl_seq_next(struct rrpc__ctl_seq *s);

/* rrpc__ctl_seq_check - a message with seq arrived: 0 if it is exactly the
 * next one (recorded), -RRPC_EPARSE otherwise (duplicate, replay or gap: a
 * peer breaking the protocol, since RC loses and reorders nothing). */
int rrpc__ctl_seq_check(struct rrpc__ctl_seq *s, uint16_t seq);

/* ---- sender side ----------------------------------------------------- */

struct rrpc__ptx_piece {
  uint16_t id;
  uint32_t len;
  uint32_t rkey;
  uint64_t addr;
  uint32_t off; /* bytes written since it was granted or returned */
};

struct rrpc__ptx {
  struct rrpc__ptx_piece w[RRPC_PIECES_MAX]; /* writable, in write order */
  uint32_t nw;
  struct rrpc__ptx_piece f[RRPC_PIECES_MAX]; /* full, in fill order */
  uint32_t nf;
  uint64_t granted;     /* bytes of the pieces in w and f */
  uint64_t max_granted; /* the peer's cap (its ring size from the CLC) */
  uint8_t want_out;     /* a WANT is unanswered */
  struct {
    uint64_t grants, returns, retires, wants, handbacks, violations;
  } n;
};

struct rrpc__ptx_seg {
  uint16_t piece;
  uint32_t rkey;
  uint64_t addr; /* remote address: piece addr + offset */
  uint32_t off;  /* offset in the piece */
  uint32_t len;
};

struct rrpc__ptx_plan {
  uint32_t nseg;
  struct rrpc__ptx_seg seg[RRPC_PTX_SEGS_MAX];
  uint64_t len;
};

/* rrpc__ptx_init - max_granted: the receiver's cap (> 0). Cannot fail. */
void rrpc__ptx_init(struct rrpc__ptx *tx, uint64_t max_granted);

/* rrpc__ptx_space - bytes the sender may write now. */
uint64_t rrpc__ptx_space(const struct rrpc__ptx *tx);

/* rrpc__ptx_plan_writes - up to max_segs (<= RRPC_PTX_SEGS_MAX; the endpoint
 * passes what its credits and send queue allow) segments covering at most
 * pending bytes, in write order, each inside one piece. Returns 0, or
 * -EAGAIN when no byte may go (no space, max_segs 0 or pending 0). Does not
 * change tx. */
int rrpc__ptx_plan_writes(const struct rrpc__ptx *tx, uint64_t pending, uint32_t max_segs,
                   struct rrpc__ptx_plan *plan);

/* rrpc__ptx_commit - the plan's writes were posted: advance the pieces,
 * moving each filled one to the full list. Returns 0, or -EINVAL for a plan
 * that does not fit the state (stale, forged, committed twice); tx is then
 * unchanged. */
int rrpc__ptx_commit(struct rrpc__ptx *tx, const struct rrpc__ptx_plan *plan);

/* rrpc__ptx_on_ctl - a GRANT or RETIRE from the receiver (already decoded,
 * its sequence and token checked). GRANT: a new piece at the end of the
 * writable list; RETIRE: forget a full piece. Returns 0, or -RRPC_EPARSE
 * for a protocol violation (a type the sender does not take, an id already
 * live or unknown, a grant past max_granted or RRPC_PIECES_MAX); tx is then
 * unchanged and the connection must fail. */
int rrpc__ptx_on_ctl(struct rrpc__ptx *tx, const struct rrpc__grant_msg *m);

/* rrpc__ptx_on_returns - the immediate returned k full pieces (the first k
 * in fill order become writable again from their start). Returns 0, or
 * -RRPC_EPARSE if fewer than k are full (tx unchanged). */
int rrpc__ptx_on_returns(struct rrpc__ptx *tx, uint32_t k);

/* rrpc__ptx_want - call after every plan with the bytes still pending (also
 * when the plan wrote some: a large message asks while its first bytes go
 * out). Whether to ask for more space now: pending bytes exceed
 * the space, no WANT is unanswered and the grants are below the peer's cap.
 * If so, fills m (type, bytes short, at most max_granted; the caller sets
 * seq and token), records the
 * WANT as unanswered and returns 1; else 0. Answered by the next GRANT,
 * RETIRE or non-zero return. */
int rrpc__ptx_want(struct rrpc__ptx *tx, uint64_t pending, struct rrpc__grant_msg *m);
/* rrpc__ptx_want_due - whether rrpc__ptx_want(tx, pending, ...) would ask
 * now; changes nothing. */
int rrpc__ptx_want_due(const struct rrpc__ptx *tx, uint64_t pending);

/* rrpc__ptx_idle_handback - the sender has been idle for the idle period:
 * hands back, one message per call, every writable piece except the first
 * one that is unwritten and at most idle_len bytes. Fills m (HANDBACK with
 * the bytes written into it; the caller sets seq and token), forgets the
 * piece and returns 1; 0 when nothing is left to hand back. After the
 * message is posted the sender never writes that piece again. */
int rrpc__ptx_idle_handback(struct rrpc__ptx *tx, uint32_t idle_len, struct rrpc__grant_msg *m);

/* ---- receiver side --------------------------------------------------- */

enum rrpc__prx_state {
  RRPC_PRX_FREE = 0,
  RRPC_PRX_GRANTED, /* the sender may write it (granted or returned) */
  RRPC_PRX_FULL,    /* written to its end; waits to be released */
  RRPC_PRX_RETIRED, /* retired while held: freed when released */
  RRPC_PRX_HANDED,  /* handed back with bytes in it: freed when released */
};

struct rrpc__prx_piece {
  uint8_t state; /* enum rrpc__prx_state */
  uint32_t len;
  uint32_t written;  /* bytes received since granted or returned */
  uint32_t released; /* of those, released by the application */
};

struct rrpc__prx_cfg {
  uint64_t ring_max;    /* --rdma_ring_size: cap of granted bytes */
  uint64_t retired_max; /* cap of retired-but-held bytes (per connection) */
  uint32_t piece_min;   /* 4 KiB << n: the idle piece and smallest grant */
  uint32_t piece_max;   /* largest grant */
};

struct rrpc__prx {
  struct rrpc__prx_cfg cfg;
  struct rrpc__prx_piece p[RRPC_PIECES_SLOTS]; /* id = index + 1 */
  uint16_t g[RRPC_PIECES_MAX]; /* granted ids, in the order they are written */
  uint32_t ng;
  uint16_t f[RRPC_PIECES_MAX]; /* full ids, in fill order */
  uint32_t nf;
  uint64_t granted; /* bytes of GRANTED + FULL pieces */
  uint64_t retired; /* bytes of RETIRED + HANDED pieces (pinned, not granted) */
  uint64_t want;    /* bytes the sender asked for, not granted yet */
  uint64_t replace; /* bytes retired while held, not replaced yet */
  uint8_t want_pending; /* a WANT is unanswered: the sender is short */
  uint8_t idle;         /* shrink: released full pieces are retired, not returned */
  struct {
    uint64_t grants, grant_bytes, returns, retires_held, retires_shrink, handbacks, wants,
        frees, retire_refused, grant_refused, table_full, violations;
  } n;
};

/* rrpc__prx_init - piece_min and piece_max are 4 KiB << n (n <= 17) with
 * piece_min <= piece_max <= ring_max; ring_max is raised to no value: a
 * piece_max below ring_max / 32 is raised to it (RRPC_PIECES_MAX bounds the
 * pieces in flight). Returns 0 or -EINVAL. */
int rrpc__prx_init(struct rrpc__prx *rx, const struct rrpc__prx_cfg *cfg);

/* rrpc__prx_pinned - bytes of every piece not FREE (granted + retired):
 * what this direction pins on the receiver's side. */
uint64_t rrpc__prx_pinned(const struct rrpc__prx *rx);

/* rrpc__prx_on_write - a write completion: n bytes for piece id (from the
 * immediate). Sets *off to where they landed in the piece. n 0 carries only
 * an ACK and changes nothing. Returns 0, or -RRPC_EPARSE if id is not the
 * piece the sender must write next or the bytes pass its end (rx
 * unchanged: fail the connection). */
int rrpc__prx_on_write(struct rrpc__prx *rx, uint16_t id, uint32_t n, uint32_t *off);

/* rrpc__prx_on_ctl - a WANT or HANDBACK from the sender (decoded, sequence
 * and token checked). Sets *free_id to a piece to deregister now (0 if
 * none): a piece handed back with nothing unreleased in it. Returns 0, or
 * -RRPC_EPARSE for a violation (a type the receiver does not take, a WANT
 * of more than ring_max, a handback of a piece that is not writable or
 * whose byte count is not the one received); rx is then unchanged. A
 * repeated WANT is not a violation (it may have crossed our answer): it
 * replaces the wanted bytes, and each one costs the peer a credit. */
int rrpc__prx_on_ctl(struct rrpc__prx *rx, const struct rrpc__grant_msg *m, uint16_t *free_id);

/* rrpc__prx_on_release - the application released n bytes of piece id (the
 * endpoint's slices know their piece). Sets *free_id to id when the piece
 * is now to be deregistered (retired or handed back, all released), else
 * 0. Returns 0, or -EINVAL when more is released than was written (a bug
 * of the caller, not the peer). */
int rrpc__prx_on_release(struct rrpc__prx *rx, uint16_t id, uint32_t n, uint16_t *free_id);

/* rrpc__prx_set_idle - the endpoint saw no data for the idle period (1) or
 * data again (on_write clears it): while idle, full pieces whose bytes are
 * all released are retired and deregistered instead of returned. */
void rrpc__prx_set_idle(struct rrpc__prx *rx, int idle);

enum rrpc__prx_act {
  RRPC_PRX_ACT_NONE = 0,
  RRPC_PRX_ACT_RETIRE, /* send m (RETIRE); the piece is out of the lists */
  RRPC_PRX_ACT_GRANT,  /* get a registered piece of grant_len, then call
                          rrpc__prx_grant */
};

struct rrpc__prx_action {
  uint8_t act;        /* enum rrpc__prx_act */
  uint32_t grant_len; /* ACT_GRANT */
  uint8_t grant_flags;
  uint16_t free_id;   /* ACT_RETIRE with reason SHRINK: deregister now */
  struct rrpc__grant_msg m; /* ACT_RETIRE: type, id, reason (caller sets seq, token) */
};

/* rrpc__prx_poll - the next control action, at most one per call; call it
 * when one control message may be posted, and post what it says before
 * anything else that carries returns (the sender applies RETIREs and
 * returns in the order sent). RETIRE is applied by this call; GRANT is a
 * request: the endpoint takes a cleared, registered piece of grant_len
 * from its cache and calls rrpc__prx_grant, or counts the failure with
 * rrpc__prx_grant_failed. Retire rule: the first full piece is still held
 * and the sender is short (nothing granted left to write, or a WANT
 * unanswered, or a later full piece is released), within retired_max
 * (else the stream waits for the application; retire_refused counts the
 * polls that found the cap in the way).
 * Grant rule: nothing granted or full at all (the sender would have no
 * space and none coming back: the idle piece, piece_min, flag IDLE), or a
 * WANT or a retired-while-held piece not yet covered, within ring_max and
 * RRPC_PIECES_MAX and RRPC_PIECES_SLOTS (else table_full counts the poll);
 * the size grows with what is granted already (a power of
 * two >= max(wanted, granted), within piece_min..piece_max). Returns 1 if
 * a is filled, 0 if nothing is due. */
int rrpc__prx_poll(struct rrpc__prx *rx, struct rrpc__prx_action *a);

/* rrpc__prx_grant - a piece of len bytes (as polled) is registered and its
 * window bound: it becomes the last writable piece. Fills m (GRANT: id,
 * flags, size code; the caller adds rkey, addr, seq, token). Returns 0, or
 * -EINVAL when the grant no longer fits (caps, table, length). */
int rrpc__prx_grant(struct rrpc__prx *rx, uint32_t len, uint8_t flags, struct rrpc__grant_msg *m);

/* rrpc__prx_grant_failed - the endpoint could not get a piece (cache empty,
 * process cap): counted; the next poll asks again. */
void rrpc__prx_grant_failed(struct rrpc__prx *rx);

/* rrpc__prx_returns_owed - full pieces at the head of the fill order whose
 * bytes are all released (and not shrinking): what the next immediate may
 * return. */
uint32_t rrpc__prx_returns_owed(const struct rrpc__prx *rx);

/* rrpc__prx_returns_due - whether returns justify a pure ACK now: some are
 * owed and the sender may be short (less than a quarter of the granted
 * bytes left to write, or a WANT unanswered). */
int rrpc__prx_returns_due(const struct rrpc__prx *rx);

/* rrpc__prx_take_returns - returns for the immediate being built: at most
 * 255 of those owed, now writable again (state GRANTED, written 0); their
 * bytes count against what a WANT still asks for. */
uint8_t rrpc__prx_take_returns(struct rrpc__prx *rx);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_PIECES_H */
