/* One-sided communication (MPI-3 windows), the peers' side of bench/src/bin/rma.rs (keep the two
 * in step: same operations, sizes, counts and method). Windows from MPI_Win_allocate.
 *
 * With 2 ranks, rank 0 is the origin and rank 1 the target, which waits in MPI_Barrier
 * meanwhile (a target that calls into the library, as MPI lets a passive target need):
 *   rma:put, rma:get      `size` bytes, 8 B to 1 MiB, in a lock_all epoch, each followed by
 *                         MPI_Win_flush(1): µs per operation;
 *   rma:accumulate        `size` bytes of doubles, MPI_SUM, 8 B to 1 MiB, in a lock_all epoch on
 *                         a window of doubles, each followed by MPI_Win_flush(1): µs;
 *   rma:fetch_and_op      one long, MPI_SUM, with flush: µs;
 *   rma:compare_and_swap  one long, with flush: µs;
 *   rma:lock              MPI_Win_lock(EXCLUSIVE, 1) + MPI_Win_unlock(1), nothing between: µs;
 *   rma:lock_put          the same with one MPI_Put of a long between (one operation's epoch);
 *   rma:fence             MPI_Win_fence(0) at both ranks, nothing between: µs per fence;
 *   rma:pscw              one post-start-complete-wait epoch: rank 1 posts to rank 0 and waits,
 *                         rank 0 starts, puts one long and completes: µs per epoch.
 * With any number of ranks, rma:contended: every rank does MPI_Fetch_and_op(MPI_SUM) + flush on
 * one counter at rank 0 in a lock_all epoch; millions of operations per second in total
 * (RESULT's size field is the rank count).
 *
 * Method: WARMUP operations, then BATCHES batches of `iters`; the median batch is reported by
 * rank 0 as `RESULT <name> <size> <value> <unit>`. */
#include "common.h"
#include <stdint.h>

#define BATCHES 5

static int rank, nranks;

static long iters_for(size_t size, int quick) {
    long n = size <= 4096 ? 2000 : size <= 65536 ? 500 : 50;
    return quick ? n / 10 + 2 : n;
}

/* Median µs per operation of `op` over BATCHES batches of `iters` (after a warm-up), at rank 0;
 * the other ranks wait in a barrier. */
#define TIME_AT_ORIGIN(name, size, iters, op)                                                  \
    do {                                                                                       \
        double t[BATCHES];                                                                     \
        if (rank == 0) {                                                                       \
            for (long i = 0; i < (iters) / 10 + 1; i++) { op; }                                \
            for (int b = 0; b < BATCHES; b++) {                                                \
                double t0 = MPI_Wtime();                                                       \
                for (long i = 0; i < (iters); i++) { op; }                                     \
                t[b] = (MPI_Wtime() - t0) * 1e6 / (double)(iters);                             \
            }                                                                                  \
            printf("RESULT %s %zu %.3f us\n", name, (size_t)(size), median(t, BATCHES));       \
            fflush(stdout);                                                                    \
        }                                                                                      \
        MPI_Barrier(MPI_COMM_WORLD);                                                           \
    } while (0)

