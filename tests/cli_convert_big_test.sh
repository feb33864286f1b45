#!/bin/sh
# cli_convert_big_test.sh - `ckpt convert` on a 72 MiB file torch writes: the
# CRC-32 check of records copied by the kernel and by the checking thread,
# --no-verify, and the progress bar of convert, verify, cat, extract -d and
# scan (drawn and erased on a terminal, absent otherwise).  Split from
# cli_convert_test.sh so that it can say "skipped": it needs Debian's torch
# at /usr/bin/python3 (exit 77 without it); the pty checks need util-linux
# `script`.
#
#     tests/cli_convert_big_test.sh CKPT
#
# Prints "ok - ..." / "not ok - ..." / "skip - ..." and "N passed, M failed".

if [ $# -ne 1 ]; then
    echo "usage: $0 CKPT" >&2
    exit 2
fi
CKPT=$1
PY=python3
TORCH_PY=/usr/bin/python3

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-convert-big.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

PASSED=0
FAILED=0
ERR=$TMP/err

ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $1: $2"; }
skip() { echo "skip - $1"; }
check() { # check DESCRIPTION REASON-OR-EMPTY
    if [ -z "$2" ]; then ok "$1"; else not_ok "$1" "$2"; fi
}

if ! [ -x "$TORCH_PY" ] || ! command -v $PY >/dev/null 2>&1; then
    echo "skip - $TORCH_PY (Debian's python3 with torch) and python3 are needed"
    exit 77
fi

# run ARGS...: run ckpt convert, setting RC and filling $ERR
run() {
    "$CKPT" convert "$@" >"$TMP/stdout" 2>"$ERR"
    RC=$?
}

# only_out DIR NAME: "" when DIR holds exactly the file NAME (no temporary)
only_out() {
    l=$(ls -A "$1")
    [ "$l" = "$2" ] || echo "directory holds '$(echo $l)', want '$2'"
}
# empty_dir DIR: "" when DIR is empty
empty_dir() {
    l=$(ls -A "$1")
    [ -z "$l" ] || echo "left behind: $(echo $l)"
}
# grep_err TEXT: "" when stderr holds TEXT (fixed string)
grep_err() {
    grep -qF -- "$1" "$ERR" || echo "stderr lacks '$1': $(head -c 400 "$ERR")"
}
status() { [ "$RC" -eq "$1" ] || echo "exit status $RC, want $1: $(head -c 300 "$ERR")"; }

# damage SRC DST [N]: copy SRC flipping one bit in the middle of its first
# non-empty stored data/ record (or of record data/N); prints its name
damage() {
    $PY - "$1" "$2" "${3:-}" <<'EOF'
import struct, sys, zipfile
src, dst, n = sys.argv[1], sys.argv[2], sys.argv[3]
raw = bytearray(open(src, 'rb').read())
for info in zipfile.ZipFile(src).infolist():
    if ('/data/' in info.filename and info.file_size > 0 and
            (not n or info.filename.endswith('/data/' + n))):
        h = info.header_offset
        nl, el = struct.unpack('<HH', raw[h + 26:h + 30])
        raw[h + 30 + nl + el + info.compress_size // 2] ^= 0x10
        break
else:
    sys.exit(1)
open(dst, 'wb').write(raw)
print(info.filename)
EOF
}

# ---- big torch files: kernel copy path, progress bar --------------------------

# 3 MiB tensors are checked as they are copied; a 512 KiB one (data/0) and
# a view of a 2 MiB storage (data/1) by the checking thread; 72 MiB in all
# (> 64 MiB).  one.pt: one 68 MiB tensor, for cat's bar below.  One process
# of torch writes both (importing it costs 2 s of CPU); 77 without torch.
"$TORCH_PY" -c "
import sys
try:
    import torch
except ImportError:
    sys.exit(77)
g = torch.Generator().manual_seed(9)
d = {'a': torch.rand(1 << 17, generator=g), 'b': torch.rand(1 << 19, generator=g)[4:]}
d.update({'t%d' % k: torch.rand(3 << 18, generator=g) for k in range(23)})
torch.save(d, sys.argv[1])
torch.save({'w': torch.zeros(17 << 20)}, sys.argv[2])
" "$TMP/big.pt" "$TMP/one.pt" 2>"$TMP/torch.err"
torch_rc=$?
if [ "$torch_rc" -eq 77 ]; then
    echo "skip - torch is not installed for $TORCH_PY"
    exit 77
elif [ "$torch_rc" -ne 0 ]; then
    not_ok "torch writes the big files" "exit $torch_rc: $(head -c 300 "$TMP/torch.err")"
else
    mkdir "$TMP/big"
    for n in 0 1 5; do
        rec=$(damage "$TMP/big.pt" "$TMP/bigbad.pt" $n)
        run "$TMP/bigbad.pt" "$TMP/big/out.st"
        check "damaged record data/$n of a 72 MiB file: exit 1, named, no OUT" \
            "$(status 1)$(grep_err "in record $rec")$(empty_dir "$TMP/big")"
    done
    run --no-verify "$TMP/bigbad.pt" "$TMP/big/out.st"
    check "damaged 72 MiB file, --no-verify: converted" "$(status 0)$(only_out "$TMP/big" out.st)"
    rm -f "$TMP/big/out.st"
    run "$TMP/big.pt" "$TMP/big/a.st"
    r1=$(status 0)
    run --no-verify "$TMP/big.pt" "$TMP/big/b.st"
    check "intact 72 MiB file: same output with and without --no-verify" \
        "$r1$(status 0)$(cmp "$TMP/big/a.st" "$TMP/big/b.st" 2>&1)"
    rm -f "$TMP/big/a.st" "$TMP/big/b.st"
    run "$TMP/big.pt" "$TMP/big/out.st"
    check "72 MiB, stderr not a terminal: converted, no progress output" \
        "$(status 0)$([ -s "$ERR" ] && echo "stderr: $(cat -v "$ERR" | head -c 200)")"
    rm -f "$TMP/big/out.st"
    if command -v script >/dev/null 2>&1; then
        # stderr on a pty: the bar appears, reaches its end and is erased
        script -qc "'$CKPT' convert '$TMP/big.pt' '$TMP/big/out.st'" /dev/null \
            </dev/null >"$TMP/pty" 2>&1
        rc=$?
        r=
        [ "$rc" -eq 0 ] || r="exit status $rc"
        grep -qF "ckpt: converting [" "$TMP/pty" || r="$r no bar in: $(cat -v "$TMP/pty" | head -c 200)"
        # the last thing written is the erase: CR, spaces, CR
        last=$(tr '\r' '\n' <"$TMP/pty" | grep -v '^$' | tail -n 1)
        [ -z "$(echo "$last" | tr -d ' ')" ] || r="$r line left on screen: '$last'"
        [ -f "$TMP/big/out.st" ] || r="$r no OUT"
        check "72 MiB on a pty: progress bar drawn and erased" "$r"
        # the same bar for the other long jobs: verify, cat and extract -d of
        # all 72 MiB (cat: one 68 MiB tensor), and several files at once
        # (output not on the terminal)
        for job in "verify:verify '$TMP/big.pt'" \
                   "writing:cat '$TMP/one.pt' w -o '$TMP/big/w.bin'" \
                   "extracting:extract '$TMP/big.pt' -d '$TMP/big/npy'" \
                   "reading files:scan '$TMP/big.pt' '$TMP/big.pt' '$TMP/big.pt' >/dev/null"; do
            label=${job%%:*}
            cmd=${job#*:}
            [ "$label" = verify ] && label=verifying
            script -qc "'$CKPT' $cmd" /dev/null </dev/null >"$TMP/pty" 2>&1
            rc=$?
            r=
            [ "$rc" -eq 0 ] || r="exit status $rc"
            grep -qF "ckpt: $label [" "$TMP/pty" || r="$r no bar in: $(cat -v "$TMP/pty" | head -c 200)"
            last=$(tr '\r' '\n' <"$TMP/pty" | grep -v '^$' | grep -v '^ok: ' | grep -v ' -> ' | tail -n 1)
            [ -z "$(echo "$last" | tr -d ' ')" ] || r="$r line left on screen: '$last'"
            check "ckpt ${cmd%% *} of 72 MiB on a pty: '$label' bar drawn and erased" "$r"
        done
        "$CKPT" verify "$TMP/big.pt" >"$TMP/out" 2>"$TMP/err"
        check "verify with stderr not a terminal: no bar" \
            "$([ -s "$TMP/err" ] && echo "stderr: $(cat -v "$TMP/err" | head -c 200)")"
    else
        skip "no util-linux script: progress bar on a pty not tested"
    fi
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
