/*
 * processor_test: libgrove_processor.so driven from C as DeepRec's
 * end-to-end demo drives libserving_processor.so: dlopen, dlsym, then
 * initialize / process / batch_process / get_serving_model_info, with
 * every output buffer freed by the caller with free(). No Go here.
 *
 *   processor_test LIB DATA WORK full      8 threads x >= 1000 calls on a
 *       TorchScript and an ONNX model; while they run a broken version 2
 *       of each is dropped into the model directories (atomic rename),
 *       and version 1 keeps serving, then (after a chdir to "/", as a
 *       daemon makes, with run.sh's relative TMPDIR) a good version 3 (the
 *       test data's version 2), which takes over
 *   processor_test LIB DATA WORK short     a few calls of each kind (for
 *       valgrind memcheck)
 *   processor_test LIB DATA WORK short-onnx   the same on the ONNX model
 *       only, which never opens libtorch (for valgrind: see run.sh)
 *
 * DATA is processor/testdata/deeprec (make.py writes it: requests,
 * models and the outputs Python computes); WORK is an empty directory
 * holding the model directories (WORK/torch/1/, WORK/onnx/1/).
 *
 * Requests and responses are tensorflow.eas protobuf messages; the
 * requests come from make.py and responses are decoded here by hand
 * (PredictResponse: map<string, ArrayProto> outputs = 1).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#else
#define VALGRIND_CHECK_MEM_IS_ADDRESSABLE(addr, len) 0
#define VALGRIND_MAKE_MEM_DEFINED(addr, len) 0
#endif

/* DeepRec's processor.h. */
typedef void *(*initialize_fn)(const char *model_entry, const char *model_config, int *state);
typedef int (*process_fn)(void *model_buf, const void *input_data, int input_size, void **output_data, int *output_size);
typedef int (*batch_process_fn)(void *model_buf, const void *input_data[], int *input_size, void *output_data[], int *output_size);
typedef int (*get_serving_model_info_fn)(void *model_buf, void **output_data, int *output_size);

static initialize_fn initialize;
static process_fn lib_process;
static batch_process_fn lib_batch_process;
static get_serving_model_info_fn lib_get_serving_model_info;

/* settle checks that an output the library handed over is addressable for
 * its whole size (under valgrind; a real error if not), then tells memcheck
 * its bytes are defined: they were computed by Go, whose heap memcheck does
 * not track (it at times sees reused goroutine stack memory there as
 * undefined), so their definedness says nothing of the library. Outside
 * valgrind it does nothing. */
static void settle(const void *out, int size) {
    if (out == NULL || size <= 0) return;
    (void)VALGRIND_CHECK_MEM_IS_ADDRESSABLE(out, size);
    (void)VALGRIND_MAKE_MEM_DEFINED(out, size);
}

/* The library's calls, each settling what it hands over. */
static int process(void *model_buf, const void *input_data, int input_size, void **output_data, int *output_size) {
    int st = lib_process(model_buf, input_data, input_size, output_data, output_size);
    if (output_data != NULL && output_size != NULL) settle(*output_data, *output_size);
    return st;
}

static int batch_process(void *model_buf, const void *input_data[], int *input_size, void *output_data[], int *output_size) {
    int st = lib_batch_process(model_buf, input_data, input_size, output_data, output_size);
    for (int i = 0; output_data != NULL && input_data != NULL && input_data[i] != NULL; i++) settle(output_data[i], output_size[i]);
    return st;
}

static int get_serving_model_info(void *model_buf, void **output_data, int *output_size) {
    int st = lib_get_serving_model_info(model_buf, output_data, output_size);
    if (output_data != NULL && output_size != NULL) settle(*output_data, *output_size);
    return st;
}

static const char *data_dir, *work_dir;

#define FAIL(...) do { fprintf(stderr, "FAIL: " __VA_ARGS__); fputc('\n', stderr); exit(1); } while (0)

typedef struct {
    char *data;
    int size;
} buf_t;

