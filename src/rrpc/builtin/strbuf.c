/* strbuf.c - the capped text buffer of the builtin pages (strbuf.h). */
#include "rrpc/builtin/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rrpc__sb_init(rrpc__sb *b, size_t max) {
  memset(b, 0, sizeof *b);
  b->max = max;
}

void rrpc__sb_free(rrpc__sb *b) {
  free(b->p);
  memset(b, 0, sizeof *b);
}

static int reserve(rrpc__sb *b, size_t n) {
  if (b->truncated) return -1;
  if (b->len + n + 1 > b->max) {
    b->truncated = 1;
    return -1;
  }
  if (b->len + n + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + n + 1) cap *= 2;
  if (cap > b->max) cap = b->max;
  char *p = realloc(b->p, cap);
  if (p == NULL) {
    b->truncated = 1;
    return -1;
  }
  b->p = p;
  b->cap = cap;
  return 0;
}

void rrpc__sb_add(rrpc__sb *b, const char *s, size_t n) {
  if (reserve(b, n) != 0) return;
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

void rrpc__sb_puts(rrpc__sb *b, const char *s) { rrpc__sb_add(b, s, strlen(s)); }

void rrpc__sb_printf(rrpc__sb *b, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    rrpc__sb_add(b, small, (size_t)n);
    return;
  }
  if (reserve(b, (size_t)n) != 0) return;
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void rrpc__sb_json_str(rrpc__sb *b, const char *s) {
  rrpc__sb_add(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char e[2] = {'\\', (char)*c};
      rrpc__sb_add(b, e, 2);
    } else if (*c < 0x20 || *c == 0x7f) {
      rrpc__sb_printf(b, "\\u%04x", *c);
    } else {
      rrpc__sb_add(b, (const char *)c, 1);
    }
  }
  rrpc__sb_add(b, "\"", 1);
}

void rrpc__sb_html(rrpc__sb *b, const char *s, size_t n) {
  size_t run = 0; /* bytes before s[i] not yet added */
  for (size_t i = 0; i < n; i++) {
    const char *e = s[i] == '&' ? "&amp;" : s[i] == '<' ? "&lt;" : s[i] == '>' ? "&gt;" : s[i] == '"' ? "&quot;" : NULL;
    if (e == NULL) {
      run++;
      continue;
    }
    rrpc__sb_add(b, s + i - run, run);
    rrpc__sb_puts(b, e);
    run = 0;
  }
  rrpc__sb_add(b, s + n - run, run);
}
