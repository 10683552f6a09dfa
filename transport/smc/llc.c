/* transport/smc/llc.c - SMC-R LLC codec, v1 and v2 layouts as Linux 6.1 sends
 * them (offsets below are from the start of the message; the tables are in
 * docs/kernel-smc.md). Pure byte work; no I/O, no allocation. */
#include "transport/smc/llc.h"

#include <errno.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/bytes.h"

enum {
  OFF_TYPE = 0,
  OFF_LEN = 1,     /* v1: one byte; v2: two, the sender's byte order */
  OFF_REJ_RSN = 2, /* v1 ADD_LINK: low nibble */
  OFF_FLAGS = 3,
  OFF_BODY = 4,
  /* CONFIRM_LINK */
  CL_MAC = 4, CL_GID = 10, CL_QPN = 26, CL_LINK_NUM = 29, CL_UID = 30,
  CL_MAX_LINKS = 34,
  /* ADD_LINK (+ v2 extension at 44) */
  AL_MAC = 4, AL_GID = 12, AL_QPN = 28, AL_LINK_NUM = 31, AL_MTU = 32,
  AL_PSN = 33, AL_EXT = 44, AL_EXT_TARGET_GID = 46, AL_EXT_NUM_RKEYS = 70,
  AL_EXT_RT = 72,
  /* ADD_LINK_CONT */
  ALC_LINK_NUM = 4, ALC_NUM_RKEYS = 5, ALC_RT = 8,
  /* DELETE_LINK */
  DL_LINK_NUM = 4, DL_REASON = 5,
  /* REQ_ADD_LINK (v2) */
  RAL_GID_CNT = 24, RAL_GIDS = 28,
  /* CONFIRM_RKEY: 3 rtokens of 13 bytes */
  CR_RTOKEN = 4, RTOKEN_LEN = 13,
  /* DELETE_RKEY */
  DR_NUM = 4, DR_ERR_MASK = 5, DR_RKEYS = 8,
  /* TEST_LINK */
  TL_DATA = 4,
};

int rrpc__llc_is_llc(uint8_t b) {
  unsigned t = b & ~(unsigned)RRPC_LLC_V2_BIT;
  if (b != t && (b & 0xf0) != RRPC_LLC_V2_BIT) return 0;
  switch (t) {
    case RRPC_LLC_CONFIRM_LINK:
    case RRPC_LLC_ADD_LINK:
    case RRPC_LLC_ADD_LINK_CONT:
    case RRPC_LLC_DELETE_LINK:
    case RRPC_LLC_REQ_ADD_LINK:
    case RRPC_LLC_CONFIRM_RKEY:
    case RRPC_LLC_TEST_LINK:
    case RRPC_LLC_DELETE_RKEY:
      return 1;
    default:
      return 0;
  }
}

/* ---- decoding ------------------------------------------------------------ */

static void get_rt(const uint8_t *p, struct rrpc__llc_add_link_rt *rt) {
  rt->rkey = rrpc__be32(p);
  rt->rkey_new = rrpc__be32(p + 4);
  rt->vaddr_new = rrpc__be64(p + 8);
}

static void dec_confirm_link(const uint8_t *b, struct rrpc__llc_confirm_link *c) {
  memcpy(c->mac, b + CL_MAC, 6);
  memcpy(c->gid, b + CL_GID, RRPC_LLC_GID_LEN);
  c->qpn = rrpc__be24(b + CL_QPN);
  c->link_num = b[CL_LINK_NUM];
  memcpy(c->link_uid, b + CL_UID, RRPC_LLC_LGR_ID_LEN);
  c->max_links = b[CL_MAX_LINKS];
}

