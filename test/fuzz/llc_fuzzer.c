/* llc_fuzzer.c - libFuzzer target for the SMC-R LLC codec
 * (transport/smc/llc.h): any bytes through the decoder (it must stay inside
 * the input and the message's own length); every message that decodes must
 * re-encode, the re-encoding must decode to the same fields (the length may
 * shrink: padding after a v2 list is not kept) and encode again to the same
 * bytes. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/smc/llc.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "llc_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static struct rrpc__llc_msg m, m2;
  static uint8_t y[RRPC_LLC_V2_MAX_LEN], z[RRPC_LLC_V2_MAX_LEN];
  size_t ylen = 0, zlen = 0;
  int rc = rrpc__llc_decode(data, size, &m);
  check(rc == 0 || rc == -RRPC_EPARSE, "decode rc", __LINE__);
  (void)rrpc__llc_type_name(size > 0 ? data[0] : 0);
  if (rc != 0) return 0;
  check(m.length >= RRPC_LLC_LEN && m.length <= size, "length", __LINE__);
  check(m.version == 1 || m.version == 2, "version", __LINE__);
  check(rrpc__llc_is_llc(data[0]), "type", __LINE__);

  check(rrpc__llc_encode(&m, y, sizeof(y), &ylen) == 0, "re-encode", __LINE__);
  check(ylen <= m.length || m.version == 1, "re-encoding grew", __LINE__);
  check(rrpc__llc_decode(y, ylen, &m2) == 0, "decode of the re-encoding", __LINE__);
  check(m2.length == ylen, "re-encoded length", __LINE__);
  m.length = m2.length;
  check(memcmp(&m, &m2, sizeof(m)) == 0, "fields changed by a round trip", __LINE__);
  check(rrpc__llc_encode(&m2, z, sizeof(z), &zlen) == 0 && zlen == ylen &&
            memcmp(y, z, ylen) == 0,
        "encoding not stable", __LINE__);
  return 0;
}
