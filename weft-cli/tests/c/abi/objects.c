/* Communicators, groups, attributes, info objects, persistent requests, matched probes and
 * buffered sends through the C ABI, checked by the program itself: "objects: rank R of N ok"
 * when every check held, "FAIL" lines otherwise. Weft's own test program. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            printf("objects: FAIL line %d: ", __LINE__);                                   \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

static int copies = 0, deletes = 0;
static int copy_fn(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key; (void)extra;
    copies++;
    *(void **)out = (char *)in + 1; /* the copy is the value plus one */
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int key, void *value, void *extra) {
    (void)c; (void)key; (void)value; (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

int main(int argc, char **argv) {
    int rank, size, result, flag;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    /* Attributes: predefined, and a keyval whose copy callback runs on dup. */
    int *tag_ub;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && *tag_ub >= 32767, "tag_ub %d", flag ? *tag_ub : -1);
    int key;
    MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL);
    MPI_Comm_set_attr(MPI_COMM_WORLD, key, (void *)100);

    /* dup copies the attribute through the callback; split by parity reverses the order. */
    MPI_Comm dup, half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    void *got = NULL;
    MPI_Comm_get_attr(dup, key, &got, &flag);
    CHECK(flag && got == (void *)101 && copies == 1, "dup attr %p flag %d copies %d", got, flag, copies);
    MPI_Comm_compare(MPI_COMM_WORLD, dup, &result);
    CHECK(result == MPI_CONGRUENT, "compare world/dup %d", result);
    MPI_Comm_split(dup, rank % 2, size - rank, &half);
    int hrank, hsize;
    MPI_Comm_rank(half, &hrank);
    MPI_Comm_size(half, &hsize);
    CHECK(hsize == (size + 1 - rank % 2) / 2, "half size %d", hsize);
    int sum = -1;
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, half);
    int want = 0;
    for (int r = rank % 2; r < size; r += 2) want += r;
    CHECK(sum == want, "sum in half %d, wanted %d", sum, want);
    MPI_Comm_set_name(half, "half");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    MPI_Comm_get_name(half, name, &len);
    CHECK(strcmp(name, "half") == 0, "name '%s'", name);
    MPI_Comm none;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, 0, &none);
    CHECK((rank == 0) == (none != MPI_COMM_NULL), "split with MPI_UNDEFINED");
    if (none != MPI_COMM_NULL) MPI_Comm_free(&none);

    /* MPI_Comm_idup of the world and of dup, started in opposite orders by even and odd
     * ranks, a blocking split while both are in flight, an Ibarrier on another: all complete,
     * the copy callback ran for the world's duplicate, and each carries its own traffic. */
    MPI_Comm idups[2], mid;
    MPI_Request reqs[3];
    int even = rank % 2 == 0;
    copies = 0;
    MPI_Comm_idup(even ? MPI_COMM_WORLD : dup, &idups[even ? 0 : 1], &reqs[0]);
    MPI_Ibarrier(half, &reqs[2]);
    MPI_Comm_idup_with_info(even ? dup : MPI_COMM_WORLD, MPI_INFO_NULL, &idups[even ? 1 : 0], &reqs[1]);
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &mid);
    MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE);
    CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL, "idup requests freed");
    got = NULL;
    MPI_Comm_get_attr(idups[0], key, &got, &flag);
    CHECK(flag && got == (void *)101 && copies == 2, "idup attr %p flag %d copies %d", got, flag, copies);
    MPI_Comm_compare(idups[1], dup, &result);
    CHECK(result == MPI_CONGRUENT, "compare idup/dup %d", result);
    int vals[3], outs[3];
    MPI_Comm three[3] = {idups[0], idups[1], mid};
    MPI_Request sreqs[3];
    for (int i = 0; i < 3; i++) {
        vals[i] = rank * 10 + i;
        MPI_Isend(&vals[i], 1, MPI_INT, (rank + 1) % size, 5, three[i], &sreqs[i]);
    }
    for (int i = 2; i >= 0; i--) {
        MPI_Recv(&outs[i], 1, MPI_INT, (rank + size - 1) % size, 5, three[i], MPI_STATUS_IGNORE);
        CHECK(outs[i] == ((rank + size - 1) % size) * 10 + i, "idup traffic %d: %d", i, outs[i]);
    }
    MPI_Waitall(3, sreqs, MPI_STATUSES_IGNORE);
    MPI_Comm_free(&idups[0]);
    MPI_Comm_free(&idups[1]);
    MPI_Comm_free(&mid);
    CHECK(deletes == 2, "deletes after freeing the idups %d", deletes);
    copies = 1;
    deletes = 0;

    /* Groups: the world's, a subgroup, translation, comparison, a communicator made from one. */
    MPI_Group world_group, evens, odds;
    MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    int range[1][3] = {{0, size - 1, 2}};
    MPI_Group_range_incl(world_group, 1, range, &evens);
    MPI_Group_difference(world_group, evens, &odds);
    int esize, osize, erank;
    MPI_Group_size(evens, &esize);
    MPI_Group_size(odds, &osize);
    MPI_Group_rank(evens, &erank);
    CHECK(esize + osize == size && esize == (size + 1) / 2, "group sizes %d %d", esize, osize);
    CHECK(erank == (rank % 2 == 0 ? rank / 2 : MPI_UNDEFINED), "rank in evens %d", erank);
    int in[2] = {0, esize - 1}, out[2];
    MPI_Group_translate_ranks(evens, 2, in, world_group, out);
    CHECK(out[0] == 0 && out[1] == 2 * (esize - 1), "translated %d %d", out[0], out[1]);
    MPI_Group_compare(world_group, world_group, &result);
    CHECK(result == MPI_IDENT, "group compare %d", result);
    MPI_Comm evens_comm;
    MPI_Comm_create(MPI_COMM_WORLD, evens, &evens_comm);
    CHECK((rank % 2 == 0) == (evens_comm != MPI_COMM_NULL), "comm_create membership");
    if (evens_comm != MPI_COMM_NULL) {
        int r;
        MPI_Comm_rank(evens_comm, &r);
        CHECK(r == rank / 2, "rank in evens comm %d", r);
        MPI_Comm_free(&evens_comm);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&world_group);
    CHECK(world_group == MPI_GROUP_NULL, "freed group not null");

    /* Info objects. */
    MPI_Info info, copy;
    MPI_Info_create(&info);
    MPI_Info_set(info, "color", "blue");
    MPI_Info_set(info, "shape", "round");
    MPI_Info_set(info, "color", "green");
    MPI_Info_dup(info, &copy);
    int nkeys, buflen = 16;
    char value[16], key0[MPI_MAX_INFO_KEY];
    MPI_Info_get_nkeys(copy, &nkeys);
    MPI_Info_get_nthkey(copy, 0, key0);
    MPI_Info_get_string(copy, "color", &buflen, value, &flag);
    CHECK(nkeys == 2 && strcmp(key0, "color") == 0 && flag && strcmp(value, "green") == 0 && buflen == 6,
          "info %d '%s' '%s' %d", nkeys, key0, value, buflen);
    MPI_Info_delete(copy, "color");
    MPI_Info_get_valuelen(copy, "color", &len, &flag);
    CHECK(!flag, "deleted key still there");
    MPI_Info_free(&info);
    MPI_Info_free(&copy);
    CHECK(info == MPI_INFO_NULL, "freed info not null");

    /* Persistent requests, started three times around the ring. */
    int next = (rank + 1) % size, prev = (rank + size - 1) % size, sendv, recvv = -1;
    MPI_Request pr[2];
    MPI_Recv_init(&recvv, 1, MPI_INT, prev, 11, MPI_COMM_WORLD, &pr[0]);
    MPI_Send_init(&sendv, 1, MPI_INT, next, 11, MPI_COMM_WORLD, &pr[1]);
    for (int round = 0; round < 3; round++) {
        sendv = rank * 10 + round;
        MPI_Startall(2, pr);
        MPI_Waitall(2, pr, MPI_STATUSES_IGNORE);
        CHECK(recvv == prev * 10 + round, "round %d got %d", round, recvv);
        CHECK(pr[0] != MPI_REQUEST_NULL, "a persistent request was freed by the wait");
    }
    MPI_Request_free(&pr[0]);
    MPI_Request_free(&pr[1]);

    /* A matched probe and receive, and a buffered send from an attached buffer. */
    int bufsize = 1024 + MPI_BSEND_OVERHEAD;
    void *bbuf = malloc(bufsize);
    MPI_Buffer_attach(bbuf, bufsize);
    MPI_Bsend(&rank, 1, MPI_INT, next, 12, MPI_COMM_WORLD);
    MPI_Message msg;
    MPI_Status st;
    MPI_Mprobe(MPI_ANY_SOURCE, 12, MPI_COMM_WORLD, &msg, &st);
    int from = -1, count;
    MPI_Get_count(&st, MPI_INT, &count);
    MPI_Mrecv(&from, count, MPI_INT, &msg, MPI_STATUS_IGNORE);
    CHECK(from == prev && msg == MPI_MESSAGE_NULL && count == 1, "mrecv %d count %d", from, count);
    void *detached;
    MPI_Count dsize;
    MPI_Buffer_detach_c(&detached, &dsize);
    CHECK(detached == bbuf && dsize == bufsize, "detach gave %p %lld", detached, (long long)dsize);
    free(bbuf);
    /* A buffer for one 1 MiB message (a rendezvous: it holds its room until received): a
     * second is MPI_ERR_BUFFER until a flush (nonblocking: it completes when the receiver
     * takes the first) frees the room. */
    int big = 1 << 20;
    bufsize = big + MPI_BSEND_OVERHEAD;
    bbuf = malloc(bufsize);
    char *out_big = calloc(big, 1), *in_big = malloc(big);
    MPI_Buffer_attach(bbuf, bufsize);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Bsend(out_big, big, MPI_BYTE, next, 13, MPI_COMM_WORLD);
    int rc = MPI_Bsend(out_big, big, MPI_BYTE, next, 13, MPI_COMM_WORLD), cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "a Bsend with no room: class %d", cls);
    MPI_Request flush;
    MPI_Buffer_iflush(&flush);
    MPI_Recv(in_big, big, MPI_BYTE, prev, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Wait(&flush, MPI_STATUS_IGNORE);
    rc = MPI_Bsend(out_big, big, MPI_BYTE, next, 13, MPI_COMM_WORLD);
    CHECK(rc == MPI_SUCCESS, "a Bsend after the flush: %d", rc);
    MPI_Recv(in_big, big, MPI_BYTE, prev, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Buffer_flush();
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    int isize;
    MPI_Buffer_detach(&detached, &isize);
    CHECK(detached == bbuf && isize == bufsize, "detach gave %p %d", detached, isize);

    /* MPI 5's buffer of a communicator: its buffered sends use its own buffer (no
     * process buffer is attached now), one message's worth; a second is MPI_ERR_BUFFER until
     * its flush; attaching twice is an error; then an automatic buffer takes anything. */
    MPI_Comm bcomm; /* a split: no attribute copied (the delete count below stays) */
    MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &bcomm);
    MPI_Comm_set_errhandler(bcomm, MPI_ERRORS_RETURN);
    CHECK(MPI_Comm_attach_buffer(bcomm, bbuf, bufsize) == MPI_SUCCESS, "comm attach");
    rc = MPI_Comm_attach_buffer(bcomm, bbuf, bufsize);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "attaching twice: class %d", cls);
    CHECK(MPI_Bsend(out_big, big, MPI_BYTE, next, 14, bcomm) == MPI_SUCCESS, "comm bsend");
    rc = MPI_Bsend(out_big, big, MPI_BYTE, next, 14, bcomm);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "a comm Bsend with no room: class %d", cls);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    rc = MPI_Bsend(&rank, 1, MPI_INT, next, 15, MPI_COMM_WORLD);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER, "the process has no buffer now: class %d", cls);
    MPI_Comm_iflush_buffer(bcomm, &flush);
    MPI_Recv(in_big, big, MPI_BYTE, prev, 14, bcomm, MPI_STATUS_IGNORE);
    MPI_Wait(&flush, MPI_STATUS_IGNORE);
    MPI_Comm_flush_buffer(bcomm);
    CHECK(MPI_Comm_detach_buffer(bcomm, &detached, &isize) == MPI_SUCCESS &&
              detached == bbuf && isize == bufsize,
          "comm detach gave %p %d", detached, isize);
    CHECK(MPI_Comm_attach_buffer(bcomm, MPI_BUFFER_AUTOMATIC, 0) == MPI_SUCCESS, "automatic");
    for (int i = 0; i < 3; i++)
        CHECK(MPI_Bsend(out_big, big, MPI_BYTE, next, 16, bcomm) == MPI_SUCCESS, "auto bsend");
    for (int i = 0; i < 3; i++)
        MPI_Recv(in_big, big, MPI_BYTE, prev, 16, bcomm, MPI_STATUS_IGNORE);
    MPI_Count csize = -1;
    MPI_Comm_detach_buffer_c(bcomm, &detached, &csize);
    CHECK(detached == MPI_BUFFER_AUTOMATIC, "automatic detach gave %p", detached);
    MPI_Comm_free(&bcomm);
    free(bbuf);
    free(out_big);
    free(in_big);

    MPI_Comm_free(&half);
    MPI_Comm_free(&dup);
    CHECK(dup == MPI_COMM_NULL && deletes == 1, "free: dup %p, deletes %d", (void *)dup, deletes);
    MPI_Comm_delete_attr(MPI_COMM_WORLD, key);
    MPI_Comm_free_keyval(&key);
    CHECK(deletes == 2 && key == MPI_KEYVAL_INVALID, "deletes %d", deletes);

    MPI_Finalize();
    if (failures == 0) printf("objects: rank %d of %d ok\n", rank, size);
    return failures != 0;
}
