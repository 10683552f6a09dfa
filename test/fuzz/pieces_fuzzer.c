/* pieces_fuzzer.c - libFuzzer target for the elastic ring's two sides
 * (transport/rdma/wire/pieces.h) driven by test/common/pieces_model.h: the
 * input chooses the configuration and every step of the schedule (writes,
 * deliveries, releases in any order, holds, grants that fail, idle ticks);
 * the model checks its invariants after each step, then that the stream
 * finishes with the held slices still held (liveness) and that an idle pair
 * comes down to the idle piece. An input whose first byte is odd ends with
 * a hostile message or write completion built from the input: each side
 * must refuse it with its state unchanged, or take it as an honest peer's
 * (then the run ends there: a hostile peer only breaks its own
 * connection). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/common/pieces_model.h"

static struct pm model;

static struct rrpc__prx_cfg config(uint8_t b) {
  struct rrpc__prx_cfg c;
  static const uint32_t rings[] = {16, 32, 64, 128}; /* KiB: small keeps runs fast */
  c.ring_max = (uint64_t)rings[b & 3] << 10;
  c.piece_min = 4096;
  c.piece_max = (uint32_t)(c.ring_max >> ((b >> 2) & 3));
  if (c.piece_max < c.piece_min) c.piece_max = c.piece_min;
  c.retired_max = c.ring_max * 4;
  return c;
}

/* A forged message or completion. Returns when the side refused it (state
 * unchanged but for its violation counter) or accepted it. */
static void hostile(struct pm *m, struct pm_src *s) {
  uint8_t buf[RRPC_GRANT_MSG_LEN];
  struct rrpc__grant_msg g;
  for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (uint8_t)pm_pick(s, 256);
  buf[1] = RRPC_GRANT_MSG_LEN;
  if (pm_pick(s, 2) == 0) buf[0] = (uint8_t)(RRPC_GRANT_T_GRANT + pm_pick(s, 4));
  if (rrpc__grant_decode(buf, sizeof(buf), &g) != 0) return; /* the codec refused it */
  switch (pm_pick(s, 3)) {
  case 0: { /* to the sender, as if from the receiver */
    struct rrpc__ptx before = m->tx;
    if (rrpc__ptx_on_ctl(&m->tx, &g) != 0) {
      before.n.violations = m->tx.n.violations;
      PM_CHECK(memcmp(&before, &m->tx, sizeof(before)) == 0, "a refused message changed the sender");
    }
    break;
  }
  case 1: { /* to the receiver, as if from the sender */
    struct rrpc__prx before = m->rx;
    uint16_t fid;
    if (rrpc__prx_on_ctl(&m->rx, &g, &fid) != 0) {
      before.n.violations = m->rx.n.violations;
      PM_CHECK(memcmp(&before, &m->rx, sizeof(before)) == 0, "a refused message changed the receiver");
    }
    break;
  }
  default: { /* a write completion naming any piece, any length */
    struct rrpc__prx before = m->rx;
    uint32_t off;
    if (rrpc__prx_on_write(&m->rx, (uint16_t)pm_pick(s, 70000), pm_pick(s, 70000), &off) != 0) {
      before.n.violations = m->rx.n.violations;
      PM_CHECK(memcmp(&before, &m->rx, sizeof(before)) == 0, "a refused write changed the receiver");
    }
    break;
  }
  }
  m->closed = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct pm_src s;
  struct rrpc__prx_cfg c;
  int hostile_end;
  if (size < 2) return 0;
  c = config(data[0] >> 1);
  hostile_end = data[0] & 1;
  pm_init(&model, &c, 1u + data[1] * 32u);
  model.grant_fail_1_in = 6;
  memset(&s, 0, sizeof(s));
  s.p = data + 2;
  s.n = size - 2;
  s.bytes = 1;
  for (int step = 0; step < 20000 && !pm_src_done(&s); step++) {
    if (hostile_end && s.n <= 48) break;
    pm_step(&model, &s);
  }
  if (hostile_end) {
    hostile(&model, &s);
  } else {
    pm_drain(&model);
    pm_idle(&model);
  }
  pm_free_all(&model);
  return 0;
}
