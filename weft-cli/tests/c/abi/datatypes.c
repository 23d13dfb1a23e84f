/* Derived datatypes through the C ABI: constructors, bounds, envelope and contents, pack and
 * unpack (native and external32), sends and receives of non-contiguous data (blocking and
 * nonblocking, with the type freed while the operation is in flight), attributes, names and
 * bad arguments, checked by the program itself: "datatypes: rank R of N ok" when every check
 * held, "FAIL" lines otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("datatypes: FAIL line %d: ", __LINE__);                                 \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static void bounds(MPI_Datatype t, MPI_Aint lb, MPI_Aint extent, int size, int line) {
    MPI_Aint l, e;
    int s;
    MPI_Type_get_extent(t, &l, &e);
    MPI_Type_size(t, &s);
    if (l != lb || e != extent || s != size) {
        printf("datatypes: FAIL line %d: lb %ld extent %ld size %d, expected %ld %ld %d\n", line,
               (long)l, (long)e, s, (long)lb, (long)extent, size);
        failures++;
    }
}
#define BOUNDS(t, lb, ext, size) bounds(t, lb, ext, size, __LINE__)

static int copies = 0, deletes = 0;
static int copy_fn(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag) {
    (void)t; (void)key; (void)extra;
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Datatype t, int key, void *value, void *extra) {
    (void)t; (void)key; (void)value; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}
static int refuse = 1;
static int refusing_delete_fn(MPI_Datatype t, int key, void *value, void *extra) {
    (void)t; (void)key; (void)value; (void)extra;
    return refuse ? MPI_ERR_OTHER : MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Constructors and bounds. */
    MPI_Datatype contig, vec, hvec, idx, hidx, blk, st, res, dup, sub;
    MPI_Type_contiguous(3, MPI_INT, &contig);
    BOUNDS(contig, 0, 12, 12);
    MPI_Type_vector(3, 2, 4, MPI_INT, &vec); /* ints 0,1, 4,5, 8,9 */
    BOUNDS(vec, 0, 40, 24);
    MPI_Type_create_hvector(2, 1, 16, MPI_DOUBLE, &hvec);
    BOUNDS(hvec, 0, 24, 16);
    int bl[3] = {1, 2, 1}, dis[3] = {5, 1, 0};
    MPI_Type_indexed(3, bl, dis, MPI_INT, &idx); /* ints 5, 1,2, 0 */
    BOUNDS(idx, 0, 24, 16);
    MPI_Aint hdis[2] = {8, -4};
    int hbl[2] = {1, 1};
    MPI_Type_create_hindexed(2, hbl, hdis, MPI_INT, &hidx);
    BOUNDS(hidx, -4, 16, 8);
    MPI_Type_create_indexed_block(2, 2, dis, MPI_SHORT, &blk);
    BOUNDS(blk, 2, 12, 8);
    struct { char c; double d; int i; } s;
    int sbl[3] = {1, 1, 1};
    MPI_Aint sdis[3], base;
    MPI_Get_address(&s, &base);
    MPI_Get_address(&s.c, &sdis[0]);
    MPI_Get_address(&s.d, &sdis[1]);
    MPI_Get_address(&s.i, &sdis[2]);
    for (int i = 0; i < 3; i++) sdis[i] = MPI_Aint_diff(sdis[i], base);
    MPI_Datatype stypes[3] = {MPI_CHAR, MPI_DOUBLE, MPI_INT};
    MPI_Type_create_struct(3, sbl, sdis, stypes, &st);
    BOUNDS(st, 0, (MPI_Aint)sizeof s, 13);
    MPI_Aint tlb, text;
    MPI_Type_get_true_extent(st, &tlb, &text);
    CHECK(tlb == 0 && text == 20, "true lb %ld extent %ld", (long)tlb, (long)text);
    MPI_Type_create_resized(MPI_INT, -4, 16, &res);
    BOUNDS(res, -4, 16, 4);
    MPI_Type_dup(vec, &dup);
    BOUNDS(dup, 0, 40, 24);
    int sizes[2] = {4, 5}, subs[2] = {2, 3}, starts[2] = {1, 2};
    MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &sub);
    BOUNDS(sub, 0, 80, 24);
    MPI_Type_get_true_extent(sub, &tlb, &text);
    CHECK(tlb == 28 && text == 32, "subarray true lb %ld extent %ld", (long)tlb, (long)text);

    /* Predefined types without a Rust twin, and the pair types laid out as C structs. */
    BOUNDS(MPI_DOUBLE_INT, 0, 16, 12);
    BOUNDS(MPI_SHORT_INT, 0, 8, 6);
    BOUNDS(MPI_LONG_DOUBLE_INT, 0, 32, 20);
    BOUNDS(MPI_2INT, 0, 8, 8);
    BOUNDS(MPI_C_DOUBLE_COMPLEX, 0, 16, 16);
    BOUNDS(MPI_LONG_DOUBLE, 0, 16, 16);
    BOUNDS(MPI_INTEGER, 0, 4, 4);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Type_get_name(MPI_INT, name, &len);
    CHECK(strcmp(name, "MPI_INT") == 0 && len == 7, "name of MPI_INT: %s", name);
    MPI_Type_set_name(vec, "my vector");
    MPI_Type_get_name(vec, name, &len);
    CHECK(strcmp(name, "my vector") == 0, "name %s", name);

    /* Fortran 90 parameterized types: sized types with their own combiner, one per request. */
    MPI_Datatype f90a, f90b;
    MPI_Type_create_f90_real(10, MPI_UNDEFINED, &f90a);
    MPI_Type_create_f90_real(10, MPI_UNDEFINED, &f90b);
    BOUNDS(f90a, 0, 8, 8);
    CHECK(f90a == f90b, "one f90 type per (p, r)");
    {
        int ni2, na2, nd2, comb2, ints2[2];
        MPI_Type_get_envelope(f90a, &ni2, &na2, &nd2, &comb2);
        MPI_Type_get_contents(f90a, 2, 0, 0, ints2, NULL, NULL);
        CHECK(comb2 == MPI_COMBINER_F90_REAL && ni2 == 2 && nd2 == 0 && ints2[0] == 10 &&
                  ints2[1] == MPI_UNDEFINED,
              "f90 envelope %d %d %d", comb2, ni2, ints2[0]);
    }

    /* Envelope and contents. */
    int ni, na, nd, comb;
    MPI_Type_get_envelope(vec, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3 && na == 0 && nd == 1, "vector envelope");
    int ints[8];
    MPI_Aint addrs[8];
    MPI_Datatype types[8];
    MPI_Type_get_contents(vec, 8, 8, 8, ints, addrs, types);
    CHECK(ints[0] == 3 && ints[1] == 2 && ints[2] == 4 && types[0] == MPI_INT, "vector contents");
    MPI_Type_get_envelope(MPI_INT, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_NAMED, "named");
    MPI_Datatype vv;
    MPI_Type_contiguous(2, vec, &vv);
    MPI_Type_get_contents(vv, 8, 8, 8, ints, addrs, types);
    CHECK(types[0] == vec, "contents give the input type");
    MPI_Type_free(&types[0]); /* a new reference to vec */
    MPI_Type_get_envelope(st, &ni, &na, &nd, &comb);
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 4 && na == 3 && nd == 3, "struct envelope");

    /* Commit; an uncommitted type cannot be sent. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int buf[64], out[64];
    for (int i = 0; i < 64; i++) buf[i] = i;
    int rc = MPI_Send(buf, 1, vec, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    int class;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_TYPE, "uncommitted send: class %d", class);
    MPI_Type_commit(&vec);
    MPI_Type_commit(&idx);
    MPI_Type_commit(&st);
    MPI_Type_commit(&res);
    MPI_Type_commit(&sub);
    MPI_Type_commit(&hidx);
    /* A negative extent: kept in the bounds, and one element at a time. */
    MPI_Datatype neg, negs;
    MPI_Type_create_resized(MPI_INT, 6, -9, &neg);
    BOUNDS(neg, 6, -9, 4);
    MPI_Type_contiguous(3, neg, &negs);
    BOUNDS(negs, -12, 9, 12);
    MPI_Type_commit(&neg);
    rc = MPI_Send(buf, 2, neg, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_TYPE, "two elements of a negative extent: class %d", class);
    rc = MPI_Send(buf, 1, neg, MPI_PROC_NULL, 0, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "one element of a negative extent: %d", rc);
    MPI_Type_free(&neg);
    MPI_Type_free(&negs);
    rc = MPI_Type_contiguous(-1, MPI_INT, &vv);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_COUNT, "negative count: class %d", class);
    rc = MPI_Type_contiguous(1, MPI_DATATYPE_NULL, &vv);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_TYPE, "null type: class %d", class);
    rc = MPI_Type_contiguous(1, MPI_INT, NULL);
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_ARG, "null newtype: class %d", class);
    rc = MPI_Type_free(&(MPI_Datatype){MPI_INT});
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_TYPE, "free MPI_INT: class %d", class);

    /* Pack and unpack, native and external32. */
    char packed[256];
    int pos = 0;
    MPI_Pack(buf, 2, vec, packed, sizeof packed, &pos, MPI_COMM_WORLD);
    CHECK(pos == 48, "pack position %d", pos);
    int psize;
    MPI_Pack_size(2, vec, MPI_COMM_WORLD, &psize);
    CHECK(psize == 48, "pack size %d", psize);
    memset(out, 0xff, sizeof out);
    pos = 0;
    MPI_Unpack(packed, sizeof packed, &pos, out, 2, vec, MPI_COMM_WORLD);
    CHECK(out[0] == 0 && out[1] == 1 && out[2] == -1 && out[4] == 4 && out[9] == 9 &&
              out[10] == 10 && out[19] == 19 && out[20] == -1,
          "unpack %d %d %d %d", out[0], out[2], out[10], out[19]);
    MPI_Aint epos = 0;
    MPI_Pack_external("external32", buf, 1, idx, packed, sizeof packed, &epos);
    CHECK(epos == 16 && packed[3] == 5 && packed[0] == 0 && packed[7] == 1,
          "external32 %ld %d %d", (long)epos, packed[3], packed[7]);
    memset(out, 0, sizeof out);
    epos = 0;
    MPI_Unpack_external("external32", packed, 16, &epos, out, 1, idx);
    CHECK(out[5] == 5 && out[1] == 1 && out[2] == 2 && out[0] == 0 && out[3] == 0, "unpack external");

    /* Attributes on a type, copied on dup, deleted on free. */
    int key;
    MPI_Type_create_keyval(copy_fn, delete_fn, &key, NULL);
    MPI_Type_set_attr(vec, key, (void *)100);
    MPI_Datatype vdup;
    MPI_Type_dup(vec, &vdup);
    void *value;
    int flag;
    MPI_Type_get_attr(vdup, key, &value, &flag);
    CHECK(flag && value == (void *)101 && copies == 1, "copied attribute");
    MPI_Type_free(&vdup);
    CHECK(deletes == 1, "deleted %d", deletes);
    /* Freeing a reference MPI_Type_get_contents handed out leaves the type's attributes. */
    MPI_Type_contiguous(2, vec, &vdup);
    MPI_Type_get_contents(vdup, 8, 8, 8, ints, addrs, types);
    MPI_Type_free(&types[0]);
    MPI_Type_get_attr(vec, key, &value, &flag);
    CHECK(flag && value == (void *)100 && deletes == 1, "attribute kept");
    MPI_Type_free(&vdup);
    MPI_Type_free_keyval(&key);
    /* A delete callback that fails keeps the value (set_attr and delete_attr fail), and the
     * error goes to MPI_COMM_WORLD's handler while MPI_COMM_SELF's is the initial one (what
     * programs written for MPI 3 expect, and MPICH and Open MPI do). */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, refusing_delete_fn, &key, NULL);
    MPI_Type_set_attr(vec, key, (void *)7);
    rc = MPI_Type_set_attr(vec, key, (void *)8);
    CHECK(rc != MPI_SUCCESS, "set_attr over a value whose delete fails returned %d", rc);
    rc = MPI_Type_delete_attr(vec, key);
    CHECK(rc != MPI_SUCCESS, "delete_attr whose callback fails returned %d", rc);
    MPI_Type_get_attr(vec, key, &value, &flag);
    CHECK(flag && value == (void *)7, "the value a failing delete callback kept: %d %p", flag, value);
    rc = MPI_Type_contiguous(-1, MPI_INT, &vdup);
    CHECK(rc != MPI_SUCCESS, "MPI_Type_contiguous(-1) returned %d", rc);
    refuse = 0;
    MPI_Type_delete_attr(vec, key);
    MPI_Type_get_attr(vec, key, &value, &flag);
    CHECK(!flag, "the attribute stayed after a delete that succeeded");
    MPI_Type_free_keyval(&key);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);

    /* Point to point: a vector to the next rank, a struct and a resized type back. */
    int to = (rank + 1) % size, from = (rank + size - 1) % size;
    MPI_Status status;
    memset(out, 0, sizeof out);
    MPI_Sendrecv(buf, 2, vec, to, 1, out, 12, MPI_INT, from, 1, MPI_COMM_WORLD, &status);
    int count;
    MPI_Get_count(&status, vec, &count);
    CHECK(count == 2, "count %d", count);
    MPI_Get_elements(&status, vec, &count);
    CHECK(count == 12, "elements %d", count);
    CHECK(out[0] == 0 && out[2] == 4 && out[5] == 9 && out[6] == 10 && out[11] == 19,
          "received %d %d %d", out[2], out[6], out[11]);
    /* A partial element: 3 ints of a 6-int vector. */
    MPI_Sendrecv(buf, 3, MPI_INT, to, 2, out, 1, vec, from, 2, MPI_COMM_WORLD, &status);
    MPI_Get_count(&status, vec, &count);
    CHECK(count == MPI_UNDEFINED, "partial count %d", count);
    MPI_Get_elements(&status, vec, &count);
    CHECK(count == 3, "partial elements %d", count);

    /* Nonblocking, the types freed while the operations are in flight. */
    MPI_Datatype sendt, recvt;
    MPI_Type_vector(4, 1, 3, MPI_INT, &sendt);
    MPI_Type_commit(&sendt);
    MPI_Type_dup(sendt, &recvt);
    MPI_Type_commit(&recvt);
    MPI_Request reqs[2];
    memset(out, 0, sizeof out);
    MPI_Irecv(out, 1, recvt, from, 3, MPI_COMM_WORLD, &reqs[0]);
    MPI_Isend(buf, 1, sendt, to, 3, MPI_COMM_WORLD, &reqs[1]);
    MPI_Type_free(&sendt);
    MPI_Type_free(&recvt);
    CHECK(sendt == MPI_DATATYPE_NULL, "freed handle");
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    CHECK(out[0] == 0 && out[3] == 3 && out[6] == 6 && out[9] == 9 && out[1] == 0,
          "nonblocking %d %d %d", out[3], out[6], out[9]);

    /* Persistent requests keep their type: freed after the init calls, used at each start. */
    MPI_Type_vector(4, 1, 3, MPI_INT, &sendt);
    MPI_Type_commit(&sendt);
    MPI_Type_dup(sendt, &recvt);
    MPI_Type_commit(&recvt);
    MPI_Recv_init(out, 1, recvt, from, 4, MPI_COMM_WORLD, &reqs[0]);
    MPI_Send_init(buf, 1, sendt, to, 4, MPI_COMM_WORLD, &reqs[1]);
    MPI_Type_free(&sendt);
    MPI_Type_free(&recvt);
    for (int round = 0; round < 2; round++) {
        memset(out, 0, sizeof out);
        MPI_Startall(2, reqs);
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        CHECK(out[3] == 3 && out[9] == 9 && out[4] == 0, "persistent round %d", round);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);

    /* A struct and a type with a negative lower bound through a collective. */
    s.c = 'x'; s.d = 2.5 * rank; s.i = rank;
    MPI_Bcast(&s, 1, st, 0, MPI_COMM_WORLD);
    CHECK(s.c == 'x' && s.d == 0.0 && s.i == 0, "bcast struct");
    int four[4] = {rank, rank, rank, rank};
    MPI_Bcast(&four[1], 1, hidx, 0, MPI_COMM_WORLD); /* ints at 8 and -4 bytes from four+1 */
    CHECK(four[0] == 0 && four[3] == 0 && four[1] == rank && four[2] == rank, "lb < 0");

    /* Reductions on the pair types. */
    struct { double v; int i; } in = {(double)rank, rank}, res2;
    MPI_Allreduce(&in, &res2, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(res2.v == size - 1 && res2.i == size - 1, "maxloc %f %d", res2.v, res2.i);

    MPI_Type_free(&contig);
    MPI_Type_free(&vec);
    MPI_Type_free(&hvec);
    MPI_Type_free(&idx);
    MPI_Type_free(&hidx);
    MPI_Type_free(&blk);
    MPI_Type_free(&st);
    MPI_Type_free(&res);
    MPI_Type_free(&dup);
    MPI_Type_free(&sub);
    MPI_Type_free(&vv);
    if (failures == 0) printf("datatypes: rank %d of %d ok\n", rank, size);
    MPI_Finalize();
    return failures != 0;
}
