/* rrpc/version.h - the rrpc release, at compile time and at run time.
 *
 * RRPC_VERSION is MAJOR*10000 + MINOR*100 + PATCH, so it compares with `>=`
 * in #if. rrpc_version() and rrpc_version_string() report the library that is
 * actually loaded, which can differ from the headers a program was built
 * with when it runs against another shared librrpc. The shared libraries'
 * soname carries the major number (librrpc.so.MAJOR); the Makefile, rrpc.pc
 * and the CMake package read the version from this file.
 */
#ifndef RRPC_VERSION_H
#define RRPC_VERSION_H

#define RRPC_VERSION_MAJOR 0
#define RRPC_VERSION_MINOR 1
#define RRPC_VERSION_PATCH 0

#define RRPC_VERSION \
  (RRPC_VERSION_MAJOR * 10000 + RRPC_VERSION_MINOR * 100 + RRPC_VERSION_PATCH)

#define RRPC_VERSION_STR_(x) #x
#define RRPC_VERSION_STR(x) RRPC_VERSION_STR_(x)
#define RRPC_VERSION_STRING      \
  RRPC_VERSION_STR(RRPC_VERSION_MAJOR) "." RRPC_VERSION_STR(RRPC_VERSION_MINOR) "." \
  RRPC_VERSION_STR(RRPC_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* rrpc_version - RRPC_VERSION of the linked library. Thread-safe. */
int rrpc_version(void);

/* rrpc_version_string - "MAJOR.MINOR.PATCH" of the linked library; static
 * storage, never NULL. Thread-safe. */
const char *rrpc_version_string(void);

#ifdef __cplusplus
}
#endif

#endif /* RRPC_VERSION_H */
