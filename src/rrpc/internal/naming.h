/* internal/naming.h - private to the rrpc core: the built-in naming services
 * and the helpers cluster channels use to find and parse them. */
#ifndef RRPC_INTERNAL_NAMING_H
#define RRPC_INTERNAL_NAMING_H

#include <stddef.h>

#include "rrpc/naming.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const rrpc_naming_service rrpc__naming_file;
extern const rrpc_naming_service rrpc__naming_dns;

/* rrpc__naming_parse_text - server lines separated by `sep` ('\n' for files,
 * ',' for list://) into out[0..max). 0 with *n set; -EINVAL (then
 * *bad_line, if not NULL, is the 1-based number of the malformed line);
 * -E2BIG (more than max servers). Pure. */
int rrpc__naming_parse_text(const char *text, size_t len, char sep, rrpc_naming_entry *out, size_t max,
                            size_t *n, size_t *bad_line);

/* rrpc__naming_lookup - the service of "scheme://param" and where param
 * starts (borrowed from url). 0 or -EINVAL (no "://", unknown scheme). */
int rrpc__naming_lookup(const char *url, const rrpc_naming_service **ns, const char **param);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_INTERNAL_NAMING_H */
