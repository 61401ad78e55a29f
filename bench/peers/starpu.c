/*
 * starpu.c: the forksafe-bench workloads on StarPU (Debian libstarpu-dev):
 * vars are data handles with the void interface (no memory, dependencies
 * only), each op a task with STARPU_R / STARPU_RW modes and StarPU's
 * implicit sequential-consistency dependencies; one wait
 * (starpu_task_wait_for_all) per run. CPU workers: STARPU_NCPU, set by
 * bench-vs-peers.sh to the same count as forksafe's compute workers; the
 * pushing thread is the program's main thread (indep-2t: two pthreads).
 *
 * Before timing, each workload runs once with a checking body and the
 * dependency order is compared with the serial order (common.h); a
 * violation exits 1.
 *
 *   starpu [--reps N] [--workers N] WORKLOAD...   (--workers is informational:
 *   StarPU reads STARPU_NCPU)
 */
#include "common.h"
#include <pthread.h>
#include <starpu.h>

/* What a checking task needs: its op index and the vars it names. */
struct rec {
    int i, n, vars[3];
};
static struct rec recs[OPS];
static starpu_data_handle_t handles[INDEP_VARS];

static void empty_fn(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
}

static void busy_fn(void *buffers[], void *arg) {
    (void)buffers;
    (void)arg;
    busy_2us();
}

static void check_fn(void *buffers[], void *arg) {
    (void)buffers;
    struct rec *r = arg;
    for (int k = 0; k < r->n; k++)
        seen[r->i][k] = __atomic_load_n(&version[r->vars[k]], __ATOMIC_RELAXED);
    __atomic_store_n(&version[r->vars[r->n - 1]], seen[r->i][r->n - 1] + 1, __ATOMIC_RELAXED);
}

#define CODELET(NAME, FN, N, ...)                                                               \
    static struct starpu_codelet NAME = {                                                       \
        .cpu_funcs = {FN}, .nbuffers = N, .modes = {__VA_ARGS__}, .name = #NAME}
CODELET(w1_empty, empty_fn, 1, STARPU_RW);
CODELET(w1_check, check_fn, 1, STARPU_RW);
CODELET(dag_empty, empty_fn, 3, STARPU_R, STARPU_R, STARPU_RW);
CODELET(dag_busy, busy_fn, 3, STARPU_R, STARPU_R, STARPU_RW);
CODELET(dag_check, check_fn, 3, STARPU_R, STARPU_R, STARPU_RW);

static int checking;

static void submit(int i, int n, int a, int b, int c, int busy) {
    struct starpu_task *t = starpu_task_create();
    int vars[3] = {a, b, c};
    for (int k = 0; k < n; k++) t->handles[k] = handles[vars[k]];
    if (checking) {
        recs[i] = (struct rec){i, n, {a, b, c}};
        t->cl = n == 1 ? &w1_check : &dag_check;
        t->cl_arg = &recs[i];
    } else {
        t->cl = n == 1 ? &w1_empty : busy ? &dag_busy : &dag_empty;
    }
    if (starpu_task_submit(t) != 0) {
        fprintf(stderr, "starpu: task submission failed\n");
        exit(1);
    }
}

struct span {
    int n, base, nvars, index0;
};

static void push_indep(const struct span *s) {
    for (int j = 0; j < s->n; j++) submit(s->index0 + j, 1, s->base + j % s->nvars, 0, 0, 0);
}

static void *pusher(void *arg) {
    push_indep(arg);
    return NULL;
}

static double run(const char *w, int ops) {
    double t0 = now_s();
    if (!strcmp(w, "chain")) {
        for (int i = 0; i < ops; i++) submit(i, 1, 0, 0, 0, 0);
    } else if (!strcmp(w, "dag") || !strcmp(w, "dag-2us")) {
        int busy = strcmp(w, "dag") != 0;
        for (int i = 0; i < ops; i++)
            submit(i, 3, dag_pick[i][0], dag_pick[i][1], dag_pick[i][2], busy);
    } else if (!strcmp(w, "indep-2t")) {
        pthread_t t[2];
        struct span s[2];
        for (int k = 0; k < 2; k++) {
            s[k] = (struct span){ops / 2, k * (INDEP_VARS / 2), INDEP_VARS / 2, k * (ops / 2)};
            pthread_create(&t[k], NULL, pusher, &s[k]);
        }
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    } else {
        struct span s = {ops, 0, INDEP_VARS, 0};
        push_indep(&s);
    }
    starpu_task_wait_for_all();
    return now_s() - t0;
}

int main(int argc, char **argv) {
    struct args a = parse(argc, argv, "starpu");
    if (starpu_init(NULL) != 0) {
        fprintf(stderr, "starpu: starpu_init failed\n");
        return 1;
    }
    fprintf(stderr, "starpu: %u CPU workers (STARPU_NCPU), --workers %d\n",
            starpu_cpu_worker_get_count(), a.workers);
    for (int i = 0; i < INDEP_VARS; i++) starpu_void_data_register(&handles[i]);
    make_dag();
    run("indep", 1000); /* warm-up */
    int rc = check_then_time("starpu", argc, argv, a, run, &checking);
    for (int i = 0; i < INDEP_VARS; i++) starpu_data_unregister(handles[i]);
    starpu_shutdown();
    return rc;
}
