/* version.c - the release of the compiled library (see rrpc/version.h). */
#include "rrpc/version.h"

int rrpc_version(void) { return RRPC_VERSION; }

const char *rrpc_version_string(void) { return RRPC_VERSION_STRING; }
