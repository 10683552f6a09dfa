// rdma_elastic_default_unittest.cc - elastic receive rings are the default
// (issue 12): rrpc_rdma_options_init, a zeroed struct and --rdma_elastic all
// give them, RRPC_RDMA_ELASTIC_OFF gives the ring per connection, other
// values are refused; the retired cap (and with it the zero-copy budget,
// half of it) defaults to 4 x the ring, so a 1 MiB message goes up without
// a copy.
//
// Options are checked and frozen without touching a device, so this runs on
// the host (its own process: global_init freezes the options process-wide).
#include <gflags/gflags.h>
#include <gtest/gtest.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "rrpc/errors.h"
#include "rrpc/rdma.h"
#ifdef RRPC_WITH_RDMA
#include "transport/rdma/device.h"
#endif

DECLARE_bool(rdma_elastic);
DECLARE_uint64(rdma_retired_max_size);

namespace {

TEST(RdmaElasticDefault, InitAndTheFlagTurnElasticRingsOn) {
  rrpc_rdma_options o;
  rrpc_rdma_options_init(&o);
#ifdef RRPC_WITH_RDMA
  EXPECT_EQ(RRPC_RDMA_ELASTIC_ON, o.elastic);
#else
  EXPECT_EQ(RRPC_RDMA_ELASTIC_DEFAULT, o.elastic);  // a build without RDMA zeroes the struct
#endif
  EXPECT_EQ(0u, o.retired_max_size);  // derived from the ring when frozen
  EXPECT_TRUE(FLAGS_rdma_elastic);
  EXPECT_EQ(0u, FLAGS_rdma_retired_max_size);
}

#ifdef RRPC_WITH_RDMA
// Off is -1 (0 being the default), in a child: the options freeze once.
TEST(RdmaElasticDefault, OffGivesTheRingPerConnection) {
  // The child runs this test alone in a fresh process: no fork of threads.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("RRPC_RDMA_ELASTIC");
        rrpc_rdma_options o;
        rrpc_rdma_options_init(&o);
        o.elastic = RRPC_RDMA_ELASTIC_OFF;
        int rc = rrpc_rdma_global_init(&o);
        exit(rc == 0 && rrpc__rdma_options()->elastic == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
#endif

TEST(RdmaElasticDefault, AZeroedStructGetsElasticRingsAndA4xRetiredCap) {
  // The suite-wide override would decide the mode instead of the options.
  unsetenv("RRPC_RDMA_ELASTIC");
  rrpc_rdma_options o;
  memset(&o, 0, sizeof o);
  o.elastic = 2;  // neither on, off nor the default
  int rc = rrpc_rdma_global_init(&o);
  if (rc == -RRPC_ENORDMA) GTEST_SKIP() << "built without RDMA";
  EXPECT_EQ(-EINVAL, rc);
  o.elastic = -2;
  EXPECT_EQ(-EINVAL, rrpc_rdma_global_init(&o));
  // The refusals froze nothing.
  o.elastic = RRPC_RDMA_ELASTIC_DEFAULT;
  o.ring_size = size_t{256} << 10;
  ASSERT_EQ(0, rrpc_rdma_global_init(&o));
#ifdef RRPC_WITH_RDMA
  const rrpc_rdma_options *eff = rrpc__rdma_options();
  EXPECT_EQ(1, eff->elastic);
  EXPECT_EQ(size_t{1} << 20, eff->retired_max_size);  // 4 x the 256 KiB ring
#endif
}

}  // namespace
