/* http_parse_fuzzer.c - libFuzzer target for the builtin pages' HTTP request
 * parser: arbitrary bytes through rrpc__http_sniff, rrpc__http_parse at a
 * limit chosen by the first byte (its answer must be one of the statuses it
 * promises, a complete head must lie within the input and the limit, and
 * feeding the same bytes in two pieces must end in the same answer), and
 * rrpc__http_query_get on the parsed query (its output must be terminated
 * within the buffer). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/builtin/http_parse.h"

static int parse_whole(const char *buf, size_t len, size_t max, rrpc__http_req *out) {
  return rrpc__http_parse(buf, len, max, out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  (void)rrpc__http_sniff(data, size);
  if (size < 1) return 0;
  size_t max = 16 + (size_t)data[0] * 32; /* 16 .. 8176 */
  const char *buf = (const char *)data + 1;
  size_t len = size - 1;
  rrpc__http_req req;
  int rc = parse_whole(buf, len, max, &req);
  if (rc != 0 && rc != 1 && rc != 400 && rc != 405 && rc != 413) abort();
  if (rc == 1) {
    if (req.head_len > len || req.head_len > max) abort();
    if (memchr(req.path, '\0', sizeof req.path) == NULL) abort();
    if (memchr(req.query, '\0', sizeof req.query) == NULL) abort();
    char val[32];
    memset(val, 'x', sizeof val);
    if (rrpc__http_query_get(req.query, "format", val, sizeof val) && memchr(val, '\0', sizeof val) == NULL)
      abort();
    (void)rrpc__http_query_get(req.query, "prefix", val, 1);
  }
  /* A prefix of the input may ask for more, or already know the answer;
   * a prefix never completes a head the whole input does not have. */
  size_t cut = len / 2;
  rrpc__http_req part;
  int prc = parse_whole(buf, cut, max, &part);
  if (prc == 1 && rc != 1) abort();
  if (prc == 1 && part.head_len != req.head_len) abort();
  return 0;
}
