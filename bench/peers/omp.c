/*
 * omp.c: the forksafe-bench workloads as OpenMP tasks with `depend`
 * clauses, built twice by scripts/bench-vs-peers.sh: with gcc (libgomp) and
 * with clang (LLVM libomp). One parallel region of `--workers` threads per
 * run; one thread (`single`) pushes every task and, like every OpenMP
 * program, also runs tasks at the end (libgomp also runs a task inline on
 * the pushing thread when its queue is long: that is its "undeferred" path).
 * indep-2t: two threads of the team push, 512 vars each.
 *
 * Before timing, each workload runs once with a checking body and the
 * dependency order is compared with the serial order (common.h); a
 * violation exits 1. Timed runs use an empty body (dag-2us: 2 µs busy).
 *
 *   omp [--reps N] [--workers N] WORKLOAD...
 * prints RESULT lines with engine=libgomp or engine=libomp.
 */
#include "common.h"
#include <omp.h>

#ifdef __clang__
#define ENGINE "libomp"
#else
#define ENGINE "libgomp"
#endif

/* The dependence objects: one byte per var, distinct addresses. */
static char var_tag[INDEP_VARS];
static int checking;
static int workers = 2;

static inline void body(int i, int n, int a, int b, int c, int busy) {
    if (checking) {
        int vars[3] = {a, b, c};
        for (int k = 0; k < n; k++)
            seen[i][k] = __atomic_load_n(&version[vars[k]], __ATOMIC_RELAXED);
        __atomic_store_n(&version[vars[n - 1]], seen[i][n - 1] + 1, __ATOMIC_RELAXED);
    }
    if (busy) busy_2us();
}

static void push_indep(int n, int base, int nvars, int index0) {
    for (int j = 0; j < n; j++) {
        int v = base + j % nvars, i = index0 + j;
#pragma omp task firstprivate(v, i) depend(inout : var_tag[v])
        body(i, 1, v, 0, 0, 0);
    }
}

static void push_all(const char *w, int ops) {
    if (!strcmp(w, "chain")) {
        for (int i = 0; i < ops; i++) {
#pragma omp task firstprivate(i) depend(inout : var_tag[0])
            body(i, 1, 0, 0, 0, 0);
        }
    } else if (!strcmp(w, "dag") || !strcmp(w, "dag-2us")) {
        int busy = strcmp(w, "dag") != 0;
        for (int i = 0; i < ops; i++) {
            int a = dag_pick[i][0], b = dag_pick[i][1], c = dag_pick[i][2];
#pragma omp task firstprivate(i, a, b, c, busy) depend(in : var_tag[a], var_tag[b]) \
    depend(inout : var_tag[c])
            body(i, 3, a, b, c, busy);
        }
    } else {
        push_indep(ops, 0, INDEP_VARS, 0);
    }
#pragma omp taskwait
}

static double run(const char *w, int ops) {
    double t0 = now_s();
    if (!strcmp(w, "indep-2t")) {
#pragma omp parallel num_threads(workers > 1 ? workers : 2)
        {
            int t = omp_get_thread_num();
            if (t < 2) {
                push_indep(ops / 2, t * (INDEP_VARS / 2), INDEP_VARS / 2, t * (ops / 2));
#pragma omp taskwait
            }
        }
    } else {
#pragma omp parallel num_threads(workers)
#pragma omp single
        push_all(w, ops);
    }
    return now_s() - t0;
}

int main(int argc, char **argv) {
    struct args a = parse(argc, argv, "omp");
    workers = a.workers;
    make_dag();
    run("indep", OPS); /* warm-up: start the team */
    return check_then_time(ENGINE, argc, argv, a, run, &checking);
}
