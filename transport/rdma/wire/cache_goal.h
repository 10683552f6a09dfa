/* wire/cache_goal.h - how many cleared, registered pieces of each size class
 * the elastic piece cache (pieces_mem.c) aims at. Pure logic, no verbs, so
 * the rule is tested on any host (test/rdma_cache_goal_unittest.cc).
 *
 * The 4 KiB class (every connection's idle grant) aims at a fixed stock
 * for a burst of new connections. Classes up to 256 KiB start at 64 KiB
 * worth (at least 2 pieces) and double their goal each time a take finds
 * them empty, up to about 1 MiB each: small calls stay in 4 - 8 KiB pieces,
 * so a new process pins ~1.3 MiB (84 pieces) instead of ~6.3 MiB (316),
 * while a bulk stream grows its classes within its first misses. Larger
 * classes keep one piece, and only once one was asked for. */
#ifndef RRPC_TRANSPORT_RDMA_WIRE_CACHE_GOAL_H
#define RRPC_TRANSPORT_RDMA_WIRE_CACHE_GOAL_H

#include <stdint.h>

#include "transport/rdma/wire/grant.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  RRPC_CACHE_IDLE_PIECES = 64,             /* 4 KiB pieces kept */
  RRPC_CACHE_CLASS_MAX_BYTES = 1 << 20,    /* a class up to 256 KiB: at most about this much */
  RRPC_CACHE_CLASS_START_BYTES = 64 << 10, /* ... starting from this much */
};

/* Per-class goals; zero-initialised means "not set yet". */
struct rrpc__cache_goals {
  uint32_t goal[RRPC_PIECE_CODE_MAX + 1];
};

/* rrpc__cache_goal_max - the most pieces of class c (size code) the cache
 * may aim at; `wanted`: a take of that class missed (classes over 256 KiB
 * are kept only then). */
uint32_t rrpc__cache_goal_max(int c, int wanted);

/* rrpc__cache_goal - what class c aims at now (sets its start value on
 * first use). */
uint32_t rrpc__cache_goal(struct rrpc__cache_goals *g, int c, int wanted);

/* rrpc__cache_goal_missed - a take found class c empty: double its goal,
 * up to rrpc__cache_goal_max. */
void rrpc__cache_goal_missed(struct rrpc__cache_goals *g, int c, int wanted);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_TRANSPORT_RDMA_WIRE_CACHE_GOAL_H */
