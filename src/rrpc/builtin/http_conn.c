/* http_conn.c - an HTTP connection to a server's builtin pages: collects
 * the request head (bounded by builtin_max_request_bytes), refuses what it
 * cannot serve with a status, and hands good requests to the pages. Owns
 * the per-connection state, the page limits and their counters. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/builtin/builtin.h"
#include "rrpc/errors.h"
#include "rrpc/internal/iobuf.h"
#include "rrpc/internal/socket.h"

enum { MAX_REQUEST_DEFAULT = 8192, MAX_REQUEST_CAP = 65536, MAX_LISTED_DEFAULT = 10000, MAX_LISTINGS_DEFAULT = 4 };

struct rrpc__http_conn {
  int answered; /* the one request was handed on: later bytes are dropped */
};

/* ---- options and counters -------------------------------------------------- */

static _Atomic size_t g_max_request = MAX_REQUEST_DEFAULT;
static _Atomic size_t g_max_listed = MAX_LISTED_DEFAULT;
static _Atomic size_t g_max_listings = MAX_LISTINGS_DEFAULT;
static atomic_size_t g_listings; /* being built now */
static _Atomic uint64_t g_requests, g_r400, g_r404, g_r405, g_r413, g_r503, g_truncated;

int rrpc_builtin_set_options(const rrpc_builtin_options *o) {
  rrpc_builtin_options def = {0};
  if (o == NULL) o = &def;
  if (o->max_request_bytes > MAX_REQUEST_CAP) return -EINVAL;
  atomic_store(&g_max_request, o->max_request_bytes ? o->max_request_bytes : MAX_REQUEST_DEFAULT);
  atomic_store(&g_max_listed, o->max_connections_listed ? o->max_connections_listed : MAX_LISTED_DEFAULT);
  atomic_store(&g_max_listings, o->max_concurrent_listings ? o->max_concurrent_listings : MAX_LISTINGS_DEFAULT);
  return 0;
}

void rrpc_builtin_get_options(rrpc_builtin_options *out) {
  memset(out, 0, sizeof *out);
  out->max_request_bytes = atomic_load(&g_max_request);
  out->max_connections_listed = atomic_load(&g_max_listed);
  out->max_concurrent_listings = atomic_load(&g_max_listings);
}

size_t rrpc__builtin_max_request(void) { return atomic_load_explicit(&g_max_request, memory_order_relaxed); }
size_t rrpc__builtin_max_listed(void) { return atomic_load_explicit(&g_max_listed, memory_order_relaxed); }

int rrpc__builtin_listing_begin(void) {
  size_t max = atomic_load_explicit(&g_max_listings, memory_order_relaxed);
  if (atomic_fetch_add(&g_listings, 1) < max) return 0;
  atomic_fetch_sub(&g_listings, 1);
  return -EBUSY;
}

void rrpc__builtin_listing_end(void) { atomic_fetch_sub(&g_listings, 1); }

void rrpc__builtin_count_status(int status) {
  _Atomic uint64_t *c = NULL;
  switch (status) {
  case 200: c = &g_requests; break;
  case 400: c = &g_r400; break;
  case 404: c = &g_r404; break;
  case 405: c = &g_r405; break;
  case 413: c = &g_r413; break;
  case 503: c = &g_r503; break;
  case -1: c = &g_truncated; break;
  }
  if (c) atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

void rrpc__builtin_counters_get(rrpc__builtin_counters *out) {
  out->requests = atomic_load(&g_requests);
  out->r400 = atomic_load(&g_r400);
  out->r404 = atomic_load(&g_r404);
  out->r405 = atomic_load(&g_r405);
  out->r413 = atomic_load(&g_r413);
  out->r503 = atomic_load(&g_r503);
  out->truncated = atomic_load(&g_truncated);
}

/* ---- responses ----------------------------------------------------------------- */

static const char *reason(int status) {
  switch (status) {
  case 200: return "OK";
  case 400: return "Bad Request";
  case 404: return "Not Found";
  case 405: return "Method Not Allowed";
  case 413: return "Payload Too Large";
  case 500: return "Internal Server Error";
  case 503: return "Service Unavailable";
  }
  return "Error";
}

void rrpc__http_respond(rrpc__socket *sock, int status, const char *content_type, const rrpc__sb *body,
                        int is_head) {
  size_t blen = body && body->p ? body->len : 0;
  char head[256];
  int n = snprintf(head, sizeof head,
                   "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%sConnection: close\r\n\r\n",
                   status, reason(status), content_type, blen, status == 405 ? "Allow: GET, HEAD\r\n" : "");
  rrpc_iobuf out;
  rrpc__iobuf_init(&out);
  int rc = rrpc_iobuf_append(&out, head, (size_t)n);
  if (rc == 0 && blen && !is_head) rc = rrpc_iobuf_append(&out, body->p, blen);
  if (rc == 0) {
    rrpc__socket_write(sock, &out);
    rrpc__socket_finish_writes(sock); /* "Connection: close": closed after the response */
  } else {
    rrpc__socket_fail(sock, rc);
  }
  rrpc__iobuf_destroy(&out);
}

static int refuse(rrpc__socket *sock, int status, const char *why) {
  rrpc__builtin_count_status(status);
  rrpc__sb b;
  rrpc__sb_init(&b, 1024);
  rrpc__sb_printf(&b, "%d %s: %s\n", status, reason(status), why);
  rrpc__http_respond(sock, status, "text/plain; charset=utf-8", &b, 0);
  rrpc__sb_free(&b);
  /* Only this connection ends: rrpc__http_respond closes it once the
   * answer is out. */
  return 0;
}

/* ---- the connection ----------------------------------------------------------- */

int rrpc__builtin_sniff(const rrpc_iobuf *rbuf) {
  uint8_t first[8];
  size_t n = rrpc_iobuf_copy_out(rbuf, 0, first, sizeof first);
  return rrpc__http_sniff(first, n);
}

int rrpc__builtin_on_data(rrpc__http_conn **stp, rrpc_server *srv, rrpc__socket *sock, rrpc_iobuf *rbuf) {
  if (*stp == NULL) {
    *stp = calloc(1, sizeof **stp);
    if (*stp == NULL) return -ENOMEM;
  }
  rrpc__http_conn *st = *stp;
  if (st->answered) {
    rrpc_iobuf_clear(rbuf); /* "Connection: close": nothing more is read */
    return 0;
  }
  size_t max = rrpc__builtin_max_request();
  char head[MAX_REQUEST_CAP];
  (void)rrpc_iobuf_copy_out(rbuf, 0, head, max); /* parse reads min(length, max) */
  rrpc__http_req req;
  int rc = rrpc__http_parse(head, rrpc_iobuf_length(rbuf), max, &req);
  if (rc == 0) return 0;
  if (rc != 1) {
    rrpc_iobuf_clear(rbuf);
    st->answered = 1;
    return refuse(sock, rc, rc == 413 ? "request head too large" : rc == 405 ? "only GET and HEAD" : "malformed request");
  }
  st->answered = 1;
  rrpc_iobuf_clear(rbuf);
  rrpc__page_serve(srv, sock, &req);
  return 0;
}

void rrpc__builtin_conn_free(rrpc__http_conn *st) { free(st); }
