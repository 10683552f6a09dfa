// smc_pingpong - a byte-exact ping-pong over the kernel's AF_SMC sockets (or TCP with --tcp),
// the kernel peer of the kernel SMC-R suite (test/kernel-smc/run.sh, docs/kernel-smc.md).
//
//   smc_pingpong server [--tcp] [--port P] [--conns N] [--ready FILE] [--die-after BYTES]
//                       [--half-close]
//   smc_pingpong client [--tcp] --addr A [--port P] [--size S] [--rounds R] [--conns N]
//                       [--expect-peer-death]
//
// Per connection the client sends a 16-byte header ("SMPP", size, rounds, connection index,
// big-endian), then per round SIZE bytes of a pattern that depends on the round and the
// connection; the server reads each message whole and writes it back; the client compares
// every byte. The server serves N connections one after the other. --die-after makes the
// server SIGKILL itself once it has read that many bytes of one connection (a kill -9 in
// mid-stream); the client with --expect-peer-death then passes only when it sees EOF or a
// reset. --half-close: the client shuts its writing down after its last message; the server
// must read EOF there (nothing more, no reset) before it writes its echo. Every socket has 60 s send/receive timeouts and the process a 300 s alarm: nothing
// waits forever. Exit status: 0 ok, 1 a data or protocol error, 2 usage, 3 a timeout.

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif
#define SMCPROTO_SMC 0   // the IPv4 flavour of AF_SMC (include/net/smc.h, not exported)

enum { HDR_LEN = 16, MAX_SIZE = 64 << 20, IO_TIMEOUT_S = 60, ALARM_S = 300 };

struct opts {
    int server, tcp, expect_death, half_close;
    const char *addr, *ready;
    unsigned port, conns, rounds;
    size_t size;
    unsigned long long die_after;
};

static unsigned char pattern(size_t j, unsigned round, unsigned conn)
{
    return (unsigned char)(j * 7u + (j >> 9) + round * 13u + conn * 31u);
}

static void fill(unsigned char *buf, size_t n, unsigned round, unsigned conn)
{
    for (size_t j = 0; j < n; j++) {
        buf[j] = pattern(j, round, conn);
    }
}

// Index of the first byte that differs from the pattern, or n.
static size_t first_mismatch(const unsigned char *buf, size_t n, unsigned round, unsigned conn)
{
    for (size_t j = 0; j < n; j++) {
        if (buf[j] != pattern(j, round, conn)) {
            return j;
        }
    }
    return n;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

// 0 done, -EPIPE on EOF, else -errno (-EAGAIN: the socket timeout).
static int read_full(int fd, unsigned char *buf, size_t n, unsigned long long *total,
                     unsigned long long die_after)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r == 0) {
            return -EPIPE;
        }
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        got += (size_t)r;
        *total += (unsigned long long)r;
        if (die_after > 0 && *total >= die_after) {
            fprintf(stderr, "smc_pingpong: server killing itself after %llu bytes\n", *total);
            kill(getpid(), SIGKILL);
        }
    }
    return 0;
}

static int write_full(int fd, const unsigned char *buf, size_t n)
{
    size_t put = 0;
    while (put < n) {
        ssize_t r = write(fd, buf + put, n - put);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        put += (size_t)r;
    }
    return 0;
}

static int new_socket(const struct opts *o)
{
    int fd = o->tcp ? socket(AF_INET, SOCK_STREAM, 0) : socket(AF_SMC, SOCK_STREAM, SMCPROTO_SMC);
    if (fd < 0) {
        perror(o->tcp ? "socket(AF_INET)" : "socket(AF_SMC)");
        return -1;
    }
    struct timeval tv = {.tv_sec = IO_TIMEOUT_S};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    return fd;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}

static uint32_t get_be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int fail_io(const char *what, int err)
{
    if (err == -EAGAIN || err == -EWOULDBLOCK) {
        fprintf(stderr, "smc_pingpong: %s timed out after %d s\n", what, IO_TIMEOUT_S);
        return 3;
    }
    fprintf(stderr, "smc_pingpong: %s: %s\n", what, err == -EPIPE ? "EOF" : strerror(-err));
    return 1;
}