static int dec_add_link(const uint8_t *b, const struct rrpc__llc_msg *m,
                        struct rrpc__llc_add_link *a) {
  size_t i;
  memcpy(a->mac, b + AL_MAC, 6);
  memcpy(a->gid, b + AL_GID, RRPC_LLC_GID_LEN);
  a->qpn = rrpc__be24(b + AL_QPN);
  a->link_num = b[AL_LINK_NUM];
  a->mtu = b[AL_MTU] & 0x0f;
  a->psn = rrpc__be24(b + AL_PSN);
  if (m->version == 1) {
    a->rej_rsn = b[OFF_REJ_RSN] & 0x0f;
    return 0;
  }
  if (m->length == RRPC_LLC_LEN) return 0; /* a reject echoes the body only */
  if (m->length < AL_EXT_RT) return -RRPC_EPARSE;
  a->has_v2_ext = 1;
  a->v2_direct = b[AL_EXT] >> 7;
  memcpy(a->client_target_gid, b + AL_EXT_TARGET_GID, RRPC_LLC_GID_LEN);
  /* num_rkeys is a u16 in the sender's order, like length_v2. */
  a->num_rkeys = (uint16_t)(b[AL_EXT_NUM_RKEYS] | b[AL_EXT_NUM_RKEYS + 1] << 8);
  if (a->num_rkeys > RRPC_LLC_MAX_RKEYS ||
      AL_EXT_RT + (size_t)a->num_rkeys * RRPC_LLC_ADD_LINK_RT_LEN > m->length)
    return -RRPC_EPARSE;
  for (i = 0; i < a->num_rkeys; i++)
    get_rt(b + AL_EXT_RT + i * RRPC_LLC_ADD_LINK_RT_LEN, &a->rt[i]);
  return 0;
}

static int dec_add_link_cont(const uint8_t *b, struct rrpc__llc_add_link_cont *c) {
  c->link_num = b[ALC_LINK_NUM];
  c->num_rkeys = b[ALC_NUM_RKEYS];
  get_rt(b + ALC_RT, &c->rt[0]);
  get_rt(b + ALC_RT + RRPC_LLC_ADD_LINK_RT_LEN, &c->rt[1]);
  return 0;
}

static int dec_req_add_link(const uint8_t *b, const struct rrpc__llc_msg *m,
                            struct rrpc__llc_req_add_link *r) {
  size_t i;
  r->gid_count = b[RAL_GID_CNT];
  if (r->gid_count > RRPC_LLC_MAX_GIDS ||
      RAL_GIDS + (size_t)r->gid_count * RRPC_LLC_GID_LEN > m->length)
    return -RRPC_EPARSE;
  for (i = 0; i < r->gid_count; i++)
    memcpy(r->gids[i], b + RAL_GIDS + i * RRPC_LLC_GID_LEN, RRPC_LLC_GID_LEN);
  return 0;
}

static void dec_confirm_rkey(const uint8_t *b, struct rrpc__llc_confirm_rkey *c) {
  size_t i;
  for (i = 0; i < RRPC_LLC_CONFIRM_RKEY_TOKENS; i++) {
    const uint8_t *t = b + CR_RTOKEN + i * RTOKEN_LEN;
    c->rtoken[i].link_id = t[0];
    c->rtoken[i].rkey = rrpc__be32(t + 1);
    c->rtoken[i].vaddr = rrpc__be64(t + 5);
  }
}

static int dec_delete_rkey(const uint8_t *b, const struct rrpc__llc_msg *m,
                           struct rrpc__llc_delete_rkey *d) {
  size_t i;
  d->num_rkeys = b[DR_NUM];
  d->err_mask = b[DR_ERR_MASK];
  if (m->version == 1) {
    if (d->num_rkeys > RRPC_LLC_DELETE_RKEY_V1_MAX) return -RRPC_EPARSE;
    d->rkey_count = RRPC_LLC_DELETE_RKEY_V1_MAX;
  } else {
    d->rkey_count = d->num_rkeys;
    if (DR_RKEYS + (size_t)d->rkey_count * 4 > m->length) return -RRPC_EPARSE;
  }
  for (i = 0; i < d->rkey_count; i++) d->rkey[i] = rrpc__be32(b + DR_RKEYS + 4 * i);
  return 0;
}

