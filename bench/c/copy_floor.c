/* The memory floor of an all-to-all: the least time this machine's CPUs take to move its data.
 *
 * An all-to-all of N ranks with blocks of B bytes moves N x N blocks (each rank's own block
 * too): whatever the algorithm, every block is read from its sender's buffer and written into
 * its receiver's at least once, and the buffers take 2 x N x N x B bytes in all. Here that work
 * is done with nothing else in the way: min(N, CPUs) forked workers, unpinned, each with its
 * share of the N x N blocks in buffers of its own (so the working set is the all-to-all's), copy
 * them with memcpy, then meet at a spinning barrier; before each copy every worker writes one
 * word per 4 KiB page of its sources, as `coll.c`/`coll.rs` vary their send buffers each call.
 * No MPI, no system calls, no waiting for a peer to be scheduled: any MPI library's all-to-all
 * of these blocks on these CPUs costs at least this. Then the same work again with each block
 * copied by the kernel (process_vm_readv, the single copy from another process's memory that
 * every implementation here uses for large blocks when it cannot map its peers' buffers): what
 * such an implementation costs at least. Warm-up, then BATCHES timed batches of about 0.1 s
 * (0.02 with --quick), median reported.
 *
 * Usage: copy_floor RANKS SIZE[,SIZE...] [--quick]. Output, for each size:
 * `RESULT copy_floor_alltoall <SIZE> <µs per all-to-all> us`, then
 * `RESULT copy_floor_alltoall_kernel <SIZE> <µs> us`. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BATCHES 5
#define MAX_WORKERS 64
#define PAGE 4096
#define DENIED (-2.0)

/* Shared by the workers: the barrier's arrivals (a sense-reversing counter) and worker 0's
 * decisions (iterations per batch; the batches' times). */
struct shared {
    _Alignas(128) _Atomic uint64_t arrived;
    _Alignas(128) _Atomic uint64_t generation;
    _Alignas(128) _Atomic long iters;
    double batch_us[BATCHES];
    /* Each worker's process and sources, for the kernel's copies from the next worker. */
    pid_t pid[MAX_WORKERS];
    char *src[MAX_WORKERS];
    /* Set by a worker whose trial copy by the kernel failed: then none is timed. */
    _Atomic int denied;
};

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

/* All `workers` meet: the last to arrive opens the next generation (release, read by the
 * others' acquire loads below). */
static void barrier(struct shared *s, int workers) {
    uint64_t gen = atomic_load_explicit(&s->generation, memory_order_acquire);
    if (atomic_fetch_add_explicit(&s->arrived, 1, memory_order_acq_rel) + 1 == (uint64_t)workers) {
        atomic_store_explicit(&s->arrived, 0, memory_order_relaxed);
        atomic_store_explicit(&s->generation, gen + 1, memory_order_release);
    } else {
        while (atomic_load_explicit(&s->generation, memory_order_acquire) == gen) cpu_relax();
    }
}

/* How the blocks are copied. */
enum copier { BY_MEMCPY, BY_KERNEL };

/* Copies `size` bytes from `src` in process `from` to `dst` by the kernel's single copy
 * (process_vm_readv: the source's pages pinned, then copied). Exits on failure (a seccomp
 * filter or Yama's ptrace scope may forbid it). */
static void kernel_copy(char *dst, pid_t from, char *src, size_t size) {
    while (size > 0) {
        struct iovec local = {dst, size}, remote = {src, size};
        ssize_t got = process_vm_readv(from, &local, 1, &remote, 1, 0);
        if (got <= 0) { perror("copy_floor: process_vm_readv"); exit(1); }
        dst += got;
        src += got;
        size -= (size_t)got;
    }
}

/* One all-to-all's worth of this worker's share: vary its sources, then copy every block,
 * with memcpy from its own sources or by the kernel from the next worker's (`from`, `theirs`:
 * as large, written by that worker, as an all-to-all's blocks are by their senders). */
static void one_call(enum copier how, char *src, char *dst, pid_t from, char *theirs, long blocks, size_t size,
                     uint64_t stamp) {
    size_t bytes = (size_t)blocks * size;
    for (size_t off = 0; off + 8 <= bytes; off += PAGE) memcpy(src + off, &stamp, 8);
    for (long b = 0; b < blocks; b++) {
        if (how == BY_MEMCPY) memcpy(dst + b * size, src + b * size, size);
        else kernel_copy(dst + b * size, from, theirs + b * size, size);
    }
}

