/* rrpc/naming.h - naming services: where a cluster channel's servers come
 * from ("list://", "file://", "dns://", or a scheme of your own).
 *
 * A naming service is a fetch function: given the text after "scheme://",
 * it returns the current servers. A cluster channel calls it once when it is
 * made and, for periodic services, again every ns_access_interval_ms on the
 * channel's own naming thread (never on an event loop, so fetch may block:
 * read files, resolve names). A changed list is applied without failing the
 * calls in flight on removed servers. See docs/client.md for an example.
 */
#ifndef RRPC_NAMING_H
#define RRPC_NAMING_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RRPC_NAMING_ADDR_MAX 80
#define RRPC_NAMING_TAG_MAX 64

/* One server: "ip:port" (or "host:port", resolved when the server is
 * added), an optional tag, and a weight (wrr; >= 1). */
typedef struct rrpc_naming_entry {
  char addr[RRPC_NAMING_ADDR_MAX];
  char tag[RRPC_NAMING_TAG_MAX];
  int weight;
} rrpc_naming_entry;

/* fetch - fill out[0..max) with the servers of `param` (the URL after
 * "scheme://") and set *n. Runs on a naming thread; may block. 0, or a
 * negative code (the channel then keeps its previous list and counts the
 * failure); -E2BIG when there are more than `max` servers. `arg` is the
 * service's own. */
typedef int (*rrpc_naming_fetch_fn)(void *arg, const char *param, rrpc_naming_entry *out,
                                    size_t max, size_t *n);

typedef struct rrpc_naming_service {
  const char *scheme;         /* e.g. "zk" for "zk://..."; borrowed */
  rrpc_naming_fetch_fn fetch;
  void *arg;                  /* borrowed; passed to fetch */
  int periodic;               /* 1: fetched again every ns_access_interval_ms */
} rrpc_naming_service;

/* rrpc_naming_register - make `scheme://` URLs use `ns` (BORROWED: it must
 * outlive every channel using it; in practice, a static). Built-in schemes:
 * list, file, dns. 0, -EINVAL, -EEXIST (scheme taken), -ENOMEM. Any thread. */
int rrpc_naming_register(const rrpc_naming_service *ns);

/* rrpc_naming_parse_line - one server line as file:// and list:// read it:
 * "addr [tag]", blanks around, '#' starts a comment. A tag that is a
 * positive integer is also the weight (brpc's wrr reads weights from tags);
 * "w=N" or "weight=N" as the tag sets only the weight. Returns 1 (an entry
 * in *out), 0 (a blank or comment line), or -EINVAL (malformed: no port, a
 * port out of range, a field too long, a bad weight, trailing words).
 * Does not resolve names. Pure; any thread. */
int rrpc_naming_parse_line(const char *line, size_t len, rrpc_naming_entry *out);

#ifdef __cplusplus
}
#endif
#endif /* RRPC_NAMING_H */
