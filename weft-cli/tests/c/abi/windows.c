/* One-sided windows from C, in each flavour (create over MPI_Alloc_mem's memory, which is
 * node-shared, and over malloc's, which is not; allocate, allocate_shared, dynamic):
 * exact counters under exclusive locks, concurrent fetch_and_op, a compare_and_swap spin
 * lock, a fence ring of derived datatypes, post-start-complete-wait, MAXLOC pairs, direct
 * pointers from MPI_Win_shared_query, a target asleep outside the library while the others
 * finish lock epochs on it, lock epochs on other ranks that take the lock at their first
 * operation (an empty one while the target holds its own lock, two windows operated on in
 * opposite orders, stores through MPI_Win_shared_query's pointers under exclusive locks),
 * attributes, names, and the error paths with the window's error handler. Prints "windows: rank R of N ok". Weft's own test. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#define ROUNDS 50
static int failures = 0, rank, size;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            printf("windows: FAIL rank %d: ", rank);                                      \
            printf(__VA_ARGS__);                                                          \
            printf("\n");                                                                 \
            failures++;                                                                   \
        }                                                                                 \
    } while (0)

enum flavor { CREATE, ALLOCATE, SHARED, DYNAMIC, CREATE_MALLOC };
static const char *names[] = {"create", "allocate", "allocate_shared", "dynamic", "create over malloc"};

/* A window of `n` longs at every rank, zeroed; `*disp0` is what displacement 0 of a part is
 * called (an address for a dynamic window, exchanged). */
static MPI_Win make(enum flavor f, int n, long **mem, MPI_Aint *disps) {
    MPI_Win win;
    MPI_Aint bytes = n * sizeof(long);
    if (f == CREATE || f == DYNAMIC) {
        MPI_Alloc_mem(bytes, MPI_INFO_NULL, mem);
        memset(*mem, 0, bytes);
    }
    if (f == CREATE_MALLOC) *mem = calloc(n, sizeof(long));
    if (f == CREATE || f == CREATE_MALLOC)
        MPI_Win_create(*mem, bytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    if (f == ALLOCATE) MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, mem, &win);
    if (f == SHARED) MPI_Win_allocate_shared(bytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, mem, &win);
    if (f == ALLOCATE || f == SHARED) memset(*mem, 0, bytes);
    MPI_Aint mine = 0;
    if (f == DYNAMIC) {
        MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win);
        MPI_Win_attach(win, *mem, bytes);
        MPI_Get_address(*mem, &mine);
    }
    MPI_Allgather(&mine, 1, MPI_AINT, disps, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    return win;
}

static void unmake(enum flavor f, MPI_Win *win, long *mem) {
    if (f == DYNAMIC) MPI_Win_detach(*win, mem);
    MPI_Win_free(win);
    CHECK(*win == MPI_WIN_NULL, "MPI_Win_free leaves MPI_WIN_NULL");
    if (f == CREATE || f == DYNAMIC) MPI_Free_mem(mem);
    if (f == CREATE_MALLOC) free(mem);
}

/* The displacement of element `i` of rank `t`'s part. */
static MPI_Aint at(enum flavor f, MPI_Aint *disps, int t, int i) {
    return f == DYNAMIC ? disps[t] + i * (MPI_Aint) sizeof(long) : i;
}

