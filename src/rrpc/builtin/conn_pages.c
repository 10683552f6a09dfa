/* conn_pages.c - /connections and /rdma. A connection's transport state
 * belongs to its loop thread, so the page asks every connection's loop for
 * its facts (rrpc__socket_facts_async) and answers when the last one has
 * replied; no thread waits for another. Owns the gathering; reads the rest. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/builtin/builtin.h"
#include "rrpc/builtin/vars.h"
#include "rrpc/internal/loop.h"
#include "rrpc/internal/socket.h"

#define LOOP_NAME_MAX 24

struct gather {
  atomic_size_t pending;
  rrpc__socket *http; /* referenced: the connection that asked */
  rrpc__http_req req;
  int json, detail, rdma_page;
  int port, use_rdma; /* copied: the server may be gone when the last reply comes */
  size_t n, total;
  uint64_t now_us;
  rrpc__socket **socks;       /* referenced */
  rrpc__socket_stats *stats;
  rrpc__conn_facts *facts;
  char (*loop)[LOOP_NAME_MAX];
  char (*peer)[64];
};

static void gather_free(struct gather *g) {
  for (size_t i = 0; i < g->n; i++) rrpc__socket_unref(g->socks[i]);
  if (g->http != NULL) rrpc__socket_unref(g->http); /* not taken yet if allocation failed */
  free(g->socks);
  free(g->stats);
  free(g->facts);
  free(g->loop);
  free(g->peer);
  free(g);
  rrpc__builtin_listing_end();
}

static void fallback_text(uint32_t code, char *buf, size_t len) {
  if (code == 0) snprintf(buf, len, "-");
  else snprintf(buf, len, "0x%08x %s", code, rrpc__transport_fallback_text(code));
}

static const char *transport_name(const rrpc__conn_facts *f) {
  if (f->is_rdma) return "RDMA";
  if (strcmp(f->transport, "rdma") == 0) return "RDMA-HS"; /* handshake not over */
  if (strcmp(f->transport, "closed") == 0) return "CLOSED";
  return "TCP";
}

/* ---- /connections ------------------------------------------------------------ */

static void conn_json(struct gather *g, size_t i, rrpc__sb *b) {
  const rrpc__conn_facts *f = &g->facts[i];
  const rrpc__socket_stats *s = &g->stats[i];
  char fb[96];
  fallback_text(s->fallback_code, fb, sizeof fb);
  rrpc__sb_puts(b, i ? ",\n{\"peer\":" : "\n{\"peer\":");
  rrpc__sb_json_str(b, g->peer[i]);
  rrpc__sb_printf(b, ",\"side\":\"%s\",\"transport\":\"%s\",\"state\":", s->is_client ? "client" : "server",
                  transport_name(f));
  rrpc__sb_json_str(b, f->state);
  rrpc__sb_printf(b, ",\"fallback_code\":%u,\"fallback\":", s->fallback_code);
  rrpc__sb_json_str(b, fb);
  rrpc__sb_puts(b, ",\"loop\":");
  rrpc__sb_json_str(b, g->loop[i]);
  rrpc__sb_puts(b, ",\"device\":");
  rrpc__sb_json_str(b, f->device);
  rrpc__sb_printf(b, ",\"port\":%d,\"gid_index\":%d,\"gid\":", f->port, f->gid_index);
  rrpc__sb_json_str(b, f->gid);
  rrpc__sb_printf(b,
                  ",\"qpn\":%u,\"peer_qpn\":%u,\"ring_size\":%u,\"peer_ring_size\":%u,\"window_free\":%llu,"
                  "\"credits\":%u,\"credits_max\":%u,\"sq_size\":%u,\"rq_size\":%u,\"sq_used\":%llu,"
                  "\"write_blocked\":%d,\"zc_held\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu,\"age_s\":%.1f",
                  f->qpn, f->peer_qpn, f->ring_size, f->peer_ring_size, (unsigned long long)f->window_free,
                  f->credits, f->credits_max, f->sq_size, f->rq_size, (unsigned long long)f->sq_used,
                  f->write_blocked, (unsigned long long)f->zc_held, (unsigned long long)s->bytes_in,
                  (unsigned long long)s->bytes_out, (double)(g->now_us - s->created_us) / 1e6);
  rrpc__sb_puts(b, ",\"dialect\":");
  rrpc__sb_json_str(b, f->dialect);
  if (f->cursor) {
    rrpc__sb_printf(b,
                    ",\"prod\":\"%u:%u\",\"cons\":\"%u:%u\",\"peer_prod\":\"%u:%u\",\"peer_cons\":\"%u:%u\","
                    "\"tx_flags\":\"%02x:%02x\",\"rx_flags\":\"%02x:%02x\"",
                    f->prod_wrap, f->prod_count, f->cons_wrap, f->cons_count, f->peer_prod_wrap, f->peer_prod_count,
                    f->peer_cons_wrap, f->peer_cons_count, f->tx_prod_flags, f->tx_conn_flags, f->rx_prod_flags,
                    f->rx_conn_flags);
  }
  rrpc__sb_puts(b, "}");
}

