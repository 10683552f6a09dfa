/* preload_input_fuzzer - what rrpc-run's preload reads from outside besides
 * the policy (preload_policy) and the relay frames (preload_frame): a
 * numeric RRPC_RUN_* value (preload/env_num.h) and a request on the stat
 * port (preload/stat_route.h). The first byte picks which one and, for a
 * setting, its range; the rest is the value or the request, copied into a
 * buffer of its exact size so ASan sees any read past it. Each answer is
 * checked against what the header promises. */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/env_num.h"
#include "preload/stat_route.h"

/* The ranges the preload asks for, and the extremes. */
static const long kRanges[][2] = {
    {0, 10000}, {0, 600000}, {1, 65535}, {1, 512L << 10}, {1, 1L << 20}, {0, 0}, {0, LONG_MAX}, {7, 7},
};

static void check_env(const char *v, size_t n, long lo, long hi) {
  const long untouched = -12345;
  long out = untouched;
  int rc = rrpc_run_env_num(v, lo, hi, &out);
  size_t digits = strspn(v, "0123456789");
  if (n == 0) {
    if (rc != 1 || out != untouched) abort();
    return;
  }
  if (digits != n) {
    if (rc != -EINVAL || out != untouched) abort();
    return;
  }
  /* All digits: the value, without its leading zeros, printed back. */
  const char *sig = v + strspn(v, "0");
  if (rc == 0) {
    if (out < lo || out > hi) abort();
    char back[32];
    snprintf(back, sizeof back, "%ld", out);
    if (strcmp(out == 0 ? "" : back, sig) != 0) abort();
    return;
  }
  if (rc != -ERANGE || out != untouched) abort();
  /* Refused: really outside lo..hi (a value that fits in 19 digits is compared as a number). */
  if (strlen(sig) <= 18) {
    long long x = strtoll(v, NULL, 10);
    if (x >= lo && x <= hi) abort();
  }
}

static int ends_path(const char *r, size_t n, size_t k) {
  return n == k || r[k] == ' ' || r[k] == '?' || r[k] == '\r' || r[k] == '\n';
}

static void check_route(const char *r, size_t n) {
  rrpc_run_stat_page p = rrpc_run_stat_route(r, n);
  static const char c[] = "GET /connections", va[] = "GET /vars";
  int is_c = n >= sizeof c - 1 && memcmp(r, c, sizeof c - 1) == 0 && ends_path(r, n, sizeof c - 1);
  int is_v = n >= sizeof va - 1 && memcmp(r, va, sizeof va - 1) == 0 && ends_path(r, n, sizeof va - 1);
  rrpc_run_stat_page want = is_c ? RRPC_RUN_STAT_CONNECTIONS : is_v ? RRPC_RUN_STAT_VARS : RRPC_RUN_STAT_NOT_FOUND;
  if (p != want) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  uint8_t sel = data[0];
  size_t n = size - 1;
  if (sel & 1) {
    char *r = malloc(n ? n : 1);
    if (r == NULL) return 0;
    memcpy(r, data + 1, n);
    check_route(r, n);
    free(r);
    return 0;
  }
  /* An environment value is a C string: it ends at its first NUL. */
  const uint8_t *nul = memchr(data + 1, 0, n);
  if (nul != NULL) n = (size_t)(nul - (data + 1));
  char *v = malloc(n + 1);
  if (v == NULL) return 0;
  memcpy(v, data + 1, n);
  v[n] = '\0';
  const long *range = kRanges[(sel >> 1) % (sizeof kRanges / sizeof kRanges[0])];
  check_env(v, n, range[0], range[1]);
  free(v);
  return 0;
}
