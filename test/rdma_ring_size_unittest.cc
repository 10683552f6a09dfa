// rdma_ring_size_unittest.cc - the receive ring sizes rrpc accepts are the
// ones a CLC Accept can announce (issue 13 item 17). SMC-R encodes a buffer
// size as 16 KiB << n in 4 bits, and rrpc peers read n up to 15: 512 MiB is
// the largest ring a server can announce. A larger ring used to be accepted
// by rrpc_rdma_global_init and --rdma_ring_size, and then every RDMA client
// died at its handshake instead of getting a Decline.
//
// Options are checked and frozen without touching a device, so this runs on
// the host (its own process: global_init freezes the options process-wide).
#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#ifdef RRPC_WITH_RDMA
#include "transport/rdma/device.h"
#endif

DECLARE_uint64(rdma_ring_size);

namespace {

const size_t kMiB = size_t{1} << 20;
const size_t kLargestAnnounceable = size_t{512} << 20;  // 16 KiB << 15

TEST(RdmaRingSize, UnannounceableSizesAreRefusedAndTheLargestAnnounceableIsKept) {
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
  o.ring_size = kLargestAnnounceable + 1;  // would round up to 1 GiB
  int rc = rrpc_rdma_global_init(&o);
  if (rc == -RRPC_ENORDMA) GTEST_SKIP() << "built without RDMA";
  EXPECT_EQ(-EINVAL, rc);
  o.ring_size = 768 * kMiB;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&o));
  o.ring_size = 1024 * kMiB;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&o));
  // The refusals froze nothing: the largest announceable size is taken as is.
  o.ring_size = kLargestAnnounceable;
  ASSERT_EQ(0, rrpc_rdma_global_init(&o));
#ifdef RRPC_WITH_RDMA
  EXPECT_EQ(kLargestAnnounceable, rrpc__rdma_options()->ring_size);
#endif
}

// The gflag says why in its refusal (gflags prints the validator's message)
// and keeps its old value.
TEST(RdmaRingSize, FlagRefusesWhatAnAcceptCannotAnnounce) {
  uint64_t before = FLAGS_rdma_ring_size;
  EXPECT_EQ("", gflags::SetCommandLineOption("rdma_ring_size", std::to_string(1024 * kMiB).c_str()));
  EXPECT_EQ(before, FLAGS_rdma_ring_size);
  EXPECT_NE("", gflags::SetCommandLineOption("rdma_ring_size", std::to_string(kLargestAnnounceable).c_str()));
  EXPECT_EQ(kLargestAnnounceable, FLAGS_rdma_ring_size);
  gflags::SetCommandLineOption("rdma_ring_size", std::to_string(before).c_str());
}

}  // namespace