static buf_t read_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) FAIL("open %s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf_t b = {malloc(n + 1), (int)n};
    if (fread(b.data, 1, n, f) != (size_t)n) FAIL("read %s", path);
    b.data[n] = 0;
    fclose(f);
    return b;
}

/* ---- expected outputs: "<name> <n> v1 ... vn" lines ---- */

#define MAX_OUTS 4
typedef struct {
    int n_outs;
    char name[MAX_OUTS][32];
    int n[MAX_OUTS];
    float *v[MAX_OUTS];
} expected_t;

static expected_t read_expected(const char *name) {
    buf_t b = read_file(data_dir, name);
    expected_t e = {0};
    char *p = b.data;
    while (*p && e.n_outs < MAX_OUTS) {
        int k = e.n_outs, used = 0;
        if (sscanf(p, "%31s %d%n", e.name[k], &e.n[k], &used) != 2) break;
        p += used;
        e.v[k] = malloc(sizeof(float) * e.n[k]);
        for (int i = 0; i < e.n[k]; i++) e.v[k][i] = strtof(p, &p);
        while (*p == '\n' || *p == ' ') p++;
        e.n_outs++;
    }
    free(b.data);
    return e;
}

static void free_expected(expected_t *e) {
    for (int i = 0; i < e->n_outs; i++) free(e->v[i]);
}

/* ---- protobuf decoding ---- */

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *p < end; s += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return 1;
    }
    return 0;
}

/* field reads one field: its number, wire type, and for a varint its
 * value, for a length-delimited field its bytes. */
static int field(const uint8_t **p, const uint8_t *end, int *num, int *wire, uint64_t *v, const uint8_t **bytes) {
    uint64_t key;
    if (!varint(p, end, &key)) return 0;
    *num = (int)(key >> 3);
    *wire = (int)(key & 7);
    switch (*wire) {
    case 0: return varint(p, end, v);
    case 2:
        if (!varint(p, end, v) || *v > (uint64_t)(end - *p)) return 0;
        *bytes = *p;
        *p += *v;
        return 1;
    case 5: if (end - *p < 4) return 0; *p += 4; return 1;
    case 1: if (end - *p < 8) return 0; *p += 8; return 1;
    }
    return 0;
}

typedef struct {
    char name[32];
    int dtype, n;
    float v[512];
} output_t;

/* decode_response reads a PredictResponse's float outputs; -1 if it is
 * not one. */
static int decode_response(const uint8_t *p, int size, output_t *outs, int max) {
    const uint8_t *end = p + size;
    int count = 0, num, wire;
    uint64_t v;
    const uint8_t *b;
    while (p < end) {
        if (!field(&p, end, &num, &wire, &v, &b)) return -1;
        if (num != 1 || wire != 2 || count == max) return -1;
        output_t *o = &outs[count++];
        memset(o, 0, sizeof *o);
        const uint8_t *q = b, *qend = b + v;
        while (q < qend) {
            uint64_t w;
            const uint8_t *c;
            if (!field(&q, qend, &num, &wire, &w, &c)) return -1;
            if (num == 1 && wire == 2) {
                snprintf(o->name, sizeof o->name, "%.*s", (int)w, c);
            } else if (num == 2 && wire == 2) { /* ArrayProto */
                const uint8_t *r = c, *rend = c + w;
                while (r < rend) {
                    uint64_t x;
                    const uint8_t *d;
                    if (!field(&r, rend, &num, &wire, &x, &d)) return -1;
                    if (num == 1 && wire == 0) o->dtype = (int)x;
                    if (num == 3 && wire == 2) { /* packed float_val */
                        if (x % 4 || x / 4 > 512) return -1;
                        o->n = (int)(x / 4);
                        memcpy(o->v, d, x);
                    }
                }
            }
        }
    }
    return count;
}

/* matches reports whether a response's outputs are e's, each value
 * within 1e-5. */
