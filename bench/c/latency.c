/* Ping-pong latency (OSU style), the peers' side of bench/src/bin/latency.rs.
 *
 * Rank 0 sends `size` bytes to rank 1, rank 1 sends them back; one-way latency is half the
 * round trip. For each size: WARMUP round trips, then BATCHES timed batches of ITERS round
 * trips each; the reported figure is the median batch. Iterations shrink with size so that a
 * run stays short. `--quick` keeps a few sizes and a tenth of the iterations (smoke run).
 *
 * Output (rank 0): `RESULT latency <size_bytes> <one-way µs> us`.
 * Keep this file and latency.rs in step: same sizes, counts and method. */
#include <mpi.h>

#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5
#define TAG 1 /* the same tag as latency.rs */

static const long SIZES[] = {0, 1, 8, 64, 256, 1 << 10, 4 << 10, 16 << 10, 32 << 10,
                             64 << 10, 256 << 10, 1 << 20, 4 << 20};
static const long QUICK_SIZES[] = {0, 64, 4 << 10, 64 << 10, 1 << 20, 4 << 20};

/* Round trips per timed batch for a message of `size` bytes. */
static long iters_for(long size, int quick) {
    long n;
    if (size <= (8 << 10)) n = 10000;
    else if (size <= (64 << 10)) n = 2000;
    else if (size <= (1 << 20)) n = 200;
    else n = 50;
    return quick ? (n / 10 > 5 ? n / 10 : 5) : n;
}


int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int quick = quick_flag(argc, argv);
    require_two_ranks("latency", rank, size);
    const long *sizes = quick ? QUICK_SIZES : SIZES;
    int nsizes = quick ? (int)(sizeof QUICK_SIZES / sizeof *QUICK_SIZES)
                       : (int)(sizeof SIZES / sizeof *SIZES);
    long max = sizes[nsizes - 1];
    char *buf = malloc(max > 0 ? max : 1);
    memset(buf, rank + 1, max > 0 ? max : 1);
    int peer = 1 - rank;

    /* Untimed warm-up of the whole path (the same in every implementation), so the first
     * size measured does not pay for cold caches and clock ramp-up. */
    for (long i = 0; i < (quick ? 2000 : 20000); i++) {
        if (rank == 0) {
            MPI_Send(buf, 0, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
            MPI_Recv(buf, 0, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(buf, 0, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, 0, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
        }
    }

    for (int s = 0; s < nsizes; s++) {
        long n = sizes[s], iters = iters_for(n, quick), warmup = iters / 10 > 2 ? iters / 10 : 2;
        double batch_us[BATCHES];
        MPI_Barrier(MPI_COMM_WORLD);
        for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
            long count = b < 0 ? warmup : iters;
            double t0 = MPI_Wtime();
            for (long i = 0; i < count; i++) {
                if (rank == 0) {
                    MPI_Send(buf, (int)n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)n, MPI_BYTE, peer, TAG, MPI_COMM_WORLD);
                }
            }
            double t = MPI_Wtime() - t0;
            if (b >= 0) batch_us[b] = t * 1e6 / (2.0 * count);
        }
        if (rank == 0) {
            printf("RESULT latency %ld %.3f us\n", n, median(batch_us, BATCHES));
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
