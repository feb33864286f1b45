#!/bin/sh
# lazy_cli_test.sh - build/ckpt does not load libarchive (nor libxml2, ICU)
# to list a checkpoint: `ckpt scan` loads it with dlopen() only for an
# archive that is not a torch.save file.  Watches the dynamic loader
# (glibc's LD_DEBUG=files); exits 77 where the loader does not report.
#
#     tests/scan/lazy_cli_test.sh CKPT SAMPLE.pt SCAN_FILES_DIR [HAVE_LIBARCHIVE]
CKPT=$1
PT=$2
F=$3
HAVE=${4:-0}
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-lazy.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

# the libraries the loader opened while CMD ran: "file=NAME" lines
loaded() {
    LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$@" >/dev/null 2>&1
    cat "$TMP"/ld.* 2>/dev/null
    rm -f "$TMP"/ld.*
}

if ! loaded "$CKPT" ls "$PT" | grep -q 'file=.*libc\.so'; then
    echo "skip - the dynamic loader does not report (LD_DEBUG=files)"
    exit 77
fi
for cmd in "ls" "ls --json" "scan" "verify"; do
    # shellcheck disable=SC2086 # $cmd is a subcommand and its options
    if loaded "$CKPT" $cmd "$PT" | grep -Eq 'file=[^ ]*(libarchive|libxml2|libicu)'; then
        nok "ckpt $cmd $(basename "$PT") loads libarchive or its dependencies"
    else
        ok "ckpt $cmd $(basename "$PT") loads no libarchive, libxml2 or ICU"
    fi
done
if [ "$HAVE" = 1 ]; then
    out=$(loaded "$CKPT" scan "$F/tar_of_pickles.tar.gz")
    if printf '%s\n' "$out" | grep -q 'file=libarchive.*dynamically loaded'; then
        ok "ckpt scan of a .tar.gz loads libarchive with dlopen()"
    else
        nok "ckpt scan of a .tar.gz loads libarchive with dlopen()"
    fi
    if printf '%s\n' "$out" | grep -q 'file=[^ ]*libarchive[^ ]* .*destroying link map'; then
        ok "and closes it when the archive is done"
    else
        nok "and closes it when the archive is done"
    fi
    "$CKPT" scan "$F/tar_of_pickles.tar.gz" >"$TMP/out" 2>&1
    rc=$?
    if [ $rc = 3 ] && grep -q '^dangerous  *os\.system  *sub/b\.pkl' "$TMP/out"; then
        ok "it finds os.system in sub/b.pkl of the .tar.gz (exit 3)"
    else
        nok "it finds os.system in sub/b.pkl of the .tar.gz (exit $rc)"; cat "$TMP/out"
    fi
fi
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
