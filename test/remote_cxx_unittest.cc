// remote_cxx_unittest.cc - rrpc::RemoteToken (src/rrpc/cxx/remote.h): a
// token issued by an owner's table parses back to the same fields and bytes;
// malformed input leaves an empty token with the C API's code.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "rrpc/cxx/remote.h"
extern "C" {
#include "rrpc/errors.h"
#include "rrpc/remote/table.h"
}

namespace {

TEST(RemoteCxx, TokenFromAnOwnerTableRoundTrips) {
  rrpc__rmt_conn c;
  ASSERT_EQ(0, rrpc__rmt_conn_init(&c, 0xfeedull, 40, 0));
  rrpc__rmt_region r;
  ASSERT_EQ(0, rrpc__rmt_own_add(&c, RRPC_REMOTE_WRITE, 1 << 20, nullptr, &r));
  uint8_t raw[RRPC_REMOTE_TOKEN_LEN];
  ASSERT_EQ(0, rrpc__rmt_own_token(&c, r.id, 0x1234, 0x10000, raw));
  std::string wire(reinterpret_cast<char *>(raw), sizeof(raw));

  rrpc::RemoteToken t;
  EXPECT_FALSE(t.valid());
  EXPECT_EQ("", t.bytes());
  ASSERT_EQ(0, t.Parse(wire));
  EXPECT_TRUE(t.valid());
  EXPECT_EQ(wire, t.bytes());
  EXPECT_EQ(1u, t.id());
  EXPECT_EQ(40u, t.generation());
  EXPECT_EQ(0xfeedull, t.conn_id());
  EXPECT_EQ(1ull << 20, t.length());
  EXPECT_TRUE(t.can_write());
  EXPECT_FALSE(t.can_read());

  EXPECT_EQ(-RRPC_EPARSE, t.Parse(wire.substr(1)));
  EXPECT_FALSE(t.valid()) << "a failed parse empties the token";
  EXPECT_EQ(0u, t.id());
  EXPECT_EQ(-EINVAL, t.Parse(nullptr, 40));
  rrpc__rmt_conn_fini(&c);
}

}  // namespace
