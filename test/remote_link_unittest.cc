// remote_link_unittest.cc - remote memory (rrpc/remote.h) on real rrpc
// channels and servers over TCP: the byte-stream carriage a connection that
// fell back from RDMA uses. The cases are shared with the Soft-RoCE binary
// (test/common/remote_link_cases.h).
namespace remote_cases {
constexpr bool kUseRdma = false;
}
#include "test/common/remote_link_cases.h"
