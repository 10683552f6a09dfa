/* preload/frame.h - the relay's framing between two rrpc-run processes.
 *
 * Once a connection is carried by rrpc (RDMA, or TCP after a CLC Decline),
 * both ends are rrpc-run relays, and the byte stream between them carries
 * small frames instead of raw bytes, so that "done writing" (the
 * application's shutdown(SHUT_WR), or the EOF of its closed socket) can
 * travel in band on any transport: a 4-byte big-endian header, then the
 * payload. Header bit 31 set: FIN (no payload follows, length must be 0);
 * else the low 31 bits are the payload length, 1..RRPC_RUN_FRAME_MAX.
 * Pure functions over bytes: the fuzz target drives them. */
#ifndef RRPC_PRELOAD_FRAME_H
#define RRPC_PRELOAD_FRAME_H

#include <stddef.h>
#include <stdint.h>

enum {
  RRPC_RUN_FRAME_HDR = 4,
  RRPC_RUN_FRAME_MAX = 1 << 20, /* a relay never sends a larger payload */
};

/* A client relay's first bytes: the server relay frames only after seeing
 * them (a first byte of 0 is neither an SMC CLC eyecatcher nor text). */
#define RRPC_RUN_HELLO "\0rrpcrun"
enum { RRPC_RUN_HELLO_LEN = 8 };

typedef struct rrpc_run_frame {
  int fin;        /* 1: the peer is done writing */
  uint32_t len;   /* payload bytes after the header (0 for FIN) */
} rrpc_run_frame;

/* rrpc_run_frame_encode - the header for `len` payload bytes (fin = 0) or a
 * FIN (fin = 1, len 0) into out[4]. 0, or -EINVAL for a length out of range. */
int rrpc_run_frame_encode(int fin, uint32_t len, unsigned char out[RRPC_RUN_FRAME_HDR]);

/* rrpc_run_frame_decode - parse a header from `in` (`n` bytes available).
 * 0 with *f set, -EAGAIN if fewer than 4 bytes, -EPROTO for a header no
 * relay sends (FIN with a length, an empty or too long data frame). */
int rrpc_run_frame_decode(const unsigned char *in, size_t n, rrpc_run_frame *f);

/* rrpc_run_hello_match - the first `n` bytes a server relay received after
 * the handshake: 1 if they begin with the whole hello; 0 if they are a
 * proper prefix of it or of SMC-R's CLC eyecatcher (wait for more); -2 if
 * they begin with the eyecatcher (a CLC message the handshake did not take:
 * a garbled or hostile one; the relay closes the connection); -1 otherwise
 * (a peer without rrpc-run). */
enum { RRPC_RUN_CLC_EYECATCHER_LEN = 4 };
int rrpc_run_hello_match(const unsigned char *in, size_t n);

#endif /* RRPC_PRELOAD_FRAME_H */
