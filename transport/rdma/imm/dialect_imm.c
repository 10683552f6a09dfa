/* dialect_imm.c - rrpc's own dialect in the dialect table (dialect.h). It
 * speaks CLC, so the shared handshake and endpoint set it up: no hook of
 * its own at setup; its data path is datapath.c and elastic_dp.c. */
#include "transport/rdma/dialect.h"

const struct rrpc__rdma_dialect rrpc__rdma_dialect_imm = {
    .name = "imm",
};