/* Reads type, version and length; checks the length against len and the
 * version's bounds. */
static int dec_header(const uint8_t *b, size_t len, struct rrpc__llc_msg *m) {
  uint16_t le, be;
  if (len < RRPC_LLC_LEN || !rrpc__llc_is_llc(b[OFF_TYPE])) return -RRPC_EPARSE;
  m->version = (b[OFF_TYPE] & RRPC_LLC_V2_BIT) ? 2 : 1;
  m->type = b[OFF_TYPE] & ~RRPC_LLC_V2_BIT;
  m->flags = b[OFF_FLAGS];
  if (m->version == 1) {
    if (b[OFF_LEN] != RRPC_LLC_LEN) return -RRPC_EPARSE;
    if (m->type == RRPC_LLC_REQ_ADD_LINK) return -RRPC_EPARSE;
    m->length = RRPC_LLC_LEN;
    return 0;
  }
  if (m->type == RRPC_LLC_ADD_LINK_CONT) return -RRPC_EPARSE;
  /* length_v2 is written in the sender's byte order: x86 (little-endian)
   * first, then a big-endian sender (s390). */
  le = (uint16_t)(b[OFF_LEN] | b[OFF_LEN + 1] << 8);
  be = rrpc__be16(b + OFF_LEN);
  if (le >= RRPC_LLC_LEN && le <= RRPC_LLC_V2_MAX_LEN && le <= len)
    m->length = le;
  else if (be >= RRPC_LLC_LEN && be <= RRPC_LLC_V2_MAX_LEN && be <= len)
    m->length = be;
  else
    return -RRPC_EPARSE;
  return 0;
}

int rrpc__llc_decode(const uint8_t *buf, size_t len, struct rrpc__llc_msg *out) {
  struct rrpc__llc_msg m;
  int rc = 0;
  memset(&m, 0, sizeof(m));
  if (dec_header(buf, len, &m) != 0) return -RRPC_EPARSE;
  switch (m.type) {
    case RRPC_LLC_CONFIRM_LINK: dec_confirm_link(buf, &m.u.confirm_link); break;
    case RRPC_LLC_ADD_LINK: rc = dec_add_link(buf, &m, &m.u.add_link); break;
    case RRPC_LLC_ADD_LINK_CONT: rc = dec_add_link_cont(buf, &m.u.add_link_cont); break;
    case RRPC_LLC_DELETE_LINK:
      m.u.delete_link.link_num = buf[DL_LINK_NUM];
      m.u.delete_link.reason = rrpc__be32(buf + DL_REASON);
      break;
    case RRPC_LLC_REQ_ADD_LINK: rc = dec_req_add_link(buf, &m, &m.u.req_add_link); break;
    case RRPC_LLC_CONFIRM_RKEY: dec_confirm_rkey(buf, &m.u.confirm_rkey); break;
    case RRPC_LLC_TEST_LINK: memcpy(m.u.test_link.user_data, buf + TL_DATA, 16); break;
    default: rc = dec_delete_rkey(buf, &m, &m.u.delete_rkey); break;
  }
  if (rc != 0) return -RRPC_EPARSE;
  memcpy(out, &m, sizeof(m));
  return 0;
}

/* ---- encoding ------------------------------------------------------------ */

static void put_rt(uint8_t *p, const struct rrpc__llc_add_link_rt *rt) {
  rrpc__put_be32(p, rt->rkey);
  rrpc__put_be32(p + 4, rt->rkey_new);
  rrpc__put_be64(p + 8, rt->vaddr_new);
}

