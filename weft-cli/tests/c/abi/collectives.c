/* Intercommunicators, user operations, the vector, nonblocking, persistent and
 * neighbourhood collectives, topologies, user error handlers and added error classes,
 * generalized requests, status conversions and MPI_Alloc_mem through the C ABI, checked by the program itself: "collectives: rank R of N ok" when every
 * check held, "FAIL" lines otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("collectives: FAIL line %d: ", __LINE__);                               \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

/* Associative, not commutative: digits written side by side, as (value, 10^digits) pairs;
 * the result shows the order the operands were combined in. */
static void concat(void *in, void *inout, int *len, MPI_Datatype *dt) {
    int *a = in, *b = inout;
    CHECK(*dt == MPI_2INT, "the user function got another datatype");
    for (int i = 0; i < *len; i++) {
        b[2 * i] = a[2 * i] * b[2 * i + 1] + b[2 * i];
        b[2 * i + 1] = a[2 * i + 1] * b[2 * i + 1];
    }
}

static int handled = 0, handled_code = 0;
static void on_error(MPI_Comm *comm, int *code, ...) {
    (void)comm;
    handled++;
    handled_code = *code;
}

static void intercommunicators(int rank, int size) {
    if (size < 2)
        return;
    MPI_Comm half, inter, merged;
    int low = rank < size / 2;
    MPI_Comm_split(MPI_COMM_WORLD, low, rank, &half);
    /* Leaders: rank 0 of each half, world ranks 0 and size/2. */
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? size / 2 : 0, 7, &inter);
    int flag, rsize, lrank;
    MPI_Comm_test_inter(inter, &flag);
    MPI_Comm_remote_size(inter, &rsize);
    MPI_Comm_rank(inter, &lrank);
    CHECK(flag && rsize == (low ? size - size / 2 : size / 2), "inter %d remote %d", flag, rsize);

    /* Rooted: the low group's rank 0 broadcasts to the high group. */
    int v = -1;
    if (low)
        v = 42, MPI_Bcast(&v, 1, MPI_INT, lrank == 0 ? MPI_ROOT : MPI_PROC_NULL, inter);
    else
        MPI_Bcast(&v, 1, MPI_INT, 0, inter);
    CHECK(low || v == 42, "intercomm bcast gave %d", v);

    /* All-to-all: each gets every remote member's rank in the world. */
    int *got = malloc(sizeof(int) * rsize);
    MPI_Allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, inter);
    for (int i = 0; i < rsize; i++)
        CHECK(got[i] == (low ? size / 2 + i : i), "intercomm allgather [%d] = %d", i, got[i]);
    free(got);

    /* Point-to-point names the other group. */
    if (lrank == 0) {
        int peer = -1;
        MPI_Sendrecv(&rank, 1, MPI_INT, 0, 3, &peer, 1, MPI_INT, 0, 3, inter, MPI_STATUS_IGNORE);
        CHECK(peer == (low ? size / 2 : 0), "intercomm sendrecv got %d", peer);
    }

    MPI_Intercomm_merge(inter, !low, &merged);
    int mrank;
    MPI_Comm_rank(merged, &mrank);
    CHECK(mrank == rank, "merged rank %d, world %d", mrank, rank);
    MPI_Comm_free(&merged);
    MPI_Comm_free(&inter);
    MPI_Comm_free(&half);
}

