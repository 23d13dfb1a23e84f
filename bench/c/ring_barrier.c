/* Ring step and barrier time for many ranks (run oversubscribed: 4 or 8 ranks on 2 cores), the
 * peers' side of bench/src/bin/ring_barrier.rs.
 *
 * Ring step: every rank posts a receive of 8 bytes from rank-1, sends 8 bytes to rank+1, and
 * waits for its receive. Barrier: one MPI_Barrier. Oversubscribed, a step may cost anything from
 * microseconds (an implementation that yields) to tens of milliseconds (one that busy-polls
 * through scheduler ticks), so the count per batch is calibrated: after WARMUP operations,
 * rank 0 times CALIBRATE operations, picks count = clamp(target / per_op, MIN_COUNT, MAX_COUNT)
 * and sends it to every rank with point-to-point messages. Then BATCHES timed batches of count
 * operations, each started after a barrier; the reported figure is rank 0's median batch,
 * divided by count. `--quick` shortens the target (smoke run).
 *
 * Output (rank 0): `RESULT ring 8 <µs per step> us` and `RESULT barrier 0 <µs> us`.
 * Keep this file and ring_barrier.rs in step: same counts and method. */
#include <mpi.h>

#include "common.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCHES 5
#define WARMUP 10
#define CALIBRATE 10
#define MIN_COUNT 10
#define MAX_COUNT 100000
#define RING_BYTES 8

static int rank, nranks;
static char sbuf[RING_BYTES], rbuf[RING_BYTES];


static void ring_step(void) {
    MPI_Request r;
    int next = (rank + 1) % nranks, prev = (rank + nranks - 1) % nranks;
    MPI_Irecv(rbuf, RING_BYTES, MPI_BYTE, prev, 5, MPI_COMM_WORLD, &r);
    MPI_Send(sbuf, RING_BYTES, MPI_BYTE, next, 5, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
}

static void barrier_op(void) { MPI_Barrier(MPI_COMM_WORLD); }

/* Runs `op` as described at the top; returns rank 0's median µs per operation. */
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
        for (int r = 1; r < nranks; r++)
            MPI_Send(&count, 8, MPI_BYTE, r, 9, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&count, 8, MPI_BYTE, 0, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    double batch_us[BATCHES];
    for (int b = 0; b < BATCHES; b++) {
        MPI_Barrier(MPI_COMM_WORLD);
        t0 = MPI_Wtime();
        for (uint64_t i = 0; i < count; i++) op();
        batch_us[b] = (MPI_Wtime() - t0) * 1e6 / (double)count;
    }
    return median(batch_us, BATCHES);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int quick = quick_flag(argc, argv);
    double target_s = quick ? 0.05 : 0.2; /* per batch */
    memset(sbuf, rank + 1, sizeof sbuf);

    double ring = measure(ring_step, target_s);
    if (rank == 0) { printf("RESULT ring %d %.3f us\n", RING_BYTES, ring); fflush(stdout); }
    double barrier = measure(barrier_op, target_s);
    if (rank == 0) { printf("RESULT barrier 0 %.3f us\n", barrier); fflush(stdout); }
    MPI_Finalize();
    return 0;
}
