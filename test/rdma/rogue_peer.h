// rogue_peer.h - a hostile RDMA peer for the adversarial tests: it speaks
// just enough of rrpc's CLC handshake and ring protocol (with rrpc's own
// codecs) to get an RDMA connection to an rrpc server, and then does what a
// correct peer never would: writes anywhere with any key, reports lengths
// it did not write, announces receives it never posts, stalls a handshake.
// It opens its own device context (its own PD), like a peer on another
// host. Test code only: nothing here is linked into librrpc.
#ifndef RRPC_TEST_RDMA_ROGUE_PEER_H
#define RRPC_TEST_RDMA_ROGUE_PEER_H

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

#include "rrpc/internal/baidu_std.h"
#include "rrpc/iobuf.h"
#include "transport/rdma/device.h"
#include "transport/smc/cdc.h"
#include "transport/smc/clc.h"
#include "transport/rdma/wire/window.h"

namespace rogue {

inline uint64_t now_ms() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One device context shared by every rogue of the process (not the one
// rrpc's server uses: its own PD).
inline rrpc__rdma_dev *device() {
  static rrpc__rdma_dev *d = nullptr;
  if (d == nullptr && rrpc__rdma_dev_open(nullptr, 1, &d) != 0) d = nullptr;
  return d;
}

// A blocking TCP connection to ip:port with a receive timeout.
inline int tcp_connect(const std::string &ip, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa = {};
  sa.sin_family = AF_INET;
  sa.sin_port = htons((uint16_t)port);
  inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
  if (connect(fd, (sockaddr *)&sa, sizeof sa) != 0) {
    close(fd);
    return -1;
  }
  timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// Whether the server closed `fd` within ms (EOF or reset seen).
inline bool tcp_closed_within(int fd, int ms) {
  uint64_t end = now_ms() + (uint64_t)ms;
  for (;;) {
    uint64_t t = now_ms();
    if (t >= end) return false;
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, (int)(end - t)) <= 0) continue;
    char b[256];
    ssize_t r = recv(fd, b, sizeof b, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
}

struct Peer {
  // What the rogue announces and does.
  uint32_t ring_size = 64 * 1024;
  int announce_log2 = 6;  // receives announced in the Confirm (2^n)
  int post_recvs = 64;    // receives really posted
  int rnr_retry = 7;
  int min_rnr_timer = 12;  // what our RNR NAKs ask the server to wait (IB encoding)
  // CLC feature bits of the Proposal and Confirm; with RRPC_CLC_FEAT_ELASTIC
  // the Confirm announces ring_size as the cap and no ring (rkey, address 0).
  uint8_t features = RRPC_CLC_FEAT_WWI;

  int fd = -1;
  rrpc__rdma_dev *dev = nullptr;
  ibv_cq *cq = nullptr;
  ibv_qp *qp = nullptr;
  char *ring = nullptr;  // the server writes responses here
  ibv_mr *ring_mr = nullptr;
  char *buf = nullptr;  // send staging + receive slots
  ibv_mr *buf_mr = nullptr;
  rrpc__clc_accept accept = {};  // the server's
  uint32_t psn = 0x123;
  uint64_t prod = 0;      // bytes written into the server's ring
  uint64_t rx_prod = 0;   // bytes the server wrote into ours
  uint64_t wr_id = 0;
  std::string error;

  static const size_t kSlot = 64;
  static const size_t kSlots = 256;
  static const size_t kStage = 256 * 1024;

  ~Peer() { destroy(); }

  void destroy() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
    if (ring_mr) ibv_dereg_mr(ring_mr);
    if (buf_mr) ibv_dereg_mr(buf_mr);
    free(ring);
    free(buf);
    if (fd >= 0) close(fd);
    qp = nullptr;
    cq = nullptr;
    ring_mr = buf_mr = nullptr;
    ring = buf = nullptr;
    fd = -1;
  }

  bool fail(const std::string &e) {
    error = e;
    return false;
  }

  // TCP connect and send a Proposal; nothing else.
  bool propose(const std::string &ip, int port) {
    dev = device();
    if (dev == nullptr) return fail("no device");
    fd = tcp_connect(ip, port);
    if (fd < 0) return fail("connect");
    return send_proposal(0);
  }

  // A Proposal on the connection; `peer_id0` is its first peer-id byte
  // (where an Accept/Confirm has its type when read as one).
  bool send_proposal(uint8_t peer_id0) {
    rrpc__clc_proposal p = {};
    sockaddr_storage local = {};
    socklen_t sl = sizeof local;
    getsockname(fd, (sockaddr *)&local, &sl);
    if (!pick_gid()) return false;
    memcpy(p.gid, gid_.raw, 16);
    memcpy(p.mac, dev->mac, 6);
    memcpy(p.peer_id + 2, dev->mac, 6);
    p.peer_id[0] = peer_id0;
    p.has_ip_area = 1;
    p.ipv4_subnet = ntohl(((sockaddr_in *)&local)->sin_addr.s_addr);
    p.ipv4_prefix_len = 32;
    p.rrpc_features = features;
    p.rrpc_version = RRPC_CLC_WIRE_VERSION;
    uint8_t b[RRPC_CLC_MAX_LEN];
    size_t len;
    if (rrpc__clc_encode_proposal(&p, b, sizeof b, &len) != 0) return fail("encode proposal");
    return send(fd, b, len, MSG_NOSIGNAL) == (ssize_t)len || fail("send proposal");
  }

  // The GID of the TCP connection's local address (for our CLC messages).
  bool pick_gid() {
    sockaddr_storage local = {};
    socklen_t sl = sizeof local;
    getsockname(fd, (sockaddr *)&local, &sl);
    int gi;
    ibv_gid gid;
    if (rrpc__rdma_dev_pick_gid(dev, &local, &gi, &gid) != 0) return fail("gid");
    gid_index_ = gi;
    gid_ = gid;
    return true;
  }

  // Read one CLC message from the server.
  bool read_clc(rrpc__clc_msg *m) {
    uint8_t b[RRPC_CLC_MAX_LEN];
    if (recv(fd, b, RRPC_CLC_HDR_LEN, MSG_WAITALL) != RRPC_CLC_HDR_LEN) return fail("no CLC header");
    rrpc__clc_hdr h;
    if (rrpc__clc_peek_header(b, RRPC_CLC_HDR_LEN, &h) != 0) return fail("bad CLC header");
    size_t rest = h.length - RRPC_CLC_HDR_LEN;
    if (recv(fd, b + RRPC_CLC_HDR_LEN, rest, MSG_WAITALL) != (ssize_t)rest) return fail("short CLC");
    if (rrpc__clc_decode(b, h.length, m) != 0) return fail("undecodable CLC");
    return true;
  }

  // Read the server's Accept.
  bool read_accept() {
    rrpc__clc_msg m;
    if (!read_clc(&m)) return false;
    if (m.hdr.type != RRPC_CLC_ACCEPT) return fail("not an Accept: type " + std::to_string(m.hdr.type));
    accept = m.u.accept;
    return true;
  }

  bool create_verbs() {
    cq = ibv_create_cq(dev->ctx, 1024, nullptr, nullptr, 0);
    if (cq == nullptr) return fail("cq");
    ibv_qp_init_attr qa = {};
    qa.send_cq = qa.recv_cq = cq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = 64;
    qa.cap.max_recv_wr = kSlots;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qp = ibv_create_qp(dev->pd, &qa);
    if (qp == nullptr) return fail("qp");
    if (posix_memalign((void **)&ring, 4096, ring_size) != 0) return fail("ring");
    memset(ring, 0, ring_size);
    ring_mr = ibv_reg_mr(dev->pd, ring, ring_size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    size_t bl = kStage + kSlots * kSlot;
    if (posix_memalign((void **)&buf, 4096, bl) != 0) return fail("buf");
    memset(buf, 0, bl);
    buf_mr = ibv_reg_mr(dev->pd, buf, bl, IBV_ACCESS_LOCAL_WRITE);
    if (ring_mr == nullptr || buf_mr == nullptr) return fail("reg_mr");
    ibv_qp_attr a = {};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = dev->port;
    a.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
      return fail("INIT");
    for (int i = 0; i < post_recvs && i < (int)kSlots; i++)
      if (!post_recv((uint64_t)i)) return fail("post_recv");
    return true;
  }

  bool post_recv(uint64_t slot) {
    ibv_sge sge = {(uintptr_t)(buf + kStage + slot * kSlot), (uint32_t)kSlot, buf_mr->lkey};
    ibv_recv_wr wr = {}, *bad;
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    return ibv_post_recv(qp, &wr, &bad) == 0;
  }

  bool connect_qp() {
    ibv_qp_attr a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = dev->active_mtu < (ibv_mtu)accept.mtu ? dev->active_mtu : (ibv_mtu)accept.mtu;
    a.dest_qp_num = accept.qpn;
    a.rq_psn = accept.psn;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = (uint8_t)min_rnr_timer;
    a.ah_attr.port_num = dev->port;
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, accept.gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)gid_index_;
    a.ah_attr.grh.hop_limit = 64;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
      return fail("RTR");
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn;
    a.timeout = 14;
    a.retry_cnt = 3;
    a.rnr_retry = (uint8_t)rnr_retry;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                          IBV_QP_MAX_QP_RD_ATOMIC))
      return fail("RTS");
    return true;
  }

