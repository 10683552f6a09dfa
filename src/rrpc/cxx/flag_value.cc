// flag_value.cc - reads settings from the gflags registry by name (see
// flag_value.h for why rrpc does not use the FLAGS_ variables of the flags
// brpc also defines).
#include "rrpc/cxx/flag_value.h"

#include <gflags/gflags.h>

#include <cerrno>
#include <cstdlib>

namespace rrpc {
namespace detail {

namespace {

bool Lookup(const char* name, std::string* out) {
  return gflags::GetCommandLineOption(name, out);
}

}  // namespace

int64_t FlagInt64(const char* name, int64_t fallback) {
  std::string s;
  if (!Lookup(name, &s) || s.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  long long v = strtoll(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return fallback;
  return static_cast<int64_t>(v);
}

uint64_t FlagUint64(const char* name, uint64_t fallback) {
  std::string s;
  // strtoull would quietly wrap a negative value of a signed definer.
  if (!Lookup(name, &s) || s.empty() || s[0] == '-') return fallback;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = strtoull(s.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return fallback;
  return static_cast<uint64_t>(v);
}

bool FlagBool(const char* name, bool fallback) {
  std::string s;
  if (!Lookup(name, &s)) return fallback;
  if (s == "true") return true;
  if (s == "false") return false;
  return fallback;
}

std::string FlagString(const char* name, const std::string& fallback) {
  std::string s;
  return Lookup(name, &s) ? s : fallback;
}

}  // namespace detail
}  // namespace rrpc
