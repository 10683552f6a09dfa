// smc_nl - configure and inspect the Linux kernel's SMC module over generic netlink.
// smc-tools is not packaged in Debian; the kernel SMC-R rig (docs/kernel-smc.md) needs a pnet
// table entry and a user EID on both guests, and its tests read link groups, links, the
// SMC-R statistics and the fallback reasons. Attribute numbers come from <linux/smc.h>.
//
//   smc_nl pnet-add PNETID NETDEV IBDEV PORT   map a netdev and an RDMA port to one PNETID
//   smc_nl pnet-flush                          empty the pnet table
//   smc_nl ueid-add EID                        add a user EID (blank-padded to 32 bytes)
//   smc_nl ueid-flush                          remove every user EID
//   smc_nl ueids                               one "ueid <EID>" line per user EID
//   smc_nl lgrs                                one "lgr ..." line per SMC-R link group
//   smc_nl links                               one "link ..." line per SMC-R link
//   smc_nl stats                               SMC-R counters, one "NAME VALUE" line each
//   smc_nl fallbacks                           one "fallback ..." line per reason code seen
// Exit status: 0 done, 1 the kernel refused (its errno is printed), 2 usage.

#include <errno.h>
#include <inttypes.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BUF_SIZE = 32768 };

struct nl {
    int fd;
    unsigned seq;
};

struct msg {
    char buf[1024];
    size_t len;
};

// ---- building a request ---------------------------------------------------------------------

static struct nlattr *attr_put(struct msg *m, unsigned short type, const void *data, size_t len)
{
    struct nlattr *a = (struct nlattr *)(m->buf + m->len);
    size_t total = NLA_ALIGN(NLA_HDRLEN + len);
    if (m->len + total > sizeof(m->buf)) {
        return NULL;
    }
    memset(a, 0, total);
    a->nla_type = type;
    a->nla_len = (unsigned short)(NLA_HDRLEN + len);
    if (len > 0) {
        memcpy((char *)a + NLA_HDRLEN, data, len);
    }
    m->len += total;
    return a;
}

static void msg_start(struct msg *m, unsigned short family, unsigned short flags, unsigned char cmd,
                      unsigned char version)
{
    memset(m, 0, sizeof(*m));
    struct nlmsghdr *h = (struct nlmsghdr *)m->buf;
    h->nlmsg_type = family;
    h->nlmsg_flags = (unsigned short)(NLM_F_REQUEST | flags);
    struct genlmsghdr *g = (struct genlmsghdr *)(m->buf + NLMSG_HDRLEN);
    g->cmd = cmd;
    g->version = version;
    m->len = NLMSG_HDRLEN + GENL_HDRLEN;
}

// ---- the socket -----------------------------------------------------------------------------

static int nl_open(struct nl *nl)
{
    nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    nl->seq = 1;
    if (nl->fd < 0) {
        return -errno;
    }
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (bind(nl->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;
        close(nl->fd);
        return err;
    }
    return 0;
}

static int nl_send(struct nl *nl, struct msg *m)
{
    struct nlmsghdr *h = (struct nlmsghdr *)m->buf;
    h->nlmsg_len = (unsigned)m->len;
    h->nlmsg_seq = ++nl->seq;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    if (sendto(nl->fd, m->buf, m->len, 0, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        return -errno;
    }
    return 0;
}

typedef void (*on_msg_fn)(const struct nlmsghdr *h, void *arg);

// Reads replies until the ACK (requests) or NLMSG_DONE (dumps); each data message goes to
// on_msg. Returns 0 or the kernel's negative errno.
static int nl_recv(struct nl *nl, on_msg_fn on_msg, void *arg)
{
    static char buf[BUF_SIZE];
    for (;;) {
        ssize_t n = recv(nl->fd, buf, sizeof(buf), 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned)n);
             h = NLMSG_NEXT(h, n)) {
            if (h->nlmsg_type == NLMSG_DONE) {
                return 0;
            }
            if (h->nlmsg_type == NLMSG_ERROR) {
                const struct nlmsgerr *e = NLMSG_DATA(h);
                return e->error;   // 0 is the ACK
            }
            if (on_msg != NULL) {
                on_msg(h, arg);
            }
        }
    }
}