  // Our Confirm (as a client) or, with RRPC_CLC_ACCEPT, our Accept (as a
  // rogue server: pick_gid and create_verbs first).
  bool send_confirm(uint8_t type = RRPC_CLC_CONFIRM) {
    rrpc__clc_accept c = {};
    c.type = type;
    c.first_contact = 1;
    memcpy(c.peer_id + 2, dev->mac, 6);
    memcpy(c.gid, gid_.raw, 16);
    memcpy(c.mac, dev->mac, 6);
    c.qpn = qp->qp_num;
    c.rkey = ring_mr->rkey;
    c.rmbe_idx = 1;
    c.token = 0x5eed;
    if (rrpc__clc_ring_code(ring_size, &c.ring_code) != 0) return fail("ring code");
    c.mtu = accept.mtu;
    c.rq_depth_log2 = (uint8_t)announce_log2;
    c.ring_addr = (uint64_t)(uintptr_t)ring;
    c.rrpc_features = features;
    if (features & RRPC_CLC_FEAT_ELASTIC) c.rkey = 0, c.ring_addr = 0;
    c.psn = psn;
    uint8_t b[RRPC_CLC_MAX_LEN];
    size_t len;
    if (rrpc__clc_encode_accept(&c, b, sizeof b, &len) != 0) return fail("encode confirm");
    return send(fd, b, len, MSG_NOSIGNAL) == (ssize_t)len || fail("send confirm");
  }

