/* transport/smc/clc.h - shared by the TCP and RDMA transports (TCP sniffs
 * and declines, RDMA shakes hands): the SMC-R CLC handshake codec
 * (Proposal, Accept, Confirm, Decline) as pure functions over bytes. It owns
 * the byte layouts and rrpc's use of reserved bytes; it knows nothing of
 * sockets, verbs or deadlines (the handshake code drives it).
 *
 * rrpc's own handshake ENCODES the version-1 SMC-R layouts (Proposal 92
 * bytes, Accept / Confirm 68, Decline 28); the version-2 encoders (SMC-Rv2,
 * for kernel peers) write the layouts Linux 6.1 sends. Both versions DECODE
 * as Linux sends them. See docs/smc-r-wire-usage.md for the why and for the rrpc
 * extension bytes.
 *
 * All functions are pure: thread-safe, non-blocking, no allocation. Buffers
 * are borrowed for the duration of the call; decoded structs are plain
 * values (copies), nothing points back into the input. Every decoder treats
 * its input as hostile: it reads only inside [buf, buf + len) and inside the
 * message's own length field, and returns -RRPC_EPARSE for anything outside
 * the layouts below. */
#ifndef RRPC_TRANSPORT_SMC_CLC_H
#define RRPC_TRANSPORT_SMC_CLC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rrpc__clc_type {
  RRPC_CLC_PROPOSAL = 1,
  RRPC_CLC_ACCEPT = 2,
  RRPC_CLC_CONFIRM = 3,
  RRPC_CLC_DECLINE = 4,
};

/* SMC type of a header (v1 "path", v2 typev1/typev2). */
enum rrpc__clc_smc_type {
  RRPC_CLC_SMC_R = 0,
  RRPC_CLC_SMC_D = 1,
  RRPC_CLC_SMC_N = 2, /* neither (v2 headers only) */
  RRPC_CLC_SMC_B = 3, /* both */
};

enum {
  RRPC_CLC_HDR_LEN = 8,
  RRPC_CLC_TRAILER_LEN = 4,
  RRPC_CLC_PROPOSAL_V1_LEN = 52, /* smallest v1: IP area at offset 0 */
  /* rrpc's v1 Proposal: a zeroed 40-byte SMC-D area, then the IP area
   * (offset 40), no IPv6 prefixes; the layout Linux sends and the one
   * Wireshark 4.0 decodes (it reads the IP area after that area). */
  RRPC_CLC_PROPOSAL_RRPC_LEN = 92,
  RRPC_CLC_PROPOSAL_SMCD_AREA_LEN = 40,
  RRPC_CLC_PROPOSAL_V2_MIN_LEN = 84, /* header + local + SMC-D area + trailer */
  RRPC_CLC_ACCEPT_V1_LEN = 68,       /* Accept and Confirm, SMC-R v1 */
  RRPC_CLC_ACCEPT_V2_MIN_LEN = 108,
  RRPC_CLC_DECLINE_V1_LEN = 28,
  RRPC_CLC_DECLINE_V2_LEN = 44,
  /* Largest CLC message rrpc reads. Linux's biggest (a v2 Proposal with 8
   * IPv6 prefixes, 8 EIDs and 8 ISM GIDs) stays well below it, so a reader
   * can use one fixed buffer of this size. */
  RRPC_CLC_MAX_LEN = 1024,
  RRPC_CLC_MAX_IPV6_PREFIXES = 8,
  RRPC_CLC_MAX_EIDS = 8,
  RRPC_CLC_MAX_GIDS = 8, /* v2 Confirm GID list entries rrpc keeps */
  RRPC_CLC_EID_LEN = 32,
  RRPC_CLC_HOSTNAME_LEN = 32,
};

/* rrpc feature flags: Proposal IP-area reserved byte 0, Accept/Confirm
 * reserved byte at offset 60. */
