/* timer_heap.c - the per-loop timer set (internal/timer_heap.h): a binary
 * min-heap on (deadline, id) and an id -> node hash. No locking, no clock. */
#include "rrpc/internal/timer_heap.h"

#include <errno.h>
#include <stdlib.h>

struct rrpc__timer_node {
  uint64_t deadline;
  rrpc__timer_id id;
  rrpc__task_fn fn; /* borrowed from the caller of add */
  void *arg;        /* borrowed; never touched here */
  size_t heap_idx;  /* where the node sits in h->heap, kept current by set() */
  rrpc__timer_node *next_free;
};

/* Recycling a few nodes saves a malloc/free pair per RPC timeout; the cap
 * bounds what a burst of timers leaves behind. */
enum { FREE_NODES_MAX = 256, MIN_CAP = 16, MIN_SLOTS = 64 };

void rrpc__timer_heap_init(rrpc__timer_heap *h) {
  h->heap = NULL;
  h->len = h->cap = 0;
  h->slots = NULL;
  h->slot_mask = 0;
  h->free_nodes = NULL;
  h->free_count = 0;
  h->next_id = 1;
}

void rrpc__timer_heap_destroy(rrpc__timer_heap *h) {
  for (size_t i = 0; i < h->len; i++) free(h->heap[i]);
  while (h->free_nodes) {
    rrpc__timer_node *n = h->free_nodes;
    h->free_nodes = n->next_free;
    free(n);
  }
  free(h->heap);
  free(h->slots);
  rrpc__timer_heap_init(h);
}

size_t rrpc__timer_heap_size(const rrpc__timer_heap *h) { return h->len; }

uint64_t rrpc__timer_heap_next_deadline(const rrpc__timer_heap *h) {
  return h->len ? h->heap[0]->deadline : UINT64_MAX;
}

/* ---- heap ---------------------------------------------------------------- */

/* Equal deadlines fire in creation order: ids only grow. */
static int node_less(const rrpc__timer_node *a, const rrpc__timer_node *b) {
  return a->deadline < b->deadline || (a->deadline == b->deadline && a->id < b->id);
}

static void heap_set(rrpc__timer_heap *h, size_t i, rrpc__timer_node *n) {
  h->heap[i] = n;
  n->heap_idx = i;
}

static void sift_up(rrpc__timer_heap *h, size_t i) {
  rrpc__timer_node *n = h->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!node_less(n, h->heap[parent])) break;
    heap_set(h, i, h->heap[parent]);
    i = parent;
  }
  heap_set(h, i, n);
}

static void sift_down(rrpc__timer_heap *h, size_t i) {
  rrpc__timer_node *n = h->heap[i];
  for (;;) {
    size_t child = 2 * i + 1;
    if (child >= h->len) break;
    if (child + 1 < h->len && node_less(h->heap[child + 1], h->heap[child])) child++;
    if (!node_less(h->heap[child], n)) break;
    heap_set(h, i, h->heap[child]);
    i = child;
  }
  heap_set(h, i, n);
}

static void heap_remove_at(rrpc__timer_heap *h, size_t i) {
  rrpc__timer_node *last = h->heap[--h->len];
  if (i == h->len) return;
  heap_set(h, i, last);
  if (i > 0 && node_less(last, h->heap[(i - 1) / 2]))
    sift_up(h, i);
  else
    sift_down(h, i);
}

static int heap_reserve(rrpc__timer_heap *h, size_t want) {
  if (want <= h->cap) return 0;
  size_t cap = h->cap ? h->cap * 2 : MIN_CAP;
  rrpc__timer_node **p = realloc(h->heap, cap * sizeof *p);
  if (!p) return -ENOMEM;
  h->heap = p;
  h->cap = cap;
  return 0;
}

/* Give memory back after a burst (10k RPC timeouts that all completed).
 * Failure to shrink is harmless: the old array stays. */
static void heap_maybe_shrink(rrpc__timer_heap *h) {
  if (h->cap <= MIN_CAP || h->len >= h->cap / 4) return;
  rrpc__timer_node **p = realloc(h->heap, (h->cap / 2) * sizeof *p);
  if (!p) return;
  h->heap = p;
  h->cap /= 2;
}

/* ---- id -> node hash ----------------------------------------------------- */

/* Ids are sequential; a multiplicative mix spreads them over the table so
 * a run of cancelled neighbours does not build one long probe cluster. */
static size_t slot_of(rrpc__timer_id id, size_t mask) {
  uint64_t x = id * UINT64_C(0x9E3779B97F4A7C15);
  return (size_t)(x ^ (x >> 29)) & mask;
}

static void slots_insert(rrpc__timer_node **slots, size_t mask, rrpc__timer_node *n) {
  size_t i = slot_of(n->id, mask);
  while (slots[i]) i = (i + 1) & mask;
  slots[i] = n;
}