// ---- server ---------------------------------------------------------------------------------

static int serve_one(int fd, const struct opts *o)
{
    unsigned char hdr[HDR_LEN];
    unsigned long long total = 0;
    int rc = read_full(fd, hdr, HDR_LEN, &total, o->die_after);
    if (rc != 0) {
        return fail_io("server: reading the header", rc);
    }
    size_t size = get_be32(hdr + 4);
    uint32_t rounds = get_be32(hdr + 8);
    if (memcmp(hdr, "SMPP", 4) != 0 || size == 0 || size > MAX_SIZE) {
        fprintf(stderr, "smc_pingpong: server: bad header\n");
        return 1;
    }
    unsigned char *buf = malloc(size);
    if (buf == NULL) {
        return 1;
    }
    for (uint32_t r = 0; r < rounds && rc == 0; r++) {
        rc = read_full(fd, buf, size, &total, o->die_after);
        if (rc == 0 && o->half_close && r + 1 == rounds) {
            // The client's shutdown(SHUT_WR): EOF now, and the echo still goes back.
            unsigned char extra;
            ssize_t n = read(fd, &extra, 1);
            if (n != 0) {
                fprintf(stderr, "smc_pingpong: server: no EOF after the last message (%s)\n",
                        n > 0 ? "more bytes" : strerror(errno));
                free(buf);
                return 1;
            }
        }
        if (rc == 0) {
            rc = write_full(fd, buf, size);
        }
    }
    free(buf);
    return rc == 0 ? 0 : fail_io("server: echo", rc);
}

static int run_server(const struct opts *o)
{
    int lfd = new_socket(o);
    if (lfd < 0) {
        return 1;
    }
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 8) < 0) {
        perror("smc_pingpong: bind/listen");
        return 1;
    }
    if (o->ready != NULL) {
        FILE *f = fopen(o->ready, "w");
        if (f == NULL || fclose(f) != 0) {
            perror("smc_pingpong: ready file");
            return 1;
        }
    }
    int status = 0;
    for (unsigned c = 0; c < o->conns; c++) {
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) {
            return fail_io("server: accept", -errno);
        }
        int rc = serve_one(fd, o);
        close(fd);
        if (rc != 0 && status == 0) {
            status = rc;
        }
    }
    close(lfd);
    return status;
}

// ---- client ---------------------------------------------------------------------------------

static int client_rounds(int fd, const struct opts *o, unsigned conn, unsigned char *out,
                         unsigned char *in)
{
    unsigned long long total = 0;
    for (unsigned r = 0; r < o->rounds; r++) {
        fill(out, o->size, r, conn);
        int rc = write_full(fd, out, o->size);
        if (rc == 0) {
            rc = read_full(fd, in, o->size, &total, 0);
        }
        if (rc != 0) {
            if (o->expect_death && (rc == -EPIPE || rc == -ECONNRESET)) {
                printf("peer-gone conn=%u round=%u how=%s\n", conn, r,
                       rc == -EPIPE ? "eof" : "reset");
                return 0;
            }
            return fail_io("client: ping-pong", rc);
        }
        size_t bad = first_mismatch(in, o->size, r, conn);
        if (bad != o->size) {
            fprintf(stderr, "smc_pingpong: conn %u round %u: byte %zu differs\n", conn, r, bad);
            return 1;
        }
    }
    if (o->expect_death) {
        fprintf(stderr, "smc_pingpong: conn %u: the peer did not die\n", conn);
        return 1;
    }
    return 0;
}