static void operations_and_vectors(int rank, int size) {
    MPI_Op op;
    int commute = 1;
    MPI_Op_create(concat, 0, &op);
    MPI_Op_commutative(op, &commute);
    CHECK(!commute, "MPI_Op_commutative said %d", commute);
    int digit[2] = {rank + 1, 10}, out[2] = {0, 0}, want = 0;
    for (int r = 0; r < size; r++)
        want = want * 10 + r + 1;
    MPI_Reduce(digit, out, 1, MPI_2INT, op, 0, MPI_COMM_WORLD);
    CHECK(rank != 0 || size > 8 || out[0] == want, "non-commutative reduce %d, want %d", out[0], want);
    MPI_Allreduce(digit, out, 1, MPI_2INT, op, MPI_COMM_WORLD);
    CHECK(size > 8 || out[0] == want, "non-commutative allreduce %d, want %d", out[0], want);
    MPI_Op_free(&op);
    CHECK(op == MPI_OP_NULL, "MPI_Op_free left the handle");

    /* Gatherv: rank r sends r+1 copies of r; the root packs them with a gap of one. */
    int *mine = malloc(sizeof(int) * (rank + 1));
    for (int i = 0; i <= rank; i++)
        mine[i] = rank;
    int *counts = malloc(sizeof(int) * size), *displs = malloc(sizeof(int) * size), total = 0;
    for (int r = 0; r < size; r++) {
        counts[r] = r + 1;
        displs[r] = total;
        total += r + 2;
    }
    int *all = calloc(total, sizeof(int));
    MPI_Gatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int r = 0; r < size; r++)
            for (int i = 0; i < counts[r]; i++)
                CHECK(all[displs[r] + i] == r, "gatherv [%d] = %d", displs[r] + i, all[displs[r] + i]);

    /* The same, nonblocking, to everyone. */
    MPI_Request req;
    memset(all, 0, sizeof(int) * total);
    MPI_Iallgatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int r = 0; r < size; r++)
        CHECK(all[displs[r]] == r, "iallgatherv [%d] = %d", displs[r], all[displs[r]]);

    /* Reduce_scatter: member r gets r+1 sums. */
    int *ones = malloc(sizeof(int) * total), *sums = malloc(sizeof(int) * (rank + 1));
    for (int i = 0; i < total; i++)
        ones[i] = 1;
    MPI_Reduce_scatter(ones, sums, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i <= rank; i++)
        CHECK(sums[i] == size, "reduce_scatter [%d] = %d", i, sums[i]);
    free(mine), free(counts), free(displs), free(all), free(ones), free(sums);
}

static void persistent_out_of_order(int rank, int size) {
    if (size < 2)
        return;
    /* Initialized in one order, started in another on rank 0: starts match by init. */
    int a = rank == 0 ? 9 : -1, sum = 0, one = 1;
    MPI_Request reqs[2];
    MPI_Bcast_init(&a, 1, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[0]);
    MPI_Allreduce_init(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &reqs[1]);
    for (int round = 0; round < 2; round++) {
        if (rank == 0) {
            MPI_Start(&reqs[1]);
            MPI_Start(&reqs[0]);
        } else {
            MPI_Startall(2, reqs);
        }
        MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
        CHECK(a == 9 && sum == size, "round %d: bcast %d, allreduce %d", round, a, sum);
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);

    /* The count and displacement arrays may be freed once the init call returns (MPICH and
     * Open MPI copy them; mpi4py frees its own): member r gives r + 1 copies of r. */
    int total = size * (size + 1) / 2, *all = malloc(sizeof(int) * total);
    int *mine = malloc(sizeof(int) * (rank + 1));
    for (int i = 0; i <= rank; i++)
        mine[i] = rank;
    MPI_Count *counts = malloc(sizeof(MPI_Count) * size);
    MPI_Aint *displs = malloc(sizeof(MPI_Aint) * size);
    int *icounts = malloc(sizeof(int) * size), *idispls = malloc(sizeof(int) * size);
    for (int r = 0, at = 0; r < size; at += r + 1, r++)
        counts[r] = icounts[r] = r + 1, displs[r] = idispls[r] = at;
    MPI_Allgatherv_init_c(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &reqs[0]);
    MPI_Gatherv_init(mine, rank + 1, MPI_INT, all, rank == 0 ? icounts : NULL,
                     rank == 0 ? idispls : NULL, MPI_INT, 0, MPI_COMM_WORLD, MPI_INFO_NULL,
                     &reqs[1]);
    for (int r = 0; r < size; r++)
        counts[r] = icounts[r] = -7, displs[r] = idispls[r] = -7;
    free(counts), free(displs), free(icounts), free(idispls);
    for (int round = 0; round < 2; round++) {
        for (int k = 0; k < 2; k++) {
            memset(all, 0xff, sizeof(int) * total);
            MPI_Start(&reqs[k]);
            MPI_Wait(&reqs[k], MPI_STATUS_IGNORE);
            if (k == 1 && rank != 0)
                continue;
            for (int r = 0, at = 0; r < size; at += r + 1, r++)
                for (int i = 0; i <= r; i++)
                    CHECK(all[at + i] == r, "persistent %s round %d: [%d] = %d",
                          k ? "gatherv" : "allgatherv_c", round, at + i, all[at + i]);
        }
    }
    MPI_Request_free(&reqs[0]);
    MPI_Request_free(&reqs[1]);
    free(all), free(mine);
}

