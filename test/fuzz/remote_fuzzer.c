/* remote_fuzzer.c - libFuzzer target for remote memory's decoders
 * (src/rrpc/remote/wire.h, table.h, tcp_frames.h): any bytes as a token, a
 * control message and a TCP frame header (what decodes must re-encode to
 * the same bytes), then the input
 * cut into 44-byte messages fed to a connection's state, with a token
 * check after each: no crash, no leak, and the tables never report an
 * entry the checks would refuse. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "rrpc/remote.h"
#include "rrpc/remote/table.h"
#include "rrpc/remote/tcp_frames.h"
#include "rrpc/remote/wire.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "remote_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

static void token(const uint8_t *data, size_t size) {
  struct rrpc__rmt_token t;
  uint8_t out[RRPC_RMT_TOKEN_LEN];
  rrpc_remote_token_info info;
  int rc = rrpc__rmt_token_decode(data, size, &t);
  check(rc == 0 || rc == -RRPC_EPARSE, "token decode rc", __LINE__);
  check(rc == rrpc_remote_token_inspect(data, size, &info), "inspect agrees with decode", __LINE__);
  if (rc) return;
  check(rrpc__rmt_token_encode(&t, out) == 0, "decoded token does not encode", __LINE__);
  check(memcmp(out, data, sizeof(out)) == 0, "token re-encode differs", __LINE__);
}

static void message(const uint8_t *data, size_t size) {
  struct rrpc__rmt_msg m;
  uint8_t out[RRPC_RMT_MSG_LEN];
  int rc = rrpc__rmt_msg_decode(data, size, &m);
  check(rc == 0 || rc == -RRPC_EPARSE, "message decode rc", __LINE__);
  if (rc) return;
  check(rrpc__rmt_is_msg(data, size), "accepted a non-remote message", __LINE__);
  check(rrpc__rmt_msg_encode(&m, out) == 0, "decoded message does not encode", __LINE__);
  check(memcmp(out, data, sizeof(out)) == 0, "message re-encode differs", __LINE__);
}

/* The TCP carriage's frame header: what decodes re-encodes to the same 40
 * bytes and respects the payload bound. */
static void tcp_frame(const uint8_t *data, size_t size) {
  struct rrpc__rmt_tcp_hdr h;
  uint8_t out[RRPC_RMT_TCP_HDR_LEN];
  int rc = rrpc__rmt_tcp_decode(data, size, 4096, &h);
  check(rc == 0 || rc == -RRPC_EPARSE, "frame decode rc", __LINE__);
  if (rc) return;
  check(h.length <= 4096, "payload over the bound", __LINE__);
  check(rrpc__rmt_tcp_encode(&h, out) == 0, "decoded frame does not encode", __LINE__);
  check(memcmp(out, data, sizeof(out)) == 0, "frame re-encode differs", __LINE__);
}

/* Messages at every 44-byte step; a protocol error ends the connection, as
 * the carriage would. The first 40 bytes double as a token to check. */
static void stream(const uint8_t *data, size_t size) {
  struct rrpc__rmt_conn c;
  struct rrpc__rmt_region r;
  struct rrpc__rmt_entry e;
  check(rrpc__rmt_conn_init(&c, 0x1234, 7, 16) == 0, "init", __LINE__);
  check(rrpc__rmt_own_add(&c, RRPC_REMOTE_WRITE, 4096, NULL, &r) == 0, "own add", __LINE__);
  for (size_t off = 0; off + RRPC_RMT_MSG_LEN <= size; off += RRPC_RMT_MSG_LEN) {
    struct rrpc__rmt_msg m;
    const struct rrpc__rmt_region *n = NULL;
    int rc = rrpc__rmt_conn_rx(&c, data + off, RRPC_RMT_MSG_LEN, &m, &n);
    if (rc < 0) break;
    if (rc == 0 && m.type == RRPC_RMT_T_NOTIFY)
      check(n && n->id == m.id && rrpc__rmt_in_range(n->length, m.offset, m.length),
            "notify outside a live region", __LINE__);
    if (size >= RRPC_RMT_TOKEN_LEN &&
        rrpc__rmt_peer_check_token(&c, data, RRPC_RMT_TOKEN_LEN, 0, 1, RRPC_REMOTE_WRITE, &e) == 0)
      check((e.rights & RRPC_REMOTE_WRITE) && e.length >= 1, "token check passed a bad entry",
            __LINE__);
  }
  check(c.n_peer <= c.max_entries, "peer table over its limit", __LINE__);
  rrpc__rmt_conn_fini(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  token(data, size);
  message(data, size);
  tcp_frame(data, size);
  stream(data, size);
  return 0;
}
