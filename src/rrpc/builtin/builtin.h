/* builtin/builtin.h - private to the rrpc core: the builtin pages as the
 * server sees them (sniff the first bytes, hand an HTTP connection its
 * bytes), the server's view they read, and the pieces shared between the
 * files of src/rrpc/builtin/. */
#ifndef RRPC_BUILTIN_BUILTIN_H
#define RRPC_BUILTIN_BUILTIN_H

#include <stddef.h>
#include <stdint.h>

#include "rrpc/builtin.h"
#include "rrpc/builtin/http_parse.h"
#include "rrpc/builtin/strbuf.h"
#include "rrpc/internal/metrics.h"
#include "rrpc/server.h"
#include "rrpc/transport.h"

/* ---- what server.c calls (http_conn.c) ------------------------------------ */
typedef struct rrpc__http_conn rrpc__http_conn;

/* rrpc__builtin_sniff - do the connection's first bytes start an HTTP
 * request? 1 yes, 0 no (baidu_std or anything else), -EAGAIN too few. */
int rrpc__builtin_sniff(const rrpc_iobuf *rbuf);
/* rrpc__builtin_on_data - the connection speaks HTTP: consume rbuf. *st
 * is the connection's state (NULL at first; freed by
 * rrpc__builtin_conn_free). One request per connection: it is answered with
 * "Connection: close", a bad one with its status, and either way the
 * connection closes once the answer is out; bytes after the request are
 * discarded. Loop thread. 0 or a negative code (fail the socket). */
int rrpc__builtin_on_data(rrpc__http_conn **st, rrpc_server *srv, rrpc__socket *sock, rrpc_iobuf *rbuf);
void rrpc__builtin_conn_free(rrpc__http_conn *st);

typedef struct rrpc__builtin_counters {
  uint64_t requests;                /* heads parsed and served */
  uint64_t r400, r404, r405, r413, r503; /* refused, by status */
  uint64_t truncated;               /* /connections cut at the listing cap */
} rrpc__builtin_counters;
void rrpc__builtin_counters_get(rrpc__builtin_counters *out);
void rrpc__builtin_count_status(int status);
size_t rrpc__builtin_max_request(void);
size_t rrpc__builtin_max_listed(void);
/* A /connections or /rdma page starts (0) or is one too many (-EBUSY);
 * every 0 is matched by one end. Any thread. */
int rrpc__builtin_listing_begin(void);
void rrpc__builtin_listing_end(void);

/* rrpc__http_respond - write a whole response with "Connection: close"
 * (body copied; NULL = empty; not sent for HEAD), then close the
 * connection once it is out. Any thread; the caller holds a reference. */
void rrpc__http_respond(rrpc__socket *sock, int status, const char *content_type, const rrpc__sb *body,
                        int is_head);

/* ---- pages.c / conn_pages.c ------------------------------------------------ */
/* rrpc__page_serve - answer `req` on sock, now or (pages that ask other
 * loops) later from another loop thread. Loop thread of sock. */
void rrpc__page_serve(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req);
/* /connections and /rdma: each connection's facts come from its own loop. */
void rrpc__page_connections(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req, int json,
                            int rdma_page);
int rrpc__page_want_json(const rrpc__http_req *req);
/* A 200 answer with body b: a text page goes to a browser (Accept:
 * text/html) escaped inside an HTML page with links to the others. */
void rrpc__page_respond(rrpc__socket *sock, const rrpc__http_req *req, const char *ctype, rrpc__sb *b);
/* The start (title, style, links to every page) and end of an HTML page. */
void rrpc__page_html_begin(rrpc__sb *b, const char *title);
void rrpc__page_html_end(rrpc__sb *b);

/* ---- what server.c offers the pages ------------------------------------------ */
const rrpc_server_options *rrpc__server_options(const rrpc_server *s);
/* Methods are fixed once started; 0 before start. */
size_t rrpc__server_method_count(const rrpc_server *s);
void rrpc__server_method_at(const rrpc_server *s, size_t i, const char **service, const char **method,
                            const rrpc__call_stats **stats);
const rrpc__call_stats *rrpc__server_totals(const rrpc_server *s);
/* Up to `max` live connections, each referenced (the caller unrefs);
 * *total gets how many there are. */
size_t rrpc__server_conns(rrpc_server *s, rrpc__socket **out, size_t max, size_t *total);

#endif /* RRPC_BUILTIN_BUILTIN_H */
