/* transport/smc/clc.c - SMC-R CLC codec: decodes v1 and v2 messages as Linux sends
 * them, encodes rrpc's v1 messages. Pure byte work; no I/O, no allocation.
 * Offsets below are from the start of the message (see
 * docs/smc-r-wire-usage.md for the tables). */
#include "transport/smc/clc.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"
#include "transport/smc/clc_layout.h"

static const uint8_t eye_smcr[4] = {RRPC__CLC_EYE_SMCR};
static const uint8_t eye_smcd[4] = {0xe2, 0xd4, 0xc3, 0xc4};


static int eyecatcher_prefix_ok(const uint8_t *buf, size_t n) {
  if (n == 0) return 1;
  if (n > 4) n = 4;
  return memcmp(buf, eye_smcr, n) == 0 || memcmp(buf, eye_smcd, n) == 0;
}

static int length_ok(const struct rrpc__clc_hdr *h) {
  if (h->length > RRPC_CLC_MAX_LEN) return 0;
  switch (h->type) {
    case RRPC_CLC_PROPOSAL:
      return h->length >= (h->version == 1 ? RRPC_CLC_PROPOSAL_V1_LEN
                                           : RRPC_CLC_PROPOSAL_V2_MIN_LEN);
    case RRPC_CLC_ACCEPT:
    case RRPC_CLC_CONFIRM:
      if (h->version == 1) return h->length == RRPC_CLC_ACCEPT_V1_LEN;
      return h->length >= RRPC_CLC_ACCEPT_V2_MIN_LEN;
    case RRPC_CLC_DECLINE:
      return h->length == RRPC_CLC_DECLINE_V1_LEN ||
             h->length == RRPC_CLC_DECLINE_V2_LEN;
    default:
      return 0;
  }
}

int rrpc__clc_peek_header(const uint8_t *buf, size_t len,
                          struct rrpc__clc_hdr *hdr) {
  struct rrpc__clc_hdr h;
  if (!eyecatcher_prefix_ok(buf, len)) return -RRPC_EPARSE;
  if (len < RRPC_CLC_HDR_LEN) return -EAGAIN;
  memset(&h, 0, sizeof(h));
  h.smcd = buf[3] == eye_smcd[3];
  h.type = buf[4];
  h.length = rrpc__be16(buf + 5);
  h.version = buf[7] >> 4;
  h.flag = (buf[7] >> 3) & 1;
  h.typev1 = buf[7] & 3;
  /* Bits 3-2 are typev2 only in a v2 Proposal; elsewhere bit 3 is the flag
   * and bit 2 is reserved. */
  h.typev2 = (h.version >= 2 && h.type == RRPC_CLC_PROPOSAL)
                 ? (uint8_t)((buf[7] >> 2) & 3)
                 : 0;
  if (h.version == 0 || h.type < RRPC_CLC_PROPOSAL ||
      h.type > RRPC_CLC_DECLINE || !length_ok(&h))
    return -RRPC_EPARSE;
  memcpy(hdr, &h, sizeof(h)); /* padding too: decoded structs compare with memcmp */
  return 0;
}

/* Header + whole-message checks shared by every decoder. */
static int frame(const uint8_t *buf, size_t len, struct rrpc__clc_hdr *h) {
  int rc = rrpc__clc_peek_header(buf, len, h);
  if (rc != 0) return rc;
  if (len < h->length) return -EAGAIN;
  /* Linux does not check the trailer of a Decline, so neither do we. */
  if (h->type != RRPC_CLC_DECLINE &&
      memcmp(buf + h->length - RRPC_CLC_TRAILER_LEN, buf, 4) != 0)
    return -RRPC_EPARSE;
  return 0;
}