static int matches(const output_t *outs, int n, const expected_t *e) {
    if (n != e->n_outs) return 0;
    for (int k = 0; k < e->n_outs; k++) {
        const output_t *o = NULL;
        for (int i = 0; i < n; i++)
            if (!strcmp(outs[i].name, e->name[k])) o = &outs[i];
        if (!o || o->dtype != 1 || o->n != e->n[k]) return 0;
        for (int i = 0; i < o->n; i++)
            if (fabsf(o->v[i] - e->v[k][i]) > 1e-5f) return 0;
    }
    return 1;
}

/* ---- the two processors and their requests ---- */

typedef struct {
    const char *kind;
    void *model;
    buf_t req[3];           /* b1, b64, b1 with output_filter ["y"] (onnx) */
    expected_t exp[2][3];   /* [data version-1][request] */
    atomic_long ok_v[2];    /* calls answered by data version 1, 2 (served as 3) */
} model_t;

static model_t models[2];
static atomic_long failed, calls;
static atomic_int swapped; /* version 3 of both models serves */

static const char *req_names[3] = {"req_b1.bin", "req_b64.bin", "req_b1_y.bin"};

static void load_model_data(model_t *m, const char *kind) {
    m->kind = kind;
    for (int r = 0; r < 3; r++) m->req[r] = read_file(data_dir, req_names[r]);
    for (int v = 0; v < 2; v++) {
        for (int r = 0; r < 2; r++) {
            char name[256];
            snprintf(name, sizeof name, "expected_%s_v%d_%s.txt", kind, v + 1, r ? "b64" : "b1");
            m->exp[v][r] = read_expected(name);
        }
        /* output_filter ["y"]: only y */
        expected_t *f = &m->exp[v][2];
        *f = m->exp[v][0];
        f->n_outs = 0;
        for (int k = 0; k < m->exp[v][0].n_outs; k++)
            if (!strcmp(m->exp[v][0].name[k], "y")) {
                memmove(f->name[0], m->exp[v][0].name[k], 32);
                f->n[0] = m->exp[v][0].n[k];
                f->v[0] = m->exp[v][0].v[k];
                f->n_outs = 1;
            }
    }
}

/* call sends request r to m and checks the answer against either
 * version; it returns the version (1, 2) or 0 on a failure. */
static int call(model_t *m, int r) {
    void *out = NULL;
    int size = 0;
    int st = process(m->model, m->req[r].data, m->req[r].size, &out, &size);
    atomic_fetch_add(&calls, 1);
    int version = 0;
    if (st != 200) {
        fprintf(stderr, "%s request %d: status %d: %.*s\n", m->kind, r, st, size, (char *)out);
    } else {
        output_t outs[MAX_OUTS];
        int n = decode_response(out, size, outs, MAX_OUTS);
        for (int v = 0; v < 2 && !version; v++)
            if (matches(outs, n, &m->exp[v][r])) version = v + 1;
        if (!version) fprintf(stderr, "%s request %d: outputs match neither version (%d outputs)\n", m->kind, r, n);
    }
    free(out);
    if (!version) atomic_fetch_add(&failed, 1);
    else atomic_fetch_add(&m->ok_v[version - 1], 1);
    return version;
}

static int n_calls = 1000;

static void *worker(void *arg) {
    long id = (long)arg;
    for (int i = 0; i < n_calls || !atomic_load(&swapped); i++) {
        model_t *m = &models[(id + i) % 2];
        int r = (i / 2) % (m == &models[1] ? 3 : 2);
        call(m, r);
    }
    return NULL;
}

/* ---- the C API's other calls ---- */