/* The cursor dialect's cursors and CDC flags in one cell, as smc-tools
 * print them: prod/cons (mine), then the peer's, wrap:count; flags as the
 * two raw CDC bytes producer:connection, as last sent / received. */
static void cursor_text(const rrpc__conn_facts *f, char *out, size_t len) {
  if (!f->cursor) {
    snprintf(out, len, "-");
    return;
  }
  snprintf(out, len, "%u:%u/%u:%u peer %u:%u/%u:%u fl %02x:%02x/%02x:%02x", f->prod_wrap, f->prod_count,
           f->cons_wrap, f->cons_count, f->peer_prod_wrap, f->peer_prod_count, f->peer_cons_wrap, f->peer_cons_count,
           f->tx_prod_flags, f->tx_conn_flags, f->rx_prod_flags, f->rx_conn_flags);
}

static void conn_text(struct gather *g, size_t i, rrpc__sb *b) {
  const rrpc__conn_facts *f = &g->facts[i];
  const rrpc__socket_stats *s = &g->stats[i];
  char fb[96], credits[24] = "-", qpn[12] = "-", pqpn[12] = "-", win[24] = "-";
  fallback_text(s->fallback_code, fb, sizeof fb);
  if (f->qpn) snprintf(qpn, sizeof qpn, "%u", f->qpn);
  if (f->peer_qpn) snprintf(pqpn, sizeof pqpn, "%u", f->peer_qpn);
  if (f->peer_ring_size) {
    snprintf(win, sizeof win, "%llu", (unsigned long long)f->window_free);
    snprintf(credits, sizeof credits, "%u/%u", f->credits, f->credits_max);
  }
  rrpc__sb_printf(b, "%-21s %-6s %-9s %-28s %-12s %8s %8s %9s %9s %12llu %12llu %8.0f", g->peer[i],
                  s->is_client ? "client" : "server", transport_name(f), fb, g->loop[i], qpn, pqpn, win, credits,
                  (unsigned long long)s->bytes_in, (unsigned long long)s->bytes_out,
                  (double)(g->now_us - s->created_us) / 1e6);
  if (g->detail) {
    char cur[96];
    cursor_text(f, cur, sizeof cur);
    rrpc__sb_printf(b, "  %-20s %-8s %4d %4d %-39s %9u %9u %6llu %3d %9llu %-7s %s", f->state,
                    f->device[0] ? f->device : "-", f->port, f->gid_index, f->gid[0] ? f->gid : "-", f->ring_size,
                    f->peer_ring_size, (unsigned long long)f->sq_used, f->write_blocked,
                    (unsigned long long)f->zc_held, f->dialect[0] ? f->dialect : "-", cur);
  }
  rrpc__sb_puts(b, "\n");
}

/* One table cell: text escaped; numeric (1) cells align right, long text
 * ones (2: fallback reason, GID) may wrap. */
static void cell(rrpc__sb *b, const char *text, int kind) {
  rrpc__sb_puts(b, kind == 1 ? "<td class=\"n\">" : kind == 2 ? "<td class=\"w\">" : "<td>");
  rrpc__sb_html(b, text, strlen(text));
  rrpc__sb_puts(b, "</td>");
}

static void cell_u(rrpc__sb *b, unsigned long long v) {
  char t[24];
  snprintf(t, sizeof t, "%llu", v);
  cell(b, t, 1);
}

static const char *const k_cols[] = {"Peer", "Side", "Transport", "Fallback", "Loop", "QPN", "PeerQPN",
                                     "Window", "Credits", "BytesIn", "BytesOut", "Age(s)"};
static const char *const k_detail_cols[] = {"State", "Device", "Port", "GidX", "GID", "Ring",
                                            "PeerRing", "SQUsed", "Blk", "ZcHeld", "Dialect", "Cursors"};

/* A browser's /connections: the text page's columns as an HTML table, which
 * stays readable where the detail lines (~290 characters) would not. */
