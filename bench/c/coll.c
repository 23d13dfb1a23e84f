/* Collective latency, OSU style: the peers' side of bench/src/bin/coll.rs (keep the two in step:
 * same operations, sizes, counts and method).
 *
 * Operations on MPI_COMM_WORLD, rooted ones at rank 0: barrier; bcast, reduce and allreduce of
 * `size` bytes of doubles (MPI_SUM); allgather, gather and scatter of `size` bytes per rank;
 * alltoall and reduce_scatter_block (MPI_SUM on doubles) of `size` bytes per pair/block. Sizes
 * 8 B to 4 MiB (`--quick`: 8 B, 64 KiB, 1 MiB). Before every call, each rank writes one word
 * per 4 KiB of its send data (and one per cache line up to 64 KiB): the data changes every
 * iteration, the same work for every implementation, timed with the call.
 *
 * Method, per operation and size: WARMUP calls; rank 0 times CALIBRATE calls and picks a count
 * per batch for about `target` seconds (clamped), sent to all with point-to-point messages;
 * BATCHES timed batches of `count` calls, each after a barrier; a batch takes as long as its
 * slowest rank (each rank times its own, then MPI_MAX outside the timing: a root that returns
 * before the others have their data does not count as done); the median batch per call is
 * reported by rank 0 as `RESULT <op> <size> <µs> us` (barrier: size 0). Barriers run untimed
 * for a moment before the first measurement (see main). */
#include <mpi.h>

#include "common.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 3
#define WARMUP 3
#define CALIBRATE 3
#define MIN_COUNT 2
#define MAX_COUNT 100000

static int rank, nranks;
static double *sbuf, *rbuf;
static size_t cur; /* bytes of the current size */
static uint64_t stamp;

/* Changes the send data: one word per cache line up to 64 KiB, then one per 4 KiB. */
static void touch(double *buf, size_t bytes) {
    size_t stride = bytes <= 65536 ? 64 : 4096;
    stamp++;
    for (size_t off = 0; off + sizeof(double) <= bytes; off += stride)
        buf[off / sizeof(double)] = (double)(stamp + off);
}

static int count_of(size_t bytes) { return (int)(bytes / sizeof(double)); }

static void op_barrier(void) { MPI_Barrier(MPI_COMM_WORLD); }
static void op_bcast(void) {
    if (rank == 0) touch(sbuf, cur);
    MPI_Bcast(sbuf, count_of(cur), MPI_DOUBLE, 0, MPI_COMM_WORLD);
}
static void op_reduce(void) {
    touch(sbuf, cur);
    MPI_Reduce(sbuf, rbuf, count_of(cur), MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
}
static void op_allreduce(void) {
    touch(sbuf, cur);
    MPI_Allreduce(sbuf, rbuf, count_of(cur), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}
static void op_allgather(void) {
    touch(sbuf, cur);
    MPI_Allgather(sbuf, (int)cur, MPI_BYTE, rbuf, (int)cur, MPI_BYTE, MPI_COMM_WORLD);
}
static void op_gather(void) {
    touch(sbuf, cur);
    MPI_Gather(sbuf, (int)cur, MPI_BYTE, rbuf, (int)cur, MPI_BYTE, 0, MPI_COMM_WORLD);
}
static void op_scatter(void) {
    if (rank == 0) touch(sbuf, cur * nranks);
    MPI_Scatter(sbuf, (int)cur, MPI_BYTE, rbuf, (int)cur, MPI_BYTE, 0, MPI_COMM_WORLD);
}
static void op_alltoall(void) {
    touch(sbuf, cur * nranks);
    MPI_Alltoall(sbuf, (int)cur, MPI_BYTE, rbuf, (int)cur, MPI_BYTE, MPI_COMM_WORLD);
}
static void op_reduce_scatter(void) {
    touch(sbuf, cur * nranks);
    MPI_Reduce_scatter_block(sbuf, rbuf, count_of(cur), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

/* Runs `op` as described at the top; returns rank 0's median µs per call. */
static double measure(void (*op)(void), double target_s) {
    for (int i = 0; i < WARMUP; i++) op();
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < CALIBRATE; i++) op();
    double per_op = (MPI_Wtime() - t0) / CALIBRATE;
    uint64_t count;
    if (rank == 0) {
        double c = per_op > 0 ? target_s / per_op : MAX_COUNT;
        count = c < MIN_COUNT ? MIN_COUNT : c > MAX_COUNT ? MAX_COUNT : (uint64_t)c;
        for (int r = 1; r < nranks; r++) MPI_Send(&count, 8, MPI_BYTE, r, 9, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&count, 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double batch_us[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (uint64_t i = 0; i < count; i++) op();
        double mine = (MPI_Wtime() - t0) * 1e6 / (double)count;
        MPI_Allreduce(&mine, &batch_us[b], 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    }
    return median(batch_us, BATCHES);
}

struct op { const char *name; void (*fn)(void); };

/* Whether `name` is one of the comma-separated `list`. */
static int listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; *p; p += strcspn(p, ","), p += *p == ',')
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int quick = quick_flag(argc, argv);
    double target_s = quick ? 0.02 : 0.1;
    static const size_t sizes[] = {8, 64, 512, 4096, 65536, 1 << 20, 4 << 20};
    static const size_t quick_sizes[] = {8, 65536, 1 << 20};
    const size_t *sz = quick ? quick_sizes : sizes;
    int nsizes = quick ? 3 : 7;
    /* For quick runs by hand, as the Rust bench: BENCH_SIZES=8,64 BENCH_OPS=bcast,gather. */
    static size_t listed_sizes[16];
    const char *only_sizes = getenv("BENCH_SIZES");
    if (only_sizes) {
        nsizes = 0;
        for (const char *p = only_sizes; *p && nsizes < 16; p += strcspn(p, ","), p += *p == ',')
            listed_sizes[nsizes++] = strtoull(p, NULL, 10);
        sz = listed_sizes;
    }
    const char *only_ops = getenv("BENCH_OPS");
    size_t largest = (size_t)4 << 20;
    for (int s = 0; s < nsizes; s++) largest = sz[s] > largest ? sz[s] : largest;
    size_t most = largest * (size_t)nranks;
    sbuf = calloc(most / sizeof(double) + 1, sizeof(double));
    rbuf = calloc(most / sizeof(double) + 1, sizeof(double));
    if (!sbuf || !rbuf) { fprintf(stderr, "coll: out of memory\n"); MPI_Abort(MPI_COMM_WORLD, 1); }

    /* First, barriers for as long as a measurement takes, untimed: just after start-up the
     * scheduler has not yet spread oversubscribed ranks over the CPUs (see coll.rs's main). */
    measure(op_barrier, target_s);
    double b = measure(op_barrier, target_s);
    if (rank == 0) { printf("RESULT barrier 0 %.3f us\n", b); fflush(stdout); }
    struct op ops[] = {{"bcast", op_bcast}, {"reduce", op_reduce}, {"allreduce", op_allreduce},
                       {"allgather", op_allgather}, {"gather", op_gather}, {"scatter", op_scatter},
                       {"alltoall", op_alltoall}, {"reduce_scatter", op_reduce_scatter}};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
        if (only_ops && !listed(only_ops, ops[o].name)) continue;
        for (int s = 0; s < nsizes; s++) {
            cur = sz[s];
            double us = measure(ops[o].fn, target_s);
            if (rank == 0) { printf("RESULT %s %zu %.3f us\n", ops[o].name, cur, us); fflush(stdout); }
        }
    }
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return 0;
}