// ---- attributes of a reply ------------------------------------------------------------------

static const struct nlattr *attr_first(const void *data, size_t len, size_t *left)
{
    *left = len;
    return len >= NLA_HDRLEN ? data : NULL;
}

static const struct nlattr *attr_next(const struct nlattr *a, size_t *left)
{
    size_t step = NLA_ALIGN(a->nla_len);
    if (a->nla_len < NLA_HDRLEN || step >= *left) {
        return NULL;
    }
    *left -= step;
    const struct nlattr *n = (const struct nlattr *)((const char *)a + step);
    return *left >= NLA_HDRLEN && n->nla_len <= *left ? n : NULL;
}

#define ATTRS_FOREACH(a, data, len, left)                                                     \
    for (const struct nlattr *a = attr_first((data), (len), &(left)); a != NULL;             \
         a = attr_next(a, &(left)))

static const void *attr_data(const struct nlattr *a) { return (const char *)a + NLA_HDRLEN; }
static size_t attr_len(const struct nlattr *a) { return a->nla_len - NLA_HDRLEN; }
static int attr_type(const struct nlattr *a) { return a->nla_type & NLA_TYPE_MASK; }

static uint64_t attr_uint(const struct nlattr *a)
{
    const unsigned char *p = attr_data(a);
    switch (attr_len(a)) {
    case 1: return p[0];
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    case 8: { uint64_t v; memcpy(&v, p, 8); return v; }
    default: return 0;
    }
}

// A string attribute, copied and NUL-terminated; trailing blanks (EIDs are padded) removed.
static void attr_str(const struct nlattr *a, char *out, size_t cap)
{
    size_t n = strnlen(attr_data(a), attr_len(a));
    if (n >= cap) {
        n = cap - 1;
    }
    memcpy(out, attr_data(a), n);
    while (n > 0 && out[n - 1] == ' ') {
        n--;
    }
    out[n] = '\0';
}

static const void *genl_attrs(const struct nlmsghdr *h, size_t *len)
{
    size_t hdr = NLMSG_HDRLEN + GENL_HDRLEN;
    *len = h->nlmsg_len > hdr ? h->nlmsg_len - hdr : 0;
    return (const char *)h + hdr;
}

// ---- family lookup --------------------------------------------------------------------------

static void on_family(const struct nlmsghdr *h, void *arg)
{
    size_t len, left;
    const void *data = genl_attrs(h, &len);
    ATTRS_FOREACH(a, data, len, left) {
        if (attr_type(a) == CTRL_ATTR_FAMILY_ID) {
            *(unsigned short *)arg = (unsigned short)attr_uint(a);
        }
    }
}

static int family_id(struct nl *nl, const char *name, unsigned short *id)
{
    struct msg m;
    // With NLM_F_ACK the family message is followed by an ACK, which ends nl_recv.
    msg_start(&m, GENL_ID_CTRL, NLM_F_ACK, CTRL_CMD_GETFAMILY, 1);
    attr_put(&m, CTRL_ATTR_FAMILY_NAME, name, strlen(name) + 1);
    *id = 0;
    int rc = nl_send(nl, &m);
    if (rc == 0) {
        rc = nl_recv(nl, on_family, id);
    }
    if (rc == 0 && *id == 0) {
        rc = -ENOENT;
    }
    return rc;
}

// ---- commands -------------------------------------------------------------------------------

struct ctx {
    struct nl nl;
    unsigned short pnet_family;
    unsigned short gen_family;
};

static int request(struct ctx *c, struct msg *m, on_msg_fn on_msg, void *arg)
{
    int rc = nl_send(&c->nl, m);
    return rc != 0 ? rc : nl_recv(&c->nl, on_msg, arg);
}

