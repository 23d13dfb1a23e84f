/* Streaming bandwidth (OSU osu_bw style), the peers' side of bench/src/bin/bandwidth.rs.
 *
 * One window: rank 0 posts WINDOW MPI_Isend of `size` bytes (all from the same buffer) and
 * waits for them; rank 1 posts WINDOW MPI_Irecv into WINDOW distinct buffers, waits for them,
 * then sends a 4-byte ack that rank 0 receives before the next window. For each size: a few
 * warm-up windows, then BATCHES timed batches of `windows` windows; bandwidth of a batch is
 * size * WINDOW * windows / time, in MB/s (10^6 bytes per second); the median batch is reported.
 * `--quick` keeps three sizes and fewer windows (smoke run).
 *
 * Output (rank 0): `RESULT bandwidth <size_bytes> <MB/s> MB/s`.
 * Keep this file and bandwidth.rs in step: same sizes, counts and method. */
#include <mpi.h>

#include "common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5
#define WINDOW 64

static const long SIZES[] = {1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
static const long QUICK_SIZES[] = {1 << 10, 64 << 10, 4 << 20};

/* Windows per timed batch for a message of `size` bytes. */
static long windows_for(long size, int quick) {
    long n;
    if (size <= (64 << 10)) n = 100;
    else if (size <= (256 << 10)) n = 30;
    else if (size <= (1 << 20)) n = 10;
    else n = 4;
    return quick ? (n / 4 > 2 ? n / 4 : 2) : n;
}


int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int quick = quick_flag(argc, argv);
    require_two_ranks("bandwidth", rank, size);
    const long *sizes = quick ? QUICK_SIZES : SIZES;
    int nsizes = quick ? (int)(sizeof QUICK_SIZES / sizeof *QUICK_SIZES)
                       : (int)(sizeof SIZES / sizeof *SIZES);
    long max = sizes[nsizes - 1];
    /* Sender: one buffer sent WINDOW times. Receiver: WINDOW distinct buffers. */
    long bytes = rank == 0 ? max : max * WINDOW;
    char *buf = malloc(bytes);
    memset(buf, rank + 1, bytes);
    int ack = 0;
    MPI_Request req[WINDOW];

    for (int s = 0; s < nsizes; s++) {
        long n = sizes[s], windows = windows_for(n, quick), warmup = windows / 10 > 2 ? windows / 10 : 2;
        double batch_mbs[BATCHES];
        MPI_Barrier(MPI_COMM_WORLD);
        for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
            long count = b < 0 ? warmup : windows;
            double t0 = MPI_Wtime();
            for (long w = 0; w < count; w++) {
                if (rank == 0) {
                    for (int i = 0; i < WINDOW; i++)
                        MPI_Isend(buf, (int)n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &req[i]);
                    MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                    MPI_Recv(&ack, 1, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    for (int i = 0; i < WINDOW; i++)
                        MPI_Irecv(buf + (long)i * n, (int)n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &req[i]);
                    MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
                    MPI_Send(&ack, 1, MPI_INT, 0, 3, MPI_COMM_WORLD);
                }
            }
            double t = MPI_Wtime() - t0;
            if (b >= 0) batch_mbs[b] = (double)n * WINDOW * count / t / 1e6;
        }
        if (rank == 0) {
            printf("RESULT bandwidth %ld %.1f MB/s\n", n, median(batch_mbs, BATCHES));
            fflush(stdout);
        }
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
