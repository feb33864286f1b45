#!/bin/sh
# check_exports.sh LIBCKPT.so LIBCKPT.a - every symbol the libraries define
# for the outside world starts with ckpt_ (include/ckpt.h): the internal
# ck_* functions must not leak into a program that links libckpt, shared or
# static.  Symbols a sanitizer's instrumentation adds are not ckpt's API and
# are ignored, and so are the ELF markers some linkers define.
so=$1 ar=$2
pass=0 fail=0
NM=${NM:-nm}
if ! command -v "$NM" >/dev/null 2>&1; then
    echo "skipped: no nm"
    exit 77
fi
check() { # label, symbol list (one a line)
    label=$1 syms=$2
    bad=$(printf '%s\n' "$syms" | grep -v '^ckpt_' |
          grep -Ev '^(_init|_fini|_edata|_end|__bss_start|__(odr_)?asan.*|___asan.*|__ubsan.*|__sancov.*)$' |
          grep -v '^$')
    n=$(printf '%s\n' "$syms" | grep -c '^ckpt_')
    if [ "$n" -gt 0 ]; then
        echo "ok - $label exports $n ckpt_* symbols"; pass=$((pass + 1))
    else
        echo "not ok - $label exports no ckpt_* symbol"; fail=$((fail + 1))
    fi
    if [ -z "$bad" ]; then
        echo "ok - $label exports nothing else"; pass=$((pass + 1))
    else
        echo "not ok - $label exports symbols without the ckpt_ prefix:"; fail=$((fail + 1))
        printf '%s\n' "$bad" | head -20 | sed 's/^/    /'
    fi
}
# Global defined symbols: upper-case type letters (T, D, B, R, W, V, ...).
globals() { awk 'NF >= 3 && $2 ~ /^[A-Z]$/ { print $3 }'; }
check "$(basename "$so")" "$("$NM" -D --defined-only "$so" | globals)"
check "$(basename "$ar")" "$("$NM" -g --defined-only "$ar" | globals)"
# and the API is there
for f in ckpt_open ckpt_options_init_sized ckpt_get_info_sized ckpt_tensor_read; do
    if "$NM" -D --defined-only "$so" | grep -q " $f\$" && "$NM" -g --defined-only "$ar" | grep -q " $f\$"; then
        echo "ok - both define $f"; pass=$((pass + 1))
    else
        echo "not ok - $f missing from a library"; fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