static int cmd_pnet_add(struct ctx *c, char **argv)
{
    struct msg m;
    char *end;
    unsigned long port = strtoul(argv[3], &end, 10);
    if (*end != '\0' || port < 1 || port > 2) {
        fprintf(stderr, "smc_nl: PORT must be 1 or 2\n");
        return -EINVAL;
    }
    unsigned char port8 = (unsigned char)port;
    msg_start(&m, c->pnet_family, NLM_F_ACK, SMC_PNETID_ADD, SMCR_GENL_FAMILY_VERSION);
    attr_put(&m, SMC_PNETID_NAME, argv[0], strlen(argv[0]) + 1);
    attr_put(&m, SMC_PNETID_ETHNAME, argv[1], strlen(argv[1]) + 1);
    attr_put(&m, SMC_PNETID_IBNAME, argv[2], strlen(argv[2]) + 1);
    attr_put(&m, SMC_PNETID_IBPORT, &port8, 1);
    return request(c, &m, NULL, NULL);
}

static int cmd_pnet_flush(struct ctx *c, char **argv)
{
    (void)argv;
    struct msg m;
    msg_start(&m, c->pnet_family, NLM_F_ACK, SMC_PNETID_FLUSH, SMCR_GENL_FAMILY_VERSION);
    return request(c, &m, NULL, NULL);
}

static int cmd_ueid_add(struct ctx *c, char **argv)
{
    // The kernel takes the EID as SMC_MAX_EID_LEN bytes, blank-padded, plus a NUL.
    char eid[SMC_MAX_EID_LEN + 1];
    size_t n = strlen(argv[0]);
    if (n == 0 || n > SMC_MAX_EID_LEN) {
        fprintf(stderr, "smc_nl: an EID has 1 to %d characters\n", SMC_MAX_EID_LEN);
        return -EINVAL;
    }
    memset(eid, ' ', SMC_MAX_EID_LEN);
    memcpy(eid, argv[0], n);
    eid[SMC_MAX_EID_LEN] = '\0';
    struct msg m;
    msg_start(&m, c->gen_family, NLM_F_ACK, SMC_NETLINK_ADD_UEID, SMC_GENL_FAMILY_VERSION);
    attr_put(&m, SMC_NLA_EID_TABLE_ENTRY, eid, sizeof(eid));
    return request(c, &m, NULL, NULL);
}

static int cmd_ueid_flush(struct ctx *c, char **argv)
{
    (void)argv;
    struct msg m;
    msg_start(&m, c->gen_family, NLM_F_ACK, SMC_NETLINK_FLUSH_UEID, SMC_GENL_FAMILY_VERSION);
    return request(c, &m, NULL, NULL);
}

static int dump(struct ctx *c, unsigned char cmd, on_msg_fn on_msg)
{
    struct msg m;
    msg_start(&m, c->gen_family, NLM_F_DUMP, cmd, SMC_GENL_FAMILY_VERSION);
    return request(c, &m, on_msg, NULL);
}

static void on_ueid(const struct nlmsghdr *h, void *arg)
{
    (void)arg;
    size_t len, left;
    const void *data = genl_attrs(h, &len);
    char eid[SMC_MAX_EID_LEN + 1];
    ATTRS_FOREACH(a, data, len, left) {
        if (attr_type(a) == SMC_NLA_EID_TABLE_ENTRY) {
            attr_str(a, eid, sizeof(eid));
            printf("ueid %s\n", eid);
        }
    }
}

static int cmd_ueids(struct ctx *c, char **argv)
{
    (void)argv;
    return dump(c, SMC_NETLINK_DUMP_UEID, on_ueid);
}

// The nest of one top-level attribute of a reply, or NULL.
static const struct nlattr *top_nest(const struct nlmsghdr *h, int type)
{
    size_t len, left;
    const void *data = genl_attrs(h, &len);
    ATTRS_FOREACH(a, data, len, left) {
        if (attr_type(a) == type) {
            return a;
        }
    }
    return NULL;
}

