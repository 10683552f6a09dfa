/* preload_frame_fuzzer - the rrpc-run relay's frame headers (preload/frame.h)
 * over hostile bytes: walk the input as the relay's on_data walks a stream
 * (header, payload, header, ...), checking that a decoded header is one an
 * encoder makes (so re-encoding gives the same bytes) and that a header the
 * relay refuses is never one it sends; and the server relay's hello check. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "preload/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* The hello check a server relay makes on a client's first bytes. */
  int m = rrpc_run_hello_match(data, size);
  static const unsigned char clc[4] = {0xe2, 0xd4, 0xc3, 0xd9};
  size_t k = size < RRPC_RUN_HELLO_LEN ? size : RRPC_RUN_HELLO_LEN;
  size_t e = size < 4 ? size : 4;
  int want = memcmp(data, RRPC_RUN_HELLO, k) == 0 ? (k == RRPC_RUN_HELLO_LEN ? 1 : 0)
             : memcmp(data, clc, e) == 0          ? (e == 4 ? -2 : 0)
                                                  : -1;
  if (m != want) abort();
  size_t off = 0;
  while (off < size) {
    rrpc_run_frame f;
    int rc = rrpc_run_frame_decode(data + off, size - off, &f);
    if (rc != 0) break;
    unsigned char again[RRPC_RUN_FRAME_HDR];
    if (rrpc_run_frame_encode(f.fin, f.len, again) != 0) abort();
    if (memcmp(again, data + off, sizeof again) != 0) abort();
    if (f.fin ? f.len != 0 : (f.len == 0 || f.len > RRPC_RUN_FRAME_MAX)) abort();
    off += RRPC_RUN_FRAME_HDR + f.len;
  }
  /* Every length the encoder takes decodes to itself. */
  if (size >= 4) {
    uint32_t len;
    memcpy(&len, data, sizeof len);
    unsigned char h[RRPC_RUN_FRAME_HDR];
    rrpc_run_frame f;
    if (rrpc_run_frame_encode(0, len, h) == 0 &&
        (rrpc_run_frame_decode(h, sizeof h, &f) != 0 || f.fin || f.len != len))
      abort();
  }
  return 0;
}
