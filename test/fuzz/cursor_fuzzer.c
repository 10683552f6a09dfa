/* cursor_fuzzer.c - libFuzzer target for the cursor dialect's flow control
 * (transport/rdma/wire/cursor_window.h) fed through the CDC codec
 * (transport/smc/cdc.h), as a victim endpoint sees a peer.
 *
 * Mode 0 (hostile peer): the input is a stream of steps; each either
 * decodes 44 raw bytes as a CDC (token forced to ours half of the time so
 * the cursor checks are reached), or writes/consumes locally. A refused CDC
 * must leave the window unchanged; after every step the received bytes fit
 * the ring, the peer never consumed more than was written, and a consumer
 * update never claims bytes not consumed.
 *
 * Mode 1 (honest peers): two windows over fuzzer-chosen rings exchange
 * writes and CDCs in fuzzer-chosen order and sizes, with the receiver
 * reading at fuzzer-chosen times and sending consumer updates by the kernel
 * rule only. Every CDC must be accepted; then both sides read everything
 * and follow the rule alone: a blocked writer must get all its bytes
 * through (no deadlock) within a bounded number of rounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrpc/errors.h"
#include "transport/rdma/wire/cursor_window.h"
#include "transport/smc/cdc.h"

static void check(int ok, const char *what, int line) {
  if (!ok) {
    fprintf(stderr, "cursor_fuzzer: check failed at line %d: %s\n", line, what);
    abort();
  }
}
#define CHECK(x) check((x), #x, __LINE__)

struct input {
  const uint8_t *p;
  size_t n;
};

static uint32_t get(struct input *in, int bytes) {
  uint32_t v = 0;
  while (bytes-- > 0) {
    v <<= 8;
    if (in->n > 0) {
      v |= *in->p++;
      in->n--;
    }
  }
  return v;
}

static void invariants(const struct rrpc__cur_window *w) {
  CHECK(w->rx_cons <= w->rx_prod);
  CHECK(w->rx_prod - w->rx_cons <= w->rx_ring);
  CHECK(w->rx_cons_sent <= w->rx_cons);
  CHECK(w->tx_peer_cons <= w->tx_prod);
  CHECK(w->tx_prod - w->tx_peer_cons <= w->tx_ring);
}

static uint32_t ring_of(uint32_t code) { return 16384u << (code % 4); }

/* ---- mode 0 ------------------------------------------------------------------ */

static void hostile(struct input *in) {
  struct rrpc__cur_window w;
  CHECK(rrpc__cur_init(&w, ring_of(get(in, 1)), ring_of(get(in, 1)), get(in, 4)) == 0);
  for (int step = 0; step < 256 && in->n > 0; step++) {
    uint32_t op = get(in, 1) % 4;
    if (op == 0 || op == 1) {
      uint8_t raw[RRPC_CDC_LEN];
      memset(raw, 0, sizeof raw);
      for (size_t i = 0; i < sizeof raw && in->n > 0; i++) raw[i] = (uint8_t)get(in, 1);
      raw[0] = RRPC_CDC_TYPE;
      raw[1] = RRPC_CDC_LEN;
      struct rrpc__cdc_msg m;
      if (rrpc__cdc_decode(raw, sizeof raw, &m) != 0) continue;
      if (op == 1) m.token = w.token;
      struct rrpc__cur_window before = w;
      struct rrpc__cur_event ev;
      enum rrpc__cur_violation why;
      int rc = rrpc__cur_on_cdc(&w, &m, &ev, &why);
      if (rc != 0) {
        CHECK(rc == -RRPC_EPARSE && why != RRPC_CUR_OK);
        CHECK(memcmp(&before, &w, sizeof w) == 0);
      } else if (!ev.stale) {
        CHECK(w.rx_prod == before.rx_prod + ev.new_bytes);
        CHECK(w.tx_peer_cons == before.tx_peer_cons + ev.freed);
      }
    } else if (op == 2) {
      struct rrpc__cur_seg seg[2];
      int nseg;
      uint32_t n = rrpc__cur_tx_plan(&w, get(in, 3), seg, &nseg);
      CHECK(n <= rrpc__cur_tx_free(&w));
      rrpc__cur_tx_commit(&w, n);
    } else {
      uint32_t avail = (uint32_t)(w.rx_prod - w.rx_cons);
      uint32_t n = avail ? get(in, 3) % (avail + 1) : 0;
      rrpc__cur_rx_consume(&w, n);
      if (rrpc__cur_update_due(&w)) {
        struct rrpc__cdc_msg m;
        rrpc__cur_make_cdc(&w, 1, 0, &m);
        uint64_t off;
        CHECK(rrpc__cdc_cursor_to_offset(&m.cons, w.rx_ring, w.rx_cons, &off) == 0 && off == w.rx_cons);
      }
    }
    invariants(&w);
  }
}

