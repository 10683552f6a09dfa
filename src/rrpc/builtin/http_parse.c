/* http_parse.c - recognising and parsing HTTP/1.x request heads for the
 * builtin pages (http_parse.h). Bytes in, a bounded struct out; nothing is
 * allocated and nothing is read past `max`. */
#include "rrpc/builtin/http_parse.h"

#include <errno.h>
#include <string.h>

static const char *const k_methods[] = {"GET ", "HEAD ", "POST ", "PUT ", "DELETE ",
                                         "OPTIONS ", "PATCH ", "CONNECT ", "TRACE "};

int rrpc__http_sniff(const uint8_t *p, size_t n) {
  int partial = 0;
  for (size_t i = 0; i < sizeof k_methods / sizeof k_methods[0]; i++) {
    size_t mlen = strlen(k_methods[i]);
    size_t cmp = n < mlen ? n : mlen;
    if (memcmp(p, k_methods[i], cmp) != 0) continue;
    if (cmp == mlen) return 1;
    partial = 1;
  }
  return partial ? -EAGAIN : 0;
}

/* A byte that may appear in a request head besides CR and LF. */
static int head_byte_ok(unsigned char c) { return c == '\t' || (c >= 0x20 && c != 0x7f); }

static int is_tchar(unsigned char c) {
  if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return 1;
  return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Where "\r\n\r\n" starts in buf[0, len), or -1. */
static long find_end(const char *buf, size_t len) {
  for (size_t i = 0; i + 3 < len; i++)
    if (buf[i] == '\r' && buf[i + 1] == '\n' && buf[i + 2] == '\r' && buf[i + 3] == '\n') return (long)i;
  return -1;
}

static int ieq(const char *a, size_t alen, const char *b) {
  size_t blen = strlen(b);
  if (alen != blen) return 0;
  for (size_t i = 0; i < alen; i++) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x != y) return 0;
  }
  return 1;
}

/* "GET /path?q HTTP/1.1" in line[0, len). 0 or a status. */
static int parse_request_line(const char *line, size_t len, rrpc__http_req *out) {
  size_t i = 0;
  while (i < len && line[i] >= 'A' && line[i] <= 'Z') i++;
  if (i == 0 || i > 7 || i >= len || line[i] != ' ') return 400;
  int is_get = i == 3 && memcmp(line, "GET", 3) == 0;
  out->is_head = i == 4 && memcmp(line, "HEAD", 4) == 0;
  size_t t = ++i;
  while (i < len && line[i] != ' ') i++;
  if (i >= len || i == t || line[t] != '/') return 400;
  size_t tlen = i - t;
  const char *q = memchr(line + t, '?', tlen);
  size_t plen = q ? (size_t)(q - (line + t)) : tlen;
  size_t qlen = q ? tlen - plen - 1 : 0;
  if (plen >= sizeof out->path || qlen >= sizeof out->query) return 413;
  memcpy(out->path, line + t, plen);
  out->path[plen] = '\0';
  if (q) memcpy(out->query, q + 1, qlen);
  out->query[qlen] = '\0';
  i++;
  if (len - i != 8 || memcmp(line + i, "HTTP/1.", 7) != 0 || line[i + 7] < '0' || line[i + 7] > '9')
    return 400;
  out->minor = line[i + 7] - '0';
  if (!is_get && !out->is_head) return 405;
  return 0;
}

/* Does v[0, n) hold "text/html"? (Case as browsers send it.) */
static int names_html(const char *v, size_t n) {
  static const char k[] = "text/html";
  for (size_t i = 0; i + sizeof k - 1 <= n; i++)
    if (memcmp(v + i, k, sizeof k - 1) == 0) return 1;
  return 0;
}

/* One "Name: value" line. 0 or a status. */
static int parse_header(const char *line, size_t len, rrpc__http_req *out) {
  size_t i = 0;
  while (i < len && is_tchar((unsigned char)line[i])) i++;
  if (i == 0 || i >= len || line[i] != ':') return 400; /* also obs-fold lines */
  const char *v = line + i + 1;
  size_t vlen = len - i - 1;
  while (vlen > 0 && (*v == ' ' || *v == '\t')) v++, vlen--;
  while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t')) vlen--;
  if (ieq(line, i, "transfer-encoding")) return 413; /* a body follows: not taken */
  if (ieq(line, i, "accept") && names_html(v, vlen)) out->accepts_html = 1;
  if (ieq(line, i, "content-length")) {
    if (vlen == 0) return 400;
    for (size_t k = 0; k < vlen; k++)
      if (v[k] < '0' || v[k] > '9') return 400;
    for (size_t k = 0; k < vlen; k++)
      if (v[k] != '0') return 413;
  }
  return 0;
}

int rrpc__http_parse(const char *buf, size_t len, size_t max, rrpc__http_req *out) {
  memset(out, 0, sizeof *out);
  size_t n = len < max ? len : max;
  long end = find_end(buf, n);
  /* Only the head is looked at: bytes after it (pipelined or junk) are the
   * connection's business, not this request's. */
  size_t scan = end < 0 ? n : (size_t)end + 4;
  for (size_t i = 0; i < scan; i++)
    if (!head_byte_ok((unsigned char)buf[i]) && buf[i] != '\r' && buf[i] != '\n') return 400;
  if (end < 0) return len >= max ? 413 : 0;
  const char *p = buf, *stop = buf + end + 2; /* each line ends with its CRLF */
  int first = 1;
  while (p < stop) {
    const char *cr = memchr(p, '\r', (size_t)(stop - p));
    if (cr == NULL || cr + 1 >= stop || cr[1] != '\n') return 400;
    size_t llen = (size_t)(cr - p);
    if (memchr(p, '\n', llen) != NULL) return 400; /* a bare LF */
    int rc = first ? parse_request_line(p, llen, out) : parse_header(p, llen, out);
    if (rc != 0) return rc;
    first = 0;
    p = cr + 2;
  }
  out->head_len = (size_t)end + 4;
  return 1;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int rrpc__http_query_get(const char *query, const char *key, char *val, size_t vlen) {
  size_t klen = strlen(key);
  const char *p = query;
  while (*p) {
    const char *amp = strchr(p, '&');
    size_t plen = amp ? (size_t)(amp - p) : strlen(p);
    const char *eq = memchr(p, '=', plen);
    size_t nlen = eq ? (size_t)(eq - p) : plen;
    if (nlen == klen && memcmp(p, key, klen) == 0) {
      size_t o = 0;
      if (eq) {
        for (const char *c = eq + 1; c < p + plen && o + 1 < vlen; c++) {
          if (*c == '%' && c + 2 < p + plen && hexval(c[1]) >= 0 && hexval(c[2]) >= 0) {
            val[o++] = (char)(hexval(c[1]) * 16 + hexval(c[2]));
            c += 2;
          } else {
            val[o++] = *c == '+' ? ' ' : *c;
          }
        }
      }
      if (vlen) val[o] = '\0';
      return 1;
    }
    p += plen;
    if (*p == '&') p++;
  }
  return 0;
}
