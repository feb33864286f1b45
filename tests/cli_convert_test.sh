#!/bin/sh
# cli_convert_test.sh - `ckpt convert`: the CRC-32 check of what it copies
# (--no-verify), names that are not UTF-8 (--skip-unsupported), --filter.
# The same on big files torch writes, and the progress bar: see
# cli_convert_big_test.sh.
#
#     tests/cli_convert_test.sh CKPT FIXTURES_DIR
#
# Damaged and crafted inputs are built here as bytes (python3's zipfile and
# a hand-written pickle, never unpickled).
# Prints "ok - ..." / "not ok - ..." / "skip - ..." and "N passed, M failed".

if [ $# -ne 2 ]; then
    echo "usage: $0 CKPT FIXTURES_DIR" >&2
    exit 2
fi
CKPT=$1
FIX=$2
PY=python3

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-convert-test.XXXXXX") || exit 1
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

if ! command -v $PY >/dev/null 2>&1; then
    echo "skip - python3 is needed to build the inputs"
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
# st_names FILE: the tensor names of a safetensors file, one a line, sorted
st_names() {
    $PY - "$1" <<'EOF'
import json, struct, sys
b = open(sys.argv[1], 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n].decode('utf-8'))
print('\n'.join(sorted(k for k in h if k != '__metadata__')))
EOF
}

# ---- 1. CRC-32 of the copied records ----------------------------------------

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

# a stored ZIP fixture (torch's layout: data descriptors) and a deflated one
# (one python3 sorts them all: "KIND<TAB>FILE" lines, in glob order)
stored=
deflated=
$PY -c "
import sys, zipfile
for f in sys.argv[1:]:
    try:
        z = zipfile.ZipFile(f)
    except Exception:
        continue
    d = [i for i in z.infolist() if '/data/' in i.filename and i.file_size > 0]
    if d and not any(i.filename.endswith('constants.pkl') for i in z.infolist()):
        print('%s\t%s' % ('deflated' if d[0].compress_type == zipfile.ZIP_DEFLATED else 'stored', f))
" "$FIX"/*.pt >"$TMP/kinds"
while IFS="$(printf '\t')" read -r kind f; do
    [ -z "$kind" ] && continue
    "$CKPT" convert "$f" "$TMP/probe.st" >/dev/null 2>&1 || { rm -f "$TMP/probe.st"; continue; }
    rm -f "$TMP/probe.st"
    if [ "$kind" = stored ] && [ -z "$stored" ]; then stored=$f; fi
    if [ "$kind" = deflated ] && [ -z "$deflated" ]; then deflated=$f; fi
done <"$TMP/kinds"

if [ -z "$stored" ]; then
    not_ok "find a stored ZIP fixture" "none in $FIX"
else
    mkdir "$TMP/crc"
    rec=$(damage "$stored" "$TMP/bad.pt")
    run "$TMP/bad.pt" "$TMP/crc/out.st"
    check "damaged record: exit 1" "$(status 1)"
    check "damaged record: message names the record" "$(grep_err "crc mismatch for tensor '")$(grep_err "in record $rec")"
    check "damaged record: message says --no-verify" "$(grep_err "--no-verify")"
    check "damaged record: one line on stderr" "$([ "$(wc -l <"$ERR")" -eq 1 ] || echo "$(wc -l <"$ERR") lines")"
    check "damaged record: no OUT, no temporary file" "$(empty_dir "$TMP/crc")"
    run --no-verify "$TMP/bad.pt" "$TMP/crc/out.st"
    check "damaged record with --no-verify: converted" "$(status 0)$(only_out "$TMP/crc" out.st)"
    rm -f "$TMP/crc/out.st"
    # an intact file converts the same with and without the check
    run "$stored" "$TMP/crc/a.st"
    r1=$(status 0)
    run --no-verify "$stored" "$TMP/crc/b.st"
    check "intact file: same output with and without --no-verify" \
        "$r1$(status 0)$(cmp "$TMP/crc/a.st" "$TMP/crc/b.st" 2>&1)$([ -s "$ERR" ] && echo "stderr: $(cat "$ERR")")"
    rm -f "$TMP/crc/a.st" "$TMP/crc/b.st"
    # a damaged record no written tensor uses is not copied: not checked
    run --filter 'no such tensor' "$TMP/bad.pt" "$TMP/crc/none.st"
    check "damaged record left out by --filter: converted" "$(status 0)"
    rm -f "$TMP/crc/none.st"
fi

if [ -z "$deflated" ]; then
    skip "no deflated ZIP fixture in $FIX"
else
    mkdir -p "$TMP/crcd"
    rec=$(damage "$deflated" "$TMP/badd.pt")
    run "$TMP/badd.pt" "$TMP/crcd/out.st"
    check "damaged deflated record: exit 1, no OUT" "$(status 1)$(empty_dir "$TMP/crcd")"
fi

# ---- 2. names that are not UTF-8 --------------------------------------------

