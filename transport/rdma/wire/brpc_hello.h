/* wire/brpc_hello.h - the hello and ACK messages of Apache brpc's RDMA
 * transport (its "dialect"), as pure codecs over byte arrays (no verbs, no
 * I/O), so that the TCP sniff, the tests and the fuzzer share one reading of
 * the wire. The facts come from ../shared/specs/brpc-rdma-facts.md §1; the
 * code is rrpc's.
 *
 * A brpc client opens its TCP connection with a hello in one of two forms:
 *   v2: "RDMA" | msg_len u16 | hello_ver u16 | impl_ver u16 | block_size u32
 *       | sq u16 | rq u16 | lid u16 | gid[16] | qp_num u32     (40 bytes, BE)
 *   v3: "RDM3" | pb_size u32 (1..8192) | proto2 RdmaHello of pb_size bytes
 * The server answers in the same form, the client then sends a 4-byte ACK
 * (BE u32, bit 0 = "use RDMA"). A hello that parses but is not *valid*
 * (versions, sizes) means "no RDMA, go on over TCP" - a fallback; a hello
 * that does not parse (lengths, protobuf) is a hard error.
 *
 * Thread safety: none needed (pure functions). */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_BRPC_HELLO_H
#define RRPC_TRANSPORT_RDMA_WIRE_BRPC_HELLO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RRPC_BRPC_MAGIC_LEN 4
#define RRPC_BRPC_V2_LEN 40          /* what a v2 hello is, and what we send */
#define RRPC_BRPC_V2_MAX_LEN 4096    /* a v2 msg_len above this is a hard error */
#define RRPC_BRPC_V3_HDR_LEN 8       /* magic + pb_size */
#define RRPC_BRPC_V3_PB_MAX 8192     /* pb_size bound (1..8192) */
#define RRPC_BRPC_HELLO_MAX (RRPC_BRPC_V3_HDR_LEN + RRPC_BRPC_V3_PB_MAX)
#define RRPC_BRPC_ACK_LEN 4
#define RRPC_BRPC_ACK_RDMA 1u        /* ACK bit 0: the client uses RDMA */

/* The refusal a TCP-mode brpc server sends in v2 (hello_ver = 0xFFFF); an
 * RDMA-mode server that will not do RDMA sends hello_ver = impl_ver = 0. */
#define RRPC_BRPC_V2_TCP_MODE_VER 0xFFFFu

struct rrpc__brpc_hello {
  int version;         /* 2 ("RDMA") or 3 ("RDM3"): the form on the wire */
  uint16_t hello_ver;  /* v2 only: 2 is the only valid value */
  uint16_t impl_ver;   /* v2 only: 1 is the only valid value */
  uint32_t block_size; /* the sender's receive payload size per WR */
  uint32_t sq_size, rq_size;
  uint32_t lid;
  uint8_t gid[16];
  uint32_t gid_len;    /* v3: bytes the peer sent (only 16 is valid); v2: 16 */
  uint32_t qp_num;
  int has_ece;         /* v3 field 7 (RdmaEce) was present */
  uint32_t ece_vendor_id, ece_options, ece_comp_mask;
};

/* rrpc__brpc_hello_frame - what the first `n` bytes of a connection are:
 *   RRPC_BRPC_NOT   not a brpc hello (the magic does not match);
 *   RRPC_BRPC_WAIT  they may still become one: more bytes are needed;
 *   RRPC_BRPC_WHOLE a whole hello of *len <= n bytes (v2: msg_len, whose
 *                   bytes past 40 the reader drains; v3: 8 + pb_size);
 *   -RRPC_EPARSE    the magic matches but the length is out of range
 *                   (v2 msg_len outside 40..4096, v3 pb_size outside
 *                   1..8192): the connection must be closed. */
enum { RRPC_BRPC_NOT = 0, RRPC_BRPC_WAIT = 1, RRPC_BRPC_WHOLE = 2 };
int rrpc__brpc_hello_frame(const uint8_t *buf, size_t n, size_t *len);

/* rrpc__brpc_hello_decode - decode a whole hello (`len` as framed). 0, or
 * -RRPC_EPARSE (a v3 body that is not a well-formed RdmaHello with all its
 * required fields). Decoding says nothing about validity. */
int rrpc__brpc_hello_decode(const uint8_t *buf, size_t len, struct rrpc__brpc_hello *out);

/* rrpc__brpc_hello_valid - 1 if the hello asks for (or grants) RDMA by
 * brpc's rules, 0 if it means "go on over TCP". v2: hello_ver 2, impl_ver
 * 1; both: block_size >= 1024, sq and rq >= 16; v3 also: sq, rq and lid <=
 * 65535, a 16-byte gid, qp_num != 0. */
int rrpc__brpc_hello_valid(const struct rrpc__brpc_hello *h);

/* rrpc__brpc_hello_encode - write `h` in its form (h->version): exactly 40
 * bytes for v2, 8 + protobuf for v3 (ECE only if has_ece). 0 or -EINVAL
 * (unknown version, a v2 field that does not fit, cap too small). */
int rrpc__brpc_hello_encode(const struct rrpc__brpc_hello *h, uint8_t *buf, size_t cap, size_t *len);

/* rrpc__brpc_hello_refusal - the "won't do RDMA" hello in `version`'s form:
 * v2 with hello_ver 0xFFFF when `tcp_mode` (a server without RDMA), else
 * hello_ver = impl_ver = 0; every other field 0 (v3: all fields 0, empty
 * gid). It fails rrpc__brpc_hello_valid by construction. */
void rrpc__brpc_hello_refusal(int version, int tcp_mode, struct rrpc__brpc_hello *out);

/* The 4-byte ACK: encode `flags`, or read it back. */
void rrpc__brpc_ack_encode(uint32_t flags, uint8_t out[RRPC_BRPC_ACK_LEN]);
uint32_t rrpc__brpc_ack_decode(const uint8_t in[RRPC_BRPC_ACK_LEN]);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_BRPC_HELLO_H */