static void operations(enum flavor f) {
    long *mem;
    MPI_Aint disps[64];
    MPI_Win win = make(f, 8, &mem, disps);
    const char *name = names[f];

    /* An exact counter at rank 0, element 0: get, add, put under an exclusive lock. */
    for (int i = 0; i < ROUNDS; i++) {
        long v;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Get(&v, 1, MPI_LONG, 0, at(f, disps, 0, 0), 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        v += 1;
        MPI_Put(&v, 1, MPI_LONG, 0, at(f, disps, 0, 0), 1, MPI_LONG, win);
        MPI_Win_unlock(0, win);
    }
    /* Concurrent fetch_and_op at rank 0, element 1, in a lock_all epoch. */
    MPI_Win_lock_all(0, win);
    for (int i = 0; i < ROUNDS; i++) {
        long one = 1, old;
        MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, at(f, disps, 0, 1), MPI_SUM, win);
    }
    /* A compare_and_swap spin lock at rank 0, element 2, guarding element 3. */
    for (int i = 0; i < ROUNDS / 5; i++) {
        long free_ = 0, mine = rank + 1, old = -1, v;
        do {
            MPI_Compare_and_swap(&mine, &free_, &old, MPI_LONG, 0, at(f, disps, 0, 2), win);
            MPI_Win_flush(0, win);
        } while (old != 0);
        MPI_Get(&v, 1, MPI_LONG, 0, at(f, disps, 0, 3), 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        v += 1;
        MPI_Put(&v, 1, MPI_LONG, 0, at(f, disps, 0, 3), 1, MPI_LONG, win);
        MPI_Win_flush(0, win);
        MPI_Compare_and_swap(&free_, &mine, &old, MPI_LONG, 0, at(f, disps, 0, 2), win);
        MPI_Win_flush(0, win);
        CHECK(old == mine, "%s: the spin lock was %ld while held by %ld", name, old, mine);
    }
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
        CHECK(mem[0] == (long) size * ROUNDS, "%s: counter %ld, wanted %ld", name, mem[0], (long) size * ROUNDS);
        CHECK(mem[1] == (long) size * ROUNDS, "%s: fetch_and_op sum %ld, wanted %ld", name, mem[1], (long) size * ROUNDS);
        CHECK(mem[3] == (long) size * (ROUNDS / 5), "%s: guarded %ld, wanted %ld", name, mem[3], (long) size * (ROUNDS / 5));
        MPI_Win_unlock(0, win);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* A fence ring: every rank puts a strided pair (a vector type on both sides) into its
     * right neighbour's elements 4 and 6. */
    MPI_Datatype every_other;
    MPI_Type_vector(2, 1, 2, MPI_LONG, &every_other);
    MPI_Type_commit(&every_other);
    long src[3] = {100 + rank, -1, 200 + rank};
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    MPI_Win_fence(0, win);
    MPI_Put(src, 1, every_other, right, at(f, disps, right, 4), 1, every_other, win);
    MPI_Win_fence(0, win);
    long got[3] = {0, 0, 0};
    MPI_Get(got, 1, every_other, rank, at(f, disps, rank, 4), 1, every_other, win);
    MPI_Win_fence(MPI_MODE_NOSUCCEED, win);
    CHECK(got[0] == 100 + left && got[2] == 200 + left, "%s: fence ring got %ld %ld", name, got[0], got[2]);

    /* Post-start-complete-wait: each rank exposes to its left neighbour and accesses its
     * right one, adding its rank + 1 to element 7. */
    MPI_Group world, to_left, to_right;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &to_left);
    MPI_Group_incl(world, 1, &right, &to_right);
    MPI_Win_post(to_left, 0, win);
    MPI_Win_start(to_right, 0, win);
    long plus = rank + 1;
    MPI_Accumulate(&plus, 1, MPI_LONG, right, at(f, disps, right, 7), 1, MPI_LONG, MPI_SUM, win);
    MPI_Win_complete(win);
    int flag = 0;
    while (!flag) MPI_Win_test(win, &flag);
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
    CHECK(mem[7] == left + 1, "%s: PSCW gave %ld, wanted %d", name, mem[7], left + 1);
    MPI_Win_unlock(rank, win);
    MPI_Group_free(&to_left);
    MPI_Group_free(&to_right);
    MPI_Group_free(&world);
    MPI_Type_free(&every_other);
    MPI_Barrier(MPI_COMM_WORLD);
    unmake(f, &win, mem);
}

/* MAXLOC on (value, index) pairs from every rank at once: the greatest value wins, the
 * lowest index among equals. */
