/*
 * harness.c: the forksafe-bench workloads on MXNet 1.9.1's engine, through
 * its public C API (MXEnginePushSyncND, MXNDArrayWaitAll; vars are NDArrays
 * from MXNDArrayCreate with delay_alloc, so no memory is touched).
 *
 * The C API headers are not in the PyPI wheel, so the few prototypes used
 * are declared here (from include/mxnet/c_api.h, MXNet 1.9.1).
 *
 * Build and run: see scripts/bench-vs-mxnet.sh. Usage:
 *   harness [--reps N] WORKLOAD...    (indep chain dag dag-2us indep-2t)
 * Prints one line per timed run:
 *   RESULT engine=mxnet workload=W ops=N seconds=S cpu_seconds=C
 * (C: user + system CPU time of the whole process during the run). Sizes,
 * the dag picks, the 2 µs body and the clocks are bench/peers/common.h,
 * shared with the other peer harnesses.
 */
#include "../peers/common.h"
#include <pthread.h>

typedef void *NDArrayHandle;
typedef const void *ContextHandle;
typedef const void *EngineFnPropertyHandle;
typedef void (*EngineSyncFunc)(void *rctx, void *param);
typedef void (*EngineFuncParamDeleter)(void *param);

/* mxnet::Context: a DeviceType enum (kCPU = 1) and an int32 device id. */
struct MXContext {
    int dev_type;
    int32_t dev_id;
};

extern int MXEnginePushSyncND(EngineSyncFunc sync_func, void *func_param,
                              EngineFuncParamDeleter deleter, ContextHandle ctx_handle,
                              NDArrayHandle *const_nds_handle, int num_const_nds,
                              NDArrayHandle *mutable_nds_handle, int num_mutable_nds,
                              EngineFnPropertyHandle prop_handle, int priority,
                              const char *opr_name);
extern int MXNDArrayCreate(const uint32_t *shape, uint32_t ndim, int dev_type, int dev_id,
                           int delay_alloc, NDArrayHandle *out);
extern int MXNDArrayFree(NDArrayHandle handle);
extern int MXNDArrayWaitAll(void);
extern int MXEngineSetBulkSize(int bulk_size, int *prev_bulk_size);
extern const char *MXGetLastError(void);

static const struct MXContext CPU = {1, 0};

static void check(int rc, const char *what) {
    if (rc != 0) {
        fprintf(stderr, "harness: %s failed: %s\n", what, MXGetLastError());
        exit(1);
    }
}

static void empty_body(void *rctx, void *param) {
    (void)rctx;
    (void)param;
}

/* The 2 µs body (common.h) as an MXNet sync function. */
static void busy_body(void *rctx, void *param) {
    (void)rctx;
    (void)param;
    busy_2us();
}

static NDArrayHandle new_var(void) {
    uint32_t shape[1] = {1};
    NDArrayHandle h;
    check(MXNDArrayCreate(shape, 1, 1, 0, 1, &h), "MXNDArrayCreate");
    return h;
}

static void push(EngineSyncFunc f, NDArrayHandle *reads, int nreads, NDArrayHandle *writes,
                 int nwrites) {
    check(MXEnginePushSyncND(f, NULL, NULL, &CPU, reads, nreads, writes, nwrites, NULL, 0, "op"),
          "MXEnginePushSyncND");
}

static NDArrayHandle vars[INDEP_VARS];

static void run_indep_range(int from, int to, int var_base, int nvars) {
    for (int i = from; i < to; i++) push(empty_body, NULL, 0, &vars[var_base + i % nvars], 1);
}

struct span {
    int from, to, base, nvars;
};

static void *pusher(void *arg) {
    struct span *s = arg;
    run_indep_range(s->from, s->to, s->base, s->nvars);
    return NULL;
}

static double run(const char *w) {
    double t0 = now_s();
    if (!strcmp(w, "indep")) {
        run_indep_range(0, OPS, 0, INDEP_VARS);
    } else if (!strcmp(w, "chain")) {
        for (int i = 0; i < OPS; i++) push(empty_body, NULL, 0, &vars[0], 1);
    } else if (!strcmp(w, "dag") || !strcmp(w, "dag-2us")) {
        EngineSyncFunc f = strcmp(w, "dag") ? busy_body : empty_body;
        for (int i = 0; i < OPS; i++) {
            NDArrayHandle r[2] = {vars[dag_pick[i][0]], vars[dag_pick[i][1]]};
            push(f, r, 2, &vars[dag_pick[i][2]], 1);
        }
    } else if (!strcmp(w, "indep-2t")) {
        pthread_t t[2];
        struct span s[2] = {{0, OPS / 2, 0, INDEP_VARS / 2},
                            {0, OPS / 2, INDEP_VARS / 2, INDEP_VARS / 2}};
        for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, pusher, &s[k]);
        for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    } else {
        fprintf(stderr, "harness: unknown workload %s\n", w);
        exit(2);
    }
    check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
    return now_s() - t0;
}

int main(int argc, char **argv) {
    int reps = 1, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--reps")) {
        reps = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || reps < 1) {
        fprintf(stderr, "usage: harness [--reps N] WORKLOAD...\n");
        return 2;
    }
    int prev = -1;
    check(MXEngineSetBulkSize(0, &prev), "MXEngineSetBulkSize");
    fprintf(stderr, "harness: engine bulk size was %d, set to 0\n", prev);
    for (int i = 0; i < INDEP_VARS; i++) vars[i] = new_var();
    make_dag();
    /* Warm-up: start the workers. */
    for (int i = 0; i < 1000; i++) push(empty_body, NULL, 0, &vars[i % INDEP_VARS], 1);
    check(MXNDArrayWaitAll(), "MXNDArrayWaitAll");
    for (int a = first; a < argc; a++) {
        for (int r = 0; r < reps; r++) {
            double c0 = cpu_s();
            double s = run(argv[a]);
            double c = cpu_s() - c0;
            printf("RESULT engine=mxnet workload=%s ops=%d seconds=%.6f cpu_seconds=%.6f\n", argv[a],
                   OPS, s, c);
            fflush(stdout);
        }
    }
    for (int i = 0; i < INDEP_VARS; i++) MXNDArrayFree(vars[i]);
    return 0;
}
