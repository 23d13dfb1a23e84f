/* Reductions on `long double` for Weft's C ABI: Rust has no `long double` (x87 extended on
 * x86_64, IEEE quad on aarch64), so the predefined operations on MPI_LONG_DOUBLE,
 * MPI_LONG_DOUBLE_INT and MPI_C_LONG_DOUBLE_COMPLEX are these functions, compiled by the C
 * compiler of the platform's ABI. Each has the shape of an MPI user function:
 * inout[i] = in[i] op inout[i] for `*len` elements. Weft's own code. */
#include <complex.h>

typedef struct {
    long double value;
    int index;
} weft_long_double_int;

#define ELEMENTWISE(name, type, expr)                                              \
    void name(void *in, void *inout, int *len, void *datatype) {                   \
        const type *a = (const type *)in;                                          \
        type *b = (type *)inout;                                                   \
        (void)datatype;                                                            \
        for (int i = 0; i < *len; i++) b[i] = (expr);                              \
    }

ELEMENTWISE(weft_long_double_sum, long double, a[i] + b[i])
ELEMENTWISE(weft_long_double_prod, long double, a[i] * b[i])
ELEMENTWISE(weft_long_double_max, long double, a[i] > b[i] ? a[i] : b[i])
ELEMENTWISE(weft_long_double_min, long double, a[i] < b[i] ? a[i] : b[i])
ELEMENTWISE(weft_long_double_complex_sum, long double _Complex, a[i] + b[i])
ELEMENTWISE(weft_long_double_complex_prod, long double _Complex, a[i] * b[i])

/* MINLOC and MAXLOC: the better value; on a tie, the smaller index (MPI 4.1 §6.9.4). */
static weft_long_double_int pick(weft_long_double_int a, weft_long_double_int b, int max) {
    if (a.value == b.value) {
        weft_long_double_int r = a;
        r.index = a.index < b.index ? a.index : b.index;
        return r;
    }
    return (max ? a.value > b.value : a.value < b.value) ? a : b;
}
ELEMENTWISE(weft_long_double_int_maxloc, weft_long_double_int, pick(a[i], b[i], 1))
ELEMENTWISE(weft_long_double_int_minloc, weft_long_double_int, pick(a[i], b[i], 0))
