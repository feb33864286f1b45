/*
 * test_verify.c - ckpt_verify_progress() through the public API: progress
 * is monotonic, ends at done == total, and the total covers the ZIP
 * records; containers checked entirely at open report no progress.
 *
 *     test_verify ZIP.pt LEGACY.pt
 */
#include "ckpt.h"

#include "../unit/harness.h"

typedef struct seen {
    int calls, notes;
    uint64_t last, total;
    int backwards, total_changed;
} seen;

static void on_note(void *ctx, const char *line)
{
    seen *s = ctx;
    (void)line;
    s->notes++;
}

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    seen *s = ctx;
    if (s->calls > 0 && done < s->last) s->backwards = 1;
    if (s->calls > 0 && total != s->total) s->total_changed = 1;
    s->calls++;
    s->last = done;
    s->total = total;
}

int main(int argc, char **argv)
{
    ckpt_error err;
    ckpt_file *f;
    ckpt_info info;
    seen s;

    if (argc != 3) {
        fprintf(stderr, "usage: test_verify ZIP.pt LEGACY.pt\n");
        return 2;
    }

    SECTION("a ZIP checkpoint");
    f = ckpt_open(argv[1], NULL, &err);
    CHECK(f != NULL);
    if (f) {
        ckpt_get_info(f, &info);
        memset(&s, 0, sizeof s);
        CHECK_EQ_INT(ckpt_verify_progress(f, on_note, on_progress, &s, &err), 0);
        CHECK(s.calls >= 2);
        CHECK(!s.backwards);
        CHECK(!s.total_changed);
        CHECK_EQ_U64(s.last, s.total);
        CHECK(s.total >= info.total_bytes); /* every record, tensors' included */
        CHECK(s.total <= info.file_size);
        /* without a progress callback: the same verdict */
        CHECK_EQ_INT(ckpt_verify_progress(f, NULL, NULL, NULL, &err), 0);
        CHECK_EQ_INT(ckpt_verify(f, NULL, NULL, &err), 0);
        ckpt_close(f);
    }

    SECTION("a legacy stream: checked at open, no progress");
    f = ckpt_open(argv[2], NULL, &err);
    CHECK(f != NULL);
    if (f) {
        memset(&s, 0, sizeof s);
        CHECK_EQ_INT(ckpt_verify_progress(f, on_note, on_progress, &s, &err), 0);
        CHECK_EQ_INT(s.calls, 0);
        CHECK(s.notes >= 1);
        ckpt_close(f);
    }

    SECTION("a null file");
    CHECK_EQ_INT(ckpt_verify_progress(NULL, NULL, on_progress, &s, &err), -1);
    CHECK_EQ_INT(err.code, CKPT_E_ARG);
    return ut_summary();
}
