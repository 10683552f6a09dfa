/* transport/smc/clc_v2.c - the SMC-Rv2 CLC encoders (clc.h): Proposal,
 * Accept/Confirm and Decline in the version-2 layouts Linux 6.1 sends, which a
 * kernel peer on a RoCEv2-only device (rxe) requires. The decoders for both
 * versions live in clc.c. Pure byte work; no I/O, no allocation. */
#include "transport/smc/clc.h"

#include <errno.h>
#include <string.h>

#include "transport/smc/bytes.h"
#include "transport/smc/clc_layout.h"

static const uint8_t eye_smcr[4] = {RRPC__CLC_EYE_SMCR};

enum {
  VERSION2 = 0x20,     /* byte 7: version 2 in the high nibble */
  HDR_FLAG = 0x08,      /* byte 7 bit 3: first contact (Accept/Confirm), out of sync (Decline) */
  OFF_SMCD_AREA = 40,   /* the SMC-D area follows the fixed Proposal part */
  OFF_EID_RSVD = 96,    /* 8 reserved bytes between the EID and the FCE */
};

static void put_frame(uint8_t *buf, uint8_t type, size_t len, uint8_t byte7) {
  memcpy(buf, eye_smcr, 4);
  buf[4] = type;
  rrpc__put_be16(buf + 5, (uint16_t)len);
  buf[7] = byte7;
  memcpy(buf + len - RRPC_CLC_TRAILER_LEN, eye_smcr, 4);
}

/* ---- Proposal ------------------------------------------------------------ */

static size_t ip_area_len(const struct rrpc__clc_proposal *p) {
  return p->has_ip_area ? IPAREA_FIXED_LEN + (size_t)p->ipv6_count * IPV6_PREFIX_LEN : 0;
}

static void put_ip_area(const struct rrpc__clc_proposal *p, uint8_t *ip) {
  size_t i;
  rrpc__put_be32(ip, p->ipv4_subnet);
  ip[4] = p->ipv4_prefix_len;
  ip[5] = p->rrpc_features;
  ip[6] = p->rrpc_version;
  ip[7] = p->ipv6_count;
  for (i = 0; i < p->ipv6_count; i++) {
    uint8_t *e = ip + IPAREA_FIXED_LEN + i * IPV6_PREFIX_LEN;
    memcpy(e, p->ipv6[i].prefix, 16);
    e[16] = p->ipv6[i].len;
  }
}

static void put_v2_ext(const struct rrpc__clc_proposal *p, uint8_t *ext) {
  size_t i;
  ext[V2EXT_EID_CNT] = p->eid_count;
  ext[V2EXT_GID_CNT] = 0;
  ext[V2EXT_FLAG] = (uint8_t)(p->v2_release << 4 | (p->v2_seid & 1));
  memcpy(ext + V2EXT_ROCE_GID, p->roce_v2_gid, 16);
  ext[V2EXT_MAX_CONNS] = p->max_conns;
  ext[V2EXT_MAX_LINKS] = p->max_links;
  rrpc__put_be16(ext + V2EXT_FEATURE_MASK, p->feature_mask);
  for (i = 0; i < p->eid_count; i++)
    memcpy(ext + V2_EXT_FIXED_LEN + i * RRPC_CLC_EID_LEN, p->eids[i], RRPC_CLC_EID_LEN);
}

int rrpc__clc_encode_proposal_v2(const struct rrpc__clc_proposal *p, uint8_t *buf,
                                 size_t cap, size_t *out_len) {
  size_t ip_len, ext_at, len;
  uint8_t byte7;
  if (!p->has_ip_area && !p->has_v2_ext) return -EINVAL;
  if (p->ipv6_count > RRPC_CLC_MAX_IPV6_PREFIXES || p->eid_count > RRPC_CLC_MAX_EIDS ||
      p->ism_gid_count != 0 || p->v2_release > 15)
    return -EINVAL;
  ip_len = ip_area_len(p);
  /* Layout: fixed part, SMC-D area, IP area (if any), v2 extension (if any). */
  ext_at = OFF_SMCD_AREA + RRPC_CLC_PROPOSAL_SMCD_AREA_LEN + ip_len;
  len = ext_at + RRPC_CLC_TRAILER_LEN;
  if (p->has_v2_ext) len += V2_EXT_FIXED_LEN + (size_t)p->eid_count * RRPC_CLC_EID_LEN;
  if (len > RRPC_CLC_MAX_LEN) return -EINVAL;
  if (cap < len) return -ENOSPC;
  memset(buf, 0, len);
  byte7 = (uint8_t)(VERSION2 | (p->has_v2_ext ? RRPC_CLC_SMC_R : RRPC_CLC_SMC_N) << 2 |
                    (p->has_ip_area ? RRPC_CLC_SMC_R : RRPC_CLC_SMC_N));
  put_frame(buf, RRPC_CLC_PROPOSAL, len, byte7);
  memcpy(buf + OFF_PEER_ID, p->peer_id, 8);
  memcpy(buf + OFF_GID, p->gid, 16);
  memcpy(buf + OFF_MAC, p->mac, 6);
  if (p->has_ip_area) {
    /* The IP area sits after the SMC-D area: its offset is that area's size. */
    rrpc__put_be16(buf + OFF_IPAREA_OFFSET, RRPC_CLC_PROPOSAL_SMCD_AREA_LEN);
    put_ip_area(p, buf + OFF_IPAREA_BASE + RRPC_CLC_PROPOSAL_SMCD_AREA_LEN);
  }
  if (p->has_v2_ext) {
    rrpc__put_be16(buf + OFF_V2_EXT_OFFSET, (uint16_t)(ext_at - OFF_V2_EXT_BASE));
    put_v2_ext(p, buf + ext_at);
  }
  *out_len = len;
  return 0;
}