/* serving_version returns the version get_serving_model_info reports. */
static int serving_version(model_t *m, char *checksum, size_t cap) {
    void *out = NULL;
    int size = 0;
    int st = get_serving_model_info(m->model, &out, &size);
    if (st != 200) FAIL("get_serving_model_info(%s): %d: %.*s", m->kind, st, size, (char *)out);
    const uint8_t *p = out, *end = p + size;
    int num, wire, version = 0, has_path = 0;
    uint64_t v;
    const uint8_t *b;
    while (p < end) {
        if (!field(&p, end, &num, &wire, &v, &b)) FAIL("get_serving_model_info(%s): not a ServingModelInfo", m->kind);
        if (num == 1 && wire == 2) has_path = v > 0;
        if (num == 100 && wire == 2) {
            char text[16] = {0};
            memcpy(text, b, v < 15 ? v : 15);
            version = atoi(text);
        }
        if (num == 101 && wire == 2 && checksum) snprintf(checksum, cap, "%.*s", (int)v, b);
    }
    if (!has_path) FAIL("get_serving_model_info(%s): no model_path", m->kind);
    free(out);
    return version;
}

static void check_signature(model_t *m) {
    void *out = NULL;
    int size = 0;
    int st = process(m->model, "", 0, &out, &size);
    if (st != 200 || !memmem(out, size, "\"x\"", 3) || !memmem(out, size, "serving_default", 15))
        FAIL("process(%s, input_size 0): %d %.*s, want the signature JSON", m->kind, st, size, (char *)out);
    printf("signature of %s: %.*s\n", m->kind, size, (char *)out);
    free(out);
}

static void check_errors(model_t *m) {
    void *out = NULL;
    int size = 0;
    int st = process(m->model, "\xff\xff\xff", 3, &out, &size);
    if (st != 500 || size == 0) FAIL("process(%s, garbage) = %d, want 500 with the error text", m->kind, st);
    printf("garbage request: %d %.*s\n", st, size, (char *)out);
    free(out);
    st = process(NULL, m->req[0].data, m->req[0].size, &out, &size);
    if (st != 500) FAIL("process(NULL model) = %d, want 500", st);
    free(out);
}

static void check_batch(model_t *m) {
    const void *in[3] = {m->req[0].data, m->req[1].data, NULL};
    int in_size[2] = {m->req[0].size, m->req[1].size};
    void *out[2] = {0};
    int out_size[2] = {0};
    int st = batch_process(m->model, in, in_size, out, out_size);
    if (st != 200) FAIL("batch_process(%s) = %d", m->kind, st);
    for (int r = 0; r < 2; r++) {
        output_t outs[MAX_OUTS];
        int n = decode_response(out[r], out_size[r], outs, MAX_OUTS);
        if (!matches(outs, n, &m->exp[0][r]) && !matches(outs, n, &m->exp[1][r]))
            FAIL("batch_process(%s) output %d is not the model's", m->kind, r);
        free(out[r]);
    }
}

static void *init_model(model_t *m, const char *extra) {
    char config[4096];
    snprintf(config, sizeof config,
             "{\"omp_num_threads\": 1, \"kmp_blocktime\": 0, \"feature_store_type\": \"local\", \"serialize_protocol\": \"protobuf\","
             " \"inter_op_parallelism_threads\": 2, \"intra_op_parallelism_threads\": 1, \"init_timeout_minutes\": 2,"
             " \"signature_name\": \"serving_default\", \"model_store_type\": \"local\", \"session_num\": 2,"
             " \"checkpoint_dir\": \"%s/%s/\", \"savedmodel_dir\": \"%s/%s/\", \"grove_poll_interval\": \"1s\", \"grove_gomaxprocs\": 2%s}",
             work_dir, m->kind, work_dir, m->kind, extra);
    int state = -1;
    m->model = initialize("", config, &state);
    if (state != 0 || !m->model) FAIL("initialize(%s) state %d", m->kind, state);
    return m->model;
}

