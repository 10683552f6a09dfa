// brpc_peer.h - an independent brpc-dialect RDMA peer (client and server
// roles), written
// from specs/brpc-rdma-facts.md sections 1, 2 and 6 only: raw libibverbs,
// POSIX sockets and libprotobuf (test/rpc_meta.proto). It includes nothing
// of rrpc, so a rule that rrpc's brpc dialect gets wrong the same way on both
// of its own ends (a field's byte order, the immediate's meaning, PSN/MTU,
// the reserved receives, the solicited flag) fails against this peer.
// What it checks of the other side, besides the bytes coming back:
//  - the other side's hello is a valid v2 hello (40 B, versions 2/1, sizes),
//    and a client's ACK says RDMA;
//  - as a server, as brpc's own server before apache/brpc#3505 (whose QP
//    takes data from the moment it is up, into the buffer the ACK is parsed
//    from): the client sends nothing over RDMA before this server has parsed
//    the ACK, which takes it ack_parse_ms, and nothing after the ACK on TCP;
//  - the other side never sends more data WRs than the credits it holds
//    (min(its sq, our rq) - 3, returned through our immediates) and never
//    returns more credits than we used; a WR over our block size would be a
//    local length error, an unposted receive an RNR failure (rnr_retry 0);
//  - the receive CQ is armed solicited-only, as brpc's is, so a sender that
//    does not set SOLICITED on the last WR of a message stalls this peer.
// Test code only.
#ifndef RRPC_TEST_RDMA_BRPC_PEER_H
#define RRPC_TEST_RDMA_BRPC_PEER_H

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "test/rpc_meta.pb.h"

namespace brpc_peer {

// brpc's defaults: 8 KiB blocks (announced as block - 32), SQ and RQ 128.
constexpr uint32_t kRecvPayload = 8192 - 32;
constexpr uint16_t kSq = 128, kRq = 128;
constexpr int kReserved = 3;               // RESERVED_WR_NUM, for pure ACKs
constexpr int kWaitMs = 15000;             // a stall longer than this is a failure

inline void put16(uint8_t *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
inline void put32(uint8_t *p, uint32_t v) { uint32_t n = htonl(v); memcpy(p, &n, 4); }
inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
inline uint32_t get32(const uint8_t *p) { uint32_t n; memcpy(&n, p, 4); return ntohl(n); }

// The v2 hello (spec section 1), decoded.
struct Hello {
  uint16_t msg_len = 0, hello_ver = 0, impl_ver = 0;
  uint32_t block_size = 0;
  uint16_t sq = 0, rq = 0, lid = 0;
  uint8_t gid[16] = {};
  uint32_t qp_num = 0;
};

inline void encode_hello(const Hello &h, uint8_t out[40]) {
  memcpy(out, "RDMA", 4);
  put16(out + 4, 40);
  put16(out + 6, 2);
  put16(out + 8, 1);
  put32(out + 10, h.block_size);
  put16(out + 14, h.sq);
  put16(out + 16, h.rq);
  put16(out + 18, h.lid);
  memcpy(out + 20, h.gid, 16);
  put32(out + 36, h.qp_num);
}

inline bool decode_hello(const uint8_t in[40], Hello *h) {
  if (memcmp(in, "RDMA", 4) != 0) return false;
  h->msg_len = get16(in + 4);
  h->hello_ver = get16(in + 6);
  h->impl_ver = get16(in + 8);
  h->block_size = get32(in + 10);
  h->sq = get16(in + 14);
  h->rq = get16(in + 16);
  h->lid = get16(in + 18);
  memcpy(h->gid, in + 20, 16);
  h->qp_num = get32(in + 36);
  return true;
}

inline bool hello_valid(const Hello &h) {
  return h.msg_len == 40 && h.hello_ver == 2 && h.impl_ver == 1 && h.block_size >= 1024 && h.sq >= 16 &&
         h.rq >= 16;
}

inline bool write_all(int fd, const void *p, size_t n) {
  const char *c = static_cast<const char *>(p);
  while (n > 0) {
    ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
    if (w <= 0) return false;
    c += w;
    n -= (size_t)w;
  }
  return true;
}

inline bool read_all(int fd, void *p, size_t n) {
  char *c = static_cast<char *>(p);
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r <= 0) return false;
    c += r;
    n -= (size_t)r;
  }
  return true;
}