static void conn_html(struct gather *g, size_t i, rrpc__sb *b) {
  const rrpc__conn_facts *f = &g->facts[i];
  const rrpc__socket_stats *s = &g->stats[i];
  char fb[96], t[24];
  fallback_text(s->fallback_code, fb, sizeof fb);
  rrpc__sb_puts(b, "<tr>");
  cell(b, g->peer[i], 0);
  cell(b, s->is_client ? "client" : "server", 0);
  cell(b, transport_name(f), 0);
  cell(b, fb, 2);
  cell(b, g->loop[i], 0);
  if (f->qpn) cell_u(b, f->qpn); else cell(b, "-", 1);
  if (f->peer_qpn) cell_u(b, f->peer_qpn); else cell(b, "-", 1);
  if (f->peer_ring_size) {
    cell_u(b, (unsigned long long)f->window_free);
    snprintf(t, sizeof t, "%u/%u", f->credits, f->credits_max);
    cell(b, t, 1);
  } else {
    cell(b, "-", 1);
    cell(b, "-", 1);
  }
  cell_u(b, (unsigned long long)s->bytes_in);
  cell_u(b, (unsigned long long)s->bytes_out);
  snprintf(t, sizeof t, "%.0f", (double)(g->now_us - s->created_us) / 1e6);
  cell(b, t, 1);
  if (g->detail) {
    cell(b, f->state[0] ? f->state : "-", 0);
    cell(b, f->device[0] ? f->device : "-", 0);
    snprintf(t, sizeof t, "%d", f->port);
    cell(b, t, 1);
    snprintf(t, sizeof t, "%d", f->gid_index);
    cell(b, t, 1);
    cell(b, f->gid[0] ? f->gid : "-", 2);
    cell_u(b, f->ring_size);
    cell_u(b, f->peer_ring_size);
    cell_u(b, (unsigned long long)f->sq_used);
    snprintf(t, sizeof t, "%d", f->write_blocked);
    cell(b, t, 1);
    cell_u(b, (unsigned long long)f->zc_held);
    cell(b, f->dialect[0] ? f->dialect : "-", 0);
    char cur[96];
    cursor_text(f, cur, sizeof cur);
    cell(b, cur, 2);
  }
  rrpc__sb_puts(b, "</tr>\n");
}

static void render_connections_html(struct gather *g, rrpc__sb *b) {
  rrpc__page_html_begin(b, g->req.path);
  rrpc__sb_printf(b, "<h3>Connections of the server on port %d: %zu</h3><table><tr>", g->port, g->total);
  for (size_t c = 0; c < sizeof k_cols / sizeof k_cols[0]; c++) rrpc__sb_printf(b, "<th>%s</th>", k_cols[c]);
  for (size_t c = 0; g->detail && c < sizeof k_detail_cols / sizeof k_detail_cols[0]; c++)
    rrpc__sb_printf(b, "<th>%s</th>", k_detail_cols[c]);
  rrpc__sb_puts(b, "</tr>\n");
  for (size_t i = 0; i < g->n; i++) conn_html(g, i, b);
  rrpc__sb_puts(b, "</table>");
  if (g->n < g->total)
    rrpc__sb_printf(b, "<p>%zu more not listed: builtin_max_connections_listed</p>", g->total - g->n);
  rrpc__sb_puts(b, g->detail ? "<p><a href=\"/connections\">fewer columns</a></p>"
                             : "<p><a href=\"/connections?detail=1\">more columns</a></p>");
  rrpc__page_html_end(b);
}

static void render_connections(struct gather *g, rrpc__sb *b) {
  if (g->json) {
    rrpc__sb_printf(b, "{\"port\":%d,\"total\":%zu,\"listed\":%zu,\"connections\":[", g->port, g->total, g->n);
    for (size_t i = 0; i < g->n; i++) conn_json(g, i, b);
    rrpc__sb_puts(b, "\n]}\n");
    return;
  }
  rrpc__sb_printf(b, "%-21s %-6s %-9s %-28s %-12s %8s %8s %9s %9s %12s %12s %8s", "Peer", "Side", "Transport",
                  "Fallback", "Loop", "QPN", "PeerQPN", "Window", "Credits", "BytesIn", "BytesOut", "Age(s)");
  if (g->detail)
    rrpc__sb_printf(b, "  %-20s %-8s %4s %4s %-39s %9s %9s %6s %3s %9s %-7s %s", "State", "Device", "Port", "GidX",
                    "GID", "Ring", "PeerRing", "SQUsed", "Blk", "ZcHeld", "Dialect",
                    "Cursors(prod/cons peer prod/cons fl tx/rx)");
  rrpc__sb_puts(b, "\n");
  for (size_t i = 0; i < g->n; i++) conn_text(g, i, b);
  if (g->n < g->total)
    rrpc__sb_printf(b, "(%zu more not listed: builtin_max_connections_listed)\n", g->total - g->n);
}