/* check_refusals: configs initialize must refuse, with state -1 and NULL. */
static void check_refusals(void) {
    char tf[4096], config[8192];
    snprintf(tf, sizeof tf, "%s/tf_saved_model", work_dir);
    mkdir(tf, 0755);
    char pb[4200];
    snprintf(pb, sizeof pb, "%s/saved_model.pb", tf);
    FILE *f = fopen(pb, "wb");
    fputs("\x08\x01", f);
    fclose(f);
    const char *bad[] = {
        "{\"model_store_type\": \"oss\", \"checkpoint_dir\": \"oss://b/m/\"}",
        "{\"savedmodel_dir\": \"/m/p\", \"feature_store_type\": \"redis\"}",
        "{\"savedmodel_dir\": \"/m/p\", \"no_such_key\": 1}",
        NULL, /* the TensorFlow SavedModel */
    };
    for (int i = 0; i < 4; i++) {
        const char *c = bad[i];
        if (!c) {
            snprintf(config, sizeof config, "{\"savedmodel_dir\": \"%s\", \"init_timeout_minutes\": 1}", tf);
            c = config;
        }
        int state = 0;
        void *h = initialize("", c, &state);
        if (h || state != -1) FAIL("initialize(%s) = %p, state %d; want NULL and -1", c, h, state);
    }
}

/* copy_version drops version 2 of kind's test data into WORK/kind/V by
 * writing it elsewhere and renaming it in, as TF Serving and DeepRec
 * expect; broken drops a file that is no model instead. */
static void copy_version(const char *kind, const char *file, int v, int broken) {
    char src[4096], tmp[4096], dst[8192];
    snprintf(src, sizeof src, "%s/2/%s", kind, file);
    buf_t b = read_file(data_dir, src);
    snprintf(tmp, sizeof tmp, "%s/%s.upload-%d", work_dir, kind, v);
    mkdir(tmp, 0755);
    snprintf(dst, sizeof dst, "%s/%s", tmp, file);
    FILE *f = fopen(dst, "wb");
    if (broken) {
        static const char junk[] = "not a model";
        if (!f || fwrite(junk, 1, sizeof junk, f) != sizeof junk || fclose(f)) FAIL("writing %s", dst);
    } else if (!f || fwrite(b.data, 1, b.size, f) != (size_t)b.size || fclose(f)) {
        FAIL("writing %s", dst);
    }
    free(b.data);
    snprintf(dst, sizeof dst, "%s/%s/%d", work_dir, kind, v);
    if (rename(tmp, dst)) FAIL("rename %s %s: %s", tmp, dst, strerror(errno));
}