static void on_lgr(const struct nlmsghdr *h, void *arg)
{
    (void)arg;
    const struct nlattr *n = top_nest(h, SMC_GEN_LGR_SMCR);
    if (n == NULL) {
        return;
    }
    size_t left;
    char pnetid[64] = "";
    uint64_t id = 0, role = 0, type = 0, conns = 0;
    ATTRS_FOREACH(a, attr_data(n), attr_len(n), left) {
        switch (attr_type(a)) {
        case SMC_NLA_LGR_R_ID: id = attr_uint(a); break;
        case SMC_NLA_LGR_R_ROLE: role = attr_uint(a); break;
        case SMC_NLA_LGR_R_TYPE: type = attr_uint(a); break;
        case SMC_NLA_LGR_R_CONNS_NUM: conns = attr_uint(a); break;
        case SMC_NLA_LGR_R_PNETID: attr_str(a, pnetid, sizeof(pnetid)); break;
        default: break;
        }
    }
    printf("lgr id=0x%" PRIx64 " role=%s type=%" PRIu64 " conns=%" PRIu64 " pnetid=%s\n", id,
           role == 0 ? "client" : "server", type, conns, pnetid[0] ? pnetid : "-");
}

static int cmd_lgrs(struct ctx *c, char **argv)
{
    (void)argv;
    return dump(c, SMC_NETLINK_GET_LGR_SMCR, on_lgr);
}

static void on_link(const struct nlmsghdr *h, void *arg)
{
    (void)arg;
    const struct nlattr *n = top_nest(h, SMC_GEN_LINK_SMCR);
    if (n == NULL) {
        return;
    }
    size_t left;
    char ibdev[64] = "", gid[64] = "", peer_gid[64] = "";
    uint64_t id = 0, port = 0, conns = 0, state = 0;
    ATTRS_FOREACH(a, attr_data(n), attr_len(n), left) {
        switch (attr_type(a)) {
        case SMC_NLA_LINK_ID: id = attr_uint(a); break;
        case SMC_NLA_LINK_IB_DEV: attr_str(a, ibdev, sizeof(ibdev)); break;
        case SMC_NLA_LINK_IB_PORT: port = attr_uint(a); break;
        case SMC_NLA_LINK_GID: attr_str(a, gid, sizeof(gid)); break;
        case SMC_NLA_LINK_PEER_GID: attr_str(a, peer_gid, sizeof(peer_gid)); break;
        case SMC_NLA_LINK_CONN_CNT: conns = attr_uint(a); break;
        case SMC_NLA_LINK_STATE: state = attr_uint(a); break;
        default: break;
        }
    }
    printf("link id=%" PRIu64 " ibdev=%s port=%" PRIu64 " conns=%" PRIu64 " state=%" PRIu64
           " gid=%s peer_gid=%s\n", id, ibdev, port, conns, state, gid, peer_gid);
}

static int cmd_links(struct ctx *c, char **argv)
{
    (void)argv;
    // Links are dumped per link group: the kernel walks every group itself.
    return dump(c, SMC_NETLINK_GET_LINK_SMCR, on_link);
}

static const char *const smcr_tech_names[] = {
    [SMC_NLA_STATS_T_CLNT_V1_SUCC] = "client_v1_ok",
    [SMC_NLA_STATS_T_CLNT_V2_SUCC] = "client_v2_ok",
    [SMC_NLA_STATS_T_SRV_V1_SUCC] = "server_v1_ok",
    [SMC_NLA_STATS_T_SRV_V2_SUCC] = "server_v2_ok",
    [SMC_NLA_STATS_T_RX_BYTES] = "rx_bytes",
    [SMC_NLA_STATS_T_TX_BYTES] = "tx_bytes",
    [SMC_NLA_STATS_T_RX_CNT] = "rx_calls",
    [SMC_NLA_STATS_T_TX_CNT] = "tx_calls",
};

static void on_stats(const struct nlmsghdr *h, void *arg)
{
    (void)arg;
    const struct nlattr *n = top_nest(h, SMC_GEN_STATS);
    if (n == NULL) {
        return;
    }
    size_t left, left2;
    ATTRS_FOREACH(a, attr_data(n), attr_len(n), left) {
        switch (attr_type(a)) {
        case SMC_NLA_STATS_CLNT_HS_ERR_CNT:
            printf("client_handshake_errors %" PRIu64 "\n", attr_uint(a));
            break;
        case SMC_NLA_STATS_SRV_HS_ERR_CNT:
            printf("server_handshake_errors %" PRIu64 "\n", attr_uint(a));
            break;
        case SMC_NLA_STATS_SMCR_TECH:
            ATTRS_FOREACH(t, attr_data(a), attr_len(a), left2) {
                int ty = attr_type(t);
                if (ty > 0 && (size_t)ty < sizeof(smcr_tech_names) / sizeof(smcr_tech_names[0]) &&
                    smcr_tech_names[ty] != NULL) {
                    printf("smcr_%s %" PRIu64 "\n", smcr_tech_names[ty], attr_uint(t));
                }
            }
            break;
        default: break;
        }
    }
}