enum {
  RRPC_CLC_FEAT_WWI = 0x01, /* write-with-immediate data path (rrpc's) */
  /* elastic receive rings (docs/elastic-rings.md): on when both set it;
   * the Accept/Confirm's ring code is then the cap of granted bytes and its
   * rkey and address are 0 (pieces come as GRANT messages). */
  RRPC_CLC_FEAT_ELASTIC = 0x02,
  /* rdma_cm setup (transport/rdma/cm/): in a Proposal, the client connects
   * its QP through rdma_cm; in an Accept, the server agrees and its PSN
   * field (unused then: rdma_cm picks the PSNs) carries the port of its
   * rdma_cm listener; a Confirm repeats it. */
  RRPC_CLC_FEAT_CM = 0x40,
  /* the cursor dialect (SMC-R's own WRITE + CDC data path) is spoken; an
   * Accept/Confirm with it and without WWI says it was chosen
   * (transport/rdma/handshake.c). */
  RRPC_CLC_FEAT_CURSOR = 0x04,
};

/* rrpc wire version carried in the Proposal's IP-area reserved byte 1. */
enum { RRPC_CLC_WIRE_VERSION = 1 };

/* Ring sizes: 16 KiB << code. Linux caps SMC-R at code 5 (512 KiB); rrpc
 * peers that announce RRPC_CLC_FEAT_WWI accept codes up to 15 (512 MiB). */
enum {
  RRPC_CLC_RING_MIN = 16384,
  RRPC_CLC_RING_CODE_MAX = 15,
  RRPC_CLC_RING_CODE_MAX_LINUX = 5,
  /* log2 of the receive-WR depth an rrpc peer may announce (2..16): the
   * window needs at least 4 receives (see rrpc__tx_window_init). */
  RRPC_CLC_RQ_DEPTH_LOG2_MIN = 2,
  RRPC_CLC_RQ_DEPTH_LOG2_MAX = 16,
};

/* SMC peer-diagnosis (decline) codes; the values Linux uses today. The code
 * is informational: a receiver falls back to TCP whatever it says (except
 * the out-of-sync flag, which rrpc never sets). */
enum rrpc__clc_decline_code {
  RRPC_CLC_DECL_MEM = 0x01010000,         /* insufficient memory */
  RRPC_CLC_DECL_TIMEOUT_CL = 0x02010000,  /* timeout waiting for CONFIRM */
  RRPC_CLC_DECL_TIMEOUT_AL = 0x02020000,  /* timeout waiting for ADD LINK */
  RRPC_CLC_DECL_CNFERR = 0x03000000,      /* configuration error */
  RRPC_CLC_DECL_PEERNOSMC = 0x03010000,   /* peer did not indicate SMC */
  RRPC_CLC_DECL_IPSEC = 0x03020000,       /* IPsec usage */
  RRPC_CLC_DECL_NOSMCDEV = 0x03030000,    /* no SMC device found */
  RRPC_CLC_DECL_NOSMCDDEV = 0x03030001,   /* no SMC-D device found */
  RRPC_CLC_DECL_NOSMCRDEV = 0x03030002,   /* no SMC-R device found */
  RRPC_CLC_DECL_NOISM2SUPP = 0x03030003,  /* no ISMv2 support */
  RRPC_CLC_DECL_NOV2EXT = 0x03030004,     /* peer sent no CLC v2 extension */
  RRPC_CLC_DECL_NOV2DEXT = 0x03030005,    /* peer sent no SMC-Dv2 extension */
  RRPC_CLC_DECL_NOSEID = 0x03030006,      /* peer sent no system EID */
  RRPC_CLC_DECL_NOSMCD2DEV = 0x03030007,  /* no SMC-Dv2 device found */
  RRPC_CLC_DECL_NOUEID = 0x03030008,      /* no user EID in common */
  RRPC_CLC_DECL_MODEUNSUPP = 0x03040000,  /* SMC modes do not match (R/D) */
  RRPC_CLC_DECL_RMBE_EC = 0x03050000,     /* peer requires RMBE eyecatcher */
  RRPC_CLC_DECL_OPTUNSUPP = 0x03060000,   /* fastopen not supported */
  RRPC_CLC_DECL_DIFFPREFIX = 0x03070000,  /* IP prefix mismatch */
  RRPC_CLC_DECL_GETVLANERR = 0x03080000,  /* cannot get the VLAN id */
  RRPC_CLC_DECL_ISMVLANERR = 0x03090000,  /* cannot register the VLAN id */
  RRPC_CLC_DECL_NOACTLINK = 0x030a0000,   /* no active link in the group */
  RRPC_CLC_DECL_NOSRVLINK = 0x030b0000,   /* server's link not found */
  RRPC_CLC_DECL_VERSMISMAT = 0x030c0000,  /* version mismatch */
  RRPC_CLC_DECL_MAX_DMB = 0x030d0000,     /* SMC-D DMB limit */
  RRPC_CLC_DECL_NOROUTE = 0x030e0000,     /* SMC-Rv2: no route to the peer */
  RRPC_CLC_DECL_NOINDIRECT = 0x030f0000,  /* SMC-Rv2: direct/indirect mismatch */
  RRPC_CLC_DECL_SYNCERR = 0x04000000,     /* synchronization error */
  RRPC_CLC_DECL_PEERDECL = 0x05000000,    /* peer declined (bookkeeping) */
  RRPC_CLC_DECL_INTERR = 0x09990000,      /* internal error (0x0999000x) */
  RRPC_CLC_DECL_ERR_RTOK = 0x09990001,    /* rtoken handling failed */
  RRPC_CLC_DECL_ERR_RDYLNK = 0x09990002,  /* link not ready */
  RRPC_CLC_DECL_ERR_REGBUF = 0x09990003,  /* buffer registration failed */
};

