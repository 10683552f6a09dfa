/* idmap.c - id -> pointer hash map for pending calls (internal/idmap.h). */
#include "rrpc/internal/idmap.h"

#include <errno.h>
#include <stdlib.h>

void rrpc__idmap_init(rrpc__idmap *m) {
  m->slots = NULL;
  m->cap = 0;
  m->count = 0;
}

void rrpc__idmap_destroy(rrpc__idmap *m) {
  free(m->slots);
  rrpc__idmap_init(m);
}

size_t rrpc__idmap_count(const rrpc__idmap *m) { return m->count; }

static size_t hash_id(uint64_t id) {
  /* Correlation ids are sequential: mix them so neighbours spread out. */
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return (size_t)id;
}

static void place(rrpc__idmap_slot *slots, size_t cap, uint64_t id, void *val) {
  size_t i = hash_id(id) & (cap - 1);
  while (slots[i].id != 0) i = (i + 1) & (cap - 1);
  slots[i].id = id;
  slots[i].val = val;
}

static int grow(rrpc__idmap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 16;
  rrpc__idmap_slot *ns = calloc(ncap, sizeof *ns);
  if (ns == NULL) return -ENOMEM;
  for (size_t i = 0; i < m->cap; i++)
    if (m->slots[i].id != 0) place(ns, ncap, m->slots[i].id, m->slots[i].val);
  free(m->slots);
  m->slots = ns;
  m->cap = ncap;
  return 0;
}

int rrpc__idmap_put(rrpc__idmap *m, uint64_t id, void *val) {
  /* Keep the load under 1/2 so probes stay short. */
  if ((m->count + 1) * 2 > m->cap) {
    int rc = grow(m);
    if (rc != 0) return rc;
  }
  place(m->slots, m->cap, id, val);
  m->count++;
  return 0;
}

/* Remove slot i and shift later members of its probe run back. */
static void remove_at(rrpc__idmap *m, size_t i) {
  size_t mask = m->cap - 1;
  size_t j = i;
  for (;;) {
    j = (j + 1) & mask;
    if (m->slots[j].id == 0) break;
    size_t home = hash_id(m->slots[j].id) & mask;
    /* Move j into the hole at i if its home is not in (i, j]. */
    int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) {
      m->slots[i] = m->slots[j];
      i = j;
    }
  }
  m->slots[i].id = 0;
  m->slots[i].val = NULL;
  m->count--;
}

void *rrpc__idmap_take(rrpc__idmap *m, uint64_t id) {
  if (m->cap == 0 || id == 0) return NULL;
  size_t mask = m->cap - 1;
  for (size_t i = hash_id(id) & mask;; i = (i + 1) & mask) {
    if (m->slots[i].id == 0) return NULL;
    if (m->slots[i].id == id) {
      void *v = m->slots[i].val;
      remove_at(m, i);
      return v;
    }
  }
}

void *rrpc__idmap_take_any(rrpc__idmap *m) {
  for (size_t i = 0; i < m->cap; i++) {
    if (m->slots[i].id != 0) {
      void *v = m->slots[i].val;
      remove_at(m, i);
      return v;
    }
  }
  return NULL;
}
