/* cdc_fuzzer.c - libFuzzer target for the SMC-R CDC codec and cursor
 * arithmetic (transport/smc/cdc.h): any bytes through the decoder
 * (what decodes must re-encode to the same bytes once the reserved ones are
 * zeroed), and fuzzer-chosen cursors, ring sizes and references through the
 * cursor helpers (no overflow, round trips hold where they must). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/cdc.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "cdc_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

static uint64_t take(const uint8_t **p, size_t *n, size_t bytes) {
  uint64_t v = 0;
  while (bytes-- > 0 && *n > 0) {
    v = v << 8 | **p;
    (*p)++;
    (*n)--;
  }
  return v;
}

static void cursors(const uint8_t *p, size_t n) {
  uint32_t ring = (uint32_t)take(&p, &n, 4);
  uint64_t ref = take(&p, &n, 8);
  struct rrpc__cdc_cursor a, b, c;
  uint64_t off, back;
  int64_t comp;
  a.wrap = (uint16_t)take(&p, &n, 2);
  a.count = (uint32_t)take(&p, &n, 4);
  b.wrap = (uint16_t)take(&p, &n, 2);
  b.count = (uint32_t)take(&p, &n, 4);

  (void)rrpc__cdc_cursor_diff(ring, &a, &b);
  comp = rrpc__cdc_cursor_comp(ring, &a, &b);
  check(comp == -rrpc__cdc_cursor_comp(ring, &b, &a), "comp is antisymmetric", __LINE__);
  (void)rrpc__cdc_cursor_is_stale(&a, &b);
  (void)rrpc__cdc_seq_newer(a.wrap, b.wrap);

  if (ring == 0) {
    check(rrpc__cdc_cursor_to_offset(&a, ring, ref, &off) == -RRPC_EPARSE, "ring 0", __LINE__);
    return;
  }
  if (rrpc__cdc_cursor_to_offset(&a, ring, ref, &off) == 0) {
    /* The offset maps back to the same cursor and lies within half a
     * period of the reference. */
    uint64_t period = (uint64_t)ring << 16;
    c = rrpc__cdc_cursor_from_offset(off, ring);
    check(c.wrap == a.wrap && c.count == a.count, "offset does not map back", __LINE__);
    check((off >= ref ? off - ref : ref - off) <= period / 2, "offset too far from ref",
          __LINE__);
  } else {
    check(a.count >= ring || ref < ((uint64_t)ring << 15) ||
              ref > UINT64_MAX - ((uint64_t)ring << 17),
          "to_offset failed for a valid cursor", __LINE__);
  }
  /* from_offset -> to_offset with the offset itself as reference. */
  c = rrpc__cdc_cursor_from_offset(ref, ring);
  check(c.count < ring, "count beyond ring", __LINE__);
  check(rrpc__cdc_cursor_to_offset(&c, ring, ref, &back) == 0 && back == ref,
        "offset round trip", __LINE__);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct rrpc__cdc_msg m;
  uint8_t out[RRPC_CDC_LEN], want[RRPC_CDC_LEN];
  int rc = rrpc__cdc_decode(data, size, &m);
  check(rc == 0 || rc == -RRPC_EPARSE, "decode rc", __LINE__);
  if (rc == 0) {
    check(size == RRPC_CDC_LEN && data[0] == RRPC_CDC_TYPE && data[1] == RRPC_CDC_LEN,
          "accepted a non-CDC", __LINE__);
    rrpc__cdc_encode(&m, out);
    memcpy(want, data, RRPC_CDC_LEN);
    memset(want + 8, 0, 2);  /* producer cursor reserved */
    memset(want + 16, 0, 2); /* consumer cursor reserved */
    memset(want + 26, 0, RRPC_CDC_LEN - 26);
    check(memcmp(out, want, RRPC_CDC_LEN) == 0, "re-encode differs", __LINE__);
  }
  cursors(data, size);
  return 0;
}
