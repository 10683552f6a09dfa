/* transport/smc/clc_layout.h - private to the CLC codec files (clc.c, clc_v2.c):
 * byte offsets of the CLC messages, from the start of a message (the tables are
 * in docs/smc-r-wire-usage.md and docs/kernel-smc.md). */
#ifndef RRPC_TRANSPORT_SMC_CLC_LAYOUT_H
#define RRPC_TRANSPORT_SMC_CLC_LAYOUT_H

/* "SMCR" in EBCDIC: the eyecatcher and trailer of every SMC-R message. */
#define RRPC__CLC_EYE_SMCR 0xe2, 0xd4, 0xc3, 0xd9

/* Fixed offsets shared by several messages. */
enum rrpc__clc_layout {
  OFF_PEER_ID = 8,
  OFF_GID = 16,
  OFF_MAC = 32,
  /* Proposal */
  OFF_IPAREA_OFFSET = 38,
  OFF_IPAREA_BASE = 40,   /* the IP area starts at 40 + iparea_offset */
  OFF_V2_EXT_OFFSET = 50, /* in the SMC-D area of a v2 Proposal */
  OFF_V2_EXT_BASE = 52,   /* the v2 extension starts at 52 + that offset */
  IPAREA_FIXED_LEN = 8,
  IPV6_PREFIX_LEN = 17,
  V2_EXT_FIXED_LEN = 40,
  /* inside the v2 extension */
  V2EXT_EID_CNT = 0,
  V2EXT_GID_CNT = 1,
  V2EXT_FLAG = 3, /* release << 4 | seid */
  V2EXT_ROCE_GID = 8,
  V2EXT_MAX_CONNS = 24,
  V2EXT_MAX_LINKS = 25,
  V2EXT_FEATURE_MASK = 26,
  /* Accept / Confirm */
  OFF_QPN = 38,
  OFF_RKEY = 41,
  OFF_RMBE_IDX = 45,
  OFF_TOKEN = 46,
  OFF_SIZE_MTU = 50,
  OFF_RQ_DEPTH = 51, /* reserved in SMC-R; rrpc: log2 receive-WR depth */
  OFF_RING_ADDR = 52,
  OFF_FEATURES = 60, /* reserved in SMC-R; rrpc: feature flags */
  OFF_PSN = 61,
  OFF_EID = 64,     /* v2 */
  OFF_FCE = 104,    /* v2 first-contact extension */
  FCE_LEN = 36,     /* flags(1) os/release(1) reserved(2) hostname(32) */
  FCE_V2X_LEN = 16, /* max_conns max_links feature_mask vendor(4) rsvd(8) */
  GLE_HDR_LEN = 4,  /* gid count + 3 reserved */
  GID_LEN = 16,
  /* Decline */
  OFF_DIAG = 16,
  OFF_OS_TYPE = 20,
  OFF_DIAG_V2 = 24,
};

#endif /* RRPC_TRANSPORT_SMC_CLC_LAYOUT_H */