/* Reads the IP area at ip (already known to lie inside the message). */
static int read_ip_area(const uint8_t *buf, size_t ip, size_t end,
                        struct rrpc__clc_proposal *p, size_t *ip_end) {
  size_t i;
  if (ip + IPAREA_FIXED_LEN > end) return -RRPC_EPARSE;
  p->has_ip_area = 1;
  p->ipv4_subnet = rrpc__be32(buf + ip);
  p->ipv4_prefix_len = buf[ip + 4];
  p->rrpc_features = buf[ip + 5];
  p->rrpc_version = buf[ip + 6];
  p->ipv6_count = buf[ip + 7];
  if (p->ipv6_count > RRPC_CLC_MAX_IPV6_PREFIXES) return -RRPC_EPARSE;
  if (ip + IPAREA_FIXED_LEN + (size_t)p->ipv6_count * IPV6_PREFIX_LEN > end)
    return -RRPC_EPARSE;
  for (i = 0; i < p->ipv6_count; i++) {
    const uint8_t *e = buf + ip + IPAREA_FIXED_LEN + i * IPV6_PREFIX_LEN;
    memcpy(p->ipv6[i].prefix, e, 16);
    p->ipv6[i].len = e[16];
  }
  *ip_end = ip + IPAREA_FIXED_LEN + (size_t)p->ipv6_count * IPV6_PREFIX_LEN;
  return 0;
}

static int read_v2_ext(const uint8_t *buf, size_t ext, size_t end,
                       struct rrpc__clc_proposal *p) {
  size_t i;
  if (ext + V2_EXT_FIXED_LEN > end) return -RRPC_EPARSE;
  p->has_v2_ext = 1;
  p->eid_count = buf[ext];
  p->ism_gid_count = buf[ext + 1];
  p->v2_release = buf[ext + 3] >> 4;
  p->v2_seid = buf[ext + 3] & 1;
  memcpy(p->roce_v2_gid, buf + ext + 8, 16);
  p->max_conns = buf[ext + 24];
  p->max_links = buf[ext + 25];
  p->feature_mask = rrpc__be16(buf + ext + 26);
  if (p->eid_count > RRPC_CLC_MAX_EIDS || p->ism_gid_count > 8)
    return -RRPC_EPARSE;
  if (ext + V2_EXT_FIXED_LEN + (size_t)p->eid_count * RRPC_CLC_EID_LEN > end)
    return -RRPC_EPARSE;
  for (i = 0; i < p->eid_count; i++)
    memcpy(p->eids[i], buf + ext + V2_EXT_FIXED_LEN + i * RRPC_CLC_EID_LEN,
           RRPC_CLC_EID_LEN);
  /* The SMC-D v2 extension (system EID, ISM GIDs) may follow; rrpc has no
   * SMC-D, so it is only required to lie inside the message. */
  return 0;
}

static int decode_proposal(const uint8_t *buf, const struct rrpc__clc_hdr *h,
                           struct rrpc__clc_proposal *p) {
  /* end = first trailer byte: every area must end at or before it. */
  size_t end = (size_t)h->length - RRPC_CLC_TRAILER_LEN;
  size_t ip_end = 0;
  int rc;

  memset(p, 0, sizeof(*p));
  p->hdr = *h;
  memcpy(p->peer_id, buf + OFF_PEER_ID, 8);
  memcpy(p->gid, buf + OFF_GID, 16);
  memcpy(p->mac, buf + OFF_MAC, 6);
  p->iparea_offset = rrpc__be16(buf + OFF_IPAREA_OFFSET);

  if (h->version == 1) {
    /* v1: the path must offer something, and Linux checks the length
     * exactly: 40 + offset + 8 + 17 * prefixes + 4. */
    if (h->typev1 == RRPC_CLC_SMC_N) return -RRPC_EPARSE;
    rc = read_ip_area(buf, OFF_IPAREA_BASE + (size_t)p->iparea_offset, end, p,
                      &ip_end);
    if (rc != 0) return rc;
    if (ip_end != end) return -RRPC_EPARSE;
    return 0;
  }

  /* v2: header, local area and the 40-byte SMC-D area are always there;
   * the IP area only when v1 is also offered, the v2 extension only when
   * v2 is. */
  if (h->typev1 == RRPC_CLC_SMC_N && h->typev2 == RRPC_CLC_SMC_N)
    return -RRPC_EPARSE;
  if (h->typev1 != RRPC_CLC_SMC_N) {
    rc = read_ip_area(buf, OFF_IPAREA_BASE + (size_t)p->iparea_offset, end, p,
                      &ip_end);
    if (rc != 0) return rc;
  }
  if (h->typev2 != RRPC_CLC_SMC_N) {
    size_t ext = OFF_V2_EXT_BASE + (size_t)rrpc__be16(buf + OFF_V2_EXT_OFFSET);
    rc = read_v2_ext(buf, ext, end, p);
    if (rc != 0) return rc;
  }
  return 0;
}