/* Rebuild the table with `nslots` entries from the heap, which holds exactly
 * the live nodes. */
static int slots_rebuild(rrpc__timer_heap *h, size_t nslots) {
  rrpc__timer_node **s = calloc(nslots, sizeof *s);
  if (!s) return -ENOMEM;
  for (size_t i = 0; i < h->len; i++) slots_insert(s, nslots - 1, h->heap[i]);
  free(h->slots);
  h->slots = s;
  h->slot_mask = nslots - 1;
  return 0;
}

/* Keep the table at most half full for `want` live nodes. */
static int slots_reserve(rrpc__timer_heap *h, size_t want) {
  size_t nslots = h->slots ? h->slot_mask + 1 : 0;
  if (want * 2 <= nslots) return 0;
  return slots_rebuild(h, nslots ? nslots * 2 : MIN_SLOTS);
}

static void slots_maybe_shrink(rrpc__timer_heap *h) {
  size_t nslots = h->slot_mask + 1;
  if (!h->slots || nslots <= MIN_SLOTS || h->len >= nslots / 8) return;
  (void)slots_rebuild(h, nslots / 4 < MIN_SLOTS ? MIN_SLOTS : nslots / 4);
}

/* Slot index of `id`, or (size_t)-1. */
static size_t slots_find(const rrpc__timer_heap *h, rrpc__timer_id id) {
  if (!h->slots) return (size_t)-1;
  size_t mask = h->slot_mask;
  for (size_t i = slot_of(id, mask);; i = (i + 1) & mask) {
    rrpc__timer_node *n = h->slots[i];
    if (!n) return (size_t)-1;
    if (n->id == id) return i;
  }
}

/* Linear-probing delete without tombstones: pull later members of the
 * probe run back into the hole when their home slot does not lie
 * (cyclically) between the hole and where they sit. */
static void slots_erase_at(rrpc__timer_heap *h, size_t hole) {
  size_t mask = h->slot_mask;
  size_t j = hole;
  for (;;) {
    j = (j + 1) & mask;
    rrpc__timer_node *n = h->slots[j];
    if (!n) break;
    size_t home = slot_of(n->id, mask);
    int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    h->slots[hole] = n;
    hole = j;
  }
  h->slots[hole] = NULL;
}

/* ---- public -------------------------------------------------------------- */

static void node_release(rrpc__timer_heap *h, rrpc__timer_node *n) {
  if (h->free_count < FREE_NODES_MAX) {
    n->next_free = h->free_nodes;
    h->free_nodes = n;
    h->free_count++;
  } else {
    free(n);
  }
}

int rrpc__timer_heap_add(rrpc__timer_heap *h, uint64_t deadline_us, rrpc__task_fn fn, void *arg,
                         rrpc__timer_id *out) {
  rrpc__timer_node *n = h->free_nodes;
  if (n) {
    h->free_nodes = n->next_free;
    h->free_count--;
  } else {
    n = malloc(sizeof *n);
    if (!n) return -ENOMEM;
  }
  /* Grow both arrays before touching either, so failure changes nothing. */
  if (heap_reserve(h, h->len + 1) || slots_reserve(h, h->len + 1)) {
    node_release(h, n);
    return -ENOMEM;
  }
  n->deadline = deadline_us;
  n->id = h->next_id++;
  n->fn = fn;
  n->arg = arg;
  n->next_free = NULL;
  slots_insert(h->slots, h->slot_mask, n);
  h->heap[h->len] = n;
  n->heap_idx = h->len++;
  sift_up(h, n->heap_idx);
  *out = n->id;
  return 0;
}

static void remove_node(rrpc__timer_heap *h, size_t slot, rrpc__timer_node *n) {
  slots_erase_at(h, slot);
  heap_remove_at(h, n->heap_idx);
  node_release(h, n);
  heap_maybe_shrink(h);
  slots_maybe_shrink(h);
}

int rrpc__timer_heap_cancel(rrpc__timer_heap *h, rrpc__timer_id id) {
  size_t slot = slots_find(h, id);
  if (slot == (size_t)-1) return -ENOENT;
  remove_node(h, slot, h->slots[slot]);
  return 0;
}

int rrpc__timer_heap_pop_due(rrpc__timer_heap *h, uint64_t now_us, rrpc__timer_id id_limit,
                             rrpc__task_fn *fn, void **arg) {
  if (!h->len) return -EAGAIN;
  rrpc__timer_node *n = h->heap[0];
  if (n->deadline > now_us || n->id >= id_limit) return -EAGAIN;
  *fn = n->fn;
  *arg = n->arg;
  remove_node(h, slots_find(h, n->id), n);
  return 0;
}
