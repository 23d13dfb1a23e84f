/* Helpers shared by the C benchmarks (header-only: each benchmark is one translation unit). */
#ifndef WEFT_BENCH_COMMON_H
#define WEFT_BENCH_COMMON_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether the program was started with --quick (a smoke run). */
static int quick_flag(int argc, char **argv) {
    return argc > 1 && strcmp(argv[1], "--quick") == 0;
}

/* Ends the job unless it has exactly two ranks (the point-to-point benchmarks' shape). */
static void require_two_ranks(const char *name, int rank, int size) {
    if (size != 2) {
        if (rank == 0) fprintf(stderr, "%s: needs exactly 2 ranks, got %d\n", name, size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median of the n values in v (sorts v). */
static double median(double *v, int n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
