/* Windows created over the program's memory (MPI_Win_create), 2 ranks, on one node: rank 0
 * puts one long and fetches-and-adds one long at rank 1 in a lock_all epoch, each followed by
 * MPI_Win_flush(1), over memory from MPI_Alloc_mem and over memory from malloc. (Weft hands
 * out node-shared memory from MPI_Alloc_mem, so a window over it is reached directly; over
 * malloc's memory by cross-memory copy and element locks.) Not driven by compare.py (its Rust
 * side has no MPI_Win_create yet): build it with each implementation's mpicc and run it with
 * its launcher, as docs/performance.md shows. Prints `RESULT rma:<op>:<memory> 8 <µs> us`,
 * the median of BATCHES batches. */
#include "common.h"

#define BATCHES 5

static int rank;

static void run(const char *memory, long *mem, long iters) {
    MPI_Win win;
    MPI_Win_create(mem, 1024 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    long one = 1, old;
    double put[BATCHES], fop[BATCHES];
    MPI_Win_lock_all(0, win);
    if (rank == 0) {
        for (long i = 0; i < iters / 10; i++) {
            MPI_Put(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win);
            MPI_Win_flush(1, win);
        }
        for (int b = 0; b < BATCHES; b++) {
            double t0 = MPI_Wtime();
            for (long i = 0; i < iters; i++) {
                MPI_Put(&one, 1, MPI_LONG, 1, 0, 1, MPI_LONG, win);
                MPI_Win_flush(1, win);
            }
            double t1 = MPI_Wtime();
            for (long i = 0; i < iters; i++) {
                MPI_Fetch_and_op(&one, &old, MPI_LONG, 1, 1, MPI_SUM, win);
                MPI_Win_flush(1, win);
            }
            put[b] = (t1 - t0) * 1e6 / iters;
            fop[b] = (MPI_Wtime() - t1) * 1e6 / iters;
        }
        printf("RESULT rma:put:%s 8 %.3f us\n", memory, median(put, BATCHES));
        printf("RESULT rma:fetch_and_op:%s 8 %.3f us\n", memory, median(fop, BATCHES));
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_free(&win);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    require_two_ranks("rma_create", rank, size);
    long iters = quick_flag(argc, argv) ? 200 : 20000;
    long *alloc_mem, *heap = calloc(1024, sizeof(long));
    MPI_Alloc_mem(1024 * sizeof(long), MPI_INFO_NULL, &alloc_mem);
    run("alloc_mem", alloc_mem, iters);
    run("malloc", heap, iters);
    MPI_Free_mem(alloc_mem);
    free(heap);
    MPI_Finalize();
    return 0;
}
