#!/bin/sh
# cli_display_test.sh - what the reading commands (ls, show, info, scan,
# verify) show: escaped text, names that are not UTF-8 in JSON, "no tensors"
# notes, show --json that fails part way, several files, ls --filter, the
# SIZE column, --key as a path of keys, verify --json.
#
#     tests/cli_display_test.sh CKPT SOURCE_DIR
#
# Uses examples/sample.pt, tests/fixtures and tests/defects/files (built as
# bytes by gen_defects.py, never unpickled).  Prints "ok - ..." /
# "not ok - ..." per check and "N passed, M failed".

if [ $# -ne 2 ]; then
    echo "usage: $0 CKPT SOURCE_DIR" >&2
    exit 2
fi
CKPT=$1
SRC=$2
SAMPLE=$SRC/examples/sample.pt
DEF=$SRC/tests/defects/files
FIX=$SRC/tests/fixtures
EVIL=$DEF/pkl_terminal_escapes.pkl
NAMES=$DEF/zip_names_escapes.pt

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-display-test.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

PASSED=0
FAILED=0
OUT=$TMP/out
ERR=$TMP/err
WANT=$TMP/want

ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
not_ok() { FAILED=$((FAILED + 1)); echo "not ok - $1: $2"; }
check() { if [ -z "$2" ]; then ok "$1"; else not_ok "$1" "$2"; fi; }
run() { "$CKPT" "$@" >"$OUT" 2>"$ERR"; RC=$?; }
status_is() { [ "$RC" -eq "$1" ] || echo "exit status $RC, want $1 (stderr: $(sed -n 1p "$ERR"))"; }
# same FILE WANT: "" when equal, else the first differing lines
same() { cmp -s "$1" "$2" || { echo "differs:"; diff "$2" "$1" | head -8; }; }
nlines() { wc -l <"$1" | tr -d ' '; }
PY=$(command -v python3)

# ---------------------------------------------------------------------------
# 1. What is shown is what is there: one escaping everywhere

run show "$EVIL"
cat >"$WANT" <<'EOF'
model: posix.system("echo pwned")
epoch: \x1b[1A\x1b[2K\rcollections.OrderedDict()
"\u202etxt.exe": 1
"a\u009b2Jb": 2
hook: global builtins.print\x08\x08\x08\x08\x08
"\xff\xfekey": "café \x1b]0;title\x07"
"back\\slash": b"\x00\x1b\x7f\x80"
EOF
r=$(status_is 0)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "show: class/global names, keys and values escaped, the posix.system line intact" "$r"

run scan "$EVIL"
cat >"$WANT" <<'EOF'
VERDICT    GLOBAL                                   PICKLE  OFFSET  CALLED  WHY
dangerous  posix.system                             pickle      14  yes     runs commands or reaches the operating system
unknown    \x1b[1A\x1b[2K\rcollections.OrderedDict  pickle      56  yes
unknown    builtins.print\x08\x08\x08\x08\x08       pickle     131  no
EOF
echo "summary: $EVIL: 3 globals: 0 safe, 2 unknown (1 called), 1 dangerous (1 called) -- DANGEROUS: torch.load(weights_only=False) of this file can run code" >>"$WANT"
r=$(status_is 3)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "scan: global names escaped, columns aligned on the escaped text" "$r"

run ls "$NAMES"
cat >"$WANT" <<'EOF'
NAME          DTYPE    SHAPE  SIZE  STORAGE
w\xff         float32  [5]    20 B  0+0
a\x1b[31mred  float32  [3]    12 B  0+0
b             float32  [15]   60 B  s\x07+0
EOF
r=$(status_is 0)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "ls: tensor names and storage keys escaped" "$r"

run ls --key nope "$EVIL"
printf '%s\n' "ckpt: $EVIL: no top-level key 'nope'; keys are: 'model', 'epoch', '\\u202etxt.exe', 'a\\u009b2Jb', 'hook', '\\xff\\xfekey', 'back\\\\slash'" >"$WANT"
r=$(status_is 1)
[ -z "$r" ] && r=$(same "$ERR" "$WANT")
check "error messages: keys named by the library escaped" "$r"

# no raw control byte (C0 but newline, DEL, ESC) in any command's output
r=""
for c in "ls" "ls --json" "show" "show --json" "info" "info --json" "scan" "scan --json" "verify" "verify --json"; do
    for f in "$EVIL" "$NAMES"; do
        # shellcheck disable=SC2086
        "$CKPT" $c "$f" >"$OUT" 2>"$ERR"
        if LC_ALL=C tr -d '\n' <"$OUT" | LC_ALL=C grep -q '[[:cntrl:]]' ||
            LC_ALL=C tr -d '\n' <"$ERR" | LC_ALL=C grep -q '[[:cntrl:]]'; then
            r="$r $c $(basename "$f");"
        fi
    done
done
check "no control character from a file reaches stdout or stderr" "$r"

# info: keys and values escaped (C1 and bidi as \u, ESC as \x1b)
run info "$EVIL"
r=$(status_is 0)
[ -z "$r" ] && ! grep -qF '  "\u202etxt.exe"' "$OUT" && ! grep -qF '  \u202etxt.exe: int 1' "$OUT" && r="bidi key: $(grep txt "$OUT")"
[ -z "$r" ] && ! grep -qF '  epoch: \x1b[1A\x1b[2K\rcollections.OrderedDict of 0' "$OUT" && ! grep -qF 'epoch: \x1b[1A\x1b[2K\rcollections.OrderedDict' "$OUT" && r="class: $(grep epoch "$OUT")"
check "info: keys and class names escaped" "$r"

# ---------------------------------------------------------------------------
# 2. Tensor names that are not UTF-8 are not silently renamed in JSON

if [ -n "$PY" ]; then
    run ls --json "$NAMES"
    r=$(status_is 0)
    [ -z "$r" ] && r=$("$PY" - "$OUT" <<'EOF'
import base64, json, sys
t = json.load(open(sys.argv[1]))["tensors"]
want = [(b"w\xff", True), (b"a\x1b[31mred", False), (b"b", False)]
for x, (raw, has) in zip(t, want):
    if ("name_bytes" in x) != has:
        print("name_bytes for %r: %r" % (raw, x.get("name_bytes"))); break
    if has and base64.b64decode(x["name_bytes"]) != raw:
        print("name_bytes %r decodes to %r" % (x["name_bytes"], base64.b64decode(x["name_bytes"]))); break
    if not has and x["name"].encode() != raw:
        print("name %r" % x["name"]); break
else:
    if len(t) != 3: print("%d tensors" % len(t))
EOF
)
    check "ls --json: name_bytes (base64) beside a name that is not UTF-8, only there" "$r"
    run info --json "$EVIL"
    r=$(status_is 0)
    [ -z "$r" ] && r=$("$PY" -c '
import base64, json, sys
k = [x for x in json.load(open(sys.argv[1]))["keys"] if "key_bytes" in x]
if len(k) != 1 or base64.b64decode(k[0]["key_bytes"]) != b"\xff\xfekey":
    print("keys with key_bytes: %r" % k)' "$OUT")
    check "info --json: key_bytes beside the one key that is not UTF-8" "$r"
else
    ok "ls --json name_bytes # SKIP no python3"
fi

# ---------------------------------------------------------------------------
# 3. ls says why nothing is listed

run ls "$FIX/script/empty_t1.pt"
echo "ckpt: $FIX/script/empty_t1.pt: no tensors (a TorchScript module without parameters or buffers)" >"$WANT"
r=$(status_is 0)
[ -z "$r" ] && [ -s "$OUT" ] && r="stdout: $(sed -n 1p "$OUT")"
[ -z "$r" ] && r=$(same "$ERR" "$WANT")
check "ls of a TorchScript module without weights: one line on stderr, exit 0" "$r"

run ls --key epoch "$SAMPLE"
echo "ckpt: $SAMPLE: no tensors under key 'epoch'" >"$WANT"
r=$(status_is 0)
[ -z "$r" ] && [ -s "$OUT" ] && r="stdout: $(sed -n 1p "$OUT")"
[ -z "$r" ] && r=$(same "$ERR" "$WANT")
check "ls --key epoch: 'no tensors under key', exit 0" "$r"

run ls --filter 'nothing*' "$SAMPLE"
echo "ckpt: $SAMPLE: no tensor name matches 'nothing*'" >"$WANT"
r=$(status_is 0)
[ -z "$r" ] && [ -s "$OUT" ] && r="stdout: $(sed -n 1p "$OUT")"
[ -z "$r" ] && r=$(same "$ERR" "$WANT")
check "ls --filter matching nothing: said on stderr, exit 0" "$r"

# ---------------------------------------------------------------------------
# 4. show --json that fails part way leaves no half JSON presented as output

run show --json "$DEF/pkl_shared_string_laughs.pkl"
r=$(status_is 1)
[ -z "$r" ] && [ -s "$OUT" ] && r="$(wc -c <"$OUT") bytes on stdout"
[ -z "$r" ] && [ "$(nlines "$ERR")" != 1 ] && r="stderr has $(nlines "$ERR") lines"
check "show --json failing under 32 MiB: nothing on stdout, one line, exit 1" "$r"

if [ -n "$PY" ]; then
    # 2 MiB string shared 20 times: 40 MiB of JSON, the limit (4 MiB + 16 x
    # the file) stops it at about 36 MiB, past the 32 MiB kept in memory
    "$PY" -c '
import struct, sys
s = b"x" * (2 << 20)
p = b"\x80\x02]" + b"X" + struct.pack("<I", len(s)) + s + b"q\x000(" + b"h\x00" * 20 + b"e."
open(sys.argv[1], "wb").write(p)' "$TMP/big.pkl"
    run show --json "$TMP/big.pkl"
    r=$(status_is 1)
    [ -z "$r" ] && [ "$(nlines "$ERR")" != 1 ] && r="stderr has $(nlines "$ERR") lines"
    [ -z "$r" ] && r=$(tail -n 1 "$OUT" | "$PY" -c '
import json, sys
o = json.loads(sys.stdin.read())
if o.get("file") != sys.argv[1] or "JSON output" not in o["error"]["message"]:
    print("last line: %r" % o)' "$TMP/big.pkl" 2>&1)
    check "show --json failing past 32 MiB: ends with a {file, error} line, exit 1" "$r"
fi

# ---------------------------------------------------------------------------
# 5. Several files: headers, JSON Lines, worst status

run ls --filter '*fc1.bias' "$SAMPLE" "$TMP/missing.pt" "$SAMPLE"
{
    echo "==> $SAMPLE <=="
    echo "NAME            DTYPE    SHAPE  SIZE  STORAGE"
    echo "model.fc1.bias  float32  [8]    32 B  1+0"
    echo
    echo "==> $TMP/missing.pt <=="
    echo
    echo "==> $SAMPLE <=="
    echo "NAME            DTYPE    SHAPE  SIZE  STORAGE"
    echo "model.fc1.bias  float32  [8]    32 B  1+0"
} >"$WANT"
r=$(status_is 1)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
[ -z "$r" ] && [ "$(cat "$ERR")" != "ckpt: $TMP/missing.pt: No such file or directory" ] && r="stderr: $(cat "$ERR")"
check "ls A MISSING A: a header per file, goes on past a bad file, exit 1" "$r"

run scan "$SAMPLE" "$TMP/missing.pt" "$DEF/pkl_os_system.pkl"
r=$(status_is 3)
[ -z "$r" ] && [ "$(grep -c '^==> ' "$OUT")" != 3 ] && r="$(grep -c '^==> ' "$OUT") headers"
check "scan good missing dangerous: exit 3 (3 beats 1 beats 0)" "$r"
run scan "$SAMPLE" "$TMP/missing.pt"
check "scan good missing: exit 1" "$(status_is 1)"
run scan "$SAMPLE" "$SAMPLE"
check "scan good good: exit 0" "$(status_is 0)"

if [ -n "$PY" ]; then
    for c in "ls --json" "show --json" "info --json" "scan --json" "verify --json"; do
        # shellcheck disable=SC2086
        run $c "$SAMPLE" "$TMP/missing.pt" "$NAMES"
        r=$(status_is 1)
        [ -z "$r" ] && r=$("$PY" - "$OUT" "$SAMPLE" "$TMP/missing.pt" "$NAMES" <<'EOF'
import json, sys
lines = open(sys.argv[1], "rb").read().split(b"\n")
if lines[-1] != b"":
    print("no newline at the end")
lines = lines[:-1]
if len(lines) != 3:
    print("%d lines" % len(lines)); sys.exit()
for line, f in zip(lines, sys.argv[2:]):
    o = json.loads(line)
    if o.get("file") != f:
        print("file %r, want %r" % (o.get("file"), f))
    if f.endswith("missing.pt") and not o.get("error"):
        print("no error for the missing file")
EOF
)
        check "$c with 3 files: JSON Lines, one object per file with \"file\"" "$r"
    done
fi

# one file: as before (no "file" field in ls --json, no header)
run ls --json "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && ! head -c 12 "$OUT" | grep -q '^{"format": ' && r="starts: $(head -c 20 "$OUT")"
check "ls --json with one file: no \"file\" field, as before" "$r"
run show "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && grep -q '^==> ' "$OUT" && r="a header with one file"
check "show with one file: no header" "$r"
run verify "$SAMPLE" "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && [ "$(grep -c "^ok: $SAMPLE: zip" "$OUT")" != 2 ] && r="$(cat "$OUT")"
check "verify with two files: both verified" "$r"
run info "$SAMPLE" "$EVIL"
r=$(status_is 0)
[ -z "$r" ] && [ "$(grep -c '^==> ' "$OUT")" != 2 ] && r="$(grep -c '^==> ' "$OUT") headers"
check "info with two files: two headers" "$r"

# ---------------------------------------------------------------------------
# 6. ls --filter, SIZE, --key as a path of keys, verify --json

run ls --filter '*.bias' --key model "$SAMPLE"
cat >"$WANT" <<'EOF'
NAME      DTYPE    SHAPE  SIZE  STORAGE
fc1.bias  float32  [8]    32 B  1+0
bn.bias   float32  [8]    32 B  3+0
fc2.bias  float32  [3]    12 B  8+0
EOF
r=$(status_is 0)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "ls --filter '*.bias' --key model" "$r"

if [ -n "$PY" ]; then
    # SIZE agrees with nbytes (written by torch) on every fixture that lists
    r=""
    for f in "$FIX"/*_zip.pt "$FIX"/*_legacy.pt; do
        "$CKPT" ls --json "$f" >"$TMP/ls.json" 2>/dev/null || continue
        "$CKPT" ls "$f" >"$TMP/ls.txt" 2>/dev/null || continue
        r=$("$PY" - "$TMP/ls.json" "$TMP/ls.txt" <<'EOF'
import json, re, sys
t = json.load(open(sys.argv[1]))["tensors"]
rows = open(sys.argv[2], encoding="utf-8", errors="replace").read().splitlines()[1:]
def human(n):
    if n < 1024: return "%d B" % n
    v, u = n / 1024.0, 0
    units = ["KiB", "MiB", "GiB", "TiB"]
    while v >= 1023.95 and u + 1 < len(units):
        v /= 1024.0; u += 1
    return "%.1f %s" % (v, units[u])
if len(rows) != len(t):
    print("%d rows, %d tensors" % (len(rows), len(t)))
for x, row in zip(t, rows):
    if " " + human(x["nbytes"]) + "  " not in row:
        print("row %r: want size %s" % (row, human(x["nbytes"]))); break
EOF
)
        [ -n "$r" ] && { r="$(basename "$f"): $r"; break; }
    done
    check "ls SIZE column agrees with nbytes on every fixture" "$r"
fi
run ls --json "$FIX/many_zip.pt"
if grep -q '"nbytes": [0-9][0-9][0-9][0-9]' "$OUT"; then
    run ls "$FIX/many_zip.pt"
    r=""
    grep -q ' KiB  ' "$OUT" || r="no KiB size in $(sed -n 2p "$OUT")"
    check "ls: sizes of 1024 bytes and more in KiB" "$r"
fi

run ls --key optimizer.state "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && [ "$(sed -n 2p "$OUT" | cut -d' ' -f1)" != "0.step" ] && r="row 1: $(sed -n 2p "$OUT")"
# as many rows as the full listing has names under optimizer.state.
n=$("$CKPT" ls "$SAMPLE" | grep -c '^optimizer[.]state[.]')
want=$((n + 1))
[ -z "$r" ] && [ "$(nlines "$OUT")" != "$want" ] && r="$(nlines "$OUT") lines, want $want"
check "ls --key optimizer.state: a path of keys, names relative to it" "$r"

run info --key optimizer.state "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && ! grep -q "^tensors:     $n in $n storages\$" "$OUT" && r="$(grep '^tensors' "$OUT"), want $n"
[ -z "$r" ] && ! grep -q '^  0: dict of 3 (3 tensors, ' "$OUT" && r="keys: $(grep '^  0:' "$OUT")"
check "info --key optimizer.state: counts and keys under the path" "$r"

run ls --key model.fc1.weight "$SAMPLE"
printf '%s\n' 'NAME  DTYPE    SHAPE    SIZE  STORAGE' '""    float32  [8, 4]  128 B  0+0' >"$WANT"
r=$(status_is 0)
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "ls --key model.fc1.weight: the key 'fc1.weight' (with a dot) under model" "$r"

run show --key optimizer.param_groups.0.betas "$SAMPLE"
r=$(status_is 0)
printf '%s\n' '[0]: 0.9' '[1]: 0.999' >"$WANT"
[ -z "$r" ] && r=$(same "$OUT" "$WANT")
check "show --key through a list index" "$r"

run ls --key optimizer.nope "$SAMPLE"
echo "ckpt: $SAMPLE: no key 'optimizer.nope', as a top-level key or a path of keys" >"$WANT"
r=$(status_is 1)
[ -z "$r" ] && r=$(same "$ERR" "$WANT")
check "ls --key with a path that is not there: one line, exit 1" "$r"

run verify --json "$SAMPLE"
r=$(status_is 0)
[ -z "$r" ] && [ "$(cat "$OUT")" != "{\"file\": \"$SAMPLE\", \"ok\": true, \"format\": \"zip\", \"version\": \"3\", \"tensors\": 27, \"storages\": 27, \"bytes\": 1092, \"file_size\": 8677, \"tensors_checked\": true, \"notes\": [], \"error\": null}" ] && r="$(cat "$OUT")"
check "verify --json on a good file" "$r"
run verify --json "$DEF/zip_eocd_missing.pt"
r=$(status_is 1)
[ -z "$r" ] && ! grep -q '"ok": false, .*"error": {"message": "ZIP end of central directory record not found", "code": "format error", "offset": [0-9]*}}$' "$OUT" && r="$(cat "$OUT")"
[ -z "$r" ] && [ "$(nlines "$ERR")" != 1 ] && r="stderr: $(cat "$ERR")"
check "verify --json on a damaged file: ok false, the error, exit 1" "$r"

# ---------------------------------------------------------------------------
# --help describes the new options

for c in "ls:--filter" "ls:several files" "show:--key" "verify:--json" "scan:Several files" "info:Several files"; do
    cmd=${c%%:*}
    word=${c#*:}
    "$CKPT" "$cmd" --help >"$OUT" 2>&1
    r=""
    grep -qi -- "$word" "$OUT" || r="'$word' not in help"
    check "ckpt $cmd --help mentions $word" "$r"
done

# show --json: a key that is not UTF-8 comes back exactly (surrogateescape),
# as ls --json's name_bytes does; before, w\xff became "w\u00ff" (wÿ)
if command -v python3 >/dev/null 2>&1; then
    run show --json "$NAMES"
    r=$(status_is 0)
    [ -z "$r" ] && r=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
keys = [k.encode("utf-8", "surrogateescape") for k in d]
print("" if b"w\xff" in keys and b"a\x1b[31mred" in keys else "keys came back as %r" % keys)' "$OUT")
    check "show --json: names that are not UTF-8 come back byte for byte" "$r"
fi

echo "$PASSED passed, $FAILED failed"
[ "$FAILED" -eq 0 ]