/* Worker `w` of `workers`: its share of the ranks x ranks blocks of `size` bytes. */
static void work(struct shared *s, enum copier how, int w, int workers, long ranks, size_t size, double target_s) {
    long total = ranks * ranks;
    long blocks = total / workers + (w < total % workers);
    /* Every worker's sources as large as the largest share, so that the next one's cover mine. */
    size_t most = (size_t)(total / workers + (total % workers != 0)) * size;
    size_t bytes = (size_t)blocks * size;
    char *src = aligned_alloc(PAGE, (most + PAGE - 1) / PAGE * PAGE);
    char *dst = aligned_alloc(PAGE, bytes ? (bytes + PAGE - 1) / PAGE * PAGE : PAGE);
    if (!src || !dst) { perror("copy_floor: aligned_alloc"); exit(1); }
    memset(src, 1, most);
    memset(dst, 2, bytes);
    s->pid[w] = getpid();
    s->src[w] = src;
    uint64_t stamp = 0;
    /* Warm-up, and worker 0 times three calls to choose the batches' length. The barrier
     * publishes every worker's pid and sources (its acq_rel counter and release generation). */
    barrier(s, workers);
    int next = (w + 1) % workers;
    pid_t from = s->pid[next];
    char *theirs = s->src[next];
    if (how == BY_KERNEL) {
        /* A trial copy first: a seccomp filter or Yama's ptrace scope may forbid them. */
        char word[8];
        struct iovec local = {word, sizeof word}, remote = {theirs, sizeof word};
        if (process_vm_readv(from, &local, 1, &remote, 1, 0) != (ssize_t)sizeof word) {
            perror("copy_floor: process_vm_readv");
            atomic_store_explicit(&s->denied, 1, memory_order_relaxed);
        }
        barrier(s, workers); /* its acq_rel counter and release generation publish `denied` */
        if (atomic_load_explicit(&s->denied, memory_order_relaxed)) {
            free(src);
            free(dst);
            return;
        }
    }
    double t0 = now();
    for (int i = 0; i < 3; i++) {
        one_call(how, src, dst, from, theirs, blocks, size, ++stamp);
        barrier(s, workers);
    }
    if (w == 0) {
        double per = (now() - t0) / 3;
        long iters = per > 0 ? (long)(target_s / per) : 1000;
        atomic_store_explicit(&s->iters, iters < 3 ? 3 : iters > 100000 ? 100000 : iters, memory_order_release);
    }
    barrier(s, workers);
    long iters = atomic_load_explicit(&s->iters, memory_order_acquire);
    for (int b = 0; b < BATCHES; b++) {
        barrier(s, workers);
        t0 = now();
        for (long i = 0; i < iters; i++) {
            one_call(how, src, dst, from, theirs, blocks, size, ++stamp);
            barrier(s, workers);
        }
        if (w == 0) s->batch_us[b] = (now() - t0) * 1e6 / iters;
    }
    free(src);
    free(dst);
}

/* The median µs per all-to-all of `ranks` ranks and blocks of `size` copied `how`; DENIED
 * when the kernel may not copy between the workers, -1 on another failure. */
static double measure(enum copier how, long ranks, size_t size, int workers, double target_s) {
    struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) { perror("copy_floor: mmap"); return -1; }
    memset(s, 0, sizeof *s);
    pid_t kids[MAX_WORKERS];
    for (int w = 1; w < workers; w++) {
        kids[w] = fork();
        if (kids[w] < 0) { perror("copy_floor: fork"); exit(1); }
        if (kids[w] == 0) {
            work(s, how, w, workers, ranks, size, target_s);
            _exit(0);
        }
    }
    work(s, how, 0, workers, ranks, size, target_s);
    int failed = 0;
    for (int w = 1; w < workers; w++) {
        int status;
        if (waitpid(kids[w], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    qsort(s->batch_us, BATCHES, sizeof *s->batch_us, cmp_double);
    double median = atomic_load_explicit(&s->denied, memory_order_relaxed) ? DENIED : s->batch_us[BATCHES / 2];
    munmap(s, sizeof *s);
    return failed ? -1 : median;
}

int main(int argc, char **argv) {
    int quick = 0;
    const char *positional[2] = {NULL, NULL};
    int npos = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (npos < 2) positional[npos++] = argv[i];
        else npos = 3;
    }
    long ranks = positional[0] ? strtol(positional[0], NULL, 10) : 0;
    if (npos != 2 || ranks < 1 || ranks > 4096) {
        fprintf(stderr, "copy_floor: usage: copy_floor RANKS SIZE[,SIZE...] [--quick] (RANKS 1-4096)\n");
        return 2;
    }
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) { perror("copy_floor: sched_getaffinity"); return 1; }
    int cpus = CPU_COUNT(&set);
    int workers = ranks < cpus ? (int)ranks : cpus;
    if (workers > MAX_WORKERS) workers = MAX_WORKERS;
    char *sizes = strdup(positional[1]);
    int kernel_denied = 0;
    for (char *tok = strtok(sizes, ","); tok; tok = strtok(NULL, ",")) {
        char *end;
        unsigned long long size = strtoull(tok, &end, 10);
        if (*end || size == 0 || size > (1ULL << 30)) {
            fprintf(stderr, "copy_floor: size %s: want a byte count from 1 to 1 GiB\n", tok);
            return 2;
        }
        static const char *const names[] = {"copy_floor_alltoall", "copy_floor_alltoall_kernel"};
        for (int how = BY_MEMCPY; how <= (kernel_denied ? BY_MEMCPY : BY_KERNEL); how++) {
            double us = measure((enum copier)how, ranks, (size_t)size, workers, quick ? 0.02 : 0.1);
            if (us == DENIED) {
                fprintf(stderr, "copy_floor: the kernel may not copy between processes here: no kernel floor\n");
                kernel_denied = 1;
                continue;
            }
            if (us < 0) return 1;
            printf("RESULT %s %llu %.3f us\n", names[how], size, us);
            fflush(stdout);
        }
    }
    free(sizes);
    return 0;
}