static void topologies(int rank, int size) {
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(size, 2, dims);
    CHECK(dims[0] * dims[1] == size && dims[0] >= dims[1], "dims %d x %d", dims[0], dims[1]);
    MPI_Comm cart;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &cart);
    int status, coords[2], back;
    MPI_Topo_test(cart, &status);
    CHECK(status == MPI_CART, "topo_test %d", status);
    MPI_Cart_coords(cart, rank, 2, coords);
    MPI_Cart_rank(cart, coords, &back);
    CHECK(back == rank, "cart rank %d -> (%d,%d) -> %d", rank, coords[0], coords[1], back);
    int src, dst;
    MPI_Cart_shift(cart, 1, 1, &src, &dst);
    CHECK(coords[1] < dims[1] - 1 ? dst != MPI_PROC_NULL : dst == MPI_PROC_NULL,
          "non-periodic shift gave %d", dst);
    /* Every neighbour sends its rank; MPI_PROC_NULL neighbours leave their slot alone. */
    int got[4] = {-7, -7, -7, -7};
    MPI_Neighbor_allgather(&rank, 1, MPI_INT, got, 1, MPI_INT, cart);
    int up, down;
    MPI_Cart_shift(cart, 0, 1, &up, &down);
    CHECK(got[0] == (up == MPI_PROC_NULL ? -7 : up), "neighbour 0 sent %d, expected %d", got[0], up);
    CHECK(got[3] == (dst == MPI_PROC_NULL ? -7 : dst), "neighbour 3 sent %d", got[3]);
    MPI_Comm row;
    int keep[2] = {0, 1}, rsize;
    MPI_Cart_sub(cart, keep, &row);
    MPI_Comm_size(row, &rsize);
    CHECK(rsize == dims[1], "cart_sub row of %d", rsize);
    MPI_Comm_free(&row);
    MPI_Comm_free(&cart);
}

