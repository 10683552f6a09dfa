/* stat_route.c - pick the stat page a request names (see stat_route.h). */
#include "preload/stat_route.h"

#include <string.h>

/* `req` begins with `path` and the path ends right after it. */
static int names(const char *req, size_t n, const char *path) {
  size_t k = strlen(path);
  if (n < k || memcmp(req, path, k) != 0) return 0;
  if (n == k) return 1;
  char c = req[k];
  return c == ' ' || c == '?' || c == '\r' || c == '\n';
}

rrpc_run_stat_page rrpc_run_stat_route(const char *req, size_t n) {
  if (req == NULL) return RRPC_RUN_STAT_NOT_FOUND;
  if (names(req, n, "GET /connections")) return RRPC_RUN_STAT_CONNECTIONS;
  if (names(req, n, "GET /vars")) return RRPC_RUN_STAT_VARS;
  return RRPC_RUN_STAT_NOT_FOUND;
}
