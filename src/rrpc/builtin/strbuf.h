/* builtin/strbuf.h - private to the builtin pages: a growable text buffer
 * with a hard cap, so no page can be made to allocate without bound. Past
 * the cap (or when memory is short) appends are dropped and `truncated` is
 * set; the page says so. */
#ifndef RRPC_BUILTIN_STRBUF_H
#define RRPC_BUILTIN_STRBUF_H

#include <stddef.h>

typedef struct rrpc__sb {
  char *p; /* owned; NUL-terminated when not NULL */
  size_t len, cap, max;
  int truncated;
} rrpc__sb;

/* Pages are capped at 64 MiB (10k connections take about 3 MiB). */
#define RRPC_SB_PAGE_MAX ((size_t)64 << 20)

void rrpc__sb_init(rrpc__sb *b, size_t max);
void rrpc__sb_free(rrpc__sb *b);
void rrpc__sb_add(rrpc__sb *b, const char *s, size_t n);
void rrpc__sb_puts(rrpc__sb *b, const char *s);
void rrpc__sb_printf(rrpc__sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal of s (quotes included, control bytes escaped). */
void rrpc__sb_json_str(rrpc__sb *b, const char *s);
/* n bytes of s as HTML text (& < > " escaped). */
void rrpc__sb_html(rrpc__sb *b, const char *s, size_t n);

#endif /* RRPC_BUILTIN_STRBUF_H */