static void read_gids(const uint8_t *buf, size_t at, struct rrpc__clc_accept *a) {
  size_t i;
  a->gid_count = buf[at];
  for (i = 0; i < a->gid_count; i++)
    memcpy(a->gids[i], buf + at + GLE_HDR_LEN + i * GID_LEN, GID_LEN);
}

static int decode_accept(const uint8_t *buf, const struct rrpc__clc_hdr *h,
                         struct rrpc__clc_accept *a) {
  size_t len = h->length;

  if (h->type != RRPC_CLC_ACCEPT && h->type != RRPC_CLC_CONFIRM)
    return -RRPC_EPARSE;
  /* Only SMC-R: an SMC-D Accept has another layout. */
  if (h->smcd || h->typev1 != RRPC_CLC_SMC_R) return -RRPC_EPARSE;

  memset(a, 0, sizeof(*a));
  a->hdr = *h;
  a->type = h->type;
  a->first_contact = h->flag;
  memcpy(a->peer_id, buf + OFF_PEER_ID, 8);
  memcpy(a->gid, buf + OFF_GID, 16);
  memcpy(a->mac, buf + OFF_MAC, 6);
  a->qpn = rrpc__be24(buf + OFF_QPN);
  a->rkey = rrpc__be32(buf + OFF_RKEY);
  a->rmbe_idx = buf[OFF_RMBE_IDX];
  a->token = rrpc__be32(buf + OFF_TOKEN);
  a->ring_code = buf[OFF_SIZE_MTU] >> 4;
  a->mtu = buf[OFF_SIZE_MTU] & 0x0f;
  a->rq_depth_log2 = buf[OFF_RQ_DEPTH];
  a->ring_addr = rrpc__be64(buf + OFF_RING_ADDR);
  a->rrpc_features = buf[OFF_FEATURES];
  a->psn = rrpc__be24(buf + OFF_PSN);
  if (h->version == 1) return 0; /* length is exactly 68 (peek checked) */

  memcpy(a->eid, buf + OFF_EID, RRPC_CLC_EID_LEN);
  if (!h->flag || len < OFF_FCE + FCE_LEN + RRPC_CLC_TRAILER_LEN) return 0;

  a->has_fce = 1;
  a->v2_direct = buf[OFF_FCE] >> 7;
  a->os_type = buf[OFF_FCE + 1] >> 4;
  a->release = buf[OFF_FCE + 1] & 0x0f;
  memcpy(a->hostname, buf + OFF_FCE + 4, RRPC_CLC_HOSTNAME_LEN);

  /* After the hostname: Linux 6.x sends 16 more first-contact bytes
   * (max conns/links, feature mask, vendor options); a Confirm then carries
   * its GID list (count, 3 reserved, 16 bytes per GID). Older kernels put the
   * list right after the hostname. The count must make the lengths add up
   * exactly; the newer layout wins when both would. */
  {
    size_t v2x = OFF_FCE + FCE_LEN;            /* 140 */
    size_t gle_new = v2x + FCE_V2X_LEN;        /* 156 */
    size_t tail = len - RRPC_CLC_TRAILER_LEN;  /* trailer offset */
    int new_gle = 0, old_gle = 0;
    if (h->type == RRPC_CLC_CONFIRM) {
      new_gle = tail >= gle_new + GLE_HDR_LEN &&
                gle_new + GLE_HDR_LEN + (size_t)buf[gle_new] * GID_LEN == tail;
      old_gle = !new_gle && tail >= v2x + GLE_HDR_LEN &&
                v2x + GLE_HDR_LEN + (size_t)buf[v2x] * GID_LEN == tail;
    }
    if (!old_gle && tail >= gle_new) {
      a->has_fce_v2x = 1;
      a->max_conns = buf[v2x];
      a->max_links = buf[v2x + 1];
      a->feature_mask = rrpc__be16(buf + v2x + 2);
      a->vendor_options = rrpc__be32(buf + v2x + 4);
    }
    if (new_gle || old_gle) {
      size_t at = new_gle ? gle_new : v2x;
      if (buf[at] > RRPC_CLC_MAX_GIDS) return -RRPC_EPARSE;
      read_gids(buf, at, a);
    }
  }
  return 0;
}

