/*
 * test_multi.c - checkpoints of several files through the C API
 * (src/formats/multi.c, dcp.c): the parts API, and ckpt_tensor_read_range()
 * on DCP tensors assembled from chunks, for every start and several lengths
 * (ranges inside one chunk and across chunk borders) against a whole read.
 * Fixtures: tests/fixtures/sharded (tests/gen_sharded.py, torch 2.6).
 */
#include "harness.h"

#include "ckpt.h"

static char fx[1024];

static const char *fixture(const char *name)
{
    static char path[1200];
    snprintf(path, sizeof path, "%s/%s", fx, name);
    return path;
}

static void ranges(const char *name, int use_mmap)
{
    ckpt_options opt;
    ckpt_options_init(&opt);
    opt.use_mmap = use_mmap;
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(fixture(name), &opt, &err);
    CHECK(f != NULL);
    if (!f) return;
    ckpt_info info;
    ckpt_get_info(f, &info);
    CHECK_EQ_INT(info.format, CKPT_FORMAT_DCP);
    for (size_t i = 0; i < ckpt_tensor_count(f); i++) {
        const ckpt_tensor *t = ckpt_tensor_at(f, i);
        size_t nb = (size_t)t->nbytes;
        uint8_t *all = malloc(nb + 1), *part = malloc(nb + 1);
        CHECK(ckpt_tensor_read(f, t, all, nb, &err) == 0);
        const size_t lens[] = {1, 3, 4, 7, 20};
        for (size_t s = 0; s < nb; s++)
            for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
                size_t n = lens[k] < nb - s ? lens[k] : nb - s;
                memset(part, 0xAA, n);
                if (ckpt_tensor_read_range(f, t, s, part, n, &err) != 0 ||
                    memcmp(part, all + s, n) != 0) {
                    CHECK(!"read_range differs from the whole read");
                    fprintf(stderr, "  %s: tensor %s start %zu n %zu\n", name, t->name, s, n);
                    s = nb;
                    break;
                }
            }
        CHECK(ckpt_tensor_data(f, t, &err) == NULL && err.code == CKPT_E_NOTMAPPABLE);
        CHECK(ckpt_tensor_part(f, t) < ckpt_part_count(f));
        free(all);
        free(part);
    }
    ckpt_close(f);
}

int main(void)
{
    snprintf(fx, sizeof fx, "%s", __FILE__);
    char *slash = strrchr(fx, '/');
    if (slash) *slash = 0;
    snprintf(fx + strlen(fx), sizeof fx - strlen(fx), "/../fixtures/sharded");

    SECTION("read_range across chunk borders");
    ranges("dcp_split", 0);
    ranges("dcp_split", 1);
    ranges("dcp_optim", 0);

    SECTION("parts of a shard index");
    ckpt_error err;
    ckpt_file *f = ckpt_open_path(fixture("hf_bin/pytorch_model.bin.index.json"), NULL, &err);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_U64(ckpt_part_count(f), 3);
        CHECK_CONTAINS(ckpt_part_path(f, 0), "hf_bin/pytorch_model-00001-of-00003.bin");
        CHECK_CONTAINS(ckpt_part_path(f, 2), "hf_bin/pytorch_model-00003-of-00003.bin");
        CHECK(ckpt_part_path(f, 3) == NULL);
        CHECK_EQ_U64(ckpt_tensor_part(f, ckpt_find(f, "0.weight")), 0);
        CHECK_EQ_U64(ckpt_tensor_part(f, ckpt_find(f, "extra.mask")), 2);
        ckpt_info info;
        ckpt_get_info(f, &info);
        CHECK_EQ_INT(info.format, CKPT_FORMAT_SHARDED);
        CHECK(ckpt_verify(f, NULL, NULL, &err) == 0);
        ckpt_close(f);
    }

    SECTION("a single file has one part");
    f = ckpt_open_path(fixture("single.safetensors"), NULL, &err);
    CHECK(f != NULL);
    if (f) {
        CHECK_EQ_U64(ckpt_part_count(f), 1);
        CHECK(ckpt_part_path(f, 0) == NULL);
        CHECK_EQ_U64(ckpt_tensor_part(f, ckpt_tensor_at(f, 0)), 0);
        ckpt_close(f);
    }

    SECTION("errors");
    CHECK(ckpt_open_path(NULL, NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    CHECK(ckpt_open_path(fixture("no-such-folder"), NULL, &err) == NULL);
    CHECK_EQ_INT(err.code, CKPT_E_IO);
    CHECK(ckpt_part_count(NULL) == 0);
    return ut_summary();
}
