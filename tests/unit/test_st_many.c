/*
 * test_st_many.c - a valid safetensors file of 300,000 tensors (a header of
 * 20 MB, written here, not kept) opens (issue 33), within the memory a
 * torch.save ZIP of as many tensors takes.  It used to be refused
 * ("shared references expand too much": the listing budget grows with the
 * pickle bytes, and a safetensors file has none) after holding 16-18x its
 * size (the whole header as a JSON tree).  Counted per tensor: the memory
 * the library charges (its arena and what it charges beside it) and the
 * resident memory the open adds, each open in a child process of its own.
 */
#include "harness.h"

#include "ckpt.h"
#include "composite.h"

#include "torch/torch.h"

#define N_TENSORS 300000
#define NAME_FMT "model.layers.%zu.self_attn.weight"

static char *dir;

/* Header {"__metadata__": {"format": "pt"}, name_i: {F32, [1], [4i, 4i+4]}}
 * as the safetensors library writes it (no spaces, padded to 8 bytes). */
static void write_st(const char *path)
{
    bb h = {0};
    bb_text(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    char e[160];
    for (size_t i = 0; i < N_TENSORS; i++) {
        char name[96];
        snprintf(name, sizeof name, NAME_FMT, i);
        snprintf(e, sizeof e, ",\"%s\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[%zu,%zu]}",
                 name, 4 * i, 4 * i + 4);
        bb_text(&h, e);
    }
    bb_u8(&h, '}');
    while (h.n % 8) bb_u8(&h, ' ');
    bb out = {0};
    bb_le64(&out, h.n);
    bb_append(&out, &h);
    for (size_t i = 0; i < N_TENSORS; i++) bb_f32le(&out, (float)i);
    cw_file(path, out.p, out.n);
    printf("  safetensors: %zu bytes, header %zu\n", out.n, h.n);
    bb_free(&h);
    bb_free(&out);
}

typedef struct usage {
    double charged, resident; /* bytes a tensor */
} usage;

static int measure(const char *path, usage *u)
{
    ckpt_error err;
    long long rss0 = cw_status_kb("VmRSS");
    ckpt_file *f = ckpt_open(path, NULL, &err);
    long long hwm = cw_status_kb("VmHWM");
    if (!f) {
        fprintf(stderr, "  %s: %s\n", path, err.message);
        return -1;
    }
    int r = ckpt_tensor_count(f) == N_TENSORS ? 0 : -1;
    char name[96];
    snprintf(name, sizeof name, NAME_FMT, (size_t)123456);
    const ckpt_tensor *t = ckpt_find(f, name);
    float v = 0;
    if (!t || ckpt_tensor_read(f, t, &v, 4, &err) || v != 123456.0f) r = -1;
    u->charged = (double)atomic_load(&f->arena.peak) / N_TENSORS;
    u->resident = (double)(hwm - rss0) / N_TENSORS;
    ckpt_close(f);
    return r;
}

/* Runs measure() in a child; its answer comes back through a pipe. */
static int measured(const char *path, usage *u)
{
    int fds[2];
    if (pipe(fds)) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        usage m = {0, 0};
        int r = measure(path, &m);
        if (write(fds[1], &m, sizeof m) != (ssize_t)sizeof m) r = -1;
        _exit(r ? 1 : 0);
    }
    close(fds[1]);
    ssize_t got = read(fds[0], u, sizeof *u);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    return got == (ssize_t)sizeof *u && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

int main(void)
{
    dir = cw_tmpdir("st-many");
    char st[4200], zip[4200];
    snprintf(st, sizeof st, "%s/many.safetensors", dir);
    snprintf(zip, sizeof zip, "%s/many.pt", dir);
    write_st(st);
    cw_zip_many(zip, N_TENSORS, NAME_FMT);

    SECTION("300,000 tensors in a safetensors file");
    usage s = {0, 0}, z = {0, 0};
    CHECK(measured(st, &s) == 0);
    SECTION("as many in a torch.save ZIP");
    CHECK(measured(zip, &z) == 0);
    printf("  per tensor: safetensors %.0f bytes charged, %.0f resident; ZIP %.0f charged, "
           "%.0f resident\n",
           s.charged, s.resident, z.charged, z.resident);

    SECTION("memory a tensor: safetensors within the ZIP reader's");
    CHECK(s.charged > 0 && s.charged <= z.charged * 1.25);
#ifndef CKPT_SANITIZED
    CHECK(s.resident > 0 && s.resident <= z.resident * 1.25);
#endif
    cw_rmtree(dir);
    free(dir);
    return ut_summary();
}