/* The 8-byte header as found on the wire. */
struct rrpc__clc_hdr {
  uint8_t type;    /* enum rrpc__clc_type */
  uint16_t length; /* whole message, trailer included */
  uint8_t version; /* 1 or 2 (a higher value is read as the v2 layout) */
  uint8_t flag;    /* byte 7 bit 3: first contact (Accept/Confirm), out of
                      sync (Decline) */
  uint8_t typev1;  /* byte 7 bits 1-0 (v1: the path) */
  uint8_t typev2;  /* byte 7 bits 3-2 (v2 Proposal only; 0 in v1) */
  uint8_t smcd;    /* 1 if the eyecatcher is "SMCD" instead of "SMCR" */
};

struct rrpc__clc_ipv6_prefix {
  uint8_t prefix[16];
  uint8_t len;
};

struct rrpc__clc_proposal {
  struct rrpc__clc_hdr hdr; /* decode only; the encoder writes v1 SMC-R */
  uint8_t peer_id[8];
  uint8_t gid[16]; /* v1 RoCE GID (all zero in a v2-only Proposal) */
  uint8_t mac[6];
  uint16_t iparea_offset; /* decode only; rrpc encodes 40 */
  /* IP area: present in every v1 Proposal and in a v2 one whose typev1 is
   * not N. */
  uint8_t has_ip_area;
  uint32_t ipv4_subnet; /* host order; 0 for an IPv6 connection */
  uint8_t ipv4_prefix_len;
  uint8_t rrpc_features; /* reserved byte 0: RRPC_CLC_FEAT_* (0 from Linux) */
  uint8_t rrpc_version;  /* reserved byte 1: RRPC_CLC_WIRE_VERSION */
  uint8_t ipv6_count;    /* <= RRPC_CLC_MAX_IPV6_PREFIXES */
  struct rrpc__clc_ipv6_prefix ipv6[RRPC_CLC_MAX_IPV6_PREFIXES];
  /* v2 extension (decode only): present when the header is v2 and typev2
   * is not N. */
  uint8_t has_v2_ext;
  uint8_t v2_release; /* high nibble of the extension flag byte */
  uint8_t v2_seid;    /* bit 0 of the extension flag byte */
  uint8_t ism_gid_count;
  uint8_t roce_v2_gid[16];
  uint8_t max_conns;     /* v2.1; 0 from older kernels */
  uint8_t max_links;     /* v2.1 */
  uint16_t feature_mask; /* v2.1 */
  uint8_t eid_count;     /* <= RRPC_CLC_MAX_EIDS */
  uint8_t eids[RRPC_CLC_MAX_EIDS][RRPC_CLC_EID_LEN]; /* blank padded */
};

