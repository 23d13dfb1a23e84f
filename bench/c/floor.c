/* The floor: the cheapest possible one-way message between two processes on this machine.
 *
 * Two processes (fork) ping-pong a counter through a MAP_SHARED anonymous mapping, in the two
 * cheapest shapes there are, and the floor is the cheaper of the two:
 *   - two lines, each written by one side only (as a ring's records and its reader's position
 *     are): the parent writes its counter in its line and spins until the child's line shows
 *     the same value; the child spins on the parent's line and echoes each value into its own;
 *   - one line bounced both ways: each side spins until the line holds its turn's value and
 *     writes the next one.
 * In theory the first is cheaper (the reader never takes the line back to write); on CPUs that
 * hand a line read-then-written straight over for writing (migratory sharing), the second is:
 * on this project's 2-vCPU Xeon VM, 0.075 µs against 0.13-0.20 µs for two lines. A floor must
 * be a lower bound, so both are measured and the minimum is the floor. One-way latency is half
 * the round trip. No MPI, no system calls on the path: any message-passing library's
 * small-message latency is this plus its own overheads. Same shape as latency.c: warm-up, then
 * BATCHES timed batches, median reported.
 *
 * The two processes are pinned to the first two CPUs this process may use (parent on the
 * first, child on the second), as `weft run --bind-to core`, `mpiexec.hydra -bind-to core` and
 * `mpirun --bind-to core` place ranks 0 and 1: bench/compare.py runs the latency benchmark that
 * way, so that "x floor" compares like with like. `--no-pin` leaves placement to the scheduler.
 *
 * Usage: floor [--quick] [--no-pin]. Output: `RESULT floor 64 <one-way µs> us` (the minimum), after
 * `RESULT floor_two_lines 64 ...` and `RESULT floor_one_line 64 ...`. */
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

/* One measurement: two processes pinned to cpu[0] and cpu[1] (unless -1), `two_lines` or one
 * line bounced; returns the median batch's one-way µs, or a negative value on failure. */
static double measure(int two_lines, long iters, const int cpu[2]) {
    long warmup = iters / 10;
    long total = warmup + BATCHES * iters;
    struct lines *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (l == MAP_FAILED) { perror("floor: mmap"); return -1; }
    atomic_store(&l->ping.seq, 0);
    atomic_store(&l->pong.seq, 0);
    /* One line bounced: both sides use ping; the parent writes odd values, the child even. */
    _Atomic uint64_t *theirs = two_lines ? &l->pong.seq : &l->ping.seq;
    pid_t child = fork();
    if (child < 0) { perror("floor: fork"); return -1; }
    if (child == 0) {
        if (cpu[1] >= 0) pin_to(cpu[1]);
        for (uint64_t i = 1; i <= (uint64_t)total; i++) {
            uint64_t want = two_lines ? i : 2 * i - 1;
            while (atomic_load_explicit(&l->ping.seq, memory_order_acquire) != want) cpu_relax();
            atomic_store_explicit(theirs, two_lines ? i : want + 1, memory_order_release);
        }
        _exit(0);
    }
    if (cpu[0] >= 0) pin_to(cpu[0]);
    double batch_us[BATCHES];
    uint64_t seq = 0;
    for (int b = -1; b < BATCHES; b++) { /* b == -1: warm-up */
        long count = b < 0 ? warmup : iters;
        double t0 = now();
        for (long i = 0; i < count; i++) {
            seq++;
            uint64_t out = two_lines ? seq : 2 * seq - 1, back = two_lines ? seq : 2 * seq;
            atomic_store_explicit(&l->ping.seq, out, memory_order_release);
            while (atomic_load_explicit(theirs, memory_order_acquire) != back) cpu_relax();
        }
        double t = now() - t0;
        if (b >= 0) batch_us[b] = t * 1e6 / (2.0 * count);
    }
    waitpid(child, NULL, 0);
    munmap(l, sizeof *l);
    qsort(batch_us, BATCHES, sizeof *batch_us, cmp_double);
    return batch_us[BATCHES / 2];
}

int main(int argc, char **argv) {
    int quick = 0, pin = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--no-pin") == 0) pin = 0;
        else { fprintf(stderr, "floor: unknown argument %s (usage: floor [--quick] [--no-pin])\n", argv[i]); return 2; }
    }
    long iters = quick ? 20000 : 200000;
    int cpu[2] = {-1, -1};
    if (pin) {
        cpu_set_t set;
        if (sched_getaffinity(0, sizeof set, &set) != 0) { perror("floor: sched_getaffinity"); return 1; }
        cpu[0] = nth_cpu(&set, 0);
        cpu[1] = nth_cpu(&set, 1);
        if (cpu[1] < 0) { fprintf(stderr, "floor: one CPU only: nothing to pin a pair to\n"); return 1; }
    }
    double two = measure(1, iters, cpu);
    double one = measure(0, iters, cpu);
    if (two < 0 || one < 0) return 1;
    printf("RESULT floor_two_lines 64 %.3f us\n", two);
    printf("RESULT floor_one_line 64 %.3f us\n", one);
    printf("RESULT floor 64 %.3f us\n", two < one ? two : one);
    return 0;
}
