// remote_link_rdma_test.cc - remote memory (rrpc/remote.h) on real rrpc
// channels and servers over RDMA (Soft-RoCE in tools/rxe-vm): the cases of
// test/common/remote_link_cases.h, every call checked to have used RDMA.
#include "rrpc/rdma.h"
namespace remote_cases {
constexpr bool kUseRdma = true;
}
#include "test/common/remote_link_cases.h"