/* Accept (server) and Confirm (client): the same layout. */
struct rrpc__clc_accept {
  struct rrpc__clc_hdr hdr;  /* decode only */
  uint8_t type;              /* RRPC_CLC_ACCEPT or RRPC_CLC_CONFIRM */
  uint8_t first_contact;     /* byte 7 bit 3 */
  uint8_t peer_id[8];
  uint8_t gid[16];
  uint8_t mac[6];
  uint32_t qpn;          /* 24 bits */
  uint32_t rkey;         /* of the sender's receive ring */
  uint8_t rmbe_idx;      /* 1-based; rrpc and Linux send 1 */
  uint32_t token;        /* sender's alert token: goes into every CDC to it */
  uint8_t ring_code;     /* high nibble of byte 50: ring = 16 KiB << code */
  uint8_t mtu;           /* low nibble of byte 50: IB enum, 1=256 .. 5=4096 */
  uint8_t rq_depth_log2; /* reserved byte 51: log2 of the posted receive-WR
                            depth, 0 = not announced (Linux) */
  uint64_t ring_addr;    /* virtual address the rkey maps */
  uint8_t rrpc_features; /* reserved byte 60: RRPC_CLC_FEAT_* */
  uint32_t psn;          /* initial PSN, 24 bits */
  /* v2 only (decode only) */
  uint8_t eid[RRPC_CLC_EID_LEN];
  uint8_t has_fce; /* first-contact extension present */
  uint8_t v2_direct;
  uint8_t os_type; /* 2 = Linux */
  uint8_t release;
  uint8_t hostname[RRPC_CLC_HOSTNAME_LEN]; /* blank padded */
  uint8_t has_fce_v2x; /* the 16 bytes after the hostname are present */
  uint8_t max_conns;
  uint8_t max_links;
  uint16_t feature_mask;
  uint32_t vendor_options;
  uint8_t gid_count; /* Confirm GID list; <= RRPC_CLC_MAX_GIDS */
  uint8_t gids[RRPC_CLC_MAX_GIDS][16];
};

struct rrpc__clc_decline {
  struct rrpc__clc_hdr hdr; /* decode only */
  uint8_t peer_id[8];       /* may be zero */
  uint32_t diag;            /* enum rrpc__clc_decline_code (or any value) */
  uint8_t out_of_sync;      /* byte 7 bit 3 */
  uint8_t os_type;          /* v2: high nibble of byte 20; 0 in v1 */
  uint32_t diag_v2[4];      /* v2 (44-byte) Declines only */
};

/* One decoded message of any type. */
struct rrpc__clc_msg {
  struct rrpc__clc_hdr hdr;
  union {
    struct rrpc__clc_proposal proposal;
    struct rrpc__clc_accept accept; /* Accept or Confirm */
    struct rrpc__clc_decline decline;
  } u;
};

/* rrpc__clc_peek_header - validate the first 8 bytes of a CLC message.
 * Checks the eyecatcher ("SMCR", or "SMCD"), the type (1..4), the version
 * (>= 1) and the length against the type (v1 Proposal >= 52, v2 >= 84;
 * Accept/Confirm v1 == 68, v2 >= 108; Decline 28 or 44; all <=
 * RRPC_CLC_MAX_LEN), so a reader can then read exactly hdr->length bytes.
 * Returns 0; -EAGAIN when len < 8 and the bytes so far are a prefix of an
 * eyecatcher (read more); -RRPC_EPARSE when the bytes are not a CLC header
 * (a server then serves the connection as plain TCP). */
int rrpc__clc_peek_header(const uint8_t *buf, size_t len,
                          struct rrpc__clc_hdr *hdr);

/* rrpc__clc_decode - decode one whole CLC message of any type.
 * buf must hold at least the header's length bytes (extra bytes after the
 * message are ignored). Returns 0, -EAGAIN when len is shorter than the
 * message, or -RRPC_EPARSE. *out is fully written on success only. */
int rrpc__clc_decode(const uint8_t *buf, size_t len, struct rrpc__clc_msg *out);

/* Per-type decoders: as rrpc__clc_decode, and -RRPC_EPARSE when the message
 * is of another type. rrpc__clc_decode_accept takes Accept and Confirm. */
int rrpc__clc_decode_proposal(const uint8_t *buf, size_t len,
                              struct rrpc__clc_proposal *out);
int rrpc__clc_decode_accept(const uint8_t *buf, size_t len,
                            struct rrpc__clc_accept *out);
int rrpc__clc_decode_decline(const uint8_t *buf, size_t len,
                             struct rrpc__clc_decline *out);

/* Encoders: write the v1 SMC-R layout into buf (cap bytes) and set *out_len.
 * The hdr and v2-only fields of the input are ignored. Return 0, -ENOSPC when
 * cap is too small, -EINVAL for a field that does not fit its wire width
 * (qpn/psn > 24 bits, ring_code/mtu > 15, ipv6_count > 8, type not
 * Accept/Confirm). */
