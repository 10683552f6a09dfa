// flag_validators.h - private to src/rrpc/cxx and src/rrpc/flags: the gflag
// validators both flag files register, so librrpc_flags (brpc's names) and
// librrpc_cxx (rrpc's own) reject bad values with the same words. Not
// installed; applications never include it.
#ifndef RRPC_CXX_FLAG_VALIDATORS_H
#define RRPC_CXX_FLAG_VALIDATORS_H

#include <stdint.h>
#include <stdio.h>

namespace rrpc {
namespace detail {

inline bool FlagNonNegative(const char* name, int32_t v) {
  if (v >= 0) return true;
  fprintf(stderr, "--%s must be >= 0, got %d\n", name, static_cast<int>(v));
  return false;
}

inline bool FlagPositive64(const char* name, uint64_t v) {
  if (v > 0) return true;
  fprintf(stderr, "--%s must be > 0\n", name);
  return false;
}

}  // namespace detail
}  // namespace rrpc

#endif  // RRPC_CXX_FLAG_VALIDATORS_H