static int decode_decline(const uint8_t *buf, const struct rrpc__clc_hdr *h,
                          struct rrpc__clc_decline *d) {
  int i;
  if (h->type != RRPC_CLC_DECLINE) return -RRPC_EPARSE;
  memset(d, 0, sizeof(*d));
  d->hdr = *h;
  memcpy(d->peer_id, buf + OFF_PEER_ID, 8);
  d->diag = rrpc__be32(buf + OFF_DIAG);
  d->out_of_sync = h->flag;
  d->os_type = buf[OFF_OS_TYPE] >> 4;
  if (h->length == RRPC_CLC_DECLINE_V2_LEN)
    for (i = 0; i < 4; i++) d->diag_v2[i] = rrpc__be32(buf + OFF_DIAG_V2 + 4 * i);
  return 0;
}

int rrpc__clc_decode(const uint8_t *buf, size_t len, struct rrpc__clc_msg *out) {
  struct rrpc__clc_hdr h;
  int rc = frame(buf, len, &h);
  if (rc != 0) return rc;
  switch (h.type) {
    case RRPC_CLC_PROPOSAL:
      rc = decode_proposal(buf, &h, &out->u.proposal);
      break;
    case RRPC_CLC_ACCEPT:
    case RRPC_CLC_CONFIRM:
      rc = decode_accept(buf, &h, &out->u.accept);
      break;
    default: /* peek admits types 1..4 only */
      rc = decode_decline(buf, &h, &out->u.decline);
      break;
  }
  if (rc == 0) out->hdr = h;
  return rc;
}

int rrpc__clc_decode_proposal(const uint8_t *buf, size_t len,
                              struct rrpc__clc_proposal *out) {
  struct rrpc__clc_hdr h;
  int rc = frame(buf, len, &h);
  if (rc != 0) return rc;
  if (h.type != RRPC_CLC_PROPOSAL) return -RRPC_EPARSE;
  return decode_proposal(buf, &h, out);
}

int rrpc__clc_decode_accept(const uint8_t *buf, size_t len,
                            struct rrpc__clc_accept *out) {
  struct rrpc__clc_hdr h;
  int rc = frame(buf, len, &h);
  if (rc != 0) return rc;
  return decode_accept(buf, &h, out);
}

int rrpc__clc_decode_decline(const uint8_t *buf, size_t len,
                             struct rrpc__clc_decline *out) {
  struct rrpc__clc_hdr h;
  int rc = frame(buf, len, &h);
  if (rc != 0) return rc;
  return decode_decline(buf, &h, out);
}

/* ---- encoders (v1 SMC-R) ------------------------------------------------ */

static void put_frame(uint8_t *buf, uint8_t type, size_t len, uint8_t byte7) {
  memcpy(buf, eye_smcr, 4);
  buf[4] = type;
  rrpc__put_be16(buf + 5, (uint16_t)len);
  buf[7] = byte7;
  memcpy(buf + len - RRPC_CLC_TRAILER_LEN, eye_smcr, 4);
}

int rrpc__clc_encode_proposal(const struct rrpc__clc_proposal *p, uint8_t *buf,
                              size_t cap, size_t *out_len) {
  size_t len, i;
  uint8_t *ip = buf + OFF_IPAREA_BASE + RRPC_CLC_PROPOSAL_SMCD_AREA_LEN;
  if (p->ipv6_count > RRPC_CLC_MAX_IPV6_PREFIXES) return -EINVAL;
  len = RRPC_CLC_PROPOSAL_RRPC_LEN + (size_t)p->ipv6_count * IPV6_PREFIX_LEN;
  if (cap < len) return -ENOSPC;
  memset(buf, 0, len);
  put_frame(buf, RRPC_CLC_PROPOSAL, len, 0x10 | RRPC_CLC_SMC_R);
  memcpy(buf + OFF_PEER_ID, p->peer_id, 8);
  memcpy(buf + OFF_GID, p->gid, 16);
  memcpy(buf + OFF_MAC, p->mac, 6);
  /* The SMC-D area (ISM GID, CHID, v2-extension offset, reserved) stays
   * zero; the IP area follows it. */
  rrpc__put_be16(buf + OFF_IPAREA_OFFSET, RRPC_CLC_PROPOSAL_SMCD_AREA_LEN);
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
  *out_len = len;
  return 0;
}

