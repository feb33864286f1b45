/*
 * harness.h - a tiny test harness for the unit tests (one executable per
 * layer, each a single translation unit).
 *
 *   CHECK(cond)            a condition
 *   CHECK_EQ_INT(a, b)     two integers (compared as long long)
 *   CHECK_EQ_U64(a, b)     two unsigned integers (compared as uint64_t)
 *   CHECK_STR(a, b)        two C strings (either may be NULL)
 *   CHECK_CONTAINS(s, sub) s contains sub (s may be NULL: a failure)
 *   CHECK_MEM(a, b, n)     n bytes equal
 *   CHECK_ERR(err, code, offset)   a ckpt_error's code and offset
 *
 * A failed check prints file:line and what differed to stderr, then the test
 * goes on.  ut_summary() prints "N passed, M failed" on its own line to
 * stdout and returns the exit status (non-zero when anything failed).
 *
 * ut_isolated(fn, ctx) runs fn(ctx) in a forked child (for inputs that may
 * corrupt memory or crash): the check passes when the child exits normally
 * with status 0 (fn returned 0).
 */
#ifndef CKPT_UNIT_HARNESS_H
#define CKPT_UNIT_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static long ut_passed, ut_failed;
static const char *ut_section = "";

static inline void ut_fail_at(const char *file, int line)
{
    ut_failed++;
    fprintf(stderr, "%s:%d: [%s] FAILED: ", file, line, ut_section);
}

static inline void ut_section_begin(const char *name)
{
    ut_section = name;
}

#define SECTION(name) ut_section_begin(name)

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (cond) {                                                                                \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK(%s)\n", #cond);                                                 \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                         \
    do {                                                                                           \
        long long ut_a_ = (long long)(a), ut_b_ = (long long)(b);                                  \
        if (ut_a_ == ut_b_) {                                                                      \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK_EQ_INT(%s, %s): %lld != %lld\n", #a, #b, ut_a_, ut_b_);         \
        }                                                                                          \
    } while (0)

#define CHECK_EQ_U64(a, b)                                                                         \
    do {                                                                                           \
        unsigned long long ut_a_ = (unsigned long long)(a), ut_b_ = (unsigned long long)(b);       \
        if (ut_a_ == ut_b_) {                                                                      \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK_EQ_U64(%s, %s): %llu != %llu\n", #a, #b, ut_a_, ut_b_);         \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *ut_a_ = (a), *ut_b_ = (b);                                                     \
        if ((!ut_a_ && !ut_b_) || (ut_a_ && ut_b_ && strcmp(ut_a_, ut_b_) == 0)) {                 \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK_STR(%s, %s): \"%s\" != \"%s\"\n", #a, #b,                       \
                    ut_a_ ? ut_a_ : "(null)", ut_b_ ? ut_b_ : "(null)");                           \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(s, sub)                                                                     \
    do {                                                                                           \
        const char *ut_s_ = (s), *ut_sub_ = (sub);                                                 \
        if (ut_s_ && ut_sub_ && strstr(ut_s_, ut_sub_)) {                                          \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK_CONTAINS(%s, %s): \"%s\" does not contain \"%s\"\n", #s, #sub,  \
                    ut_s_ ? ut_s_ : "(null)", ut_sub_ ? ut_sub_ : "(null)");                       \
        }                                                                                          \
    } while (0)

#define CHECK_MEM(a, b, n)                                                                         \
    do {                                                                                           \
        const void *ut_a_ = (a), *ut_b_ = (b);                                                     \
        size_t ut_n_ = (size_t)(n);                                                                \
        if (ut_a_ && ut_b_ && memcmp(ut_a_, ut_b_, ut_n_) == 0) {                                  \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr, "CHECK_MEM(%s, %s, %zu): bytes differ\n", #a, #b, ut_n_);              \
        }                                                                                          \
    } while (0)

/* A ckpt_error's code and byte offset; prints the message on failure. */
#define CHECK_ERR(e, want_code, want_offset)                                                       \
    do {                                                                                           \
        const ckpt_error *ut_e_ = &(e);                                                            \
        long long ut_wc_ = (long long)(want_code), ut_wo_ = (long long)(want_offset);              \
        if ((long long)ut_e_->code == ut_wc_ && (long long)ut_e_->offset == ut_wo_) {              \
            ut_passed++;                                                                           \
        } else {                                                                                   \
            ut_fail_at(__FILE__, __LINE__);                                                        \
            fprintf(stderr,                                                                        \
                    "CHECK_ERR(%s): code %d offset %lld, want code %lld offset %lld (\"%s\")\n",   \
                    #e, (int)ut_e_->code, (long long)ut_e_->offset, ut_wc_, ut_wo_,                \
                    ut_e_->message);                                                               \
        }                                                                                          \
    } while (0)

/* Run fn(ctx) in a child process; passes when it returned 0 and did not crash. */
#define CHECK_ISOLATED(fn, ctx) ut_isolated((fn), (ctx), #fn, __FILE__, __LINE__)

static inline void ut_isolated(int (*fn)(void *), void *ctx, const char *name, const char *file,
                               int line)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        ut_fail_at(file, line);
        fprintf(stderr, "fork failed for %s\n", name);
        return;
    }
    if (pid == 0) _exit(fn(ctx) == 0 ? 0 : 1);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) {
        ut_fail_at(file, line);
        fprintf(stderr, "waitpid failed for %s\n", name);
        return;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        ut_passed++;
    } else {
        ut_fail_at(file, line);
        if (WIFSIGNALED(st))
            fprintf(stderr, "%s: child killed by signal %d\n", name, WTERMSIG(st));
        else
            fprintf(stderr, "%s: child exited with status %d\n", name, WEXITSTATUS(st));
    }
}

static inline int ut_summary(void)
{
    printf("%ld passed, %ld failed\n", ut_passed, ut_failed);
    fflush(stdout);
    return ut_failed ? 1 : 0;
}

#endif