/* ---- /rdma ----------------------------------------------------------------- */

static void render_rdma(struct gather *g, rrpc__sb *b) {
  rrpc__rdma_runtime_facts rt;
  int have = rrpc__rdma_runtime_facts_get(&rt) == 0;
  rrpc__varlist l;
  rrpc__vars_collect(&l);
  size_t nrdma = 0, nhs = 0; /* on RDMA / handshake still running */
  for (size_t i = 0; i < g->n; i++) {
    nrdma += g->facts[i].is_rdma;
    nhs += !g->facts[i].is_rdma && strcmp(g->facts[i].transport, "rdma") == 0;
  }
  if (g->json) {
    rrpc__sb_printf(b, "{\"compiled_in\":%d,\"device_open\":%d,\"device\":", have, have && rt.device_open);
    rrpc__sb_json_str(b, have ? rt.device : "");
    rrpc__sb_printf(b, ",\"port\":%d,\"link_layer\":", rt.port);
    rrpc__sb_json_str(b, have ? rt.link_layer : "");
    rrpc__sb_printf(b, ",\"active_mtu\":%d,\"max_inline\":%u,\"pool_bytes\":%llu,\"pool_max_bytes\":%llu,"
                       "\"rdma_connections\":%zu,\"handshakes_in_progress\":%zu,\"gids\":[",
                    rt.active_mtu, rt.max_inline, (unsigned long long)rt.pool_bytes,
                    (unsigned long long)rt.pool_max_bytes, nrdma, nhs);
  } else if (!have) {
    rrpc__sb_puts(b, "RDMA is not compiled into this build\n");
  } else {
    rrpc__sb_printf(b, "%-10s %-4s %-10s %-6s %-9s %14s %14s %8s %11s\n", "Device", "Port", "LinkLayer", "MTU",
                    "MaxInline", "PoolBytes", "PoolMaxBytes", "RdmaConn", "Handshaking");
    rrpc__sb_printf(b, "%-10s %-4d %-10s %-6d %-9u %14llu %14llu %8zu %11zu\n\n",
                    rt.device_open ? rt.device : "(none)", rt.port, rt.device_open ? rt.link_layer : "-",
                    rt.active_mtu, rt.max_inline, (unsigned long long)rt.pool_bytes,
                    (unsigned long long)rt.pool_max_bytes, nrdma, nhs);
    rrpc__sb_printf(b, "%-10s %-4s %-8s %-39s %s\n", "Device", "Port", "GidIndex", "GID (in use)", "Connections");
  }
  /* GIDs in use: distinct (device, index) over this server's connections. */
  int first = 1;
  for (size_t i = 0; i < g->n; i++) {
    const rrpc__conn_facts *f = &g->facts[i];
    if (f->gid_index < 0 || f->gid[0] == '\0') continue;
    int seen = 0;
    size_t uses = 0;
    for (size_t j = 0; j < g->n; j++) {
      if (g->facts[j].gid_index == f->gid_index && strcmp(g->facts[j].device, f->device) == 0) {
        if (j < i) seen = 1;
        uses++;
      }
    }
    if (seen) continue;
    if (g->json) {
      rrpc__sb_printf(b, "%s{\"device\":", first ? "" : ",");
      rrpc__sb_json_str(b, f->device);
      rrpc__sb_printf(b, ",\"port\":%d,\"gid_index\":%d,\"gid\":", f->port, f->gid_index);
      rrpc__sb_json_str(b, f->gid);
      rrpc__sb_printf(b, ",\"connections\":%zu}", uses);
    } else {
      rrpc__sb_printf(b, "%-10s %-4d %-8d %-39s %zu\n", f->device, f->port, f->gid_index, f->gid, uses);
    }
    first = 0;
  }
  if (g->json) {
    rrpc__sb_puts(b, "],\"counters\":");
    rrpc__vars_render(&l, RRPC_FMT_JSON, "rrpc_rdma_", b);
    rrpc__sb_puts(b, "}\n");
  } else if (have) {
    rrpc__sb_puts(b, "\n");
    rrpc__vars_render(&l, RRPC_FMT_TEXT, "rrpc_rdma_", b);
    rrpc__vars_render(&l, RRPC_FMT_TEXT, "rrpc_fallbacks_", b);
  }
  rrpc__vars_free(&l);
}