static void pairs(void) {
    struct { int val, loc; } *mem, mine = {rank % 2, rank};
    MPI_Win win;
    MPI_Win_allocate(sizeof *mem, sizeof *mem, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    mem->val = -1;
    mem->loc = -1;
    MPI_Win_fence(0, win);
    MPI_Accumulate(&mine, 1, MPI_2INT, 0, 0, 1, MPI_2INT, MPI_MAXLOC, win);
    MPI_Win_fence(0, win);
    int want = size > 1 ? 1 : 0;
    if (rank == 0) CHECK(mem->val == want && mem->loc == want, "MAXLOC gave (%d, %d)", mem->val, mem->loc);
    MPI_Win_free(&win);
}

/* allocate_shared: the neighbours' parts by pointer. */
static void shared_pointers(void) {
    int *mine;
    MPI_Win win;
    MPI_Win_allocate_shared(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mine, &win);
    MPI_Win_lock_all(0, win);
    *mine = 1000 + rank;
    MPI_Win_sync(win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(win);
    for (int r = 0; r < size; r++) {
        MPI_Aint bytes;
        int unit, *p;
        MPI_Win_shared_query(win, r, &bytes, &unit, &p);
        CHECK(bytes == sizeof(int) && unit == sizeof(int) && *p == 1000 + r, "shared_query %d: %d", r, *p);
    }
    MPI_Win_unlock_all(win);
    MPI_Win_free(&win);
}

/* A target that sleeps outside the library while the others lock, put and unlock on it:
 * they finish before it wakes. */
static void asleep(enum flavor f) {
    long *mem;
    MPI_Aint disps[64];
    MPI_Win win = make(f, 1, &mem, disps);
    double wake = 0, done = 0;
    if (rank == 0) {
        sleep(3);
        wake = MPI_Wtime();
    } else {
        long v = rank;
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win);
        MPI_Accumulate(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win);
        MPI_Win_unlock(0, win);
        done = MPI_Wtime();
    }
    double last = 0;
    MPI_Reduce(&done, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        CHECK(last < wake, "%s: the others finished at %f, after the target woke at %f", names[f], last, wake);
        CHECK(*mem == (long) size * (size - 1) / 2, "%s: asleep sum %ld", names[f], *mem);
    }
    unmake(f, &win, mem);
}

static int handler_calls = 0;
static void count_calls(MPI_Win *win, int *code, ...) {
    (void) win;
    (void) code;
    handler_calls++;
}

static void expect(int got, int class, const char *needle, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0, got_class = -1;
    MPI_Error_class(got, &got_class);
    MPI_Error_string(got, text, &len);
    CHECK(got_class == class && strstr(text, needle) != NULL, "%s: class %d (wanted %d), '%s' (wanted '%s')",
          what, got_class, class, text, needle);
}

static void errors_and_attributes(void) {
    int *mem, x = 0;
    MPI_Win win;
    MPI_Win_allocate(4 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN); /* errors of no window */
    expect(MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, win), MPI_ERR_RMA_SYNC, "MPI_Put", "outside an epoch");
    MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win);
    expect(MPI_Put(&x, 1, MPI_INT, size, 0, 1, MPI_INT, win), MPI_ERR_RANK, "target rank", "bad target");
    expect(MPI_Put(&x, 1, MPI_INT, 0, 4, 1, MPI_INT, win), MPI_ERR_DISP, "displacement 4", "past the part");
    expect(MPI_Get(&x, 1, MPI_INT, 0, -1, 1, MPI_INT, win), MPI_ERR_DISP, "displacement -1", "negative disp");
    expect(MPI_Put(&x, 1, MPI_INT, 1 % size, 0, 1, MPI_INT, win), size > 1 ? MPI_ERR_RMA_SYNC : MPI_SUCCESS,
           size > 1 ? "covers target 1" : "", "other target than the lock's");
    expect(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win), MPI_ERR_RMA_SYNC, "already holds", "second lock");
    expect(MPI_Win_fence(0, win), MPI_ERR_RMA_SYNC, "lock epoch", "fence in a lock epoch");
    MPI_Op mine;
    MPI_Op_create((MPI_User_function *) count_calls, 1, &mine);
    expect(MPI_Accumulate(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, mine, win), MPI_ERR_OP, "predefined", "user op");
    MPI_Op_free(&mine);
    expect(MPI_Put(&x, 1, MPI_INT, MPI_PROC_NULL, 99, 1, MPI_INT, win), MPI_SUCCESS, "", "MPI_PROC_NULL");
    MPI_Win_unlock(0, win);
    expect(MPI_Win_unlock(0, win), MPI_ERR_RMA_SYNC, "holds no lock", "unlock twice");
    expect(MPI_Win_lock(7, 0, 0, win), MPI_ERR_LOCKTYPE, "lock type 7", "bad lock type");
    expect(MPI_Win_attach(win, &x, sizeof x), MPI_ERR_RMA_FLAVOR, "dynamic", "attach to allocate");
    expect(MPI_Win_fence(1, win), MPI_ERR_ASSERT, "assertion", "bad assertion");
    expect(MPI_Put(&x, 1, MPI_INT, 0, 0, 1, MPI_INT, MPI_WIN_NULL), MPI_ERR_WIN, "MPI_WIN_NULL", "null window");
    /* The window's own handler, not the communicator's, hears of its errors. */
    MPI_Errhandler counting;
    MPI_Win_create_errhandler(count_calls, &counting);
    MPI_Win_set_errhandler(win, counting);
    MPI_Errhandler_free(&counting);
    MPI_Win_unlock(0, win);
    MPI_Win_call_errhandler(win, MPI_ERR_OTHER);
    CHECK(handler_calls == 2, "the window's handler ran %d times, wanted 2", handler_calls);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);

    /* Attributes and names. */
    void *base;
    MPI_Aint *bytes;
    int *unit, *flavor, *model, flag;
    MPI_Win_get_attr(win, MPI_WIN_BASE, &base, &flag);
    CHECK(flag && base == mem, "MPI_WIN_BASE");
    MPI_Win_get_attr(win, MPI_WIN_SIZE, &bytes, &flag);
    CHECK(flag && *bytes == 4 * sizeof(int), "MPI_WIN_SIZE %ld", (long) *bytes);
    MPI_Win_get_attr(win, MPI_WIN_DISP_UNIT, &unit, &flag);
    CHECK(flag && *unit == sizeof(int), "MPI_WIN_DISP_UNIT");
    MPI_Win_get_attr(win, MPI_WIN_CREATE_FLAVOR, &flavor, &flag);
    CHECK(flag && *flavor == MPI_WIN_FLAVOR_ALLOCATE, "MPI_WIN_CREATE_FLAVOR");
    MPI_Win_get_attr(win, MPI_WIN_MODEL, &model, &flag);
    CHECK(flag && *model == MPI_WIN_UNIFIED, "MPI_WIN_MODEL");
    int key;
    MPI_Win_create_keyval(MPI_WIN_NULL_COPY_FN, MPI_WIN_NULL_DELETE_FN, &key, NULL);
    MPI_Win_set_attr(win, key, &x);
    int *back;
    MPI_Win_get_attr(win, key, &back, &flag);
    CHECK(flag && back == &x, "keyed attribute");
    MPI_Win_delete_attr(win, key);
    MPI_Win_get_attr(win, key, &back, &flag);
    CHECK(!flag, "deleted attribute");
    MPI_Win_free_keyval(&key);
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Win_set_name(win, "counters");
    MPI_Win_get_name(win, name, &len);
    CHECK(strcmp(name, "counters") == 0 && len == 8, "name '%s'", name);
    MPI_Group g;
    int gsize;
    MPI_Win_get_group(win, &g);
    MPI_Group_size(g, &gsize);
    CHECK(gsize == size, "group size %d", gsize);
    MPI_Group_free(&g);
    MPI_Win_free(&win);
}

