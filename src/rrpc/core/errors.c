/* errors.c - text and names for rrpc error codes (see rrpc/errors.h). */
#include "rrpc/errors.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int abs_code(int code) { return code < 0 ? -code : code; }

const char *rrpc_strerror(int code) {
  int c = abs_code(code);
  switch (c) {
#define RRPC_X_TEXT(name, value, text) \
  case value:                          \
    return text;
    RRPC_ERRNO_MAP(RRPC_X_TEXT)
#undef RRPC_X_TEXT
  case 0:
    return "success";
  default:
    break;
  }
  /* strerror() may use a static buffer in some libcs; glibc's text for known
   * errno values is static, and unknown values fall to the branch below. */
  if (c > 0 && c < 4096) {
    const char *s = strerrordesc_np(c);
    if (s != NULL) return s;
  }
  return "unknown error";
}

const char *rrpc_err_name(int code) {
  int c = abs_code(code);
  switch (c) {
#define RRPC_X_NAME(name, value, text) \
  case value:                          \
    return #name;
    RRPC_ERRNO_MAP(RRPC_X_NAME)
#undef RRPC_X_NAME
  case 0:
    return "OK";
  default:
    break;
  }
  if (c > 0 && c < 4096) {
    const char *s = strerrorname_np(c);
    if (s != NULL) return s;
  }
  return "UNKNOWN";
}
