/* naming.c - the naming-service registry, the server-line parser that
 * file:// and list:// share, and list:// itself. Owns the registry; knows
 * nothing of channels or balancers. */
#include "rrpc/internal/naming.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MAX_WEIGHT 1000000
#define MAX_SCHEMES 32

/* ---- the server-line parser ------------------------------------------------ */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

static int is_host_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

/* A decimal in [lo, hi], all of [s, s+n). 0 or -EINVAL. */
static int parse_uint(const char *s, size_t n, long lo, long hi, long *out) {
  if (n == 0 || n > 7) return -EINVAL;
  long v = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] < '0' || s[i] > '9') return -EINVAL;
    v = v * 10 + (s[i] - '0');
  }
  if (v < lo || v > hi) return -EINVAL;
  *out = v;
  return 0;
}

/* "host:port": a non-empty host of name/IPv4 characters and a port in 1..65535. */
static int check_addr(const char *s, size_t n) {
  if (n >= RRPC_NAMING_ADDR_MAX) return -EINVAL;
  const char *colon = memchr(s, ':', n);
  if (colon == NULL || colon == s) return -EINVAL;
  for (const char *p = s; p < colon; p++)
    if (!is_host_char(*p)) return -EINVAL;
  long port;
  return parse_uint(colon + 1, n - (size_t)(colon + 1 - s), 1, 65535, &port);
}

/* The weight a tag carries: a bare number, or "w=N" / "weight=N"; 1 if the
 * tag is not about weight. 0 or -EINVAL (a weight out of range). */
static int tag_weight(const char *t, size_t n, int *out) {
  long w = 1;
  int rc = 0;
  if (n > 0 && t[0] >= '0' && t[0] <= '9') {
    rc = parse_uint(t, n, 1, MAX_WEIGHT, &w);
  } else if (n > 2 && memcmp(t, "w=", 2) == 0) {
    rc = parse_uint(t + 2, n - 2, 1, MAX_WEIGHT, &w);
  } else if (n > 7 && memcmp(t, "weight=", 7) == 0) {
    rc = parse_uint(t + 7, n - 7, 1, MAX_WEIGHT, &w);
  }
  if (rc == 0) *out = (int)w;
  return rc;
}

int rrpc_naming_parse_line(const char *line, size_t len, rrpc_naming_entry *out) {
  if (line == NULL || out == NULL) return -EINVAL;
  const char *hash = memchr(line, '#', len);
  if (hash != NULL) len = (size_t)(hash - line);
  const char *tok[3];
  size_t toklen[3];
  int ntok = 0;
  size_t i = 0;
  while (i < len) {
    if (is_blank(line[i])) {
      i++;
      continue;
    }
    if (line[i] == '\0') return -EINVAL;
    size_t start = i;
    while (i < len && !is_blank(line[i])) {
      if (line[i] == '\0') return -EINVAL;
      i++;
    }
    if (ntok == 2) return -EINVAL; /* trailing words */
    tok[ntok] = line + start;
    toklen[ntok++] = i - start;
  }
  if (ntok == 0) return 0;
  if (check_addr(tok[0], toklen[0]) != 0) return -EINVAL;
  memset(out, 0, sizeof *out);
  memcpy(out->addr, tok[0], toklen[0]);
  out->weight = 1;
  if (ntok == 2) {
    if (toklen[1] >= RRPC_NAMING_TAG_MAX) return -EINVAL;
    for (size_t k = 0; k < toklen[1]; k++)
      if ((unsigned char)tok[1][k] < 0x21 || (unsigned char)tok[1][k] > 0x7e) return -EINVAL;
    if (tag_weight(tok[1], toklen[1], &out->weight) != 0) return -EINVAL;
    memcpy(out->tag, tok[1], toklen[1]);
  }
  return 1;
}

int rrpc__naming_parse_text(const char *text, size_t len, char sep, rrpc_naming_entry *out, size_t max,
                            size_t *n, size_t *bad_line) {
  size_t count = 0, lineno = 0, i = 0;
  while (i < len) {
    lineno++;
    const char *end = memchr(text + i, sep, len - i);
    size_t l = end ? (size_t)(end - (text + i)) : len - i;
    rrpc_naming_entry e;
    int rc = rrpc_naming_parse_line(text + i, l, &e);
    if (rc < 0) {
      if (bad_line) *bad_line = lineno;
      return rc;
    }
    if (rc == 1) {
      if (count == max) return -E2BIG;
      out[count++] = e;
    }
    i += l + (end ? 1 : 0);
  }
  *n = count;
  return 0;
}

/* ---- list:// ------------------------------------------------------------------ */

static int list_fetch(void *arg, const char *param, rrpc_naming_entry *out, size_t max, size_t *n) {
  (void)arg;
  return rrpc__naming_parse_text(param, strlen(param), ',', out, max, n, NULL);
}

static const rrpc_naming_service list_ns = {.scheme = "list", .fetch = list_fetch, .periodic = 0};

/* ---- the registry -------------------------------------------------------------- */

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static const rrpc_naming_service *registry[MAX_SCHEMES];
static size_t nregistry;

static const rrpc_naming_service *const builtins[] = {&list_ns, &rrpc__naming_file, &rrpc__naming_dns};

static const rrpc_naming_service *find_locked(const char *scheme, size_t n) {
  for (size_t i = 0; i < sizeof builtins / sizeof builtins[0]; i++)
    if (strlen(builtins[i]->scheme) == n && memcmp(builtins[i]->scheme, scheme, n) == 0) return builtins[i];
  for (size_t i = 0; i < nregistry; i++)
    if (strlen(registry[i]->scheme) == n && memcmp(registry[i]->scheme, scheme, n) == 0) return registry[i];
  return NULL;
}

int rrpc_naming_register(const rrpc_naming_service *ns) {
  if (ns == NULL || ns->scheme == NULL || ns->fetch == NULL || ns->scheme[0] == '\0' ||
      strstr(ns->scheme, "://") != NULL)
    return -EINVAL;
  pthread_mutex_lock(&reg_mu);
  int rc = 0;
  if (find_locked(ns->scheme, strlen(ns->scheme)) != NULL)
    rc = -EEXIST;
  else if (nregistry == MAX_SCHEMES)
    rc = -ENOMEM;
  else
    registry[nregistry++] = ns;
  pthread_mutex_unlock(&reg_mu);
  return rc;
}

int rrpc__naming_lookup(const char *url, const rrpc_naming_service **ns, const char **param) {
  if (url == NULL) return -EINVAL;
  const char *sep = strstr(url, "://");
  if (sep == NULL || sep == url) return -EINVAL;
  pthread_mutex_lock(&reg_mu);
  *ns = find_locked(url, (size_t)(sep - url));
  pthread_mutex_unlock(&reg_mu);
  if (*ns == NULL) return -EINVAL;
  *param = sep + 3;
  return 0;
}