/* The calls the C ABI takes on its fast path (contiguous predefined data alike on both sides,
 * every member reached directly) at their edges, each result exact: MPI_NO_OP with no origin,
 * sums of doubles, MPI_REPLACE, a multi-element accumulate, an element not aligned to its size
 * (no CPU atomic), compare_and_swap both ways, empty operations; and what they leave to the
 * general path: a flush or an operation on a target no epoch covers, locks released out of
 * order. Each rank works on its right neighbour's part, which only it touches. */
static void fast_paths(void) {
    char *mem;
    MPI_Win win;
    MPI_Win_allocate(64, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win);
    memset(mem, 0, 64);
    MPI_Win_set_errhandler(win, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    int t = (rank + 1) % size;
    long five = 5, seven = 7, old = -1, got = -1;
    double half = 1.5, dgot = 0;

    MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win);
    expect(MPI_Win_flush(size, win), MPI_ERR_RANK, "target rank", "flush of no member");
    if (t != rank) {
        expect(MPI_Win_flush(rank, win), MPI_ERR_RMA_SYNC, "passive-target", "flush of an unlocked target");
        expect(MPI_Fetch_and_op(&five, &old, MPI_LONG, rank, 0, MPI_SUM, win), MPI_ERR_RMA_SYNC, "covers target",
               "fetch_and_op on an unlocked target");
        /* Two locks, the first released first: the second still covers its target. */
        MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win);
        MPI_Win_unlock(t, win);
        expect(MPI_Put(&five, 1, MPI_LONG, t, 0, 1, MPI_LONG, win), MPI_ERR_RMA_SYNC, "covers target",
               "put after its lock was released");
        expect(MPI_Win_flush(rank, win), MPI_SUCCESS, "", "flush of the lock still held");
        MPI_Win_unlock(rank, win);
    } else {
        MPI_Win_unlock(t, win);
    }
    expect(MPI_Win_unlock(t, win), MPI_ERR_RMA_SYNC, "holds no lock", "unlock of a released lock");

    MPI_Win_lock_all(0, win);
    MPI_Fetch_and_op(NULL, &old, MPI_LONG, t, 0, MPI_NO_OP, win);
    CHECK(old == 0, "fast: MPI_NO_OP fetched %ld, wanted 0", old);
    MPI_Fetch_and_op(&five, &old, MPI_LONG, t, 0, MPI_SUM, win);
    MPI_Fetch_and_op(&five, &old, MPI_LONG, t, 0, MPI_SUM, win);
    CHECK(old == 5, "fast: fetch_and_op fetched %ld, wanted 5", old);
    MPI_Accumulate(&half, 1, MPI_DOUBLE, t, 8, 1, MPI_DOUBLE, MPI_SUM, win);
    MPI_Accumulate(&half, 1, MPI_DOUBLE, t, 8, 1, MPI_DOUBLE, MPI_SUM, win);
    MPI_Get_accumulate(NULL, 0, MPI_DOUBLE, &dgot, 1, MPI_DOUBLE, t, 8, 1, MPI_DOUBLE, MPI_NO_OP, win);
    CHECK(dgot == 3.0, "fast: sums of doubles %g, wanted 3", dgot);
    int three[3] = {4, -2, 9}, more[3] = {1, 6, 2}, back[3] = {0, 0, 0};
    MPI_Accumulate(three, 3, MPI_INT, t, 16, 3, MPI_INT, MPI_REPLACE, win);
    MPI_Accumulate(more, 3, MPI_INT, t, 16, 3, MPI_INT, MPI_MAX, win);
    MPI_Get(back, 3, MPI_INT, t, 16, 3, MPI_INT, win);
    MPI_Win_flush(t, win);
    CHECK(back[0] == 4 && back[1] == 6 && back[2] == 9, "fast: MAX of three ints %d %d %d", back[0], back[1], back[2]);
    /* A long at byte 33: not aligned, so combined under the element locks. */
    MPI_Fetch_and_op(&seven, &old, MPI_LONG, t, 33, MPI_SUM, win);
    MPI_Fetch_and_op(&seven, &old, MPI_LONG, t, 33, MPI_SUM, win);
    MPI_Get(&got, 1, MPI_LONG, t, 33, 1, MPI_LONG, win);
    MPI_Win_flush(t, win);
    CHECK(old == 7 && got == 14, "fast: misaligned fetch_and_op %ld then %ld, wanted 7, 14", old, got);
    MPI_Compare_and_swap(&seven, &five, &old, MPI_LONG, t, 0, win); /* 10 != 5: unchanged */
    CHECK(old == 10, "fast: compare_and_swap saw %ld, wanted 10", old);
    long ten = 10;
    MPI_Compare_and_swap(&seven, &ten, &old, MPI_LONG, t, 0, win);
    MPI_Get(&got, 1, MPI_LONG, t, 0, 1, MPI_LONG, win);
    MPI_Win_flush(t, win);
    CHECK(old == 10 && got == 7, "fast: compare_and_swap swapped %ld to %ld, wanted 10 to 7", old, got);
    expect(MPI_Put(&five, 0, MPI_LONG, t, 0, 0, MPI_LONG, win), MPI_SUCCESS, "", "empty put");
    expect(MPI_Put(&five, 1, MPI_LONG, t, 64, 1, MPI_LONG, win), MPI_ERR_DISP, "displacement 64", "put past the part");
    MPI_Win_unlock_all(win);
    MPI_Barrier(MPI_COMM_WORLD);
    long mine;
    memcpy(&mine, mem + 33, sizeof mine);
    CHECK(*(long *) mem == 7 && mine == 14, "fast: own part holds %ld and %ld", *(long *) mem, mine);
    MPI_Win_free(&win);
}