int rrpc__clc_encode_proposal(const struct rrpc__clc_proposal *p, uint8_t *buf,
                              size_t cap, size_t *out_len);
int rrpc__clc_encode_accept(const struct rrpc__clc_accept *a, uint8_t *buf,
                            size_t cap, size_t *out_len);
int rrpc__clc_encode_decline(const struct rrpc__clc_decline *d, uint8_t *buf,
                             size_t cap, size_t *out_len);

/* Version-2 encoders: the SMC-Rv2 layouts Linux 6.1 sends and requires from
 * a peer whose RoCE device has only RoCEv2 GIDs (docs/kernel-smc.md).
 *
 * rrpc__clc_encode_proposal_v2: header version 2, SMCv2 type R when
 * has_v2_ext (RoCEv2 GID, UEIDs, release/SEID flag, max_conns/max_links/
 * feature_mask), SMCv1 type R with the IP area when has_ip_area, else N; the
 * SMC-D area is zero apart from its v2-extension offset. -EINVAL when
 * neither area is wanted or a count is above its array (ism_gid_count must
 * be 0: no SMC-D).
 * rrpc__clc_encode_accept_v2 (Accept or Confirm by a->type): the v1 body at
 * the same offsets, the negotiated EID at 64; with first_contact the
 * first-contact extension (v2_direct, os_type, release, hostname), the 16
 * bytes after it (max_conns, max_links, feature_mask, vendor_options) and,
 * in a Confirm, the GID list (gid_count GIDs). 108 bytes without first
 * contact.
 * rrpc__clc_encode_decline_v2: 44 bytes, diag, os_type, diag_v2[4].
 * All three: 0, -ENOSPC when cap is too small, -EINVAL for a field wider
 * than its wire width; the hdr fields of the input are ignored. */
int rrpc__clc_encode_proposal_v2(const struct rrpc__clc_proposal *p,
                                 uint8_t *buf, size_t cap, size_t *out_len);
int rrpc__clc_encode_accept_v2(const struct rrpc__clc_accept *a, uint8_t *buf,
                               size_t cap, size_t *out_len);
int rrpc__clc_encode_decline_v2(const struct rrpc__clc_decline *d,
                                uint8_t *buf, size_t cap, size_t *out_len);

/* rrpc__clc_proposal_decline_code - server side: 0 if rrpc can answer this
 * Proposal with its v1 Accept, else the decline code to send: MODEUNSUPP for
 * an SMC-D-only offer, VERSMISMAT for a v2-only offer (typev1 N) or a peer
 * without RRPC_CLC_FEAT_WWI (a kernel SMC stack: rrpc does not speak the
 * kernel's SMC-R data path). */
uint32_t rrpc__clc_proposal_decline_code(const struct rrpc__clc_proposal *p);

/* rrpc__clc_accept_decline_code - 0 if an Accept (client side) or Confirm
 * (server side) from the peer is usable, else the decline code: VERSMISMAT
 * without RRPC_CLC_FEAT_WWI; CNFERR for an MTU outside 1..5, RMBE index 0,
 * QPN < 2, or a receive-WR depth not announced, below 4 or above 2^16. */
uint32_t rrpc__clc_accept_decline_code(const struct rrpc__clc_accept *a);

/* rrpc__clc_decline_text - short text for a decline code, for logs. Never
 * NULL; static storage; thread-safe. */
const char *rrpc__clc_decline_text(uint32_t code);

/* rrpc__clc_type_name - "PROPOSAL", "ACCEPT", ... or "UNKNOWN". */
const char *rrpc__clc_type_name(unsigned type);

/* Ring size code helpers. rrpc__clc_ring_size returns 16 KiB << code, or 0
 * for a code above 15. rrpc__clc_ring_code sets *code for a size that is
 * exactly 16 KiB << n (n <= 15) and returns 0, else -EINVAL. */
uint64_t rrpc__clc_ring_size(unsigned code);
int rrpc__clc_ring_code(uint64_t size, uint8_t *code);

/* rrpc__clc_mtu_bytes - bytes of an IB MTU enum (1..5), 0 otherwise. */
uint32_t rrpc__clc_mtu_bytes(unsigned mtu);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_SMC_CLC_H */