static void latencies(int quick) {
    size_t max = 1 << 20;
    char *base, *local = malloc(max);
    memset(local, 1, max);
    double *doubles, *addends = malloc(max);
    for (size_t i = 0; i < max / sizeof(double); i++) addends[i] = 0.5;
    MPI_Win win, dwin;
    MPI_Win_allocate((MPI_Aint)max, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    MPI_Win_allocate((MPI_Aint)max, sizeof(double), MPI_INFO_NULL, MPI_COMM_WORLD, &doubles, &dwin);
    MPI_Win_lock_all(0, win);
    MPI_Win_lock_all(0, dwin);
    static const size_t sizes[] = {8, 64, 512, 4096, 32768, 262144, 1 << 20};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t size = sizes[k];
        long iters = iters_for(size, quick);
        TIME_AT_ORIGIN("rma:put", size, iters,
                       (MPI_Put(local, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win),
                        MPI_Win_flush(1, win)));
        TIME_AT_ORIGIN("rma:get", size, iters,
                       (MPI_Get(local, (int)size, MPI_BYTE, 1, 0, (int)size, MPI_BYTE, win),
                        MPI_Win_flush(1, win)));
        int count = (int)(size / sizeof(double));
        TIME_AT_ORIGIN("rma:accumulate", size, iters,
                       (MPI_Accumulate(addends, count, MPI_DOUBLE, 1, 0, count, MPI_DOUBLE, MPI_SUM, dwin),
                        MPI_Win_flush(1, dwin)));
    }
    MPI_Win_unlock_all(dwin);
    MPI_Win_free(&dwin);
    free(addends);
    long one = 1, old, cmp = 0;
    long iters = iters_for(8, quick);
    TIME_AT_ORIGIN("rma:fetch_and_op", 8, iters,
                   (MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 0, MPI_SUM, win),
                    MPI_Win_flush(1, win)));
    TIME_AT_ORIGIN("rma:compare_and_swap", 8, iters,
                   (MPI_Compare_and_swap(&one, &cmp, &old, MPI_LONG, 1, 8, win),
                    MPI_Win_flush(1, win)));
    MPI_Win_unlock_all(win);
    TIME_AT_ORIGIN("rma:lock", 0, iters,
                   (MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win), MPI_Win_unlock(1, win)));
    TIME_AT_ORIGIN("rma:lock_put", 8, iters,
                   (MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, win),
                    MPI_Put(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win), MPI_Win_unlock(1, win)));
    MPI_Win_free(&win);
    free(local);
}

static void contended(int quick) {
    long *base, one = 1, old;
    MPI_Win win;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    long iters = quick ? 200 : 2000;
    double t[BATCHES];
    MPI_Win_lock_all(0, win);
    for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (long i = 0; i < iters; i++) {
            MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win);
            MPI_Win_flush(0, win);
        }
        double mine = MPI_Wtime() - t0, slowest;
        MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (b >= 0) t[b] = (double)iters * nranks / slowest / 1e6;
    }
    MPI_Win_unlock_all(win);
    if (rank == 0) {
        printf("RESULT rma:contended %d %.3f Mops/s\n", nranks, median(t, BATCHES));
        fflush(stdout);
    }
    MPI_Win_free(&win);
}

/* Median µs per iteration of `op` over BATCHES batches of `iters` at every rank (after a
 * warm-up batch), reported by rank 0. */
#define TIME_AT_ALL(name, iters, op)                                                           \
    do {                                                                                       \
        double t[BATCHES];                                                                     \
        for (int b = -1; b < BATCHES; b++) {                                                   \
            MPI_Barrier(MPI_COMM_WORLD);                                                       \
            double t0 = MPI_Wtime();                                                           \
            for (long i = 0; i < (iters); i++) { op; }                                         \
            if (b >= 0) t[b] = (MPI_Wtime() - t0) * 1e6 / (double)(iters);                     \
        }                                                                                      \
        if (rank == 0) {                                                                       \
            printf("RESULT %s 0 %.3f us\n", name, median(t, BATCHES));                         \
            fflush(stdout);                                                                    \
        }                                                                                      \
    } while (0)

static void epochs(int quick) {
    long *base, x = 1;
    MPI_Win win;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    long iters = quick ? 200 : 2000;
    TIME_AT_ALL("rma:fence", iters, MPI_Win_fence(0, win));
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    MPI_Group world, other;
    int peer = 1 - rank;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &peer, &other);
    TIME_AT_ALL("rma:pscw", iters,
                if (rank == 0) {
                    MPI_Win_start(other, 0, win);
                    MPI_Put(&x, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win);
                    MPI_Win_complete(win);
                } else {
                    MPI_Win_post(other, 0, win);
                    MPI_Win_wait(win);
                });
    MPI_Group_free(&other);
    MPI_Group_free(&world);
    MPI_Win_free(&win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int quick = quick_flag(argc, argv);
    if (nranks == 2) latencies(quick);
    if (nranks == 2) epochs(quick);
    contended(quick);
    MPI_Finalize();
    return 0;
}