int rrpc__clc_encode_accept(const struct rrpc__clc_accept *a, uint8_t *buf,
                            size_t cap, size_t *out_len) {
  if (a->type != RRPC_CLC_ACCEPT && a->type != RRPC_CLC_CONFIRM) return -EINVAL;
  if (a->qpn > 0xffffff || a->psn > 0xffffff || a->ring_code > 15 ||
      a->mtu > 15)
    return -EINVAL;
  if (cap < RRPC_CLC_ACCEPT_V1_LEN) return -ENOSPC;
  memset(buf, 0, RRPC_CLC_ACCEPT_V1_LEN);
  put_frame(buf, a->type, RRPC_CLC_ACCEPT_V1_LEN,
            (uint8_t)(0x10 | (a->first_contact ? 0x08 : 0) | RRPC_CLC_SMC_R));
  memcpy(buf + OFF_PEER_ID, a->peer_id, 8);
  memcpy(buf + OFF_GID, a->gid, 16);
  memcpy(buf + OFF_MAC, a->mac, 6);
  rrpc__put_be24(buf + OFF_QPN, a->qpn);
  rrpc__put_be32(buf + OFF_RKEY, a->rkey);
  buf[OFF_RMBE_IDX] = a->rmbe_idx;
  rrpc__put_be32(buf + OFF_TOKEN, a->token);
  buf[OFF_SIZE_MTU] = (uint8_t)(a->ring_code << 4 | a->mtu);
  buf[OFF_RQ_DEPTH] = a->rq_depth_log2;
  rrpc__put_be64(buf + OFF_RING_ADDR, a->ring_addr);
  buf[OFF_FEATURES] = a->rrpc_features;
  rrpc__put_be24(buf + OFF_PSN, a->psn);
  *out_len = RRPC_CLC_ACCEPT_V1_LEN;
  return 0;
}

int rrpc__clc_encode_decline(const struct rrpc__clc_decline *d, uint8_t *buf,
                             size_t cap, size_t *out_len) {
  if (cap < RRPC_CLC_DECLINE_V1_LEN) return -ENOSPC;
  memset(buf, 0, RRPC_CLC_DECLINE_V1_LEN);
  put_frame(buf, RRPC_CLC_DECLINE, RRPC_CLC_DECLINE_V1_LEN,
            (uint8_t)(0x10 | (d->out_of_sync ? 0x08 : 0)));
  memcpy(buf + OFF_PEER_ID, d->peer_id, 8);
  rrpc__put_be32(buf + OFF_DIAG, d->diag);
  *out_len = RRPC_CLC_DECLINE_V1_LEN;
  return 0;
}

/* ---- policy helpers ----------------------------------------------------- */

uint32_t rrpc__clc_proposal_decline_code(const struct rrpc__clc_proposal *p) {
  uint8_t t1 = p->hdr.typev1;
  /* rrpc answers with a v1 SMC-R Accept, which a Linux client takes only
   * when its Proposal offered SMC-R in the v1 area. */
  if (p->hdr.version >= 2 && t1 == RRPC_CLC_SMC_N)
    return RRPC_CLC_DECL_VERSMISMAT;
  if (t1 != RRPC_CLC_SMC_R && t1 != RRPC_CLC_SMC_B)
    return RRPC_CLC_DECL_MODEUNSUPP;
  if (!p->has_ip_area) return RRPC_CLC_DECL_CNFERR;
  /* A kernel SMC stack leaves the reserved bytes zero: rrpc does not speak
   * the kernel's WRITE + CDC data path yet. */
  if (!(p->rrpc_features & RRPC_CLC_FEAT_WWI) || p->rrpc_version == 0)
    return RRPC_CLC_DECL_VERSMISMAT;
  return 0;
}

uint32_t rrpc__clc_accept_decline_code(const struct rrpc__clc_accept *a) {
  if (!(a->rrpc_features & RRPC_CLC_FEAT_WWI)) return RRPC_CLC_DECL_VERSMISMAT;
  /* QPNs 0 and 1 are IB's special QPs, never a connection's; an iWARP
   * device numbers its QPs from 1, and rdma_cm (RRPC_CLC_FEAT_CM) connects
   * without the announced number anyway. */
  int qpn_bad = a->qpn < 2 && !(a->rrpc_features & RRPC_CLC_FEAT_CM);
  if (rrpc__clc_mtu_bytes(a->mtu) == 0 || a->rmbe_idx == 0 || qpn_bad ||
      a->rq_depth_log2 < RRPC_CLC_RQ_DEPTH_LOG2_MIN ||
      a->rq_depth_log2 > RRPC_CLC_RQ_DEPTH_LOG2_MAX)
    return RRPC_CLC_DECL_CNFERR;
  return 0;
}

