/* naming_fuzzer.c - libFuzzer target for the naming-file / list:// parser:
 * arbitrary bytes through rrpc__naming_parse_text (as a file, '\n', and as
 * a list:// URL, ',') with a cap chosen by the first byte, and each line
 * through rrpc_naming_parse_line. Every answer must be one it promises;
 * every entry must be NUL-terminated within its fields, name a port, and
 * carry a weight >= 1; the count must respect the cap. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/internal/naming.h"

static void check_entry(const rrpc_naming_entry *e) {
  if (memchr(e->addr, '\0', sizeof e->addr) == NULL) abort();
  if (memchr(e->tag, '\0', sizeof e->tag) == NULL) abort();
  if (strchr(e->addr, ':') == NULL || e->addr[0] == ':') abort();
  if (e->weight < 1) abort();
}

static void parse_as(const char *buf, size_t len, char sep, size_t max) {
  rrpc_naming_entry out[16];
  size_t n = 99, bad = 0;
  int rc = rrpc__naming_parse_text(buf, len, sep, out, max, &n, &bad);
  if (rc != 0 && rc != -EINVAL && rc != -E2BIG) abort();
  if (rc == -EINVAL && bad == 0) abort();
  if (rc == 0) {
    if (n > max) abort();
    for (size_t i = 0; i < n; i++) check_entry(&out[i]);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  size_t max = 1 + data[0] % 16;
  const char *buf = (const char *)data + 1;
  size_t len = size - 1;
  parse_as(buf, len, '\n', max);
  parse_as(buf, len, ',', max);
  rrpc_naming_entry e;
  int rc = rrpc_naming_parse_line(buf, len, &e);
  if (rc != 0 && rc != 1 && rc != -EINVAL) abort();
  if (rc == 1) check_entry(&e);
  return 0;
}
