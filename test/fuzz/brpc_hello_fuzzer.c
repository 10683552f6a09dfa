/* brpc_hello_fuzzer.c - libFuzzer target for brpc's RDMA hello
 * (transport/rdma/wire/brpc_hello.c), the first bytes an rrpc server reads
 * from a brpc client: framing never claims more bytes than arrived and is
 * stable as bytes keep arriving; a whole hello either decodes or is a hard
 * error; whatever decodes re-encodes to a hello that decodes to the same
 * fields, and validity is the same both times. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/brpc_hello.h"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "brpc_hello_fuzzer: %s\n", what);
    abort();
  }
}

static void check_framing(const uint8_t *data, size_t size) {
  int prev = RRPC_BRPC_WAIT;
  size_t prev_len = 0;
  /* Every prefix near the headers, then a few larger steps. */
  for (size_t n = 0; n <= size; n = n < 64 ? n + 1 : n + 509) {
    size_t len = 0;
    int c = rrpc__brpc_hello_frame(data, n, &len);
    check(c == RRPC_BRPC_NOT || c == RRPC_BRPC_WAIT || c == RRPC_BRPC_WHOLE || c == -RRPC_EPARSE, "class");
    if (c == RRPC_BRPC_WHOLE) check(len <= n && len >= 9, "whole hello out of bounds");
    if (prev == RRPC_BRPC_NOT) check(c == RRPC_BRPC_NOT, "not-a-hello became something else");
    if (prev == -RRPC_EPARSE) check(c == -RRPC_EPARSE, "a hard error went away");
    if (prev == RRPC_BRPC_WHOLE) check(c == RRPC_BRPC_WHOLE && len == prev_len, "a whole hello changed");
    prev = c;
    prev_len = len;
  }
}

static void check_roundtrip(const struct rrpc__brpc_hello *h) {
  uint8_t buf[RRPC_BRPC_HELLO_MAX];
  size_t n = 0;
  struct rrpc__brpc_hello again;
  if (rrpc__brpc_hello_encode(h, buf, sizeof buf, &n) != 0) {
    check(h->version == 2, "v3 always encodes");
    return; /* a v2 field wider than 16 bits cannot come from a v2 hello */
  }
  check(rrpc__brpc_hello_decode(buf, n, &again) == 0, "re-encoded hello decodes");
  check(again.block_size == h->block_size && again.qp_num == h->qp_num && again.sq_size == h->sq_size &&
            again.rq_size == h->rq_size && again.lid == h->lid && again.has_ece == h->has_ece,
        "fields survive a round trip");
  check(rrpc__brpc_hello_valid(&again) == rrpc__brpc_hello_valid(h) || h->gid_len > 16,
        "validity survives a round trip");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > RRPC_BRPC_HELLO_MAX + 16) size = RRPC_BRPC_HELLO_MAX + 16;
  check_framing(data, size);
  size_t len = 0;
  if (rrpc__brpc_hello_frame(data, size, &len) != RRPC_BRPC_WHOLE) return 0;
  struct rrpc__brpc_hello h;
  int rc = rrpc__brpc_hello_decode(data, len, &h);
  check(rc == 0 || rc == -RRPC_EPARSE, "decode result");
  if (rc != 0) return 0;
  int v = rrpc__brpc_hello_valid(&h);
  check(v == 0 || v == 1, "validity is a boolean");
  check_roundtrip(&h);
  return 0;
}
