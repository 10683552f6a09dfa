/* transport/rdma/siw.h - private to the RDMA transport: what Soft-iWARP
 * (siw, Linux 6.1 with rdma-core's libsiw) needs that other devices do not.
 * device.c asks; nothing else knows siw by name. */
#ifndef RRPC_TRANSPORT_RDMA_SIW_H
#define RRPC_TRANSPORT_RDMA_SIW_H

#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 if the context is a siw device (iWARP, vendor id "bmt"). */
int rrpc__siw_is(struct ibv_context *ctx, const struct ibv_device_attr *da);

/* The object that keeps libsiw's "no mapping" key from ever being handed
 * out in this context (siw.c says why), made before anything else is
 * mapped; NULL when it cannot be made (then creations may fail later with
 * errno 0, and the caller says so). Destroyed with ibv_destroy_cq. */
struct ibv_cq *rrpc__siw_key_plug(struct ibv_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
