/* main.c - dlopen()s the plugin (which needs librrpc.so) after start-up and
 * runs its echo calls: the library's thread-local (the loop's initial-exec
 * one) must fit the static TLS block glibc keeps for such late loads. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
    return 2;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int (*roundtrip)(int) = (int (*)(int))dlsym(h, "plugin_roundtrip");
  if (roundtrip == NULL) {
    fprintf(stderr, "dlsym: %s\n", dlerror());
    return 1;
  }
  int rc = roundtrip(100);
  printf("dlopen: 100 echo calls through a dlopen()ed librrpc.so: %s (%d)\n", rc == 0 ? "ok" : "failed", rc);
  return rc == 0 ? 0 : 1;
}