// A baidu_std packet, reassembled from the received byte stream.
struct Packet {
  brpc::policy::RpcMeta meta;
  std::string message, attachment;
};

using Response = Packet;

class Peer {
 public:
  std::string error;             // why the last step failed
  Hello peer_hello;              // as received
  uint64_t data_wrs_sent = 0, data_wrs_received = 0, pure_acks_sent = 0, pure_acks_received = 0;
  // Server role: how long this server takes to parse the client's ACK once
  // it is there to read (brpc: a bthread reads the fd and runs its parsers).
  // RDMA data that arrives before then is a closed connection at brpc.
  int ack_parse_ms = 50;

  // sq, rq and recv_payload (the block_size we announce) as brpc's
  // rdma_sq_size, rdma_rq_size and block type would set them.
  explicit Peer(uint16_t sq = kSq, uint16_t rq = kRq, uint32_t recv_payload = kRecvPayload)
      : sq_(sq), rq_(rq), payload_(recv_payload) {}
  Peer(const Peer &) = delete;
  Peer &operator=(const Peer &) = delete;
  ~Peer() { close_all(); }
  uint32_t recv_payload() const { return payload_; }
  // Closes the TCP connection, as brpc closes one it finds at fault.
  void hang_up() {
    if (fd_ >= 0) shutdown(fd_, SHUT_RDWR);
  }

  // TCP connect, hellos, QP bring-up, ACK=1. dev: device name ("" = first).
  bool connect(const std::string &dev, const std::string &ip, int port) {
    return open_device(dev) && create_qp() && tcp_connect(ip, port) && send_hello() && read_hello() &&
           bring_up() && send_ack();
  }

