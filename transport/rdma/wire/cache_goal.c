/* wire/cache_goal.c - the piece cache's per-class goals (see cache_goal.h). */
#include "transport/rdma/wire/cache_goal.h"

uint32_t rrpc__cache_goal_max(int c, int wanted) {
  if (c < 0 || c > RRPC_PIECE_CODE_MAX) return 0;
  if (c == 0) return RRPC_CACHE_IDLE_PIECES;
  uint32_t len = rrpc__grant_piece_len((uint8_t)c);
  if (len > (256u << 10)) return wanted ? 1 : 0;
  return RRPC_CACHE_CLASS_MAX_BYTES / len;
}

/* Class c's goal now, given its cap max (> 1, not the idle class). */
static uint32_t goal_within(struct rrpc__cache_goals *g, int c, uint32_t max) {
  if (g->goal[c] == 0) {
    uint32_t start = RRPC_CACHE_CLASS_START_BYTES / rrpc__grant_piece_len((uint8_t)c);
    g->goal[c] = start < 2 ? 2 : start;
  }
  return g->goal[c] < max ? g->goal[c] : max;
}

uint32_t rrpc__cache_goal(struct rrpc__cache_goals *g, int c, int wanted) {
  uint32_t max = rrpc__cache_goal_max(c, wanted);
  if (c == 0 || max <= 1) return max;
  return goal_within(g, c, max);
}

void rrpc__cache_goal_missed(struct rrpc__cache_goals *g, int c, int wanted) {
  uint32_t max = rrpc__cache_goal_max(c, wanted);
  if (c == 0 || max <= 1) return;
  uint32_t t = goal_within(g, c, max);
  if (t < max) g->goal[c] = t * 2 < max ? t * 2 : max;
}
