/* smc_opt.bpf.c - the sock_ops program behind preload/bpf/smc_opt.h: puts
 * SMC-R's TCP option (kind 254, length 6, eyecatcher e2 d4 c3 d9; RFC 6994
 * experimental option with a 4-byte magic) in the SYN of marked sockets
 * and in the SYN-ACK of marked listeners when the client's SYN had it, and
 * records per socket whether the peer's SYN or SYN-ACK carried it.
 *
 * User space marks a socket by writing {marked = 1} into rrpc_smcopt_sk
 * under the socket's fd; the program acts on nothing else. It runs for every
 * TCP socket of the cgroup it is attached to, so each callback first asks
 * the socket's storage and returns at once for unmarked sockets. */
#include <linux/bpf.h>
#include <linux/types.h>
#include <bpf/bpf_helpers.h>

#include "preload/bpf/smc_opt_state.h"

#define SOL_TCP 6
#define TCP_SAVE_SYN 27
#define TCPHDR_SYN 0x02
#define TCPHDR_ACK 0x10

/* BPF_F_CLONE: an accepted socket starts with its listener's state, so it
 * is marked when the listener was. */
struct {
  __uint(type, BPF_MAP_TYPE_SK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC | BPF_F_CLONE);
  __type(key, int);
  __type(value, struct rrpc_smcopt_state);
} rrpc_smcopt_sk SEC(".maps");

/* The option on the stack: the helpers take it from there. */
static void smc_option(__u8 *buf) {
  buf[0] = 254;
  buf[1] = RRPC_SMCOPT_LEN;
  buf[2] = 0xe2;
  buf[3] = 0xd4;
  buf[4] = 0xc3;
  buf[5] = 0xd9;
}

static struct rrpc_smcopt_state *marked(struct bpf_sock_ops *skops) {
  struct bpf_sock *sk = skops->sk; /* NULL for a request socket */
  if (sk == 0) return 0;
  struct rrpc_smcopt_state *st = bpf_sk_storage_get(&rrpc_smcopt_sk, sk, 0, 0);
  return st != 0 && st->marked ? st : 0;
}

/* 1 if the received SYN (from_syn) or the packet in skb_data carries the
 * option: the search key is kind 254 with the 4-byte magic. */
static int has_option(struct bpf_sock_ops *skops, int from_syn) {
  __u8 buf[RRPC_SMCOPT_LEN];
  smc_option(buf);
  long n = bpf_load_hdr_opt(skops, buf, sizeof buf, from_syn ? BPF_LOAD_HDR_OPT_TCP_SYN : 0);
  return n == RRPC_SMCOPT_LEN;
}

/* Whether this outgoing packet is one that carries the option: the SYN of
 * a marked socket, or a SYN-ACK (only marked listeners have the callback
 * flag) answering a SYN that had it. */
static int wants_option(struct bpf_sock_ops *skops) {
  __u8 flags = (__u8)skops->skb_tcp_flags;
  if (!(flags & TCPHDR_SYN)) return 0;
  if (flags & TCPHDR_ACK) {
    /* A syncookie SYN-ACK: the SYN is not saved, so the accepted socket
     * would record "not offered" while the client saw the option; leaving
     * it out keeps both ends' answers equal (plain TCP). */
    if (skops->args[0] == BPF_WRITE_HDR_TCP_SYNACK_COOKIE) return 0;
    return has_option(skops, 1);
  }
  return marked(skops) != 0;
}

static void record_peer(struct bpf_sock_ops *skops, int from_syn) {
  struct rrpc_smcopt_state *st = marked(skops);
  if (st == 0) return;
  st->offered = (__u8)has_option(skops, from_syn);
  st->seen = 1;
  /* The option rides the handshake only: no more header callbacks. */
  bpf_sock_ops_cb_flags_set(skops, 0);
}

SEC("sockops")
int rrpc_smcopt(struct bpf_sock_ops *skops) {
  __u8 opt[RRPC_SMCOPT_LEN];
  int one = 1;
  switch (skops->op) {
    case BPF_SOCK_OPS_TCP_CONNECT_CB: /* before the SYN is built */
      if (marked(skops)) bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
      break;
    case BPF_SOCK_OPS_TCP_LISTEN_CB:
      if (marked(skops)) {
        /* The child reads the client's SYN after the handshake. */
        bpf_setsockopt(skops, SOL_TCP, TCP_SAVE_SYN, &one, sizeof one);
        bpf_sock_ops_cb_flags_set(skops, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
      }
      break;
    case BPF_SOCK_OPS_HDR_OPT_LEN_CB:
      if (wants_option(skops)) bpf_reserve_hdr_opt(skops, RRPC_SMCOPT_LEN, 0);
      break;
    case BPF_SOCK_OPS_WRITE_HDR_OPT_CB:
      /* -EEXIST when another copy of this program (another rrpc-run
       * process in the cgroup) already wrote it: one option either way. */
      if (wants_option(skops)) {
        smc_option(opt);
        bpf_store_hdr_opt(skops, opt, RRPC_SMCOPT_LEN, 0);
      }
      break;
    case BPF_SOCK_OPS_ACTIVE_ESTABLISHED_CB: /* skb_data is the SYN-ACK */
      record_peer(skops, 0);
      break;
    case BPF_SOCK_OPS_PASSIVE_ESTABLISHED_CB: /* the saved SYN */
      record_peer(skops, 1);
      break;
  }
  return 1;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