/* ---- mode 1 ------------------------------------------------------------------ */

struct side {
  struct rrpc__cur_window w;
  uint64_t pending; /* bytes the application still wants to send */
  int blocked_sent; /* a CDC with write blocked went out since the last room */
};

/* One CDC from a to b, carrying a's cursors; b must accept it. */
static void cdc(struct side *a, struct side *b) {
  struct rrpc__cdc_msg m;
  rrpc__cur_make_cdc(&a->w, b->w.token, 0, &m);
  uint8_t raw[RRPC_CDC_LEN];
  rrpc__cdc_encode(&m, raw);
  struct rrpc__cdc_msg d;
  CHECK(rrpc__cdc_decode(raw, sizeof raw, &d) == 0);
  struct rrpc__cur_event ev;
  enum rrpc__cur_violation why;
  CHECK(rrpc__cur_on_cdc(&b->w, &d, &ev, &why) == 0);
  CHECK(!ev.stale);
}

/* a writes what fits of its pending bytes; one CDC after the writes. */
static void write_some(struct side *a, struct side *b, uint32_t max) {
  uint64_t want = a->pending < max ? a->pending : max;
  struct rrpc__cur_seg seg[2];
  int nseg;
  uint32_t n = rrpc__cur_tx_plan(&a->w, want, seg, &nseg);
  a->w.tx_flags = n < a->pending ? RRPC_CDC_PF_WRITE_BLOCKED : 0;
  if (n == 0 && (a->pending == 0 || a->blocked_sent)) return;
  rrpc__cur_tx_commit(&a->w, n);
  a->pending -= n;
  a->blocked_sent = a->w.tx_flags != 0;
  cdc(a, b);
}

static void read_some(struct side *me, struct side *peer, uint32_t max) {
  uint32_t avail = (uint32_t)(me->w.rx_prod - me->w.rx_cons);
  rrpc__cur_rx_consume(&me->w, avail < max ? avail : max);
  if (rrpc__cur_update_due(&me->w)) cdc(me, peer);
}

static void honest(struct input *in) {
  uint32_t r0 = ring_of(get(in, 1)), r1 = ring_of(get(in, 1));
  struct side s[2];
  memset(s, 0, sizeof s);
  CHECK(rrpc__cur_init(&s[0].w, r1, r0, 0x100) == 0);
  CHECK(rrpc__cur_init(&s[1].w, r0, r1, 0x200) == 0);
  s[0].pending = get(in, 3) * 4u;
  s[1].pending = get(in, 3) * 4u;
  uint64_t total[2] = {s[0].pending, s[1].pending};
  for (int step = 0; step < 512 && in->n > 0; step++) {
    uint32_t op = get(in, 1);
    struct side *a = &s[op & 1], *b = &s[(op & 1) ^ 1];
    if (op & 2) write_some(a, b, get(in, 3));
    else read_some(a, b, get(in, 3));
    if (rrpc__cur_tx_free(&a->w) > 0) a->blocked_sent = 0;
    invariants(&a->w);
    invariants(&b->w);
  }
  /* The rules alone from here: everything must get through. */
  for (int round = 0; round < 100000 && (s[0].pending || s[1].pending || s[0].w.rx_cons != s[0].w.rx_prod ||
                                         s[1].w.rx_cons != s[1].w.rx_prod);
       round++) {
    for (int i = 0; i < 2; i++) {
      if (rrpc__cur_tx_free(&s[i].w) > 0) s[i].blocked_sent = 0;
      write_some(&s[i], &s[i ^ 1], UINT32_MAX);
      read_some(&s[i ^ 1], &s[i], UINT32_MAX);
    }
  }
  CHECK(s[0].pending == 0 && s[1].pending == 0);
  CHECK(s[1].w.rx_prod == total[0] && s[0].w.rx_prod == total[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct input in = {data, size};
  if (get(&in, 1) & 1) honest(&in);
  else hostile(&in);
  return 0;
}
