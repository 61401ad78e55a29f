/*
 * common.h: what the peer harnesses (omp.c, starpu.c) share with
 * forksafe-bench: the workloads' sizes, the dag's var picks (the same
 * xorshift64 stream as bench/src/workloads.rs), the 2 µs body, clocks, the
 * command line and the RESULT line bench-vs-peers.sh parses.
 *
 * Workloads (as forksafe-bench): indep (op i writes var i % 1024), chain
 * (every op writes var 0), dag (reads two of 64 vars, writes a third),
 * dag-2us (dag with a 2 µs busy body), indep-2t (indep from two pushing
 * threads, 512 vars each), queue-10k and queue-1m (indep with 10 000 and
 * 1 000 000 ops pushed before the one wait: is the cost per op linear?).
 */
#ifndef FORKSAFE_PEERS_COMMON_H
#define FORKSAFE_PEERS_COMMON_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define OPS 200000
#define MAX_OPS 1000000
#define INDEP_VARS 1024
#define DAG_VARS 64

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system CPU time of the whole process (all threads). */
static inline double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

/* A 2 microsecond busy body, as forksafe-bench's. */
static inline void busy_2us(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 2000);
}

/* The dag workload's var picks: two reads, then the write. */
static uint8_t dag_pick[OPS][3] __attribute__((unused));

static inline void make_dag(void) {
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < OPS; i++) {
        int n = 0;
        while (n < 3) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            uint8_t v = (uint8_t)(s % DAG_VARS);
            int dup = 0;
            for (int k = 0; k < n; k++) dup |= dag_pick[i][k] == v;
            if (!dup) dag_pick[i][n++] = v;
        }
    }
}

/* Ops of workload `w`, or 0 if unknown. */
static inline int workload_ops(const char *w) {
    if (!strcmp(w, "queue-10k")) return 10000;
    if (!strcmp(w, "queue-1m")) return MAX_OPS;
    const char *known[] = {"indep", "chain", "dag", "dag-2us", "indep-2t"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(w, known[i])) return OPS;
    return 0;
}

/* Dependency-order check: every op records, when it runs, the version of
 * each var it names; a write bumps its var. A run obeys the dependencies iff
 * each op saw exactly the versions the serial order gives. */
static uint32_t version[INDEP_VARS] __attribute__((unused));
static uint32_t seen[OPS][3] __attribute__((unused));

/* What the serial order says op i of `w` sees, per named var; returns the
 * number of vars (reads first, the write last). */
static inline int expected(const char *w, int i, uint32_t *serial, uint32_t out[3], int vars[3]) {
    int n;
    if (!strcmp(w, "chain")) {
        vars[0] = 0;
        n = 1;
    } else if (!strcmp(w, "dag") || !strcmp(w, "dag-2us")) {
        for (int k = 0; k < 3; k++) vars[k] = dag_pick[i][k];
        n = 3;
    } else if (!strcmp(w, "indep-2t")) {
        /* Thread t pushes ops t*OPS/2 .. on vars t*512 + j % 512. */
        int half = OPS / 2, t = i / half, j = i % half;
        vars[0] = t * (INDEP_VARS / 2) + j % (INDEP_VARS / 2);
        n = 1;
    } else {
        vars[0] = i % INDEP_VARS;
        n = 1;
    }
    for (int k = 0; k < n; k++) out[k] = serial[vars[k]];
    serial[vars[n - 1]]++;
    return n;
}

/* Compares what each op saw with the serial order; prints and returns the
 * number of ops that saw something else. */
static inline int check_order(const char *engine, const char *w, int ops) {
    static uint32_t serial[INDEP_VARS];
    memset(serial, 0, sizeof serial);
    int bad = 0;
    for (int i = 0; i < ops; i++) {
        uint32_t want[3];
        int vars[3];
        int n = expected(w, i, serial, want, vars);
        for (int k = 0; k < n; k++) bad += seen[i][k] != want[k];
    }
    fprintf(stderr, "%s: %s: dependency order %s (%d ops checked)\n", engine, w,
            bad ? "VIOLATED" : "ok", ops);
    return bad;
}

static inline void result(const char *engine, const char *w, int ops, double s, double c) {
    printf("RESULT engine=%s workload=%s ops=%d seconds=%.6f cpu_seconds=%.6f\n", engine, w, ops,
           s, c);
    fflush(stdout);
}

/* `harness [--reps N] [--workers N] WORKLOAD...` */
struct args {
    int reps, workers, first;
};

static inline struct args parse(int argc, char **argv, const char *name) {
    struct args a = {1, 2, 1};
    while (a.first + 1 < argc && !strncmp(argv[a.first], "--", 2)) {
        if (!strcmp(argv[a.first], "--reps"))
            a.reps = atoi(argv[a.first + 1]);
        else if (!strcmp(argv[a.first], "--workers"))
            a.workers = atoi(argv[a.first + 1]);
        else
            break;
        a.first += 2;
    }
    int ok = a.first < argc && a.reps > 0 && a.workers > 0;
    for (int i = a.first; ok && i < argc; i++) ok = workload_ops(argv[i]) > 0;
    if (!ok) {
        fprintf(stderr,
                "usage: %s [--reps N] [--workers N] WORKLOAD...\n"
                "  workloads: indep chain dag dag-2us indep-2t queue-10k queue-1m\n",
                name);
        exit(2);
    }
    return a;
}

/* The harness's main loop: runs every workload named on the command line
 * once with `*checking` set and compares the order with the serial one (a
 * violation: exit code 1, nothing timed), then `reps` timed runs of each,
 * one RESULT line per run. `run` pushes a workload's ops and waits. */
static inline int check_then_time(const char *engine, int argc, char **argv, struct args a,
                                  double (*run)(const char *, int), int *checking) {
    int bad = 0;
    for (int k = a.first; k < argc; k++) {
        int ops = workload_ops(argv[k]);
        if (ops > OPS) continue; /* queue-1m: the shape of queue-10k, checked there */
        memset(version, 0, sizeof version);
        *checking = 1;
        run(argv[k], ops);
        *checking = 0;
        bad += check_order(engine, argv[k], ops);
    }
    for (int k = a.first; !bad && k < argc; k++) {
        int ops = workload_ops(argv[k]);
        for (int r = 0; r < a.reps; r++) {
            double c0 = cpu_s();
            double s = run(argv[k], ops);
            result(engine, argv[k], ops, s, cpu_s() - c0);
        }
    }
    return bad ? 1 : 0;
}

#endif