const char *rrpc__clc_decline_text(uint32_t code) {
  switch (code) {
    case RRPC_CLC_DECL_MEM: return "insufficient memory";
    case RRPC_CLC_DECL_TIMEOUT_CL: return "timeout waiting for CONFIRM";
    case RRPC_CLC_DECL_TIMEOUT_AL: return "timeout waiting for ADD LINK";
    case RRPC_CLC_DECL_CNFERR: return "configuration error";
    case RRPC_CLC_DECL_PEERNOSMC: return "peer did not indicate SMC";
    case RRPC_CLC_DECL_IPSEC: return "IPsec in use";
    case RRPC_CLC_DECL_NOSMCDEV: return "no SMC device";
    case RRPC_CLC_DECL_NOSMCDDEV: return "no SMC-D device";
    case RRPC_CLC_DECL_NOSMCRDEV: return "no SMC-R device";
    case RRPC_CLC_DECL_NOISM2SUPP: return "no ISMv2 support";
    case RRPC_CLC_DECL_NOV2EXT: return "peer sent no CLC v2 extension";
    case RRPC_CLC_DECL_NOV2DEXT: return "peer sent no SMC-Dv2 extension";
    case RRPC_CLC_DECL_NOSEID: return "peer sent no system EID";
    case RRPC_CLC_DECL_NOSMCD2DEV: return "no SMC-Dv2 device";
    case RRPC_CLC_DECL_NOUEID: return "no user EID in common";
    case RRPC_CLC_DECL_OPTUNSUPP: return "socket option (fastopen) not supported";
    case RRPC_CLC_DECL_GETVLANERR: return "cannot get the VLAN id";
    case RRPC_CLC_DECL_ISMVLANERR: return "cannot register the VLAN id";
    case RRPC_CLC_DECL_NOACTLINK: return "no active link in the link group";
    case RRPC_CLC_DECL_MAX_DMB: return "SMC-D DMB limit reached";
    case RRPC_CLC_DECL_NOROUTE: return "SMC-Rv2: no route to the peer";
    case RRPC_CLC_DECL_NOINDIRECT: return "SMC-Rv2: direct/indirect mismatch";
    case RRPC_CLC_DECL_MODEUNSUPP: return "SMC modes do not match (R/D)";
    case RRPC_CLC_DECL_RMBE_EC: return "peer requires an RMBE eyecatcher";
    case RRPC_CLC_DECL_DIFFPREFIX: return "IP prefix mismatch";
    case RRPC_CLC_DECL_NOSRVLINK: return "server's link not found";
    case RRPC_CLC_DECL_VERSMISMAT:
      return "version mismatch (peer is not an rrpc write-with-immediate "
             "stack, or offered only SMC v2)";
    case RRPC_CLC_DECL_SYNCERR: return "synchronization error";
    case RRPC_CLC_DECL_PEERDECL: return "peer declined";
    default: break;
  }
  switch (code >> 24) {
    case 0x01: return "insufficient resources";
    case 0x02: return "timeout";
    case 0x03: return "configuration or negotiation failure";
    case 0x04: return "synchronization error";
    case 0x05: return "peer declined";
    case 0x09: return "internal error";
    default: return "unknown decline code";
  }
}

const char *rrpc__clc_type_name(unsigned type) {
  switch (type) {
    case RRPC_CLC_PROPOSAL: return "PROPOSAL";
    case RRPC_CLC_ACCEPT: return "ACCEPT";
    case RRPC_CLC_CONFIRM: return "CONFIRM";
    case RRPC_CLC_DECLINE: return "DECLINE";
    default: return "UNKNOWN";
  }
}

uint64_t rrpc__clc_ring_size(unsigned code) {
  if (code > RRPC_CLC_RING_CODE_MAX) return 0;
  return (uint64_t)RRPC_CLC_RING_MIN << code;
}

int rrpc__clc_ring_code(uint64_t size, uint8_t *code) {
  unsigned n;
  for (n = 0; n <= RRPC_CLC_RING_CODE_MAX; n++) {
    if (rrpc__clc_ring_size(n) == size) {
      *code = (uint8_t)n;
      return 0;
    }
  }
  return -EINVAL;
}

uint32_t rrpc__clc_mtu_bytes(unsigned mtu) {
  if (mtu < 1 || mtu > 5) return 0;
  return 128u << mtu;
}
