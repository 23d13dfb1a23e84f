/* The floor: the cheapest possible one-way message between two processes on this machine.
 *
 * Two processes (fork) share two cache lines in a MAP_SHARED anonymous mapping, each line
 * written by one side only (as a ring's head and tail are): the parent writes its counter in
 * its line and spins until the child's line shows the same value; the child spins on the
 * parent's line and echoes each value into its own. Each one-way trip is one line pulled by
 * the reader, never a line taken back and forth for writing. One-way latency is half the round
 * trip. No MPI, no system calls on the path: any message-passing library's small-message
 * latency is this plus its own overheads. Same shape as latency.c: warm-up, then BATCHES timed
 * batches, median reported.
 *
 * The two processes are pinned to the first two CPUs this process may use (parent on the
 * first, child on the second), as `weft run --bind-to core`, `mpiexec.hydra -bind-to core` and
 * `mpirun --bind-to core` place ranks 0 and 1: bench/compare.py runs the latency benchmark that
 * way, so that "x floor" compares like with like. `--no-pin` leaves placement to the scheduler.
 *
 * Usage: floor [--quick] [--no-pin]. Output: `RESULT floor 64 <one-way µs> us`. */
#define _GNU_SOURCE
#include <sched.h>
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

/* One line per writer; 128-byte alignment keeps the adjacent-line prefetcher from pairing them. */
struct line { _Alignas(128) _Atomic uint64_t seq; char pad[120]; };
struct lines { struct line ping; struct line pong; };

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

/* The k-th CPU (0-based) of this process's affinity mask, or -1. */
static int nth_cpu(const cpu_set_t *set, int k) {
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, set) && k-- == 0) return c;
    return -1;
}

static void pin_to(int cpu) {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) { perror("floor: sched_setaffinity"); exit(1); }
}

int main(int argc, char **argv) {
    int quick = 0, pin = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--no-pin") == 0) pin = 0;
        else { fprintf(stderr, "floor: unknown argument %s (usage: floor [--quick] [--no-pin])\n", argv[i]); return 2; }
    }
    long iters = quick ? 20000 : 200000;
    long warmup = iters / 10;
    long total = warmup + BATCHES * iters;
    int cpu[2] = {-1, -1};
    if (pin) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) != 0) { perror("floor: sched_getaffinity"); return 1; }
        cpu[0] = nth_cpu(&set, 0);
        cpu[1] = nth_cpu(&set, 1);
        if (cpu[1] < 0) { fprintf(stderr, "floor: one CPU only: nothing to pin a pair to\n"); return 1; }
    }
    struct lines *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) { perror("mmap"); return 1; }
    atomic_store(&l->ping.seq, 0);
    atomic_store(&l->pong.seq, 0);
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    if (child == 0) {
        if (pin) pin_to(cpu[1]);
        for (uint64_t i = 1; i <= (uint64_t)total; i++) {
            while (atomic_load_explicit(&l->ping.seq, memory_order_acquire) != i) cpu_relax();
            atomic_store_explicit(&l->pong.seq, i, memory_order_release);
        }
        _exit(0);
    }
    if (pin) pin_to(cpu[0]);
    double batch_us[BATCHES];
    uint64_t seq = 0;
    for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
        long count = b < 0 ? warmup : iters;
        double t0 = now();
        for (long i = 0; i < count; i++) {
            seq++;
            atomic_store_explicit(&l->ping.seq, seq, memory_order_release);
            while (atomic_load_explicit(&l->pong.seq, memory_order_acquire) != seq) cpu_relax();
        }
        double t = now() - t0;
        if (b >= 0) batch_us[b] = t * 1e6 / (2.0 * count);
    }
    waitpid(child, NULL, 0);
    qsort(batch_us, BATCHES, sizeof *batch_us, cmp_double);
    printf("RESULT floor 64 %.3f us\n", batch_us[BATCHES / 2]);
    return 0;
}