  // One completion within ms (any CQ: send or receive), or false.
  bool poll_one(ibv_wc *wc, int ms) {
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
      int n = ibv_poll_cq(cq, 1, wc);
      if (n < 0) return fail("poll_cq");
      if (n == 1) return true;
      usleep(200);  // a busy loop on a 2-core machine would starve the server
    }
    return fail("no completion in time");
  }

  // The whole handshake: afterwards RDMA is up on both sides (the server's
  // first CDC arrived).
  bool connect_up(const std::string &ip, int port) {
    if (!propose(ip, port) || !read_accept() || !create_verbs() || !connect_qp() || !send_confirm())
      return false;
    ibv_wc wc;
    if (!poll_one(&wc, 5000)) return false;
    if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) return fail("first CDC missing");
    return post_recv(wc.wr_id);
  }

  // Post one signaled, solicited WR of `len` bytes from the staging buffer:
  // `imm` goes with the *_WITH_IMM opcodes, `inv_rkey` with SEND_WITH_INV
  // (the two share a union in the WR), (addr, rkey) with the RDMA ones.
  // Its wr_id, or 0 when the post failed.
  uint64_t post_buf(ibv_wr_opcode op, uint32_t len, uint32_t imm = 0, uint64_t addr = 0, uint32_t rkey = 0,
                    uint32_t inv_rkey = 0) {
    ibv_sge sge = {(uintptr_t)buf, len, buf_mr->lkey};
    ibv_send_wr wr = {}, *bad;
    wr.wr_id = ++wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    if (op == IBV_WR_SEND_WITH_INV)
      wr.invalidate_rkey = inv_rkey;
    else
      wr.imm_data = htonl(imm);
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    return ibv_post_send(qp, &wr, &bad) == 0 ? wr.wr_id : 0;
  }

  // RDMA-WRITE-WITH-IMM `data` at (addr, rkey), reporting `imm`; waits for
  // its completion and returns its status (IBV_WC_SUCCESS = accepted).
  int write_raw(uint64_t addr, uint32_t rkey, const std::string &data, uint32_t imm, int ms = 5000) {
    memcpy(buf, data.data(), data.size());
    uint64_t id = post_buf(IBV_WR_RDMA_WRITE_WITH_IMM, (uint32_t)data.size(), imm, addr, rkey);
    if (id == 0) return -1;
    uint64_t end = now_ms() + (uint64_t)ms;
    ibv_wc wc;
    while (now_ms() < end) {
      if (!poll_one(&wc, (int)(end - now_ms()))) return -2;
      if (wc.wr_id == id && (wc.opcode == IBV_WC_RDMA_WRITE || wc.status != IBV_WC_SUCCESS))
        return wc.status;
      if (wc.status == IBV_WC_SUCCESS && (wc.opcode & IBV_WC_RECV)) stash(wc);
    }
    return -2;
  }

  // A SEND (plain, or SEND_WITH_INV of `inv_rkey`) into the server's
  // receive slots; waits for its completion and returns its status.
  int send_op(const std::string &data, bool with_inv, uint32_t inv_rkey, int ms = 5000) {
    memcpy(buf, data.data(), data.size());
    uint64_t id = post_buf(with_inv ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND, (uint32_t)data.size(), 0, 0, 0, inv_rkey);
    if (id == 0) return -1;
    uint64_t end = now_ms() + (uint64_t)ms;
    ibv_wc wc;
    while (now_ms() < end) {
      if (!poll_one(&wc, (int)(end - now_ms()))) return -2;
      if (wc.wr_id == id && (!(wc.opcode & IBV_WC_RECV) || wc.status != IBV_WC_SUCCESS)) return wc.status;
      if (wc.status == IBV_WC_SUCCESS && (wc.opcode & IBV_WC_RECV)) stash(wc);
    }
    return -2;
  }

  // Wait for one message from the server (a write or a CDC) and do NOT
  // repost its receive. True if one came within ms.
  bool take_one_recv(int ms) {
    if (!stashed_.empty()) {
      stashed_.erase(stashed_.begin());
      return true;
    }
    ibv_wc wc;
    uint64_t end = now_ms() + (uint64_t)ms;
    while (now_ms() < end) {
      if (!poll_one(&wc, (int)(end - now_ms()))) return false;
      if (wc.opcode & IBV_WC_RECV) return wc.status == IBV_WC_SUCCESS;
    }
    return false;
  }

  bool close_was_stashed = false;  // wait_close_cdc found the close among the stashed receives

  // Wait for the server's close CDC (a CDC with connection-state flags);
  // writes and plain CDCs on the way are taken and their receives
  // reposted. Its conn_flags, or 0 if the QP failed or nothing came in ms
  // (a QP the server destroyed first shows up as a retry-exceeded error or
  // silence, never as the CDC).
  uint8_t wait_close_cdc(int ms, int *writes_after = nullptr) {
    std::string ignored;
    // The close may already be among the receives stashed while our own
    // last write waited for its completion: the peer's responder and
    // requester run apart, so the CDC the write provoked can complete
    // first (seen once in CI: the test then waited out its 5 s).
    std::vector<ibv_wc> stashed;
    stashed.swap(stashed_);
    for (size_t i = 0; i < stashed.size(); i++) {
      uint8_t flags = close_flags_of(stashed[i]);
      if (flags != 0) {
        close_was_stashed = true;
        int later = 0;  // data writes stashed after the close count too
        for (size_t k = i + 1; k < stashed.size(); k++)
          later += stashed[k].opcode == IBV_WC_RECV_RDMA_WITH_IMM && stashed[k].byte_len > 0;
        if (writes_after) *writes_after = later + count_writes(200);
        return flags;
      }
      take(stashed[i], &ignored);
    }
    uint64_t end = now_ms() + (uint64_t)ms;
    ibv_wc wc;
    while (now_ms() < end) {
      int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0) return 0;
      if (n == 0) {
        usleep(500);  // a busy loop on a 2-core machine would starve the server
        continue;
      }
      if (wc.status != IBV_WC_SUCCESS) return 0;
      uint8_t flags = close_flags_of(wc);
      if (flags != 0) {
        if (writes_after) *writes_after = count_writes(200);
        return flags;
      }
      if (wc.opcode & IBV_WC_RECV) take(wc, &ignored);
    }
    return 0;
  }

  // The connection-state flags of a received close CDC, or 0.
  uint8_t close_flags_of(const ibv_wc &wc) const {
    if (wc.opcode != IBV_WC_RECV) return 0;
    rrpc__cdc_msg m;
    const uint8_t *slot = (const uint8_t *)buf + kStage + wc.wr_id * kSlot;
    return rrpc__cdc_decode(slot, wc.byte_len, &m) == 0 ? m.conn_flags : 0;
  }

  // Data writes that arrive within ms (or until the QP fails).
  int count_writes(int ms) {
    int n = 0;
    uint64_t end = now_ms() + (uint64_t)ms;
    ibv_wc wc;
    while (now_ms() < end) {
      int k = ibv_poll_cq(cq, 1, &wc);
      if (k < 0 || (k == 1 && wc.status != IBV_WC_SUCCESS)) break;
      if (k == 0) {
        usleep(500);
        continue;
      }
      if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len > 0) n++;
    }
    return n;
  }

  // A client that sends and never reads: writes `frame` over and over as a
  // correct sender would (within the server's window, following its ACKs),
  // returns the server's receive credits (reposting, and reporting them,
  // with a pure CDC when no write carries them) but never consumes what the
  // server writes back (its consumer cursor never advances, so the
  // server's answers pile up on the server). Stops after max_frames, or
  // once the server's window stayed closed for idle_ms. Frames completed
  // (a frame the window cut goes on in the next call, with the same
  // frame), or -1 on a verbs error.
  int pump_unread(const std::string &frame, int max_frames, int idle_ms) {
    if (!tx_ready_ && !init_tx()) return -1;
    rrpc__tx_window &tx = tx_;
    int sent = 0;
    uint32_t &done_in_frame = frame_done_;  // a frame cut by the window goes on where it stopped
    uint64_t last = now_ms();
    while (sent < max_frames && now_ms() - last < (uint64_t)idle_ms) {
      ibv_wc wc;
      int n;
      while ((n = ibv_poll_cq(cq, 1, &wc)) == 1) {
        if (wc.status != IBV_WC_SUCCESS) return -1;
        if (wc.opcode & IBV_WC_RECV) {
          (void)rrpc__tx_window_on_ack(&tx, ntohl(wc.imm_data));
          if (!post_recv(wc.wr_id)) return -1;
          owed_++;
          if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) unconsumed_ += wc.byte_len;
        }
      }
      if (n < 0) return -1;
      rrpc__tx_plan plan;
      uint32_t left = (uint32_t)frame.size() - done_in_frame;
      if (rrpc__tx_window_plan(&tx, left, &plan) == 0) {
        for (uint32_t i = 0; i < plan.nseg; i++) {
          bool last_seg = i + 1 == plan.nseg;
          uint32_t credits = last_seg ? std::min<uint32_t>(owed_, RRPC_IMM_CREDITS_MAX) : 0;
          // Ask for an ACK as rrpc's own sender does when nearly blocked.
          uint8_t ask = last_seg && rrpc__tx_window_ack_request(&tx, &plan) ? 1 : 0;
          rrpc__imm imm = {ask, (uint8_t)credits, 0};
          memcpy(buf, frame.data() + done_in_frame, plan.seg[i].len);
          if (!post_and_wait(IBV_WR_RDMA_WRITE_WITH_IMM, plan.seg[i].len, rrpc__imm_pack(&imm),
                             accept.ring_addr + plan.seg[i].off, &tx))
            return -1;
          owed_ -= credits;
          done_in_frame += plan.seg[i].len;
        }
        if (rrpc__tx_window_commit(&tx, &plan) != 0) return -1;
        if (done_in_frame == frame.size()) {
          sent++;
          done_in_frame = 0;
        }
        last = now_ms();
        continue;
      }
      // Blocked: give the server its credits back, or it cannot ACK either.
      if (owed_ > 0 && rrpc__tx_window_plan_ack(&tx, 1, &plan) == 0) {
        uint32_t credits = std::min<uint32_t>(owed_, RRPC_IMM_CREDITS_MAX);
        rrpc__imm imm = {0, (uint8_t)credits, 0};
        rrpc__cdc_msg m = {};
        m.seq = ++cdc_seq_;
        m.token = accept.token;
        rrpc__cdc_encode(&m, (uint8_t *)buf);
        if (!post_and_wait(IBV_WR_SEND_WITH_IMM, RRPC_CDC_LEN, rrpc__imm_pack(&imm), 0, &tx)) return -1;
        if (rrpc__tx_window_commit(&tx, &plan) != 0) return -1;
        owed_ -= credits;
        continue;
      }
      usleep(500);  // a busy loop on a 2-core machine would starve the server
    }
    return sent;
  }

  // Consume what the server wrote (its answers) until it wrote nothing for
  // idle_ms: report the consumed bytes and the credits back with pure
  // CDCs, so that the server can write more. Bytes consumed, or -1.
  long consume_answers(int idle_ms) {
    if (!tx_ready_ && !init_tx()) return -1;
    long total = unconsumed_;  // written while we were not reading
    uint32_t unreported = unconsumed_;
    unconsumed_ = 0;
    uint64_t last = now_ms();
    while (now_ms() - last < (uint64_t)idle_ms) {
      ibv_wc wc;
      int n = ibv_poll_cq(cq, 1, &wc);
      if (n < 0 || (n == 1 && wc.status != IBV_WC_SUCCESS)) return -1;
      if (n == 1 && (wc.opcode & IBV_WC_RECV)) {
        (void)rrpc__tx_window_on_ack(&tx_, ntohl(wc.imm_data));
        if (!post_recv(wc.wr_id)) return -1;
        owed_++;
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len > 0) {
          unreported += wc.byte_len;
          total += wc.byte_len;
          last = now_ms();
        }
        continue;
      }
      rrpc__tx_plan plan;
      if ((unreported > 0 || owed_ > 0) && rrpc__tx_window_plan_ack(&tx_, owed_ > 0, &plan) == 0) {
        uint32_t credits = std::min<uint32_t>(owed_, RRPC_IMM_CREDITS_MAX);
        uint32_t adv = std::min<uint32_t>(unreported, RRPC_IMM_ADVANCE_MAX);
        rrpc__imm imm = {0, (uint8_t)credits, adv};
        rrpc__cdc_msg m = {};
        m.seq = ++cdc_seq_;
        m.token = accept.token;
        rrpc__cdc_encode(&m, (uint8_t *)buf);
        if (!post_and_wait(IBV_WR_SEND_WITH_IMM, RRPC_CDC_LEN, rrpc__imm_pack(&imm), 0, &tx_)) return -1;
        if (rrpc__tx_window_commit(&tx_, &plan) != 0) return -1;
        owed_ -= credits;
        unreported -= adv;
        unreported += unconsumed_;  // arrived while waiting for the CDC's completion
        total += unconsumed_;
        if (unconsumed_ > 0) last = now_ms();
        unconsumed_ = 0;
        continue;
      }
      if (n == 0) usleep(500);
    }
    return total;
  }

  // A correct write of `data` at the server ring's producer offset.
  int write_next(const std::string &data) {
    uint64_t ring = rrpc__clc_ring_size(accept.ring_code);
    uint64_t off = prod % ring;
    if (off + data.size() > ring) prod += ring - off, off = 0;  // keep it contiguous
    int st = write_raw(accept.ring_addr + off, accept.rkey, data, 0);
    if (st == IBV_WC_SUCCESS) prod += data.size();
    return st;
  }

  // A baidu_std echo request (test.Echo/Echo) with payload `req`.
  static std::string echo_frame(const std::string &req, int64_t cid) {
    rrpc_iobuf *out, *pay;
    rrpc_iobuf_new(&out);
    rrpc_iobuf_new(&pay);
    rrpc_iobuf_append(pay, req.data(), req.size());
    rrpc__rpc_meta m = {};
    m.has = RRPC_META_HAS_REQUEST | RRPC_META_HAS_CORRELATION_ID;
    m.service_name = {"test.Echo", 9};
    m.method_name = {"Echo", 4};
    m.correlation_id = cid;
    rrpc__baidu_pack(out, &m, pay, nullptr);
    std::string s(rrpc_iobuf_length(out), '\0');
    rrpc_iobuf_copy_out(out, 0, &s[0], s.size());
    rrpc_iobuf_free(out);
    rrpc_iobuf_free(pay);
    return s;
  }

  // Bytes the server wrote into our ring within ms (all writes that came).
  std::string received(int ms) {
    std::string got;
    uint64_t end = now_ms() + (uint64_t)ms;
    for (auto &wc : stashed_) take(wc, &got);
    stashed_.clear();
    ibv_wc wc;
    while (now_ms() < end) {
      int n = ibv_poll_cq(cq, 1, &wc);
      if (n == 1 && wc.status == IBV_WC_SUCCESS && (wc.opcode & IBV_WC_RECV)) take(wc, &got);
      else if (n == 1 && wc.status != IBV_WC_SUCCESS) break;
      else if (n == 0) usleep(500);
    }
    return got;
  }

 private:
  uint16_t cdc_seq_ = 0;
  // The receive of the server's first CDC, reposted by connect_up, is the
  // first credit owed.
  uint32_t owed_ = 1;  // server receives reposted, not yet reported as credits
  rrpc__tx_window tx_ = {};  // my view of the server's ring (pump/consume)
  uint32_t unconsumed_ = 0;  // bytes the server wrote that we have not reported consumed
  uint32_t frame_done_ = 0;  // bytes of pump_unread's current frame already written
  bool tx_ready_ = false;

  bool init_tx() {
    uint32_t depth = 1u << accept.rq_depth_log2;
    if (depth > 4096) depth = 4096;
    tx_ready_ = rrpc__tx_window_init(&tx_, (uint32_t)rrpc__clc_ring_size(accept.ring_code), depth, 0) == 0;
    return tx_ready_;
  }

  // Post one WR from the staging buffer and wait for its completion,
  // applying the ACKs of server messages met on the way to tx (their
  // receives are reposted and owed as credits).
  bool post_and_wait(ibv_wr_opcode op, uint32_t len, uint32_t imm, uint64_t addr, rrpc__tx_window *tx) {
    uint64_t id = post_buf(op, len, imm, addr, accept.rkey);
    if (id == 0) return false;
    ibv_wc wc;
    for (;;) {
      if (!poll_one(&wc, 5000)) return false;
      if (wc.status != IBV_WC_SUCCESS) return false;
      if (wc.opcode & IBV_WC_RECV) {
        (void)rrpc__tx_window_on_ack(tx, ntohl(wc.imm_data));
        if (!post_recv(wc.wr_id)) return false;
        owed_++;
        if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) unconsumed_ += wc.byte_len;
        continue;
      }
      if (wc.wr_id == id) return true;
    }
  }

  int gid_index_ = 0;
  ibv_gid gid_ = {};
  std::vector<ibv_wc> stashed_;

  void stash(const ibv_wc &wc) { stashed_.push_back(wc); }
  void take(const ibv_wc &wc, std::string *got) {
    if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM && wc.byte_len > 0) {
      uint64_t off = rx_prod % ring_size;
      got->append(ring + off, wc.byte_len);
      rx_prod += wc.byte_len;
    }
    post_recv(wc.wr_id);
  }
};

}  // namespace rogue

#endif  // RRPC_TEST_RDMA_ROGUE_PEER_H