  // Server role, section 1's order: read the client's hello, bring the QP
  // up with all receives posted, only then send our hello, then the ACK.
  bool accept(const std::string &dev, int listen_fd) {
    if (!open_device(dev) || !create_qp()) return false;
    pollfd p = {listen_fd, POLLIN, 0};
    if (poll(&p, 1, kWaitMs) != 1) return fail("no client connected");
    fd_ = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd_ < 0) return fail("accept");
    timeval tv = {kWaitMs / 1000, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (!read_hello() || !bring_up() || !send_hello()) return false;
    if (!parse_time_passes_without_data()) return false;
    uint8_t ack[4];
    if (!read_all(fd_, ack, 4)) return fail("read ACK");
    char more;
    if (recv(fd_, &more, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
      return fail("bytes after the ACK on TCP (brpc: \"Too many bytes in handshake ACK\", closed)");
    return (get32(ack) & 1) != 0 || fail("client's ACK says no RDMA");
  }

  // Server role: answers `calls` baidu_std requests, echoing the message
  // and the attachment under the request's correlation id.
  bool serve(int calls) {
    for (int i = 0; i < calls; i++) {
      Packet rq;
      if (!read_packet(&rq)) return false;
      if (!rq.meta.has_request()) return fail("request without request meta");
      brpc::policy::RpcMeta meta;
      meta.mutable_response()->set_error_code(0);
      meta.set_correlation_id(rq.meta.correlation_id());
      if (!send_message(packet(meta, rq.message, rq.attachment))) return false;
      requests_served++;
    }
    return true;
  }

  uint64_t requests_served = 0;

  // One baidu_std request, SEND_WITH_IMM in WRs of at most the other side's
  // block size; then waits for the response with the same correlation id.
  bool call(const std::string &service, const std::string &method, const std::string &message,
            const std::string &attachment, int64_t cid, Response *out) {
    brpc::policy::RpcMeta meta;
    meta.mutable_request()->set_service_name(service);
    meta.mutable_request()->set_method_name(method);
    meta.set_correlation_id(cid);
    if (!send_message(packet(meta, message, attachment)) || !read_packet(out)) return false;
    return out->meta.correlation_id() == cid || fail("packet: correlation id");
  }

 private:
  // Section 6: PRPC | body_size | meta_size, RpcMeta, message, attachment.
  static std::string packet(brpc::policy::RpcMeta meta, const std::string &message, const std::string &attachment) {
    if (!attachment.empty()) meta.set_attachment_size((int32_t)attachment.size());
    std::string m = meta.SerializeAsString();
    std::string pkt(12, '\0');
    memcpy(&pkt[0], "PRPC", 4);
    put32(reinterpret_cast<uint8_t *>(&pkt[4]), (uint32_t)(m.size() + message.size() + attachment.size()));
    put32(reinterpret_cast<uint8_t *>(&pkt[8]), (uint32_t)m.size());
    pkt += m;
    pkt += message;
    pkt += attachment;
    return pkt;
  }

  const uint16_t sq_, rq_;
  const uint32_t payload_;
  ibv_context *ctx_ = nullptr;
  ibv_pd *pd_ = nullptr;
  ibv_comp_channel *chan_ = nullptr;
  ibv_cq *scq_ = nullptr, *rcq_ = nullptr;
  ibv_qp *qp_ = nullptr;
  ibv_mr *rmr_ = nullptr, *smr_ = nullptr;
  std::vector<char> rbuf_, sbuf_;
  std::vector<int> free_slots_;
  int fd_ = -1;
  uint8_t port_ = 1;
  int gid_index_ = -1;
  Hello mine_;
  int local_cap_ = 0, remote_cap_ = 0;
  int sq_window_ = 0, rq_window_ = 0, imm_window_ = kReserved;
  uint32_t pending_credits_ = 0;
  int peer_credits_ = 0; // data WRs the other side may still send us
  int since_solicited_wrs_ = 0;
  uint64_t since_solicited_bytes_ = 0;
  uint32_t credits_since_solicited_ = 0;
  std::string stream_; // received bytes not yet parsed

  bool fail(const std::string &why) {
    if (error.empty()) error = why;
    return false;
  }

  void close_all() {
    if (qp_) ibv_destroy_qp(qp_);
    if (scq_) ibv_destroy_cq(scq_);
    if (rcq_) ibv_destroy_cq(rcq_);
    if (chan_) ibv_destroy_comp_channel(chan_);
    if (rmr_) ibv_dereg_mr(rmr_);
    if (smr_) ibv_dereg_mr(smr_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
    if (fd_ >= 0) close(fd_);
    qp_ = nullptr, scq_ = rcq_ = nullptr, chan_ = nullptr, rmr_ = smr_ = nullptr, pd_ = nullptr, ctx_ = nullptr;
    fd_ = -1;
  }

  // brpc's GID choice: the highest index with a non-zero interface id.
  bool open_device(const std::string &name) {
    int n = 0;
    ibv_device **list = ibv_get_device_list(&n);
    for (int i = 0; list && i < n && !ctx_; i++)
      if (name.empty() || name == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
    if (list) ibv_free_device_list(list);
    if (!ctx_) return fail("no RDMA device " + name);
    ibv_port_attr pa;
    if (ibv_query_port(ctx_, port_, &pa) != 0) return fail("ibv_query_port");
    mine_.lid = pa.lid;
    for (int i = 0; i < pa.gid_tbl_len; i++) {
      ibv_gid g;
      if (ibv_query_gid(ctx_, port_, i, &g) != 0) continue;
      static const uint8_t zero[8] = {};
      if (memcmp(g.raw + 8, zero, 8) != 0) {
        gid_index_ = i;
        memcpy(mine_.gid, g.raw, 16);
      }
    }
    if (gid_index_ < 0) return fail("no usable GID");
    return true;
  }

  bool create_qp() {
    if (!(pd_ = ibv_alloc_pd(ctx_)) || !(chan_ = ibv_create_comp_channel(ctx_))) return fail("pd/channel");
    if (!(scq_ = ibv_create_cq(ctx_, sq_ + kReserved + 8, nullptr, chan_, 0)) ||
        !(rcq_ = ibv_create_cq(ctx_, rq_ + 8, nullptr, chan_, 0)))
      return fail("ibv_create_cq");
    ibv_qp_init_attr ia = {};
    ia.send_cq = scq_;
    ia.recv_cq = rcq_;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = sq_;
    ia.cap.max_recv_wr = rq_;
    ia.cap.max_send_sge = 1;
    ia.cap.max_recv_sge = 1;
    if (!(qp_ = ibv_create_qp(pd_, &ia))) return fail("ibv_create_qp");
    rbuf_.assign((size_t)rq_ * payload_, 0);
    if (!(rmr_ = ibv_reg_mr(pd_, rbuf_.data(), rbuf_.size(), IBV_ACCESS_LOCAL_WRITE))) return fail("reg rbuf");
    mine_.block_size = payload_;
    mine_.sq = sq_;
    mine_.rq = rq_;
    mine_.qp_num = qp_->qp_num;
    return true;
  }

  bool tcp_connect(const std::string &ip, int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa = {};
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    timeval tv = {kWaitMs / 1000, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (::connect(fd_, reinterpret_cast<sockaddr *>(&sa), sizeof sa) != 0) return fail("tcp connect");
    return true;
  }

  bool send_hello() {
    uint8_t h[40];
    encode_hello(mine_, h);
    return write_all(fd_, h, sizeof h) || fail("send hello");
  }

  // Reads and checks the other side's hello; sizes windows and send slots.
  bool read_hello() {
    uint8_t h[40];
    if (!read_all(fd_, h, sizeof h)) return fail("read hello");
    Hello &ph = peer_hello; // the other side's
    if (!decode_hello(h, &ph)) return fail("hello: bad magic");
    if (ph.msg_len > 40) { // drain what we do not know
      std::string extra(ph.msg_len - 40u, '\0');
      if (ph.msg_len > 4096 || !read_all(fd_, &extra[0], extra.size())) return fail("hello length");
    }
    if (!hello_valid(ph)) return fail("hello not valid (fell back?)");
    local_cap_ = std::min<int>(sq_, ph.rq) - kReserved;
    remote_cap_ = std::min<int>(rq_, ph.sq) - kReserved;
    sq_window_ = rq_window_ = local_cap_;
    peer_credits_ = remote_cap_;
    size_t slot = ph.block_size;
    sbuf_.assign((size_t)local_cap_ * slot, 0);
    if (!(smr_ = ibv_reg_mr(pd_, sbuf_.data(), sbuf_.size(), IBV_ACCESS_LOCAL_WRITE))) return fail("reg sbuf");
    for (int i = local_cap_ - 1; i >= 0; i--) free_slots_.push_back(i);
    return true;
  }

  bool post_recv(int i) {
    ibv_sge sg = {(uint64_t)(uintptr_t)(rbuf_.data() + (size_t)i * payload_), payload_, rmr_->lkey};
    ibv_recv_wr wr = {}, *bad;
    wr.wr_id = (uint64_t)i;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    return ibv_post_recv(qp_, &wr, &bad) == 0 || fail("ibv_post_recv");
  }

  // Section 1's BringUpQp: PSN 0, MTU 1024, GRH on, rnr_retry 0.
  bool bring_up() {
    ibv_qp_attr a = {};
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port_;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp_, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return fail("to INIT");
    for (int i = 0; i < rq_; i++)
      if (!post_recv(i)) return false;
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    const Hello &ph = peer_hello; // the other side's
    a.dest_qp_num = ph.qp_num;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 0;
    a.min_rnr_timer = 0;
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, ph.gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index_;
    a.ah_attr.grh.hop_limit = 16;
    a.ah_attr.dlid = ph.lid;
    a.ah_attr.port_num = port_;
    if (ibv_modify_qp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return fail("to RTR");
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 0;
    a.sq_psn = 0;
    a.max_rd_atomic = 0;
    if (ibv_modify_qp(qp_, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC))
      return fail("to RTS");
    return true;
  }

  // Server role, between the ACK's arrival and its parse: our QP is up with
  // every receive posted, so a data WR the client sends now completes here.
  // Waits ack_parse_ms for the ACK's parse, woken early by a receive.
  bool parse_time_passes_without_data() {
    pollfd p = {fd_, POLLIN, 0};
    if (poll(&p, 1, kWaitMs) != 1) return fail("no ACK");
    if (ibv_req_notify_cq(rcq_, 0)) return fail("arm cq");
    ibv_wc wc;
    int n = ibv_poll_cq(rcq_, 1, &wc);
    if (n == 0 && ack_parse_ms > 0) {
      pollfd c = {chan_->fd, POLLIN, 0};
      if (poll(&c, 1, ack_parse_ms) == 1) {
        ibv_cq *cq;
        void *ctx;
        if (ibv_get_cq_event(chan_, &cq, &ctx) != 0) return fail("get cq event");
        ibv_ack_cq_events(cq, 1);
      }
      n = ibv_poll_cq(rcq_, 1, &wc);
    }
    if (n != 0)
      return fail("RDMA data before this server parsed the ACK (brpc: \"Too many bytes in handshake ACK\" "
                  "or \"unknown message\", closed)");
    return true;
  }

  bool send_ack() {
    uint8_t ack[4];
    put32(ack, 1);
    return write_all(fd_, ack, 4) || fail("send ACK");
  }

  // Section 2's solicited rule, for a single queued message.
  bool solicited(bool last_of_message) {
    return last_of_message || sq_window_ == 0 || rq_window_ == 0 || since_solicited_wrs_ > local_cap_ / 4 ||
           credits_since_solicited_ > (uint32_t)remote_cap_ / 4 || since_solicited_bytes_ > (1u << 20);
  }

  bool send_message(const std::string &pkt) {
    size_t max = peer_hello.block_size;
    for (size_t off = 0; off < pkt.size();) {
      while (sq_window_ == 0 || rq_window_ == 0)
        if (!progress(true)) return fail("send window stalled: " + error);
      size_t n = std::min(max, pkt.size() - off);
      int slot = free_slots_.back();
      free_slots_.pop_back();
      char *p = sbuf_.data() + (size_t)slot * max;
      memcpy(p, pkt.data() + off, n);
      off += n;
      sq_window_--, rq_window_--;
      credits_since_solicited_ += pending_credits_;
      since_solicited_wrs_++;
      since_solicited_bytes_ += n;
      ibv_sge sg = {(uint64_t)(uintptr_t)p, (uint32_t)n, smr_->lkey};
      ibv_send_wr wr = {}, *bad;
      wr.wr_id = (uint64_t)slot + 1; // 0 is a pure ACK
      wr.sg_list = &sg;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_SEND_WITH_IMM;
      wr.imm_data = htonl(pending_credits_);
      wr.send_flags = IBV_SEND_SIGNALED;
      if (solicited(off == pkt.size())) {
        wr.send_flags |= IBV_SEND_SOLICITED;
        since_solicited_wrs_ = 0, since_solicited_bytes_ = 0, credits_since_solicited_ = 0;
      }
      peer_credits_ += (int)pending_credits_; // what we report, the other side may use again
      pending_credits_ = 0;
      if (ibv_post_send(qp_, &wr, &bad) != 0) return fail("ibv_post_send");
      data_wrs_sent++;
      if (!progress(false)) return false;
    }
    return true;
  }

  bool send_pure_ack() {
    ibv_send_wr wr = {}, *bad;
    wr.wr_id = 0;
    wr.num_sge = 0;
    wr.opcode = IBV_WR_SEND_WITH_IMM;
    wr.imm_data = htonl(pending_credits_);
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    if (ibv_post_send(qp_, &wr, &bad) != 0) return fail("post pure ACK");
    pending_credits_ = 0;
    imm_window_--;
    pure_acks_sent++;
    return true;
  }

  bool on_recv(const ibv_wc &wc) {
    if (wc.status != IBV_WC_SUCCESS) return fail(std::string("recv completion: ") + ibv_wc_status_str(wc.status));
    if (wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM)) return fail("receive without immediate");
    rq_window_ += (int)ntohl(wc.imm_data);
    if (rq_window_ > local_cap_) return fail("the other side returned more credits than we used");
    if (wc.byte_len == 0) { // a pure ACK: one reserved entry, no credit
      pure_acks_received++;
    } else {
      if (--peer_credits_ < 0) return fail("the other side sent a data WR without a credit");
      stream_.append(rbuf_.data() + wc.wr_id * payload_, wc.byte_len);
      pending_credits_++;
      data_wrs_received++;
    }
    return post_recv((int)wc.wr_id);
  }

  bool on_send(const ibv_wc &wc) {
    if (wc.status != IBV_WC_SUCCESS) return fail(std::string("send completion: ") + ibv_wc_status_str(wc.status));
    if (wc.wr_id == 0) {
      imm_window_++;
    } else {
      sq_window_++;
      free_slots_.push_back((int)wc.wr_id - 1);
    }
    return true;
  }

  // Drains both CQs once; returns the number of completions seen.
  int drain() {
    ibv_wc wc[16];
    int seen = 0, n;
    while ((n = ibv_poll_cq(rcq_, 16, wc)) > 0) {
      for (int i = 0; i < n; i++)
        if (!on_recv(wc[i])) return -1;
      seen += n;
    }
    if (n < 0) return fail("poll rcq"), -1;
    while ((n = ibv_poll_cq(scq_, 16, wc)) > 0) {
      for (int i = 0; i < n; i++)
        if (!on_send(wc[i])) return -1;
      seen += n;
    }
    if (n < 0) return fail("poll scq"), -1;
    return seen;
  }

  // Our credits go back: piggybacked on data WRs, or in a pure ACK once
  // more than remote_cap/2 are pending. What we report, the other side may
  // use again.
  bool report_credits() {
    if (pending_credits_ > (uint32_t)remote_cap_ / 2 && imm_window_ > 0) {
      peer_credits_ += (int)pending_credits_;
      return send_pure_ack();
    }
    return true;
  }

  // Handles completions; with `wait`, sleeps on the channel until one comes
  // (recv CQ armed solicited-only, as brpc arms it).
  bool progress(bool wait) {
    int seen = drain();
    if (seen < 0) return false;
    if (!report_credits()) return false;
    if (seen > 0 || !wait) return true;
    if (ibv_req_notify_cq(rcq_, 1) || ibv_req_notify_cq(scq_, 0)) return fail("arm cq");
    if ((seen = drain()) != 0) return seen > 0 && report_credits();
    pollfd p = {chan_->fd, POLLIN, 0};
    int r = poll(&p, 1, kWaitMs);
    if (r <= 0) return fail("no solicited completion within the wait (stalled)");
    ibv_cq *cq;
    void *ctx;
    if (ibv_get_cq_event(chan_, &cq, &ctx) != 0) return fail("get cq event");
    ibv_ack_cq_events(cq, 1);
    return true;
  }

  bool read_packet(Packet *out) {
    for (;;) {
      if (stream_.size() >= 12) {
        const uint8_t *h = reinterpret_cast<const uint8_t *>(stream_.data());
        if (memcmp(h, "PRPC", 4) != 0) return fail("packet: bad magic");
        uint32_t body = get32(h + 4), msize = get32(h + 8);
        if (msize > body) return fail("packet: meta larger than body");
        if (stream_.size() >= 12 + (size_t)body) {
          if (!out->meta.ParseFromArray(stream_.data() + 12, (int)msize)) return fail("packet: meta");
          size_t att = out->meta.has_attachment_size() ? (size_t)out->meta.attachment_size() : 0;
          if (att > body - msize) return fail("packet: attachment_size over the body");
          out->message.assign(stream_, 12 + msize, body - msize - att);
          out->attachment.assign(stream_, 12 + body - att, att);
          stream_.erase(0, 12 + (size_t)body);
          return true; // credits still pending ride on the next message's first WR
        }
      }
      if (!progress(true)) return false;
    }
  }
};

} // namespace brpc_peer

#endif
