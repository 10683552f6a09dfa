// flag_value.h - private to src/rrpc/cxx: read a setting by its gflags name.
//
// Why by name: the flags that brpc also defines (max_body_size, rdma_sq_size,
// event_dispatcher_num, ...) live in librrpc_flags, which a process leaves out
// when it links brpc. rrpc then never names the FLAGS_ variable (whose symbol
// and type are the defining library's business) and asks the gflags registry
// instead, so whichever library defined the flag serves both. The defaults
// below are used when no library defined the flag at all; librrpc_flags
// defines its flags with these same values.
#ifndef RRPC_CXX_FLAG_VALUE_H
#define RRPC_CXX_FLAG_VALUE_H

#include <cstdint>
#include <string>

namespace rrpc {
namespace detail {

// Defaults of the brpc-named flags (shared by librrpc_flags and the readers).
constexpr uint64_t kDefaultMaxBodySize = 64u << 20;
constexpr int32_t kDefaultRdmaPort = 1;
constexpr int32_t kDefaultRdmaGidIndex = -1;
constexpr int32_t kDefaultRdmaSqSize = 128;
constexpr int32_t kDefaultRdmaRqSize = 128;
constexpr int32_t kDefaultRdmaPoolInitialMb = 64;
constexpr int32_t kDefaultRdmaPoolIncreaseMb = 64;
constexpr bool kDefaultRdmaUsePolling = false;
constexpr bool kDefaultRdmaTraceVerbose = false;
constexpr bool kDefaultRdmaRecvZerocopy = false;
constexpr int32_t kDefaultRdmaZerocopyMinSize = 64 << 10;
constexpr int32_t kDefaultEventDispatcherNum = 0;
constexpr bool kDefaultUsercodeInPthread = false;
constexpr int64_t kDefaultSocketMaxUnwrittenBytes = int64_t{64} << 20;
constexpr int32_t kDefaultHealthCheckIntervalS = 3;
constexpr int32_t kDefaultNsAccessIntervalS = 5;
constexpr int32_t kDefaultMaxConnectionPoolSize = 100;

// FlagInt64/FlagUint64/FlagBool/FlagString - the current value of the flag
// `name` from the gflags registry, whatever integer type its definer chose;
// `fallback` when no linked library defines it or its value does not parse
// as the asked type. Thread-safe (gflags locks its registry).
int64_t FlagInt64(const char* name, int64_t fallback);
uint64_t FlagUint64(const char* name, uint64_t fallback);
bool FlagBool(const char* name, bool fallback);
std::string FlagString(const char* name, const std::string& fallback);

}  // namespace detail
}  // namespace rrpc

#endif  // RRPC_CXX_FLAG_VALUE_H
