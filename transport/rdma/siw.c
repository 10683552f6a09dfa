/* siw.c - Soft-iWARP's quirks (siw.h).
 *
 * The mmap key collision. Every siw queue (a QP's send and receive queue,
 * a CQ, an SRQ) is mapped into the process at an offset the kernel hands
 * out per verbs context: first fit over page offsets from 0, freed offsets
 * reused. libsiw reads the offset 0x90000 (page 144, its
 * SIW_INVAL_UOBJ_KEY, from the days when keys were bounded below it) as
 * "the kernel could not map this queue": it destroys the object and
 * returns NULL with errno 0. Once every page below 144 is taken, the next
 * queue starts exactly there, fails, is freed, and so does every later
 * one: about ten rrpc connections (two QPs each in one process, 8 pages a
 * QP, 3 a CQ) are the most a process gets. A queue whose mapping starts
 * below page 144 and runs past it takes the page for good: one CQ, made
 * first in the context (so mapped from page 0), of enough entries. */
#include "transport/rdma/siw.h"

#include <stddef.h>

enum {
  SIW_VENDOR_ID = 0x626d74, /* "bmt" */
  SIW_BAD_KEY = 0x90000,    /* the offset libsiw reads as "no mapping" */
  SIW_CQE_BYTES = 32,       /* struct siw_cqe (rdma/siw-abi.h) */
  SIW_PAGE = 4096,
};

int rrpc__siw_is(struct ibv_context *ctx, const struct ibv_device_attr *da) {
  return ctx->device->transport_type == IBV_TRANSPORT_IWARP && da->vendor_id == SIW_VENDOR_ID;
}

struct ibv_cq *rrpc__siw_key_plug(struct ibv_context *ctx) {
  /* Entries whose queue (siw rounds the count up to a power of two) runs
   * from page 0 past the bad key's page: 32768, 1 MiB of kernel memory. */
  int cqe = (SIW_BAD_KEY + SIW_PAGE) / SIW_CQE_BYTES + 1;
  return ibv_create_cq(ctx, cqe, NULL, NULL, 0);
}
