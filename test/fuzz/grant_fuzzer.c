/* grant_fuzzer.c - libFuzzer target for the elastic ring's control-message
 * codec (transport/rdma/wire/grant.h): any bytes through the decoder (what
 * decodes must re-encode to exactly the same 44 bytes, since the decoder
 * admits no non-zero reserved byte), the encoder over fuzzer-chosen fields
 * (it refuses exactly what the decoder would refuse), and the elastic
 * immediate's pack/unpack round trip. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/grant.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "grant_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

/* Fields straight from the input, encoded, then decoded again. */
static void encode_fields(const uint8_t *p, size_t n) {
  struct rrpc__grant_msg m, d;
  uint8_t out[RRPC_GRANT_MSG_LEN];
  if (n < 20) return;
  memset(&m, 0, sizeof(m));
  m.type = (uint8_t)(RRPC_GRANT_T_GRANT + p[0] % 5); /* one unknown type too */
  m.seq = (uint16_t)(p[1] << 8 | p[2]);
  memcpy(&m.token, p + 3, 4);
  memcpy(&m.u.grant.addr, p + 7, 8);
  memcpy(&m.u.grant.rkey, p + 15, 4);
  m.u.grant.id = (uint16_t)(p[19] * 257u);
  m.u.grant.flags = n > 20 ? p[20] : 0;
  m.u.grant.size_code = n > 21 ? p[21] : 0;
  if (m.type == RRPC_GRANT_T_WANT) m.u.want.bytes = m.u.grant.rkey;
  if (m.type == RRPC_GRANT_T_RETIRE) {
    m.u.retire.id = m.u.grant.id;
    m.u.retire.reason = m.u.grant.flags;
  }
  if (m.type == RRPC_GRANT_T_HANDBACK) {
    uint32_t written = m.u.grant.rkey;
    uint16_t id = m.u.grant.id;
    uint8_t flags = m.u.grant.flags;
    memset(&m.u, 0, sizeof(m.u));
    m.u.handback.id = id;
    m.u.handback.flags = flags;
    m.u.handback.written = written;
  }
  if (rrpc__grant_encode(&m, out) != 0) return;
  check(rrpc__grant_decode(out, sizeof(out), &d) == 0, "encoded message does not decode", __LINE__);
  check(d.type == m.type && d.seq == m.seq && d.token == m.token, "header round trip", __LINE__);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rrpc__grant_msg m;
  uint8_t out[RRPC_GRANT_MSG_LEN];
  int rc = rrpc__grant_decode(data, size, &m);
  check(rc == 0 || rc == -RRPC_EPARSE, "decode rc", __LINE__);
  if (rc == 0) {
    check(size == RRPC_GRANT_MSG_LEN && rrpc__grant_is_ctl(data, size), "accepted a non-control message",
          __LINE__);
    check(rrpc__grant_encode(&m, out) == 0, "decoded message does not encode", __LINE__);
    check(memcmp(out, data, RRPC_GRANT_MSG_LEN) == 0, "re-encode differs", __LINE__);
    if (m.type == RRPC_GRANT_T_GRANT) {
      uint8_t code;
      check(rrpc__grant_piece_code(rrpc__grant_piece_len(m.u.grant.size_code), &code) == 0 &&
                code == m.u.grant.size_code,
            "size code round trip", __LINE__);
    }
  }
  if (size >= 4) {
    uint32_t imm = (uint32_t)data[0] << 24 | (uint32_t)data[1] << 16 | (uint32_t)data[2] << 8 | data[3];
    struct rrpc__eimm e = rrpc__eimm_unpack(imm);
    check(rrpc__eimm_pack(&e) == imm, "immediate round trip", __LINE__);
  }
  encode_fields(data, size);
  return 0;
}