static void error_handlers(void) {
    MPI_Errhandler eh, got;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_create_errhandler(on_error, &eh);
    MPI_Comm_set_errhandler(dup, eh);
    MPI_Errhandler_free(&eh); /* the communicator keeps it */
    int cls, code, back, rc;
    MPI_Add_error_class(&cls);
    MPI_Add_error_code(cls, &code);
    MPI_Add_error_string(code, "weft test: my error");
    MPI_Error_class(code, &back);
    CHECK(back == cls, "the added code's class is %d, not %d", back, cls);
    char text[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(code, text, &len);
    CHECK(strcmp(text, "weft test: my error") == 0, "error string '%s'", text);
    MPI_Comm_call_errhandler(dup, code);
    CHECK(handled == 1 && handled_code == code, "handler called %d times with %d", handled, handled_code);
    /* A real error goes to the handler, and the call returns its class. */
    rc = MPI_Send(NULL, -1, MPI_INT, 0, 0, dup);
    CHECK(handled == 2 && rc == MPI_ERR_COUNT, "bad count: rc %d, handled %d", rc, handled);
    MPI_Comm_get_errhandler(dup, &got);
    MPI_Errhandler_free(&got);
    MPI_Comm_free(&dup);
    MPI_Remove_error_string(code);
    MPI_Remove_error_code(code);
    MPI_Remove_error_class(cls);
}

static int queried = 0, freed = 0;
static int query_fn(void *extra, MPI_Status *st) {
    queried++;
    MPI_Status_set_elements(st, MPI_INT, *(int *)extra);
    MPI_Status_set_cancelled(st, 0);
    MPI_Status_set_source(st, 5);
    MPI_Status_set_tag(st, 6);
    return MPI_SUCCESS;
}
static int free_fn(void *extra) {
    (void)extra;
    freed++;
    return MPI_SUCCESS;
}
static int cancel_fn(void *extra, int complete) {
    (void)extra; (void)complete;
    return MPI_SUCCESS;
}
/* Callbacks that fail: their error codes are what the completing call returns. */
static int failing_query(void *extra, MPI_Status *st) {
    (void)extra;
    MPI_Status_set_elements(st, MPI_INT, 0);
    return MPI_ERR_BUFFER;
}
static int failing_free(void *extra) {
    (void)extra;
    return MPI_ERR_INTERN;
}
static int failing_cancel(void *extra, int complete) {
    (void)extra; (void)complete;
    return MPI_ERR_PENDING;
}

static void requests_statuses_and_memory(int rank, int size) {
    /* A generalized request: completed by the program, its status from the query. */
    MPI_Request req;
    int three = 3, count, source, flag;
    MPI_Status st;
    MPI_Grequest_start(query_fn, free_fn, cancel_fn, &three, &req);
    MPI_Test(&req, &flag, &st);
    CHECK(!flag, "an incomplete generalized request tested complete");
    MPI_Grequest_complete(req);
    MPI_Wait(&req, &st);
    MPI_Get_count(&st, MPI_INT, &count);
    MPI_Status_get_source(&st, &source);
    CHECK(req == MPI_REQUEST_NULL && queried == 1 && freed == 1 && count == 3 && source == 5,
          "greq: queried %d freed %d count %d source %d", queried, freed, count, source);

    /* Statuses convert to Fortran's form and back unchanged. */
    MPI_Fint f[MPI_F_STATUS_SIZE];
    MPI_Status back;
    MPI_Status_c2f(&st, f);
    MPI_Status_f2c(f, &back);
    CHECK(f[MPI_F_TAG] == 6 && memcmp(&st, &back, sizeof st) == 0, "status c2f/f2c");
    CHECK(MPI_Pcontrol(1) == MPI_SUCCESS, "MPI_Pcontrol");
    MPI_Info abi;
    char value[MPI_MAX_INFO_VAL];
    int vlen = MPI_MAX_INFO_VAL, found = 0;
    MPI_Abi_get_info(&abi);
    MPI_Info_get_string(abi, "mpi_aint_size", &vlen, value, &found);
    CHECK(found && atoi(value) == (int)sizeof(MPI_Aint), "mpi_aint_size %s", found ? value : "-");
    MPI_Info_free(&abi);

    /* A ring exchange in one buffer, nonblocking, in memory MPI allocated. */
    int *buf;
    MPI_Alloc_mem(2 * sizeof(int), MPI_INFO_NULL, &buf);
    buf[0] = rank, buf[1] = -rank;
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Isendrecv_replace(buf, 2, MPI_INT, right, 4, left, 4, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, &st);
    CHECK(buf[0] == left && buf[1] == -left && st.MPI_SOURCE == left,
          "isendrecv_replace got %d %d from %d", buf[0], buf[1], st.MPI_SOURCE);
    MPI_Free_mem(buf);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int dummy, rc = MPI_Free_mem(&dummy);
    CHECK(rc == MPI_ERR_BASE, "MPI_Free_mem of other memory returned %d", rc);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
}

/* Bad arguments to this session's calls: each returns the standard's class (and the job
 * goes on, with MPI_ERRORS_RETURN). */
static void bad_arguments(int size) {
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
    int rc, n, v = 0, src, dst;
    rc = MPI_Comm_remote_size(MPI_COMM_WORLD, &n);
    CHECK(rc == MPI_ERR_COMM, "remote size of an intracommunicator: %d", rc);
    rc = MPI_Cart_shift(MPI_COMM_WORLD, 0, 1, &src, &dst);
    CHECK(rc == MPI_ERR_TOPOLOGY, "cart_shift without a grid: %d", rc);
    rc = MPI_Bcast(&v, 1, MPI_INT, size, MPI_COMM_WORLD);
    CHECK(rc == MPI_ERR_ROOT, "bcast with root %d: %d", size, rc);
    MPI_Op sum = MPI_SUM;
    rc = MPI_Op_free(&sum);
    CHECK(rc == MPI_ERR_OP, "freeing MPI_SUM: %d", rc);
    int dims[2] = {0, 0};
    rc = MPI_Dims_create(-1, 2, dims);
    CHECK(rc == MPI_ERR_DIMS, "dims_create of -1 nodes: %d", rc);
    int counts[1] = {-1}, displs[1] = {0};
    if (size == 1) {
        rc = MPI_Allgatherv(&v, 0, MPI_INT, &v, counts, displs, MPI_INT, MPI_COMM_WORLD);
        CHECK(rc == MPI_ERR_COUNT, "allgatherv with a negative count: %d", rc);
    }
    int cls;
    rc = MPI_Remove_error_class(MPI_ERR_OTHER);
    CHECK(rc == MPI_ERR_ARG, "removing a predefined class: %d", rc);
    MPI_Add_error_class(&cls);
    int code;
    MPI_Add_error_code(cls, &code);
    rc = MPI_Remove_error_class(cls);
    CHECK(rc == MPI_ERR_ARG, "removing a class that has codes: %d", rc);
    MPI_Remove_error_code(code);
    MPI_Remove_error_class(cls);
    /* Waiting on a generalized request nothing completed is an error, not a hang. */
    MPI_Request req;
    MPI_Grequest_start(NULL, NULL, NULL, NULL, &req);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rc != MPI_SUCCESS, "waiting on an incomplete generalized request returned %d", rc);
    MPI_Grequest_complete(req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* A callback's error code comes back from the call that completes or frees the request:
     * directly from MPI_Wait, as MPI_ERR_IN_STATUS (each status's MPI_ERROR set) from
     * MPI_Waitall. */
    MPI_Grequest_start(failing_query, NULL, NULL, NULL, &req);
    MPI_Grequest_complete(req);
    rc = MPI_Wait(&req, MPI_STATUS_IGNORE);
    CHECK(rc == MPI_ERR_BUFFER && req == MPI_REQUEST_NULL, "failing query: MPI_Wait returned %d", rc);
    MPI_Grequest_start(NULL, failing_free, NULL, NULL, &req);
    MPI_Grequest_complete(req);
    rc = MPI_Request_free(&req);
    CHECK(rc == MPI_ERR_INTERN, "failing free: MPI_Request_free returned %d", rc);
    MPI_Grequest_start(NULL, NULL, failing_cancel, NULL, &req);
    rc = MPI_Cancel(&req);
    CHECK(rc == MPI_ERR_PENDING, "failing cancel: MPI_Cancel returned %d", rc);
    MPI_Grequest_complete(req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* A persistent collective's arguments are checked at initialization. */
    rc = MPI_Gatherv_init(&v, 1, MPI_INT, &v, counts, displs, MPI_INT, size, MPI_COMM_WORLD,
                          MPI_INFO_NULL, &req);
    CHECK(rc == MPI_ERR_ROOT, "gatherv_init with root %d returned %d", size, rc);
    MPI_Request two[2];
    MPI_Status sts[2];
    MPI_Grequest_start(NULL, NULL, NULL, NULL, &two[0]);
    MPI_Grequest_start(failing_query, NULL, NULL, NULL, &two[1]);
    MPI_Grequest_complete(two[0]);
    MPI_Grequest_complete(two[1]);
    sts[0].MPI_ERROR = sts[1].MPI_ERROR = -1;
    rc = MPI_Waitall(2, two, sts);
    CHECK(rc == MPI_ERR_IN_STATUS && sts[0].MPI_ERROR == MPI_SUCCESS
          && sts[1].MPI_ERROR == MPI_ERR_BUFFER,
          "waitall with a failing query: %d, errors %d %d", rc, sts[0].MPI_ERROR, sts[1].MPI_ERROR);
    /* The empty status is whole: MPI_ERROR = MPI_SUCCESS too (MPI 4.1 3.7.3). */
    MPI_Status empty;
    empty.MPI_ERROR = -1;
    req = MPI_REQUEST_NULL;
    MPI_Wait(&req, &empty);
    CHECK(empty.MPI_SOURCE == MPI_ANY_SOURCE && empty.MPI_TAG == MPI_ANY_TAG
          && empty.MPI_ERROR == MPI_SUCCESS, "empty status: source %d tag %d error %d",
          empty.MPI_SOURCE, empty.MPI_TAG, empty.MPI_ERROR);
    /* MPI_REPLACE and MPI_NO_OP are not commutative; MPI_DATATYPE_NULL has its name. */
    int commute = -1;
    rc = MPI_Op_commutative(MPI_REPLACE, &commute);
    CHECK(rc == MPI_SUCCESS && commute == 0, "MPI_Op_commutative(MPI_REPLACE): %d, %d", rc, commute);
    char tname[MPI_MAX_OBJECT_NAME];
    int tlen;
    rc = MPI_Type_get_name(MPI_DATATYPE_NULL, tname, &tlen);
    CHECK(rc == MPI_SUCCESS && strcmp(tname, "MPI_DATATYPE_NULL") == 0, "name of MPI_DATATYPE_NULL");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_ARE_FATAL);
}

/* Reductions on long double (compiled by the C compiler into Weft's library): a sum whose
 * low bits a double would lose, and MAXLOC on MPI_LONG_DOUBLE_INT with a tie. */
static void long_doubles(int rank, int size) {
    long double tiny = 1.0L / (1ULL << 60), mine = 1.0L + rank * tiny, sum = 0;
    MPI_Allreduce(&mine, &sum, 1, MPI_LONG_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    long double want = size + (size * (size - 1) / 2) * tiny;
    CHECK(sum == want, "long double sum off by %Lg", sum - want);
    struct { long double value; int index; } in = {rank == 0 ? 1.0L : 2.0L, rank}, out;
    MPI_Allreduce(&in, &out, 1, MPI_LONG_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD);
    CHECK(out.value == (size > 1 ? 2.0L : 1.0L) && out.index == (size > 1 ? 1 : 0),
          "long double maxloc (%Lg, %d)", out.value, out.index);
}

/* A large-count user function: the maximum, its length an MPI_Count. */
static MPI_Count largest_len = 0;
static void max_c(void *in, void *inout, MPI_Count *len, MPI_Datatype *dt) {
    CHECK(*dt == MPI_INT, "max_c got another datatype");
    largest_len = *len > largest_len ? *len : largest_len;
    for (MPI_Count i = 0; i < *len; i++)
        if (((int *)in)[i] > ((int *)inout)[i]) ((int *)inout)[i] = ((int *)in)[i];
}

/* The large-count (_c) forms: MPI_Count counts, MPI_Aint displacements. */
static void large_count_forms(int rank, int size) {
    MPI_Count n = 3;
    int ring[3] = {rank, rank, rank}, got[3] = {-1, -1, -1};
    MPI_Sendrecv_c(ring, n, MPI_INT, (rank + 1) % size, 4, got, n, MPI_INT,
                   (rank + size - 1) % size, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got[2] == (rank + size - 1) % size, "Sendrecv_c got %d", got[2]);
    long sum = 0, mine = rank + 1;
    MPI_Allreduce_c(&mine, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == (long)size * (size + 1) / 2, "Allreduce_c %ld", sum);
    MPI_Op op_c;
    MPI_Op_create_c(max_c, 1, &op_c);
    int pair[2] = {rank, -rank}, top[2] = {-1, -1};
    MPI_Allreduce_c(pair, top, 2, MPI_INT, op_c, MPI_COMM_WORLD);
    CHECK(top[0] == size - 1 && top[1] == 0, "Op_create_c max (%d, %d)", top[0], top[1]);
    CHECK(size == 1 || largest_len == 2, "max_c saw %lld elements", (long long)largest_len);
    MPI_Op_free(&op_c);
    /* Allgatherv_c: member i gives i + 1 values, laid out backwards in the receive buffer. */
    MPI_Count *counts = malloc(size * sizeof(MPI_Count));
    MPI_Aint *displs = malloc(size * sizeof(MPI_Aint));
    MPI_Aint at = 0;
    for (int i = size - 1; i >= 0; i--) {
        counts[i] = i + 1;
        displs[i] = at;
        at += i + 1;
    }
    int *mine_v = malloc((rank + 1) * sizeof(int)), *all = malloc(at * sizeof(int));
    for (int j = 0; j <= rank; j++) mine_v[j] = rank * 100 + j;
    MPI_Request req;
    MPI_Iallgatherv_c(mine_v, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int i = 0; i < size; i++)
        for (int j = 0; j <= i; j++)
            CHECK(all[displs[i] + j] == i * 100 + j, "Iallgatherv_c [%d][%d] = %d", i, j,
                  all[displs[i] + j]);
    /* A part beyond what Weft's partitions count is MPI_ERR_COUNT, before any data moves. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    counts[0] = (MPI_Count)1 << 31;
    int rc = MPI_Allgatherv_c(mine_v, rank + 1, MPI_INT, all, counts, displs, MPI_INT,
                              MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_COUNT, "a 2^31-element part: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Count count = -1;
    MPI_Status st;
    if (size > 1) {
        if (rank == 0) MPI_Send_c(all, at, MPI_INT, 1, 8, MPI_COMM_WORLD);
        if (rank == 1) {
            MPI_Recv_c(all, at, MPI_INT, 0, 8, MPI_COMM_WORLD, &st);
            MPI_Get_count_c(&st, MPI_INT, &count);
            CHECK(count == at, "Get_count_c %lld", (long long)count);
        }
    }
    free(counts);
    free(displs);
    free(mine_v);
    free(all);
}

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    intercommunicators(rank, size);
    operations_and_vectors(rank, size);
    persistent_out_of_order(rank, size);
    topologies(rank, size);
    error_handlers();
    requests_statuses_and_memory(rank, size);
    bad_arguments(size);
    long_doubles(rank, size);
    large_count_forms(rank, size);
    if (failures == 0)
        printf("collectives: rank %d of %d ok\n", rank, size);
    MPI_Finalize();
    return failures != 0;
}
