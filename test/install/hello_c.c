/* hello_c.c - an out-of-tree C program built against an installed rrpc
 * (tools/check-install): the version macros and call agree, and a server
 * starts and stops on loopback. Touching the RDMA API makes a static link
 * need libibverbs, which the link line from rrpc.pc must bring. */
#include <stdio.h>
#include <string.h>

#include "rrpc/rrpc.h"

int main(void) {
  if (rrpc_version() != RRPC_VERSION || strcmp(rrpc_version_string(), RRPC_VERSION_STRING) != 0) {
    fprintf(stderr, "hello_c: headers say %s, library says %s\n", RRPC_VERSION_STRING,
            rrpc_version_string());
    return 1;
  }
  rrpc_server *s = NULL;
  int rc = rrpc_server_new(NULL, &s);
  if (rc == 0) rc = rrpc_server_start(s, "127.0.0.1:0");
  if (rc != 0) {
    fprintf(stderr, "hello_c: %s\n", rrpc_strerror(rc));
    return 1;
  }
  printf("hello_c: rrpc %s, server on port %d, RDMA device %s\n", rrpc_version_string(),
         rrpc_server_port(s), rrpc_rdma_available() ? "present" : "absent");
  rrpc_server_stop(s);
  rrpc_server_free(s);
  return 0;
}