static int client_one(const struct opts *o, unsigned conn, unsigned char *out, unsigned char *in)
{
    int fd = new_socket(o);
    if (fd < 0) {
        return 1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    if (inet_pton(AF_INET, o->addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "smc_pingpong: bad --addr %s\n", o->addr);
        close(fd);
        return 2;
    }
    double t0 = now_s();
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int err = -errno;
        close(fd);
        return fail_io("client: connect", err);
    }
    double t1 = now_s();
    unsigned char hdr[HDR_LEN];
    memcpy(hdr, "SMPP", 4);
    put_be32(hdr + 4, (uint32_t)o->size);
    put_be32(hdr + 8, o->rounds);
    put_be32(hdr + 12, conn);
    int rc = write_full(fd, hdr, HDR_LEN);
    rc = rc != 0 ? fail_io("client: header", rc) : client_rounds(fd, o, conn, out, in);
    double t2 = now_s();
    close(fd);
    if (rc == 0 && !o->expect_death) {
        double per = (t2 - t1) / o->rounds;
        printf("ok conn=%u size=%zu rounds=%u connect_ms=%.2f rtt_us=%.1f MBps=%.2f\n", conn,
               o->size, o->rounds, (t1 - t0) * 1e3, per * 1e6, 2.0 * (double)o->size / per / 1e6);
    }
    return rc;
}

static int run_client(const struct opts *o)
{
    unsigned char *out = malloc(o->size), *in = malloc(o->size);
    int rc = out != NULL && in != NULL ? 0 : 1;
    for (unsigned c = 0; c < o->conns && rc == 0; c++) {
        rc = client_one(o, c, out, in);
    }
    free(out);
    free(in);
    return rc;
}

// ---- options --------------------------------------------------------------------------------

static int usage(void)
{
    fprintf(stderr,
            "usage: smc_pingpong server [--tcp] [--port P] [--conns N] [--ready FILE] "
            "[--die-after BYTES] [--half-close]\n"
            "       smc_pingpong client [--tcp] --addr A [--port P] [--size S] [--rounds R] "
            "[--conns N] [--expect-peer-death]\n");
    return 2;
}

static int parse_num(const char *s, unsigned long long max, unsigned long long *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno != 0 || *end != '\0' || v > max) {
        fprintf(stderr, "smc_pingpong: bad number %s\n", s);
        return -1;
    }
    *out = v;
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.port = 7477, .conns = 1, .rounds = 10, .size = 64};
    if (argc < 2) {
        return -1;
    }
    o->server = strcmp(argv[1], "server") == 0;
    if (!o->server && strcmp(argv[1], "client") != 0) {
        return -1;
    }
    unsigned long long v;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--tcp") == 0) { o->tcp = 1; continue; }
        if (strcmp(a, "--expect-peer-death") == 0) { o->expect_death = 1; continue; }
        if (strcmp(a, "--half-close") == 0) { o->half_close = 1; continue; }
        if (val == NULL) { return -1; }
        i++;
        if (strcmp(a, "--addr") == 0) { o->addr = val; }
        else if (strcmp(a, "--ready") == 0) { o->ready = val; }
        else if (strcmp(a, "--port") == 0) { if (parse_num(val, 65535, &v)) return -1; o->port = (unsigned)v; }
        else if (strcmp(a, "--conns") == 0) { if (parse_num(val, 1000, &v) || v == 0) return -1; o->conns = (unsigned)v; }
        else if (strcmp(a, "--rounds") == 0) { if (parse_num(val, 1000000, &v) || v == 0) return -1; o->rounds = (unsigned)v; }
        else if (strcmp(a, "--size") == 0) { if (parse_num(val, MAX_SIZE, &v) || v == 0) return -1; o->size = (size_t)v; }
        else if (strcmp(a, "--die-after") == 0) { if (parse_num(val, ~0ull, &v)) return -1; o->die_after = v; }
        else { return -1; }
    }
    return o->server || o->addr != NULL ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct opts o;
    if (parse(argc, argv, &o) != 0) {
        return usage();
    }
    // A bound on the whole run: SIGALRM's default action ends the process (status 128+14).
    alarm(ALARM_S);
    signal(SIGPIPE, SIG_IGN);
    return o.server ? run_server(&o) : run_client(&o);
}
