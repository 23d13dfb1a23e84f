/* MPI_THREAD_SERIALIZED through the C ABI: calls come from several threads, one at a time
 * (the program orders them with joins and a mutex). Prints "threads: rank R of N ok" when
 * every check held. Weft's own test program. */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>

static int rank, size, failures = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* One ring step from this thread: send our rank to the next, receive the previous one's. */
static void *ring_step(void *arg) {
    int tag = *(int *)arg, got = -1;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    pthread_mutex_lock(&lock);
    MPI_Request r;
    MPI_Irecv(&got, 1, MPI_INT, prev, tag, MPI_COMM_WORLD, &r);
    MPI_Send(&rank, 1, MPI_INT, next, tag, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    int main_thread;
    MPI_Is_thread_main(&main_thread);
    pthread_mutex_unlock(&lock);
    if (got != prev || main_thread) {
        printf("threads: FAIL tag %d got %d (wanted %d), is_thread_main %d\n", tag, got, prev, main_thread);
        failures++;
    }
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided != MPI_THREAD_SERIALIZED) {
        printf("threads: FAIL provided %d\n", provided);
        failures++;
    }
    /* Three threads one after another, each a ring step, then the main thread again. */
    for (int t = 0; t < 3; t++) {
        pthread_t th;
        int tag = 20 + t;
        pthread_create(&th, NULL, ring_step, &tag);
        pthread_join(th, NULL);
    }
    int sum = 0;
    MPI_Allreduce(&failures, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    if (sum == 0) printf("threads: rank %d of %d ok\n", rank, size);
    return sum != 0;
}