/* The message's length from its fields, or 0 when a field does not fit. */
static size_t enc_length(const struct rrpc__llc_msg *m) {
  size_t n = RRPC_LLC_LEN;
  if (m->version == 1) {
    if (m->type == RRPC_LLC_REQ_ADD_LINK) return 0;
    if (m->type == RRPC_LLC_DELETE_RKEY &&
        m->u.delete_rkey.num_rkeys > RRPC_LLC_DELETE_RKEY_V1_MAX)
      return 0;
    return n;
  }
  switch (m->type) {
    case RRPC_LLC_ADD_LINK_CONT: return 0;
    case RRPC_LLC_ADD_LINK:
      if (!m->u.add_link.has_v2_ext) break;
      if (m->u.add_link.num_rkeys > RRPC_LLC_MAX_RKEYS) return 0;
      n = AL_EXT_RT + (size_t)m->u.add_link.num_rkeys * RRPC_LLC_ADD_LINK_RT_LEN;
      break;
    case RRPC_LLC_REQ_ADD_LINK:
      if (m->u.req_add_link.gid_count > RRPC_LLC_MAX_GIDS) return 0;
      n = RAL_GIDS + (size_t)m->u.req_add_link.gid_count * RRPC_LLC_GID_LEN;
      break;
    case RRPC_LLC_DELETE_RKEY:
      n = DR_RKEYS + (size_t)m->u.delete_rkey.num_rkeys * 4;
      break;
    default: break;
  }
  return n < RRPC_LLC_LEN ? RRPC_LLC_LEN : n;
}

static int enc_add_link(const struct rrpc__llc_msg *m, uint8_t *b) {
  const struct rrpc__llc_add_link *a = &m->u.add_link;
  size_t i;
  if (a->qpn > 0xffffff || a->psn > 0xffffff || a->mtu > 15 || a->rej_rsn > 15)
    return -EINVAL;
  memcpy(b + AL_MAC, a->mac, 6);
  memcpy(b + AL_GID, a->gid, RRPC_LLC_GID_LEN);
  rrpc__put_be24(b + AL_QPN, a->qpn);
  b[AL_LINK_NUM] = a->link_num;
  b[AL_MTU] = a->mtu;
  rrpc__put_be24(b + AL_PSN, a->psn);
  if (m->version == 1) {
    b[OFF_REJ_RSN] = a->rej_rsn;
    return 0;
  }
  if (!a->has_v2_ext) return 0;
  b[AL_EXT] = (uint8_t)(a->v2_direct ? 0x80 : 0);
  memcpy(b + AL_EXT_TARGET_GID, a->client_target_gid, RRPC_LLC_GID_LEN);
  b[AL_EXT_NUM_RKEYS] = (uint8_t)a->num_rkeys;
  b[AL_EXT_NUM_RKEYS + 1] = (uint8_t)(a->num_rkeys >> 8);
  for (i = 0; i < a->num_rkeys; i++)
    put_rt(b + AL_EXT_RT + i * RRPC_LLC_ADD_LINK_RT_LEN, &a->rt[i]);
  return 0;
}

