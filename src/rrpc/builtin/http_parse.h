/* builtin/http_parse.h - private to the builtin pages: recognising and
 * parsing an HTTP/1.x request head, as pure functions over bytes (fuzzed by
 * test/fuzz/http_parse_fuzzer.c). Only GET and HEAD are served; a request
 * carrying a body is refused, so a request is its head alone. */
#ifndef RRPC_BUILTIN_HTTP_PARSE_H
#define RRPC_BUILTIN_HTTP_PARSE_H

#include <stddef.h>
#include <stdint.h>

#define RRPC_HTTP_PATH_MAX 128
#define RRPC_HTTP_QUERY_MAX 256

typedef struct rrpc__http_req {
  int is_head;                      /* HEAD: answer without the body */
  int minor;                        /* HTTP/1.<minor> */
  char path[RRPC_HTTP_PATH_MAX];    /* the target before '?', NUL-terminated */
  char query[RRPC_HTTP_QUERY_MAX];  /* after '?', raw, NUL-terminated */
  size_t head_len;                  /* bytes of the head, final CRLFCRLF included */
  int accepts_html;                 /* an Accept header names text/html (a browser) */
} rrpc__http_req;

/* rrpc__http_sniff - do the first bytes of a connection start an HTTP
 * request? 1 yes, 0 no, -EAGAIN when too few bytes to tell. */
int rrpc__http_sniff(const uint8_t *p, size_t n);

/* rrpc__http_parse - parse the head at the start of buf[0, len). Reads at
 * most `max` bytes. Returns 1 with *out filled when the head is complete,
 * 0 when more bytes are needed, or the HTTP status to refuse with: 400
 * (malformed), 405 (method other than GET/HEAD), 413 (head longer than
 * max, target too long, or a body announced). Allocates nothing. */
int rrpc__http_parse(const char *buf, size_t len, size_t max, rrpc__http_req *out);

/* rrpc__http_query_get - the value of `key` in a query string
 * ("a=1&b=x%20y"), percent-decoded into val (truncated to vlen-1). 1 when
 * the key is present (a bare "key" gives ""), else 0. */
int rrpc__http_query_get(const char *query, const char *key, char *val, size_t vlen);

#endif /* RRPC_BUILTIN_HTTP_PARSE_H */
