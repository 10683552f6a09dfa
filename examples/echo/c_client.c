/* c_client.c - one echo call in plain C on the rrpc C API (protobuf bytes
 * by hand, see echo_wire.h).
 * Usage: c_client [ip:port] [message]   (default 127.0.0.1:8000 hello; --help prints usage) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "examples/echo/echo_wire.h"
#include "rrpc/rrpc.h"

static void usage(FILE *to) {
  fprintf(to, "usage: c_client [IP:PORT [MESSAGE]]   (default 127.0.0.1:8000 hello)\n"
              "Makes one example.EchoService.Echo call with an attachment and prints the reply.\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
    usage(stderr);
    return 2;
  }
  const char *addr = argc > 1 ? argv[1] : "127.0.0.1:8000";
  const char *text = argc > 2 ? argv[2] : "hello";
  rrpc_channel *ch = NULL;
  rrpc_controller *cntl = NULL;
  rrpc_iobuf *req = NULL, *resp = NULL;
  char *bytes = NULL;
  int status = 1;

  int rc = rrpc_channel_new(addr, NULL, &ch);
  if (rc == -EINVAL) {
    fprintf(stderr, "c_client: '%s' is not IP:PORT\n", addr);
    usage(stderr);
    return 2;
  }
  if (rc == 0) rc = rrpc_controller_new(&cntl);
  if (rc == 0) rc = rrpc_iobuf_new(&req);
  if (rc == 0) rc = rrpc_iobuf_new(&resp);
  if (rc == 0) rc = echo_wire_append(req, text, strlen(text));
  if (rc == 0)
    rc = rrpc_iobuf_append(rrpc_controller_request_attachment(cntl), "an attachment", 13);
  if (rc != 0) {
    fprintf(stderr, "c_client: %s\n", rrpc_strerror(rc));
    goto out;
  }
  rc = rrpc_channel_call(ch, "example.EchoService", "Echo", cntl, req, resp, NULL, NULL);
  if (rc != 0) {
    fprintf(stderr, "echo failed: [E%d] %s\n", -rc, rrpc_controller_error_text(cntl));
    goto out;
  }
  size_t n = rrpc_iobuf_length(resp);
  bytes = malloc(n ? n : 1);
  const char *msg;
  size_t msg_len;
  if (bytes == NULL) goto out;
  rrpc_iobuf_copy_out(resp, 0, bytes, n);
  if (echo_wire_decode(bytes, n, &msg, &msg_len) != 0) {
    fprintf(stderr, "echo failed: the response is not an example.EchoResponse\n");
    goto out;
  }
  const rrpc_iobuf *att = rrpc_controller_response_attachment(cntl);
  char remote[64];
  rrpc_controller_remote_side(cntl, remote, sizeof remote);
  printf("%.*s (attachment: %zu bytes) from %s in %lld us\n", (int)msg_len, msg,
         rrpc_iobuf_length(att), remote, (long long)rrpc_controller_latency_us(cntl));
  status = 0;
out:
  free(bytes);
  rrpc_iobuf_free(resp);
  rrpc_iobuf_free(req);
  rrpc_controller_free(cntl);
  rrpc_channel_free(ch);
  return status;
}
