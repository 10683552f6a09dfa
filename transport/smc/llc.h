/* transport/smc/llc.h - the SMC-R link layer control (LLC) messages as pure
 * functions over bytes: the control protocol a Linux SMC-R peer runs on the
 * link's QP (SEND messages next to the CDCs) - CONFIRM_LINK, ADD_LINK (and
 * its continuation and the v2 request), DELETE_LINK, CONFIRM_RKEY,
 * DELETE_RKEY, TEST_LINK - in the version-1 layouts (44 bytes) and the
 * version-2 ones Linux 6.1 sends on SMC-Rv2 links (type 0x20 | t, a 16-bit
 * length in the sender's byte order: little-endian from x86; bodies big-
 * endian). It owns the layouts only; which message to send when is the
 * link's business (docs/kernel-smc.md lists what rrpc answers).
 *
 * Pure: thread-safe, non-blocking, no allocation; decoded structs are plain
 * copies. The decoder treats its input as hostile: it reads inside
 * [buf, buf + len) and inside the message's length, and returns
 * -RRPC_EPARSE for anything outside the layouts. Reserved bytes are not
 * checked (Linux does not check them either); an encoder writes them zero,
 * which is what Linux sends, so a Linux message re-encodes byte-exact. */
#ifndef RRPC_TRANSPORT_SMC_LLC_H
#define RRPC_TRANSPORT_SMC_LLC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum rrpc__llc_type {
  RRPC_LLC_CONFIRM_LINK = 0x01,
  RRPC_LLC_ADD_LINK = 0x02,
  RRPC_LLC_ADD_LINK_CONT = 0x03, /* v1 only */
  RRPC_LLC_DELETE_LINK = 0x04,
  RRPC_LLC_REQ_ADD_LINK = 0x05, /* v2 only */
  RRPC_LLC_CONFIRM_RKEY = 0x06,
  RRPC_LLC_TEST_LINK = 0x07,
  RRPC_LLC_DELETE_RKEY = 0x09,
};

enum {
  RRPC_LLC_LEN = 44,          /* every v1 message; the v2 minimum */
  RRPC_LLC_V2_MAX_LEN = 8192, /* Linux's v2 receive buffer */
  RRPC_LLC_V2_BIT = 0x20,     /* byte 0 = 0x20 | type in v2 */
  RRPC_LLC_GID_LEN = 16,
  RRPC_LLC_LGR_ID_LEN = 4,
  RRPC_LLC_CONFIRM_RKEY_TOKENS = 3, /* rtokens in a 44-byte CONFIRM_RKEY */
  RRPC_LLC_DELETE_RKEY_V1_MAX = 8,
  RRPC_LLC_MAX_RKEYS = 255, /* v2 DELETE_RKEY / ADD_LINK rkey lists */
  RRPC_LLC_MAX_GIDS = 8,    /* v2 REQ_ADD_LINK GID list entries kept */
  RRPC_LLC_ADD_LINK_V2_EXT_LEN = 28, /* v2 ADD_LINK extension before rkeys */
  RRPC_LLC_ADD_LINK_RT_LEN = 16,     /* one rkey/new rkey/new address */
};

/* Header flags (byte 3). */
enum {
  RRPC_LLC_FLAG_RESP = 0x80,
  RRPC_LLC_FLAG_ADD_LINK_REJ = 0x40,    /* ADD_LINK response: rejected */
  RRPC_LLC_FLAG_DEL_LINK_ALL = 0x40,    /* DELETE_LINK: every link */
  RRPC_LLC_FLAG_DEL_LINK_ORDERLY = 0x20,
  RRPC_LLC_FLAG_RKEY_NEG = 0x20,        /* DELETE_RKEY response: some failed */
  RRPC_LLC_FLAG_RKEY_RETRY = 0x10,
  RRPC_LLC_FLAG_NO_RMBE_EYEC = 0x03,    /* CONFIRM_LINK: no RMBE eyecatcher */
};

/* ADD_LINK reject reason (v1: low nibble of byte 2). */
enum { RRPC_LLC_REJ_NO_ALT_PATH = 1 };

/* DELETE_LINK reasons Linux sends. */
enum {
  RRPC_LLC_DEL_LOST_PATH = 0x00010000,
  RRPC_LLC_DEL_OP_INIT_TERM = 0x00020000,
  RRPC_LLC_DEL_PROG_INIT_TERM = 0x00030000,
  RRPC_LLC_DEL_PROT_VIOL = 0x00040000,
  RRPC_LLC_DEL_NO_ASYM_NEEDED = 0x00050000,
};

