/* internal/idmap.h - private to the rrpc core: a hash map from a non-zero
 * 64-bit id (a correlation id) to a borrowed pointer. Open addressing with
 * linear probing and backward-shift deletion, so it never fills with
 * tombstones. [thread-compatible]: callers lock. */
#ifndef RRPC_INTERNAL_IDMAP_H
#define RRPC_INTERNAL_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct rrpc__idmap_slot {
  uint64_t id; /* 0 = empty */
  void *val;
} rrpc__idmap_slot;

typedef struct rrpc__idmap {
  rrpc__idmap_slot *slots;
  size_t cap; /* power of two, or 0 */
  size_t count;
} rrpc__idmap;

void rrpc__idmap_init(rrpc__idmap *m);
void rrpc__idmap_destroy(rrpc__idmap *m);
/* put - insert a new id (must not be present, must not be 0). 0 or -ENOMEM. */
int rrpc__idmap_put(rrpc__idmap *m, uint64_t id, void *val);
/* take - remove id and return its value, or NULL if absent. */
void *rrpc__idmap_take(rrpc__idmap *m, uint64_t id);
/* take_any - remove some entry and return its value; NULL when empty. */
void *rrpc__idmap_take_any(rrpc__idmap *m);
size_t rrpc__idmap_count(const rrpc__idmap *m);

#endif /* RRPC_INTERNAL_IDMAP_H */