# mkzip OUT HEXNAME...: a ZIP checkpoint {NAME: float32 tensor of 4}, each
# NAME given as the hex of its bytes and pickled with BINUNICODE, so that
# invalid UTF-8 reaches the reader as it is
cat >"$TMP/mkzip.py" <<'EOF'
import struct, sys, zipfile
def u(b): return b'X' + struct.pack('<I', len(b)) + b
def gl(mod, name): return b'c' + mod + b'\n' + name + b'\n'
def tup(*x): return b'(' + b''.join(x) + b't'
def K(n): return b'K' + bytes([n])
def tensor(key):
    pid = tup(u(b'storage'), gl(b'torch', b'FloatStorage'), u(key), u(b'cpu'), K(4)) + b'Q'
    body = pid + K(0) + tup(K(4)) + tup(K(1)) + b'\x89' + \
        gl(b'collections', b'OrderedDict') + b')R'
    return gl(b'torch._utils', b'_rebuild_tensor_v2') + b'(' + body + b'tR'
names = [bytes.fromhex(h) for h in sys.argv[2:]]
pkl = b'\x80\x02}('
for k, n in enumerate(names):
    pkl += u(n) + tensor(str(k).encode())
pkl += b'u.'
with zipfile.ZipFile(sys.argv[1], 'w') as z:
    z.writestr('archive/data.pkl', pkl)
    for k in range(len(names)):
        z.writestr('archive/data/%d' % k, struct.pack('<4f', k, 1, 2, 3))
    z.writestr('archive/version', '3\n')
EOF
mkzip() { $PY "$TMP/mkzip.py" "$@"; }
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

mkdir "$TMP/utf"
# 'ok'; 'bad\xffname': a lone 0xff; 'sur\xed\xa0\x80': a UTF-8-encoded surrogate
mkzip "$TMP/names.pt" "$(hex ok)" 626164ff6e616d65 737572eda080
run "$TMP/names.pt" "$TMP/utf/out.st"
check "non-UTF-8 names: exit 1" "$(status 1)"
check "non-UTF-8 names: each named, escaped" \
    "$(grep_err "'bad\\xffname'")$(grep_err "'sur\\xed\\xa0\\x80'")$(grep_err "not valid UTF-8")"
check "non-UTF-8 names: message says --skip-unsupported" "$(grep_err "--skip-unsupported")"
check "non-UTF-8 names: stderr is plain text" \
    "$(LC_ALL=C grep -q '[^ -~]' "$ERR" && echo "raw bytes in: $(cat -v "$ERR")")"
check "non-UTF-8 names: no OUT" "$(empty_dir "$TMP/utf")"
run --skip-unsupported "$TMP/names.pt" "$TMP/utf/out.st"
check "non-UTF-8 names, --skip-unsupported: exit 0 and a warning" \
    "$(status 0)$(grep_err "warning: left out 2 tensors whose name is not valid UTF-8")"
if [ -f "$TMP/utf/out.st" ]; then
    check "non-UTF-8 names, --skip-unsupported: only the others written" \
        "$([ "$(st_names "$TMP/utf/out.st")" = ok ] || echo "names: $(st_names "$TMP/utf/out.st")")"
else
    not_ok "non-UTF-8 names, --skip-unsupported: only the others written" "no OUT"
fi

# ---- 3. --filter --------------------------------------------------------------

mkdir "$TMP/filt"
mkzip "$TMP/filt.pt" "$(hex enc.0.weight)" "$(hex enc.0.bias)" \
    "$(hex enc.1.weight)" "$(hex dec.weight)" "$(hex head)"
filter_case() { # filter_case GLOB WANT-NAMES (space separated, sorted)
    rm -f "$TMP/filt/out.st"
    run --filter "$1" "$TMP/filt.pt" "$TMP/filt/out.st"
    r=$(status 0)
    if [ -z "$r" ]; then
        got=$(st_names "$TMP/filt/out.st" | tr '\n' ' ' | sed 's/ $//')
        [ "$got" = "$2" ] || r="names '$got', want '$2'"
    fi
    check "--filter '$1'" "$r"
}
filter_case 'enc.*' 'enc.0.bias enc.0.weight enc.1.weight'
filter_case '*.weight' 'dec.weight enc.0.weight enc.1.weight'
filter_case 'enc.[1-9].*' 'enc.1.weight'
filter_case 'head' 'head'
filter_case '*' 'dec.weight enc.0.bias enc.0.weight enc.1.weight head'
rm -f "$TMP/filt/out.st"
run --filter 'nothing*' "$TMP/filt.pt" "$TMP/filt/out.st"
check "--filter matching nothing: warning, metadata-only OUT" \
    "$(status 0)$(grep_err "warning: --filter 'nothing*' matches no tensor")$(only_out "$TMP/filt" out.st)"
"$CKPT" convert --help >"$TMP/help" 2>&1
for flag in --filter --no-verify --skip-unsupported; do
    check "convert --help documents $flag" \
        "$(grep -qF -- "$flag" "$TMP/help" || echo missing)"
done

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
