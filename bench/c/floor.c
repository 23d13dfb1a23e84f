/* The floor: the cheapest possible one-way message between two processes on this machine.
 *
 * Two processes (fork) share one cache line in a MAP_SHARED anonymous mapping and ping-pong a
 * counter through it: the parent writes an odd value and spins until it sees the next even one,
 * the child spins for odd values and answers with the next even one. One-way latency is half the
 * round trip. No MPI, no system calls on the path: any message-passing library's small-message
 * latency is this plus its own overheads. Same shape as latency.c: warm-up, then BATCHES timed
 * batches, median reported. Pinning is left to the scheduler, as for the MPI runs.
 *
 * Output: `RESULT floor 64 <one-way µs> us`. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 5

struct line { _Alignas(64) _Atomic uint64_t seq; char pad[56]; };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

int main(int argc, char **argv) {
    long iters = (argc > 1 && strcmp(argv[1], "--quick") == 0) ? 20000 : 200000;
    long warmup = iters / 10;
    long total = warmup + BATCHES * iters;
    struct line *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) { perror("mmap"); return 1; }
    atomic_store(&l->seq, 0);
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    if (child == 0) {
        for (uint64_t i = 0; i < (uint64_t)total; i++) {
            uint64_t want = 2 * i + 1;
            while (atomic_load_explicit(&l->seq, memory_order_acquire) != want) cpu_relax();
            atomic_store_explicit(&l->seq, want + 1, memory_order_release);
        }
        _exit(0);
    }
    double batch_us[BATCHES];
    uint64_t seq = 0;
    for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
        long count = b < 0 ? warmup : iters;
        double t0 = now();
        for (long i = 0; i < count; i++) {
            atomic_store_explicit(&l->seq, seq + 1, memory_order_release);
            while (atomic_load_explicit(&l->seq, memory_order_acquire) != seq + 2) cpu_relax();
            seq += 2;
        }
        double t = now() - t0;
        if (b >= 0) batch_us[b] = t * 1e6 / (2.0 * count);
    }
    waitpid(child, NULL, 0);
    qsort(batch_us, BATCHES, sizeof *batch_us, cmp_double);
    printf("RESULT floor 64 %.3f us\n", batch_us[BATCHES / 2]);
    return 0;
}