static int cmd_stats(struct ctx *c, char **argv)
{
    (void)argv;
    return dump(c, SMC_NETLINK_GET_STATS, on_stats);
}

static void on_fallback(const struct nlmsghdr *h, void *arg)
{
    (void)arg;
    const struct nlattr *n = top_nest(h, SMC_GEN_FBACK_STATS);
    if (n == NULL) {
        return;
    }
    size_t left;
    uint64_t is_server = 0, code = 0, count = 0, srv_total = 0, clnt_total = 0;
    int has_code = 0, has_totals = 0;
    ATTRS_FOREACH(a, attr_data(n), attr_len(n), left) {
        switch (attr_type(a)) {
        case SMC_NLA_FBACK_STATS_TYPE: is_server = attr_uint(a); break;
        case SMC_NLA_FBACK_STATS_RSN_CODE: code = attr_uint(a); has_code = 1; break;
        case SMC_NLA_FBACK_STATS_RSN_CNT: count = attr_uint(a); break;
        case SMC_NLA_FBACK_STATS_SRV_CNT: srv_total = attr_uint(a); has_totals = 1; break;
        case SMC_NLA_FBACK_STATS_CLNT_CNT: clnt_total = attr_uint(a); break;
        default: break;
        }
    }
    // The kernel sends the totals once, in the first reason's message; no message: no fallback.
    if (has_totals) {
        printf("fallback_total server=%" PRIu64 " client=%" PRIu64 "\n", srv_total, clnt_total);
    }
    if (has_code) {
        printf("fallback side=%s code=0x%08" PRIx64 " count=%" PRIu64 "\n",
               is_server ? "server" : "client", code, count);
    }
}

static int cmd_fallbacks(struct ctx *c, char **argv)
{
    (void)argv;
    return dump(c, SMC_NETLINK_GET_FBACK_STATS, on_fallback);
}

struct command {
    const char *name;
    int argc;
    int needs_pnet;
    int (*run)(struct ctx *c, char **argv);
};

static const struct command commands[] = {
    {"pnet-add", 4, 1, cmd_pnet_add}, {"pnet-flush", 0, 1, cmd_pnet_flush},
    {"ueid-add", 1, 0, cmd_ueid_add}, {"ueid-flush", 0, 0, cmd_ueid_flush},
    {"ueids", 0, 0, cmd_ueids},       {"lgrs", 0, 0, cmd_lgrs},
    {"links", 0, 0, cmd_links},       {"stats", 0, 0, cmd_stats},
    {"fallbacks", 0, 0, cmd_fallbacks},
};

static int usage(void)
{
    fprintf(stderr, "usage: smc_nl pnet-add PNETID NETDEV IBDEV PORT | pnet-flush | ueid-add EID |"
                    " ueid-flush | ueids | lgrs | links | stats | fallbacks\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        return usage();
    }
    const struct command *cmd = NULL;
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            cmd = &commands[i];
        }
    }
    if (cmd == NULL || argc - 2 != cmd->argc) {
        return usage();
    }
    struct ctx c;
    int rc = nl_open(&c.nl);
    if (rc == 0) {
        const char *fam = cmd->needs_pnet ? SMCR_GENL_FAMILY_NAME : SMC_GENL_FAMILY_NAME;
        rc = family_id(&c.nl, fam, cmd->needs_pnet ? &c.pnet_family : &c.gen_family);
        if (rc != 0) {
            fprintf(stderr, "smc_nl: no generic netlink family %s (is the smc module loaded?): %s\n",
                    fam, strerror(-rc));
            return 1;
        }
        rc = cmd->run(&c, argv + 2);
        close(c.nl.fd);
    }
    if (rc != 0) {
        fprintf(stderr, "smc_nl %s: %s\n", argv[1], strerror(-rc));
        return 1;
    }
    return 0;
}