/* Lock epochs on another rank's part take its lock at their first operation: an empty one
 * completes while the target holds its own lock (this would hang were the lock taken); two
 * windows locked in one order and operated on in opposite orders (the second lock call takes
 * the first, deferred, lock: no deadlock), through the fast path and a derived datatype's
 * general path; stores through MPI_Win_shared_query's pointers stay protected. */
static void lazy_locks(void) {
    long *a, *b;
    MPI_Win wa, wb;
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &a, &wa);
    MPI_Win_allocate(sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &b, &wb);
    *a = *b = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa);
        for (int r = 1; r < size; r++) MPI_Recv(NULL, 0, MPI_BYTE, r, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Win_unlock(0, wa);
    } else {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa);
        MPI_Win_flush(0, wa);
        MPI_Win_unlock(0, wa);
        MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, wa);
        MPI_Win_unlock(0, wa);
        MPI_Send(NULL, 0, MPI_BYTE, 0, 7, MPI_COMM_WORLD);
    }
    MPI_Datatype one; /* one long as a derived datatype: the general path */
    MPI_Type_contiguous(1, MPI_LONG, &one);
    MPI_Type_commit(&one);
    for (int i = 0; i < ROUNDS; i++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa);
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wb);
        for (int k = 0; k < 2; k++) {
            MPI_Win w = (k == rank % 2) ? wa : wb;
            MPI_Datatype t = (i % 2) ? one : MPI_LONG;
            long v;
            MPI_Get(&v, 1, t, 0, 0, 1, t, w);
            MPI_Win_flush(0, w);
            v++;
            MPI_Put(&v, 1, t, 0, 0, 1, t, w);
        }
        MPI_Win_unlock(0, wb);
        MPI_Win_unlock(0, wa);
    }
    MPI_Type_free(&one);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) CHECK(*a == (long) size * ROUNDS && *b == (long) size * ROUNDS, "lazy: counters %ld %ld", *a, *b);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Aint bytes;
    int unit;
    long *p;
    MPI_Win_shared_query(wa, 0, &bytes, &unit, &p);
    CHECK(p != NULL && bytes == sizeof(long), "lazy: shared_query of rank 0's part");
    for (int i = 0; p && i < ROUNDS * 10; i++) {
        MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, wa);
        *(volatile long *) p += 1;
        MPI_Win_unlock(0, wa);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_sync(wa);
    if (rank == 0) CHECK(*a == (long) size * ROUNDS * 11, "lazy: a store through shared_query's pointer was lost: %ld", *a);
    MPI_Win_free(&wb);
    MPI_Win_free(&wa);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int f = CREATE; f <= CREATE_MALLOC; f++) operations(f);
    pairs();
    shared_pointers();
    if (size > 1) asleep(CREATE);
    if (size > 1) asleep(CREATE_MALLOC);
    errors_and_attributes();
    fast_paths();
    lazy_locks();
    if (failures == 0) printf("windows: rank %d of %d ok\n", rank, size);
    MPI_Finalize();
    return failures != 0;
}
