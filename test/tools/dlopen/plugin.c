/* plugin.c - a shared object linked against librrpc.so that a program
 * dlopen()s (dlopen_test.sh): librrpc.so is then loaded after start-up, as
 * a plugin's or a language binding's library is. */
#include <stdio.h>
#include <string.h>

#include "rrpc/rrpc.h"

static void echo(void *arg, rrpc_server_call *call) {
  (void)arg;
  rrpc_server_call_respond(call, rrpc_server_call_request(call));
}

static int one_call(rrpc_channel *ch, int i) {
  rrpc_controller *cntl = NULL;
  rrpc_iobuf *req = NULL, *resp = NULL;
  char want[32], got[32];
  int n = (int)sizeof want;
  memset(want, 'a' + i % 26, sizeof want);
  int rc = rrpc_controller_new(&cntl);
  if (rc == 0) rc = rrpc_iobuf_new(&req);
  if (rc == 0) rc = rrpc_iobuf_new(&resp);
  if (rc == 0) rc = rrpc_iobuf_append(req, want, sizeof want);
  if (rc == 0) rc = rrpc_channel_call(ch, "t.Echo", "Echo", cntl, req, resp, NULL, NULL);
  if (rc == 0 && (rrpc_iobuf_length(resp) != (size_t)n || rrpc_iobuf_copy_out(resp, 0, got, sizeof got) != sizeof got ||
                  memcmp(want, got, sizeof got) != 0))
    rc = -1;
  rrpc_iobuf_free(resp);
  rrpc_iobuf_free(req);
  rrpc_controller_free(cntl);
  return rc;
}

/* 0 when `calls` echo calls over loopback came back whole, else the first
 * failure's code. */
int plugin_roundtrip(int calls) {
  rrpc_server *srv = NULL;
  rrpc_channel *ch = NULL;
  char addr[32];
  int rc = rrpc_server_new(NULL, &srv);
  if (rc == 0) rc = rrpc_server_add_method(srv, "t.Echo", "Echo", echo, NULL);
  if (rc == 0) rc = rrpc_server_start(srv, "127.0.0.1:0");
  if (rc == 0) {
    snprintf(addr, sizeof addr, "127.0.0.1:%d", rrpc_server_port(srv));
    rc = rrpc_channel_new(addr, NULL, &ch);
  }
  for (int i = 0; rc == 0 && i < calls; i++) rc = one_call(ch, i);
  rrpc_channel_free(ch);
  rrpc_server_free(srv);
  return rc;
}
