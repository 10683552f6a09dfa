/* tcp_only.c - servers remembered as TCP-only (tcp_only.h). */
#include "transport/rdma/tcp_only.h"

#include <netinet/in.h>
#include <pthread.h>
#include <string.h>

#define TCP_ONLY_SLOTS 256

static struct {
  struct sockaddr_storage peer;
  uint64_t until_us; /* 0 = free */
} g_slots[TCP_ONLY_SLOTS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* Address and port only: sockaddr padding and IPv6 flow info differ
 * between two sockaddrs of the same server. */
static int same_peer(const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family) return 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *x = (const struct sockaddr_in *)(const void *)a;
    const struct sockaddr_in *y = (const struct sockaddr_in *)(const void *)b;
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)(const void *)a;
    const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)(const void *)b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
  }
  return 0;
}

void rrpc__tcp_only_note(const struct sockaddr_storage *peer, int ttl_s, uint64_t now_us) {
  if (ttl_s <= 0) return;
  uint64_t until = now_us + (uint64_t)ttl_s * 1000000u;
  pthread_mutex_lock(&g_mu);
  int pick = 0;
  for (int i = 0; i < TCP_ONLY_SLOTS; i++) {
    if (g_slots[i].until_us != 0 && same_peer(&g_slots[i].peer, peer)) {
      pick = i;
      break;
    }
    /* Otherwise the free, expired or soonest-expiring slot. */
    if (g_slots[i].until_us < g_slots[pick].until_us) pick = i;
  }
  g_slots[pick].peer = *peer;
  g_slots[pick].until_us = until;
  pthread_mutex_unlock(&g_mu);
}

int rrpc__tcp_only_check(const struct sockaddr_storage *peer, uint64_t now_us) {
  int found = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < TCP_ONLY_SLOTS && !found; i++) {
    if (g_slots[i].until_us == 0 || !same_peer(&g_slots[i].peer, peer)) continue;
    if (g_slots[i].until_us > now_us) found = 1;
    else g_slots[i].until_us = 0;
  }
  pthread_mutex_unlock(&g_mu);
  return found;
}

void rrpc__tcp_only_clear(void) {
  pthread_mutex_lock(&g_mu);
  memset(g_slots, 0, sizeof g_slots);
  pthread_mutex_unlock(&g_mu);
}