/* ---- gathering ----------------------------------------------------------------- */

static void one_done(void *arg) {
  struct gather *g = arg;
  if (atomic_fetch_sub(&g->pending, 1) != 1) return;
  rrpc__sb b;
  rrpc__sb_init(&b, RRPC_SB_PAGE_MAX);
  if (g->rdma_page) {
    render_rdma(g, &b);
  } else if (g->req.accepts_html && !g->json) {
    render_connections_html(g, &b);
    if (b.truncated) rrpc__sb_puts(&b, "<p>(truncated)</p>");
    rrpc__builtin_count_status(200);
    rrpc__http_respond(g->http, 200, "text/html; charset=utf-8", &b, g->req.is_head);
    rrpc__sb_free(&b);
    gather_free(g);
    return;
  } else {
    render_connections(g, &b);
  }
  rrpc__page_respond(g->http, &g->req, g->json ? "application/json" : "text/plain; charset=utf-8", &b);
  rrpc__sb_free(&b);
  gather_free(g);
}

static int gather_alloc(struct gather *g, size_t max) {
  g->socks = calloc(max ? max : 1, sizeof *g->socks);
  g->stats = calloc(max ? max : 1, sizeof *g->stats);
  g->facts = calloc(max ? max : 1, sizeof *g->facts);
  g->loop = calloc(max ? max : 1, sizeof *g->loop);
  g->peer = calloc(max ? max : 1, sizeof *g->peer);
  return g->socks && g->stats && g->facts && g->loop && g->peer ? 0 : -1;
}

static void answer_plain(rrpc__socket *sock, int status, const char *text, int is_head) {
  rrpc__builtin_count_status(status);
  rrpc__sb b;
  rrpc__sb_init(&b, 256);
  rrpc__sb_puts(&b, text);
  rrpc__http_respond(sock, status, "text/plain; charset=utf-8", &b, is_head);
  rrpc__sb_free(&b);
}

void rrpc__page_connections(rrpc_server *srv, rrpc__socket *sock, const rrpc__http_req *req, int json,
                            int rdma_page) {
  if (rrpc__builtin_listing_begin() != 0) {
    answer_plain(sock, 503, "503 Service Unavailable: builtin_max_concurrent_listings pages are being built\n",
                 req->is_head);
    return;
  }
  struct gather *g = calloc(1, sizeof *g);
  size_t max = rrpc__builtin_max_listed(), total = 0;
  rrpc__server_conns(srv, NULL, 0, &total);
  if (max > total + 64) max = total + 64; /* connections that arrive meanwhile are not listed */
  if (g == NULL || gather_alloc(g, max) != 0) {
    if (g != NULL) gather_free(g); /* ends the listing too */
    else rrpc__builtin_listing_end();
    answer_plain(sock, 500, "500 Internal Server Error: out of memory\n", req->is_head);
    return;
  }
  char v[8];
  g->http = sock;
  rrpc__socket_ref(sock);
  g->req = *req;
  g->json = json;
  g->rdma_page = rdma_page;
  g->detail = rrpc__http_query_get(req->query, "detail", v, sizeof v) && strcmp(v, "0") != 0;
  g->port = rrpc_server_port(srv);
  g->use_rdma = rrpc__server_options(srv)->use_rdma;
  g->now_us = rrpc__now_us();
  g->n = rrpc__server_conns(srv, g->socks, max, &g->total);
  if (g->n < g->total) rrpc__builtin_count_status(-1);
  atomic_init(&g->pending, g->n + 1); /* + this thread's own share */
  for (size_t i = 0; i < g->n; i++) {
    rrpc__socket_get_stats(g->socks[i], &g->stats[i]);
    snprintf(g->loop[i], LOOP_NAME_MAX, "%s", rrpc__loop_name(g->stats[i].loop));
    rrpc__socket_peer_str(g->socks[i], g->peer[i], sizeof g->peer[i]);
  }
  for (size_t i = 0; i < g->n; i++)
    if (rrpc__socket_facts_async(g->socks[i], &g->facts[i], one_done, g) != 0) {
      snprintf(g->facts[i].transport, sizeof g->facts[i].transport, "closed");
      one_done(g);
    }
  one_done(g);
}
