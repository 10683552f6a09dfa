/* env_num.c - parse one numeric rrpc-run setting (see env_num.h). */
#include "preload/env_num.h"

#include <errno.h>
#include <stddef.h>

int rrpc_run_env_num(const char *v, long lo, long hi, long *out) {
  if (v == NULL || *v == '\0') return 1;
  long n = 0;
  int over = 0; /* past hi: keep scanning, so trailing junk still says -EINVAL */
  for (const char *p = v; *p != '\0'; p++) {
    if (*p < '0' || *p > '9') return -EINVAL;
    int d = *p - '0';
    if (!over && n > (hi - d) / 10) over = 1;
    if (!over) n = n * 10 + d;
  }
  if (over || n < lo || n > hi) return -ERANGE;
  *out = n;
  return 0;
}
