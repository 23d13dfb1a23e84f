/* Two processes exchange a block through shared memory, as two members of Weft's node-shared
 * area do in an allgather: each writes its block into its own buffer (alternating two), raises
 * a flag, waits for the other's flag and copies both blocks out. The block is written with
 * ordinary stores (memcpy) or with non-temporal ones (movntdq, then sfence), the two ways
 * weft/src/coll/shm.rs can write it. Prints microseconds per exchange for each way.
 *
 *   gcc -O2 -o exchange bench/c/exchange.c && ./exchange 65536
 *
 * Run it next to bench/c/floor.c (its two-lines round trip tells whether the two CPUs share a
 * core) to see both states of this VM: docs/performance.md, 2026-11-26. */
#define _GNU_SOURCE
#include <emmintrin.h>
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

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

/* dst 64-byte aligned, len a multiple of 64 (as the area's buffers and the sizes here). */
static void copy_streaming(char *dst, const char *src, size_t len) {
    for (size_t o = 0; o < len; o += 64)
        for (int q = 0; q < 4; q++)
            _mm_stream_si128((__m128i *)(dst + o + 16 * q),
                             _mm_loadu_si128((const __m128i *)(src + o + 16 * q)));
    _mm_sfence();
}

int main(int argc, char **argv) {
    size_t len = argc > 1 ? strtoul(argv[1], 0, 0) : 65536;
    len = (len + 63) / 64 * 64;
    const int iters = 3000, warmup = 200;
    char *m = mmap(0, 4096 + 4 * len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return 1;
    _Atomic uint64_t *flag = (_Atomic uint64_t *)m; /* flag[0] and flag[8]: one line each */
    char *area = m + 4096;                           /* member j, buffer b: (2j + b) * len */
    pid_t child = fork();
    int me = child == 0;
    pin(me);
    char *src = aligned_alloc(4096, len), *dst = aligned_alloc(4096, 2 * len);
    memset(src, 1, len);
    memset(dst, 0, 2 * len);
    const char *names[] = {"ordinary", "streaming"};
    for (int round = 0; round < 2; round++)
        for (int way = 0; way < 2; way++) {
            double t0 = 0;
            for (int i = 0; i < iters; i++) {
                if (i == warmup) t0 = now_us();
                uint64_t k = (uint64_t)(round * 2 + way) * iters + i + 1;
                for (size_t o = 0; o < len; o += 64) src[o] = (char)(k + o); /* fresh data */
                char *mine = area + (2 * me + (k & 1)) * len;
                /* The other has finished k - 1, so it no longer reads my buffer of k - 2. */
                while (atomic_load_explicit(&flag[8 * (1 - me)], memory_order_acquire) < k - 1) {}
                if (way) copy_streaming(mine, src, len);
                else memcpy(mine, src, len);
                atomic_store_explicit(&flag[8 * me], k, memory_order_release);
                while (atomic_load_explicit(&flag[8 * (1 - me)], memory_order_acquire) < k) {}
                memcpy(dst + me * len, src, len);
                memcpy(dst + (1 - me) * len, area + (2 * (1 - me) + (k & 1)) * len, len);
            }
            if (!me) printf("%s %zu: %.2f us\n", names[way], len, (now_us() - t0) / (iters - warmup));
        }
    if (!me) wait(0);
    return 0;
}
