/* addr_fuzzer.c - libFuzzer target for the address text channels and
 * servers take (src/rrpc/core/addr.c): any bytes either fail cleanly or give a
 * socket address of a known family and size, and the text rrpc prints for
 * that address parses back to the same address. Host names are not looked
 * up (resolve = 0), so no input reaches DNS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "rrpc/internal/addr.h"

static void check(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "addr_fuzzer: %s\n", what);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char text[RRPC_ADDR_TEXT_MAX + 8];
  if (size >= sizeof text) size = sizeof text - 1;
  memcpy(text, data, size);
  text[size] = '\0'; /* an embedded NUL just ends the text early */
  rrpc__addr a;
  int rc = rrpc__addr_parse_ex(text, 0, &a);
  if (rc != 0) return 0;
  int fam = a.ss.ss_family;
  check(fam == AF_INET || fam == AF_INET6 || fam == AF_UNIX, "unknown family");
  check(a.len > 0 && a.len <= sizeof a.ss, "length out of bounds");
  if (fam == AF_UNIX) check(a.len <= sizeof(struct sockaddr_un), "unix length past sun_path");
  char printed[160];
  rrpc__sockaddr_str((const struct sockaddr *)&a.ss, a.len, printed, sizeof printed);
  if (fam == AF_UNIX && strlen(printed) == sizeof printed - 1) return 0; /* a long path, cut */
  rrpc__addr back;
  check(rrpc__addr_parse_ex(printed, 0, &back) == 0, "printed address does not parse");
  check(back.len == a.len && memcmp(&back.ss, &a.ss, a.len) == 0, "printed address parses differently");
  return 0;
}
