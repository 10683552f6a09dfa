/* tcp_sniff_fuzzer.c - libFuzzer target for the first bytes a TCP-only
 * server looks at (transport/tcp/clc_sniff.c): any prefix is classified as
 * wait / plain / a whole CLC message, a whole message never claims more
 * bytes than arrived, and classification is stable as bytes keep arriving
 * (a prefix that is plain stays plain; a CLC message keeps its length). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "transport/smc/clc.h"
#include "transport/tcp/tcp_internal.h"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "tcp_sniff_fuzzer: %s\n", what);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > RRPC_CLC_MAX_LEN) size = RRPC_CLC_MAX_LEN;
  int prev = RRPC_SNIFF_WAIT;
  size_t prev_len = 0;
  for (size_t n = 0; n <= size; n++) {
    size_t len = 0;
    int decline = 0;
    int c = rrpc__tcp_sniff_classify(data, n, &len, &decline);
    check(c == RRPC_SNIFF_WAIT || c == RRPC_SNIFF_PLAIN || c == RRPC_SNIFF_CLC, "unknown class");
    if (c == RRPC_SNIFF_CLC) check(len >= RRPC_CLC_HDR_LEN && len <= n, "CLC length out of bounds");
    if (prev == RRPC_SNIFF_PLAIN) check(c == RRPC_SNIFF_PLAIN, "plain became something else");
    if (prev == RRPC_SNIFF_CLC) check(c == RRPC_SNIFF_CLC && len == prev_len, "CLC message changed");
    prev = c;
    prev_len = len;
  }
  return 0;
}