struct rrpc__llc_rtoken {
  uint8_t link_id; /* rtoken[0] of CONFIRM_RKEY: the count of further ones */
  uint32_t rkey;
  uint64_t vaddr;
};

struct rrpc__llc_add_link_rt {
  uint32_t rkey;
  uint32_t rkey_new;
  uint64_t vaddr_new;
};

struct rrpc__llc_confirm_link {
  uint8_t mac[6];
  uint8_t gid[RRPC_LLC_GID_LEN];
  uint32_t qpn; /* 24 bits */
  uint8_t link_num;
  uint8_t link_uid[RRPC_LLC_LGR_ID_LEN];
  uint8_t max_links;
};

struct rrpc__llc_add_link {
  uint8_t mac[6];
  uint8_t gid[RRPC_LLC_GID_LEN];
  uint32_t qpn; /* 24 bits */
  uint8_t link_num;
  uint8_t mtu; /* 4 bits, IB enum */
  uint32_t psn; /* 24 bits */
  uint8_t rej_rsn; /* v1 only: low nibble of byte 2 (v2 has none on the wire) */
  /* v2 extension: present in a v2 message longer than 44 bytes. */
  uint8_t has_v2_ext;
  uint8_t v2_direct;
  uint8_t client_target_gid[RRPC_LLC_GID_LEN];
  uint16_t num_rkeys; /* <= RRPC_LLC_MAX_RKEYS */
  struct rrpc__llc_add_link_rt rt[RRPC_LLC_MAX_RKEYS];
};

struct rrpc__llc_add_link_cont {
  uint8_t link_num;
  uint8_t num_rkeys; /* rkeys still to come, Linux: up to 2 in this one */
  struct rrpc__llc_add_link_rt rt[2];
};

struct rrpc__llc_req_add_link {
  uint8_t gid_count; /* <= RRPC_LLC_MAX_GIDS */
  uint8_t gids[RRPC_LLC_MAX_GIDS][RRPC_LLC_GID_LEN];
};

struct rrpc__llc_delete_link {
  uint8_t link_num;
  uint32_t reason;
};

struct rrpc__llc_confirm_rkey {
  struct rrpc__llc_rtoken rtoken[RRPC_LLC_CONFIRM_RKEY_TOKENS];
};

struct rrpc__llc_delete_rkey {
  uint8_t num_rkeys;
  uint8_t err_mask;        /* v1: failed-rkey bits; v2: num_inval_rkeys */
  uint16_t rkey_count;     /* entries in rkey[]: v1 always 8, v2 num_rkeys */
  uint32_t rkey[RRPC_LLC_MAX_RKEYS];
};

struct rrpc__llc_test_link {
  uint8_t user_data[16];
};

struct rrpc__llc_msg {
  uint8_t type;    /* enum rrpc__llc_type (without the v2 bit) */
  uint8_t version; /* 1 or 2 */
  uint16_t length; /* whole message */
  uint8_t flags;   /* byte 3 */
  union {
    struct rrpc__llc_confirm_link confirm_link;
    struct rrpc__llc_add_link add_link;
    struct rrpc__llc_add_link_cont add_link_cont;
    struct rrpc__llc_req_add_link req_add_link;
    struct rrpc__llc_delete_link delete_link;
    struct rrpc__llc_confirm_rkey confirm_rkey;
    struct rrpc__llc_delete_rkey delete_rkey;
    struct rrpc__llc_test_link test_link;
  } u;
};

/* rrpc__llc_is_llc - 1 if the first byte names an LLC message (of either
 * version), 0 otherwise (a CDC is 0xFE). */
int rrpc__llc_is_llc(uint8_t first_byte);

/* rrpc__llc_decode - decode one LLC message from a received SEND's bytes
 * (len: the bytes received). Returns 0, or -RRPC_EPARSE for an unknown type,
 * a length that does not match the type, or counts that do not fit the
 * message. *out is fully written on success only. */
int rrpc__llc_decode(const uint8_t *buf, size_t len, struct rrpc__llc_msg *out);

/* rrpc__llc_encode - write m (type, version, flags and the type's fields;
 * m->length is ignored and computed) into buf (cap bytes); *out_len = the
 * message's length. Returns 0, -ENOSPC when cap is too small, -EINVAL for a
 * field wider than its wire width, a count above its array, or a type the
 * version does not have (ADD_LINK_CONT is v1, REQ_ADD_LINK v2). */
int rrpc__llc_encode(const struct rrpc__llc_msg *m, uint8_t *buf, size_t cap,
                     size_t *out_len);

/* rrpc__llc_type_name - "CONFIRM_LINK", ... or "UNKNOWN". */
const char *rrpc__llc_type_name(unsigned type);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_SMC_LLC_H */