static void cleanup(void) {
    for (int i = 0; i < 2; i++) {
        for (int r = 0; r < 3; r++) free(models[i].req[r].data);
        for (int v = 0; v < 2; v++)
            for (int r = 0; r < 2; r++) free_expected(&models[i].exp[v][r]);
    }
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 5) FAIL("usage: %s LIB DATA WORK full|short|short-onnx", argv[0]);
    data_dir = argv[2];
    work_dir = argv[3];
    int full = !strcmp(argv[4], "full");
    /* first: the first model used (1: ONNX only) */
    int first = !strcmp(argv[4], "short-onnx");
    if (!full && !first && strcmp(argv[4], "short")) FAIL("unknown mode %s: want full, short or short-onnx", argv[4]);
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (!lib) FAIL("dlopen: %s", dlerror());
    initialize = (initialize_fn)dlsym(lib, "initialize");
    lib_process = (process_fn)dlsym(lib, "process");
    lib_batch_process = (batch_process_fn)dlsym(lib, "batch_process");
    lib_get_serving_model_info = (get_serving_model_info_fn)dlsym(lib, "get_serving_model_info");
    if (!initialize || !lib_process || !lib_batch_process || !lib_get_serving_model_info) FAIL("dlsym: %s", dlerror());

    load_model_data(&models[0], "torch");
    load_model_data(&models[1], "onnx");
    /* TorchScript: DeepRec's warm-up file (its path is model_entry +
     * warmup_file_name), sessions by calling thread. ONNX: no file, so
     * a request of ones warms it; sessions in turn. */
    char extra[4200];
    snprintf(extra, sizeof extra, ", \"warmup_file_name\": \"%s/warm_up.bin\", \"select_session_policy\": \"MOD\"", data_dir);
    if (!first) init_model(&models[0], extra);
    init_model(&models[1], ", \"select_session_policy\": \"RR\", \"cpusets\": \"0;1\"");
    char sum1[128];
    for (int i = first; i < 2; i++) {
        if (serving_version(&models[i], sum1, sizeof sum1) != 1) FAIL("%s: version 1 does not serve", models[i].kind);
        check_signature(&models[i]);
        check_errors(&models[i]);
        check_batch(&models[i]);
    }
    check_refusals();

    if (!full) {
        for (int i = 0; i < 4; i++) {
            int m = first ? 1 : i % 2;
            for (int r = 0; r < 3; r++) call(&models[m], r % (m ? 3 : 2));
        }
        if (atomic_load(&failed)) FAIL("%ld failed calls", atomic_load(&failed));
        printf("short run: %ld calls, 0 failed\n", atomic_load(&calls));
        cleanup();
        return 0;
    }

    atomic_store(&swapped, 0);
    pthread_t th[8];
    double start = now();
    for (long i = 0; i < 8; i++) pthread_create(&th[i], NULL, worker, (void *)i);
    /* Once the threads are under way, a broken version 2 of each model is
     * dropped in: for three polls (grove_poll_interval 1s) version 1 keeps
     * serving every call. Then version 3 (the test data's version 2). */
    while (atomic_load(&calls) < 800) usleep(1000);
    copy_version("torch", "model.pt", 2, 1);
    copy_version("onnx", "model.onnx", 2, 1);
    double broken = now();
    while (now() - broken < 3.5) {
        for (int i = 0; i < 2; i++)
            if (serving_version(&models[i], NULL, 0) != 1) FAIL("%s: version 1 stopped serving after a broken version 2 was dropped in", models[i].kind);
        usleep(10000);
    }
    if (atomic_load(&failed)) FAIL("%ld failed calls with a broken version 2 in the directory", atomic_load(&failed));
    /* A host that changes its working directory after initialize (as a
     * daemon does, to "/"): run.sh gives a relative TMPDIR, and the model
     * caches must still take version 3 and be removed at exit. */
    if (chdir("/")) FAIL("chdir /: %s", strerror(errno));
    copy_version("torch", "model.pt", 3, 0);
    copy_version("onnx", "model.onnx", 3, 0);
    double dropped = now();
    while (now() - dropped < 60) {
        if (serving_version(&models[0], NULL, 0) == 3 && serving_version(&models[1], NULL, 0) == 3) break;
        usleep(10000);
    }
    double swap = now() - dropped;
    /* A few more calls by every thread after the swap, then they stop. */
    long at_swap = atomic_load(&calls);
    while (atomic_load(&calls) < at_swap + 400) usleep(1000);
    atomic_store(&swapped, 1);
    for (int i = 0; i < 8; i++) pthread_join(th[i], NULL);
    double secs = now() - start;
    char sum2[128];
    for (int i = 0; i < 2; i++) {
        model_t *m = &models[i];
        if (serving_version(m, sum2, sizeof sum2) != 3) FAIL("%s: version 3 does not serve %.0f s after it was dropped in", m->kind, swap);
        if (call(m, 0) != 2) FAIL("%s: after the swap a call is not answered by version 3", m->kind);
        printf("%s: %ld calls answered by version 1, %ld by version 3\n", m->kind, atomic_load(&m->ok_v[0]), atomic_load(&m->ok_v[1]));
        if (!atomic_load(&m->ok_v[0]) || !atomic_load(&m->ok_v[1])) FAIL("%s: the swap did not happen while the threads ran", m->kind);
    }
    if (!strcmp(sum1, sum2)) FAIL("the checksum did not change with the version");
    printf("full run: 8 threads, %ld calls in %.2f s (a broken version 2 ignored for 3.5 s), version 3 serving %.2f s after it was dropped in, %ld failed\n",
           atomic_load(&calls), secs, swap, atomic_load(&failed));
    if (atomic_load(&failed)) FAIL("%ld failed calls", atomic_load(&failed));
    cleanup();
    return 0;
}