/* ---- Accept / Confirm ---------------------------------------------------- */

static size_t accept_v2_len(const struct rrpc__clc_accept *a) {
  size_t len = OFF_FCE + RRPC_CLC_TRAILER_LEN; /* 108 */
  if (!a->first_contact) return len;
  len += FCE_LEN + FCE_V2X_LEN;
  if (a->type == RRPC_CLC_CONFIRM) len += GLE_HDR_LEN + (size_t)a->gid_count * GID_LEN;
  return len;
}

static void put_fce(const struct rrpc__clc_accept *a, uint8_t *buf) {
  uint8_t *fce = buf + OFF_FCE, *v2x = fce + FCE_LEN;
  size_t i;
  fce[0] = (uint8_t)(a->v2_direct ? 0x80 : 0);
  fce[1] = (uint8_t)(a->os_type << 4 | a->release);
  memcpy(fce + 4, a->hostname, RRPC_CLC_HOSTNAME_LEN);
  v2x[0] = a->max_conns;
  v2x[1] = a->max_links;
  rrpc__put_be16(v2x + 2, a->feature_mask);
  rrpc__put_be32(v2x + 4, a->vendor_options);
  if (a->type != RRPC_CLC_CONFIRM) return;
  uint8_t *gle = v2x + FCE_V2X_LEN;
  gle[0] = a->gid_count;
  for (i = 0; i < a->gid_count; i++)
    memcpy(gle + GLE_HDR_LEN + i * GID_LEN, a->gids[i], GID_LEN);
}

int rrpc__clc_encode_accept_v2(const struct rrpc__clc_accept *a, uint8_t *buf,
                               size_t cap, size_t *out_len) {
  uint8_t v1[RRPC_CLC_ACCEPT_V1_LEN];
  size_t v1_len, len;
  /* The v1 encoder writes (and checks) the common body at the same offsets. */
  int rc = rrpc__clc_encode_accept(a, v1, sizeof(v1), &v1_len);
  if (rc == -ENOSPC) return -EINVAL; /* cannot happen: v1 is exactly its size */
  if (rc != 0) return rc;
  if (a->os_type > 15 || a->release > 15 || a->gid_count > RRPC_CLC_MAX_GIDS) return -EINVAL;
  len = accept_v2_len(a);
  if (cap < len) return -ENOSPC;
  memset(buf, 0, len);
  memcpy(buf, v1, OFF_EID);
  put_frame(buf, a->type, len, (uint8_t)(VERSION2 | (a->first_contact ? HDR_FLAG : 0) |
                                         RRPC_CLC_SMC_R));
  memcpy(buf + OFF_EID, a->eid, RRPC_CLC_EID_LEN);
  if (a->first_contact) put_fce(a, buf);
  *out_len = len;
  return 0;
}

/* ---- Decline ------------------------------------------------------------- */

int rrpc__clc_encode_decline_v2(const struct rrpc__clc_decline *d, uint8_t *buf,
                                size_t cap, size_t *out_len) {
  int i;
  if (d->os_type > 15) return -EINVAL;
  if (cap < RRPC_CLC_DECLINE_V2_LEN) return -ENOSPC;
  memset(buf, 0, RRPC_CLC_DECLINE_V2_LEN);
  put_frame(buf, RRPC_CLC_DECLINE, RRPC_CLC_DECLINE_V2_LEN,
            (uint8_t)(VERSION2 | (d->out_of_sync ? HDR_FLAG : 0)));
  memcpy(buf + OFF_PEER_ID, d->peer_id, 8);
  rrpc__put_be32(buf + OFF_DIAG, d->diag);
  buf[OFF_OS_TYPE] = (uint8_t)(d->os_type << 4);
  for (i = 0; i < 4; i++) rrpc__put_be32(buf + OFF_DIAG_V2 + 4 * i, d->diag_v2[i]);
  *out_len = RRPC_CLC_DECLINE_V2_LEN;
  return 0;
}