static int enc_body(const struct rrpc__llc_msg *m, uint8_t *b) {
  size_t i;
  switch (m->type) {
    case RRPC_LLC_CONFIRM_LINK: {
      const struct rrpc__llc_confirm_link *c = &m->u.confirm_link;
      if (c->qpn > 0xffffff) return -EINVAL;
      memcpy(b + CL_MAC, c->mac, 6);
      memcpy(b + CL_GID, c->gid, RRPC_LLC_GID_LEN);
      rrpc__put_be24(b + CL_QPN, c->qpn);
      b[CL_LINK_NUM] = c->link_num;
      memcpy(b + CL_UID, c->link_uid, RRPC_LLC_LGR_ID_LEN);
      b[CL_MAX_LINKS] = c->max_links;
      return 0;
    }
    case RRPC_LLC_ADD_LINK: return enc_add_link(m, b);
    case RRPC_LLC_ADD_LINK_CONT:
      b[ALC_LINK_NUM] = m->u.add_link_cont.link_num;
      b[ALC_NUM_RKEYS] = m->u.add_link_cont.num_rkeys;
      put_rt(b + ALC_RT, &m->u.add_link_cont.rt[0]);
      put_rt(b + ALC_RT + RRPC_LLC_ADD_LINK_RT_LEN, &m->u.add_link_cont.rt[1]);
      return 0;
    case RRPC_LLC_DELETE_LINK:
      b[DL_LINK_NUM] = m->u.delete_link.link_num;
      rrpc__put_be32(b + DL_REASON, m->u.delete_link.reason);
      return 0;
    case RRPC_LLC_REQ_ADD_LINK:
      b[RAL_GID_CNT] = m->u.req_add_link.gid_count;
      for (i = 0; i < m->u.req_add_link.gid_count; i++)
        memcpy(b + RAL_GIDS + i * RRPC_LLC_GID_LEN, m->u.req_add_link.gids[i],
               RRPC_LLC_GID_LEN);
      return 0;
    case RRPC_LLC_CONFIRM_RKEY:
      for (i = 0; i < RRPC_LLC_CONFIRM_RKEY_TOKENS; i++) {
        uint8_t *t = b + CR_RTOKEN + i * RTOKEN_LEN;
        t[0] = m->u.confirm_rkey.rtoken[i].link_id;
        rrpc__put_be32(t + 1, m->u.confirm_rkey.rtoken[i].rkey);
        rrpc__put_be64(t + 5, m->u.confirm_rkey.rtoken[i].vaddr);
      }
      return 0;
    case RRPC_LLC_TEST_LINK:
      memcpy(b + TL_DATA, m->u.test_link.user_data, 16);
      return 0;
    default: { /* DELETE_RKEY (enc_length admitted only known types) */
      const struct rrpc__llc_delete_rkey *d = &m->u.delete_rkey;
      size_t n = m->version == 1 ? RRPC_LLC_DELETE_RKEY_V1_MAX : d->num_rkeys;
      b[DR_NUM] = d->num_rkeys;
      b[DR_ERR_MASK] = d->err_mask;
      for (i = 0; i < n; i++) rrpc__put_be32(b + DR_RKEYS + 4 * i, d->rkey[i]);
      return 0;
    }
  }
}

int rrpc__llc_encode(const struct rrpc__llc_msg *m, uint8_t *buf, size_t cap,
                     size_t *out_len) {
  size_t len;
  int rc;
  if ((m->version != 1 && m->version != 2) || !rrpc__llc_is_llc(m->type) ||
      (m->type & RRPC_LLC_V2_BIT))
    return -EINVAL;
  len = enc_length(m);
  if (len == 0) return -EINVAL;
  if (cap < len) return -ENOSPC;
  memset(buf, 0, len);
  if (m->version == 1) {
    buf[OFF_TYPE] = m->type;
    buf[OFF_LEN] = RRPC_LLC_LEN;
  } else {
    buf[OFF_TYPE] = (uint8_t)(RRPC_LLC_V2_BIT | m->type);
    buf[OFF_LEN] = (uint8_t)len; /* little-endian, as Linux on x86 */
    buf[OFF_LEN + 1] = (uint8_t)(len >> 8);
  }
  buf[OFF_FLAGS] = m->flags;
  rc = enc_body(m, buf);
  if (rc != 0) return rc;
  *out_len = len;
  return 0;
}

const char *rrpc__llc_type_name(unsigned type) {
  switch (type & ~(unsigned)RRPC_LLC_V2_BIT) {
    case RRPC_LLC_CONFIRM_LINK: return "CONFIRM_LINK";
    case RRPC_LLC_ADD_LINK: return "ADD_LINK";
    case RRPC_LLC_ADD_LINK_CONT: return "ADD_LINK_CONT";
    case RRPC_LLC_DELETE_LINK: return "DELETE_LINK";
    case RRPC_LLC_REQ_ADD_LINK: return "REQ_ADD_LINK";
    case RRPC_LLC_CONFIRM_RKEY: return "CONFIRM_RKEY";
    case RRPC_LLC_TEST_LINK: return "TEST_LINK";
    case RRPC_LLC_DELETE_RKEY: return "DELETE_RKEY";
    default: return "UNKNOWN";
  }
}
