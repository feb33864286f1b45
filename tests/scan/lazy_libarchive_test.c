/*
 * lazy_libarchive_test.c - libckpt does not link libarchive: `ckpt scan`
 * loads it with dlopen() only when it meets an archive that is not a
 * torch.save file, and closes it when that archive is done.  Linked to the
 * public static library (what build/ckpt links), this reads /proc/self/maps:
 *
 *   - no libarchive, libxml2 or ICU when the program starts, after a listing
 *     (ckpt_open_path + every tensor) and after a scan of a torch.save file;
 *   - a scan of tar_of_pickles.tar.gz (a generic TAR, gzipped) still finds
 *     os.system in sub/b.pkl, and libarchive is unmapped again afterwards;
 *   - twenty such scans leave no file descriptor and no library behind.
 *
 *     lazy_libarchive_test SAMPLE.pt SCAN_FILES_DIR
 *
 * Exits 77 (skipped) where /proc/self/maps cannot be read.
 */
#include "ckpt.h"
#include "ckpt_scan.h"

#include "../unit/harness.h"

#include <dirent.h>

/* How many lines of /proc/self/maps name `what` (-1: no /proc). */
static int mapped(const char *what)
{
    FILE *fp = fopen("/proc/self/maps", "r");
    char line[4096];
    int n = 0;
    if (!fp) return -1;
    while (fgets(line, sizeof line, fp))
        if (strstr(line, what)) n++;
    fclose(fp);
    return n;
}

/* None of libarchive and what it pulls in is mapped. */
static void check_unmapped(const char *when)
{
    SECTION(when);
    CHECK_EQ_INT(mapped("/libarchive.so"), 0);
    CHECK_EQ_INT(mapped("/libxml2.so"), 0);
    CHECK_EQ_INT(mapped("/libicuuc.so"), 0);
}

#ifdef CKPT_TEST_HAVE_LIBARCHIVE
/* How many file descriptors are open (-1: no /proc). */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    int n = 0;
    if (!d) return -1;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Scan the .tar.gz: its member sub/b.pkl calls os.system. */
static void scan_tar_gz(const char *path)
{
    ckpt_error err;
    ckpt_scan_report *r = ckpt_scan_path(path, NULL, 0, &err);
    int found = 0;
    CHECK(r != NULL);
    if (!r) return;
    for (size_t i = 0; i < ckpt_scan_count(r); i++) {
        const ckpt_scan_item *it = ckpt_scan_at(r, i);
        if (strcmp(it->pickle, "sub/b.pkl") == 0 && strcmp(it->module, "os") == 0 &&
            strcmp(it->name, "system") == 0 && it->verdict == CKPT_VERDICT_DANGEROUS)
            found = 1;
    }
    CHECK(found);
    CHECK(ckpt_scan_flagged(r));
    CHECK(ckpt_scan_error(r) == NULL);
    if (ckpt_scan_error(r)) fprintf(stderr, "scan error: %s\n", ckpt_scan_error(r)->message);
    ckpt_scan_free(r);
}
#endif

int main(int argc, char **argv)
{
    ckpt_error err;
    ckpt_file *f;
    ckpt_scan_report *r;

    if (argc != 3) {
        fprintf(stderr, "usage: %s SAMPLE.pt SCAN_FILES_DIR\n", argv[0]);
        return 2;
    }
    if (mapped("") <= 0) {
        printf("skip - /proc/self/maps cannot be read here\n");
        return 77;
    }
    check_unmapped("at start: libckpt does not link libarchive");

    f = ckpt_open_path(argv[1], NULL, &err);
    CHECK(f != NULL);
    if (f) {
        size_t n = ckpt_tensor_count(f);
        CHECK(n > 0);
        for (size_t i = 0; i < n; i++) CHECK(ckpt_tensor_at(f, i) != NULL);
        check_unmapped("a listing does not load libarchive");
        ckpt_close(f);
    }

    r = ckpt_scan_path(argv[1], NULL, 0, &err);
    CHECK(r != NULL);
    if (r) {
        CHECK(ckpt_scan_error(r) == NULL);
        ckpt_scan_free(r);
    }
    check_unmapped("a scan of a torch.save file does not load libarchive");

#ifdef CKPT_TEST_HAVE_LIBARCHIVE
    {
        char path[4096];
        int fds;
        snprintf(path, sizeof path, "%s/tar_of_pickles.tar.gz", argv[2]);
        SECTION("a scan of a .tar.gz reads its members through libarchive");
        scan_tar_gz(path);
        check_unmapped("libarchive is closed when the archive is done");
        /* loaded and closed once per archive: nothing accumulates */
        fds = open_fds();
        for (int i = 0; i < 20; i++) scan_tar_gz(path);
        SECTION("twenty scans of a .tar.gz");
        CHECK_EQ_INT(open_fds(), fds);
        check_unmapped("libarchive is closed after twenty scans");
    }
#else
    printf("# built without libarchive: the archive scan is not checked\n");
#endif
    return ut_summary();
}
