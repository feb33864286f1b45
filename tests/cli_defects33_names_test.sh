#!/bin/sh
# cli_defects33_names_test.sh - issue 33, names and CLI text, one group each:
#
#     tests/cli_defects33_names_test.sh CKPT SOURCE_DIR GROUP
#
#   nul    names are byte strings: {'w\x00evil', 'w', 'a', 'a\x00b'} lists
#          four names (before: refused as "two tensors are named 'w'");
#          ls/show/info escape them, --json writes \u0000, cat/extract take
#          the name as ls shows it, extract -d makes it a safe file name,
#          convert keeps it in the safetensors header, diff pairs by bytes
#   clash  {'model.fc.weight': t, 'model': {'fc.weight': u}} is valid:
#          listed, read, verified (a note, exit 0); a NAME two tensors share
#          is refused naming both key paths and --key picks either; convert
#          and extract -d refuse it naming both key paths, write nothing
#   bidi   extract -d writes no raw U+202E (U+200B, U+009B) to stdout or
#          into file names; --json escapes them as \uXXXX
#   file   every --json "file" (and diff's "a"/"b") keeps a file name that
#          is not UTF-8 byte for byte (\udcXX, as tensor names), not \u00ff
#   key    --key is a path of keys in cat, extract, convert and diff as in
#          ls (a key holding dots, an int key), and takes escapes (\x00)
#
# Fixtures: tests/fixtures/names33, written by tests/gen_names33.py with
# torch 1.13, and torch's answers beside them (key paths, sha256 of bytes).
# Prints "ok"/"not ok" lines and "N passed, M failed"; exits 77 without
# python3 (the answers are JSON).

case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$(cd "$2" && pwd)
GROUP=$3
FIX=$SRC/tests/fixtures/names33
PY=${CKPT_TEST_PYTHON:-python3}
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }

command -v "$PY" >/dev/null 2>&1 || { echo "skip - no $PY"; exit 77; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-names33.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

lines() { wc -l <"$1" | tr -d ' '; }
first_line() { sed -n 1p "$1"; }

# torch's answer for the tensor at key path PATH_JSON (a JSON list) of FILE:
# FIELD (sha256, name, ...)
answer() {
    "$PY" -c '
import json, sys
exp = json.load(open(sys.argv[1] + ".expected.json"))
want = json.loads(sys.argv[2])
for t in exp["tensors"]:
    if t["path"] == want:
        print(t[sys.argv[3]]); break
else:
    sys.exit("no tensor at %r" % want)
' "$1" "$2" "$3"
}

sha() { sha256sum "$1" | cut -c1-64; }

# the sha256 of the data of a .npy file (after its header)
npy_sha() {
    "$PY" -c '
import hashlib, struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:6] == b"\x93NUMPY", b[:6]
n = struct.unpack("<H", b[8:10])[0]
print(hashlib.sha256(b[10 + n:]).hexdigest())' "$1"
}

# "OK" when the safetensors file's keys are torch's names of FILE in order
# and each key's bytes are torch's; else what differs
st_matches() {
    "$PY" -c '
import hashlib, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
exp = json.load(open(sys.argv[2] + ".expected.json"))["tensors"]
if sys.argv[3:]:
    exp = [t for t in exp if t["path"][:len(json.loads(sys.argv[3]))] == json.loads(sys.argv[3])]
    pre = len(json.loads(sys.argv[3]))
    for t in exp:
        t["name"] = ".".join(str(k) for k in t["path"][pre:])
names = [t["name"] for t in exp]
if list(h) != names:
    sys.exit("keys %r, torch %r" % (list(h), names))
data = b[8 + n:]
for t in exp:
    lo, hi = h[t["name"]]["data_offsets"]
    if hashlib.sha256(data[lo:hi]).hexdigest() != t["sha256"]:
        sys.exit("bytes of %r differ" % t["name"])
print("OK")' "$@"
}

# ---------------------------------------------------------------------------
group_nul() {
    F=$FIX/nul.pt
    "$CKPT" ls "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    printf '%s\n' 'NAME       DTYPE    SHAPE  SIZE  STORAGE' \
        'w\x00evil  float32  [2]     8 B  0+0' \
        'w          float32  [3]    12 B  1+0' \
        'a          float32  [4]    16 B  2+0' \
        'a\x00b     float32  [5]    20 B  3+0' >"$TMP/want"
    [ $st = 0 ] && cmp -s "$TMP/o" "$TMP/want"
    check $? "ls lists four names, the NUL escaped as \\x00 (exit $st: $(first_line "$TMP/e"))"

    "$CKPT" ls --json "$F" >"$TMP/o" 2>"$TMP/e"
    "$PY" -c '
import json, sys
got = [t["name"] for t in json.load(open(sys.argv[1]))["tensors"]]
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
sys.exit(0 if got == exp else "%r != %r" % (got, exp))' "$TMP/o" "$F" 2>"$TMP/e2"
    check $? "ls --json: every name as torch.load gives it (\\u0000 kept) $(cat "$TMP/e2")"
    grep -qF '"w\u0000evil"' "$TMP/o"
    check $? "ls --json writes the NUL as \\u0000"

    "$CKPT" show --json "$F" >"$TMP/o" 2>"$TMP/e"
    "$PY" -c '
import json, sys
d = json.load(open(sys.argv[1]))
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
got = [k for k in d]
tens = [d[k]["$tensor"] for k in d]
sys.exit(0 if got == exp and tens == exp else "%r %r" % (got, tens))' "$TMP/o" "$F"
    check $? "show --json: keys and \$tensor names whole"

    "$CKPT" info "$F" >"$TMP/o" 2>"$TMP/e"
    grep -qF '  w\x00evil: tensor float32 [2]' "$TMP/o" && grep -q '^tensors:     4 in 4 storages$' "$TMP/o"
    check $? "info: four tensors, the key escaped"

    for p in '["w\u0000evil"]:w\x00evil' '["w"]:w' '["a\u0000b"]:a\x00b' '["a"]:a'; do
        path=${p%%:*}
        arg=${p#*:}
        "$CKPT" cat "$F" "$arg" --force -o "$TMP/c" 2>"$TMP/e"
        st=$?
        [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$(answer "$F" "$path" sha256)" ]
        check $? "cat FILE '$arg': torch's bytes of $path (exit $st: $(first_line "$TMP/e"))"
    done
    "$CKPT" extract "$F" 'a\x00b' -o "$TMP/x.npy" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(npy_sha "$TMP/x.npy")" = "$(answer "$F" '["a\u0000b"]' sha256)" ]
    check $? "extract FILE 'a\\x00b' -o: torch's bytes (exit $st)"

    rm -rf "$TMP/d"
    "$CKPT" extract "$F" -d "$TMP/d" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(cd "$TMP/d" && ls | LC_ALL=C sort | tr '\n' ' ')" = "a.npy a_b.npy w.npy w_evil.npy " ] &&
        [ "$(npy_sha "$TMP/d/w_evil.npy")" = "$(answer "$F" '["w\u0000evil"]' sha256)" ] &&
        [ "$(npy_sha "$TMP/d/w.npy")" = "$(answer "$F" '["w"]' sha256)" ]
    check $? "extract -d: four files, the NUL made '_' (w_evil.npy), each torch's bytes (exit $st)"
    "$PY" -c '
import json, sys
got = [json.loads(l.split(" -> ")[0]) for l in open(sys.argv[1])]
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
sys.exit(0 if got == exp else "%r" % got)' "$TMP/o" "$F"
    check $? "extract -d: each line names its tensor whole (JSON)"

    rm -f "$TMP/n.safetensors"
    "$CKPT" convert "$F" "$TMP/n.safetensors" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(st_matches "$TMP/n.safetensors" "$F")" = OK ]
    check $? "convert: the safetensors header keeps every name (\\u0000), torch's bytes (exit $st: $(first_line "$TMP/e"))"

    "$CKPT" diff "$F" "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && grep -q '^4 compared, 4 identical, 0 differ' "$TMP/o"
    check $? "diff FILE FILE: four names paired byte for byte (exit $st)"

    "$CKPT" ls --filter 'w*' "$F" >"$TMP/o" 2>&1
    [ "$(lines "$TMP/o")" = 3 ]
    check $? "ls --filter 'w*' matches w\\x00evil and w"
    "$CKPT" ls --filter 'w' "$F" >"$TMP/o" 2>&1
    [ "$(lines "$TMP/o")" = 2 ] && grep -q '^w ' "$TMP/o"
    check $? "ls --filter 'w': w only, not the name cut at its NUL"
}

# ---------------------------------------------------------------------------
group_clash() {
    F=$FIX/clash.pt
    "$CKPT" ls "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(grep -c '^model\.fc\.weight ' "$TMP/o")" = 2 ] && [ "$(lines "$TMP/o")" = 4 ]
    check $? "ls lists both tensors named model.fc.weight (exit $st: $(first_line "$TMP/e"))"
    "$CKPT" ls --json "$F" >"$TMP/o" 2>"$TMP/e"
    "$PY" -c '
import json, sys
got = [t["name"] for t in json.load(open(sys.argv[1]))["tensors"]]
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
sys.exit(0 if got == exp else "%r" % got)' "$TMP/o" "$F"
    check $? "ls --json: torch's names, in its order"
    for c in show info; do
        "$CKPT" $c "$F" >"$TMP/o" 2>"$TMP/e"
        check $? "$c reads it (exit 0)"
    done
    "$CKPT" verify "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && grep -q '^ok: ' "$TMP/o" && grep -q "^note: name clash: tensors 0 and 1 are both named 'model.fc.weight'" "$TMP/o"
    check $? "verify: ok, with a note on the clash, not damaged (exit $st: $(cat "$TMP/o" "$TMP/e" | head -2))"

    "$CKPT" cat "$F" model.fc.weight >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 1 ] && [ ! -s "$TMP/o" ] && [ "$(lines "$TMP/e")" = 1 ] &&
        grep -qF '["model.fc.weight"]' "$TMP/e" && grep -qF '["model"]["fc.weight"]' "$TMP/e" &&
        grep -q -- '--key' "$TMP/e"
    check $? "cat of the shared NAME: refused naming both key paths and --key (exit $st: $(cat "$TMP/e"))"
    "$CKPT" cat --key model "$F" fc.weight --force -o "$TMP/c" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$(answer "$F" '["model", "fc.weight"]' sha256)" ]
    check $? "cat --key model FILE fc.weight: torch's ['model']['fc.weight'] (exit $st)"
    "$CKPT" cat --key model.fc.weight "$F" '' --force -o "$TMP/c" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$(answer "$F" '["model.fc.weight"]' sha256)" ]
    check $? "cat --key model.fc.weight FILE '': torch's ['model.fc.weight'] (exit $st)"
    "$CKPT" cat "$F" other --force -o "$TMP/c" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$(answer "$F" '["other"]' sha256)" ]
    check $? "cat of a name of its own reads (exit $st)"

    rm -rf "$TMP/d"
    "$CKPT" extract "$F" -d "$TMP/d" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 1 ] && [ -z "$(ls -A "$TMP/d" 2>/dev/null)" ] && [ "$(lines "$TMP/e")" = 1 ] &&
        grep -qF '["model.fc.weight"]' "$TMP/e" && grep -qF '["model"]["fc.weight"]' "$TMP/e"
    check $? "extract -d: refused before writing, both key paths named (exit $st: $(cat "$TMP/e"))"
    rm -rf "$TMP/d"
    "$CKPT" extract --key model "$F" -d "$TMP/d" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(npy_sha "$TMP/d/fc.weight.npy")" = "$(answer "$F" '["model", "fc.weight"]' sha256)" ]
    check $? "extract --key model -d: fc.weight.npy, torch's bytes (exit $st)"

    rm -f "$TMP/c.safetensors"
    "$CKPT" convert "$F" "$TMP/c.safetensors" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 1 ] && [ ! -e "$TMP/c.safetensors" ] && [ "$(lines "$TMP/e")" = 1 ] &&
        grep -qF '["model.fc.weight"]' "$TMP/e" && grep -qF '["model"]["fc.weight"]' "$TMP/e"
    check $? "convert: refused naming both key paths, no OUT (exit $st: $(cat "$TMP/e"))"
    "$CKPT" convert --key model "$F" "$TMP/c.safetensors" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(st_matches "$TMP/c.safetensors" "$F" '["model"]')" = OK ]
    check $? "convert --key model: torch's ['model'] (exit $st: $(first_line "$TMP/e"))"

    "$CKPT" diff "$F" "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && grep -q '^3 compared, 3 identical, 0 differ, 0 only in A, 0 only in B$' "$TMP/o"
    check $? "diff FILE FILE: the shared name paired first with first, second with second (exit $st: $(cat "$TMP/o" "$TMP/e" | tail -1))"
}

# ---------------------------------------------------------------------------
group_bidi() {
    F=$FIX/bidi.pt
    RAW=$(printf '\342\200\256|\342\200\213|\302\233')
    rm -rf "$TMP/d"
    "$CKPT" extract "$F" -d "$TMP/d" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && ! grep -qE "$RAW" "$TMP/o" "$TMP/e"
    check $? "extract -d: no raw U+202E, U+200B or U+009B on stdout or stderr (exit $st)"
    grep -qF '"\u202egnp.exe" -> ' "$TMP/o"
    check $? "extract -d: the name as JSON with \\u202e"
    [ "$(cd "$TMP/d" && ls | LC_ALL=C sort | tr '\n' ' ')" = "_gnp.exe.npy csi_2J.npy plain.npy zero_width.npy " ]
    check $? "extract -d: file names without them (_gnp.exe.npy, zero_width.npy, csi_2J.npy): $(ls "$TMP/d" | tr '\n' ' ')"
    [ "$(npy_sha "$TMP/d/_gnp.exe.npy")" = "$(answer "$F" '["\u202egnp.exe"]' sha256)" ]
    check $? "extract -d: _gnp.exe.npy holds torch's bytes of '\\u202egnp.exe'"
    "$PY" -c '
import json, sys
got = [json.loads(l.split(" -> ")[0]) for l in open(sys.argv[1])]
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
sys.exit(0 if got == exp else "%r" % got)' "$TMP/o" "$F"
    check $? "extract -d: the JSON names are torch's, whole"
    for c in "ls --json" "show --json" "info --json" "ls" "show" "info"; do
        # shellcheck disable=SC2086
        "$CKPT" $c "$F" >"$TMP/o" 2>"$TMP/e"
        ! grep -qE "$RAW" "$TMP/o" "$TMP/e"
        check $? "$c: no raw U+202E, U+200B or U+009B"
    done
    "$CKPT" ls --json "$F" >"$TMP/o"
    "$PY" -c '
import json, sys
got = [t["name"] for t in json.load(open(sys.argv[1]))["tensors"]]
exp = [t["name"] for t in json.load(open(sys.argv[2] + ".expected.json"))["tensors"]]
sys.exit(0 if got == exp else "%r" % got)' "$TMP/o" "$F"
    check $? "ls --json: the escaped names decode to torch's"
    "$CKPT" cat "$F" '\u202egnp.exe' --force -o "$TMP/c" 2>"$TMP/e"
    [ "$(sha "$TMP/c")" = "$(answer "$F" '["\u202egnp.exe"]' sha256)" ]
    check $? "cat FILE '\\u202egnp.exe' (as ls shows it): torch's bytes"
}

# ---------------------------------------------------------------------------
# every JSON object of OUT (one a line, or one in all) with FIELDs: are they
# the bytes of the given paths, decoded with surrogateescape?
files_ok() {
    "$PY" -c '
import json, sys
out, field, want = sys.argv[1], sys.argv[2], [a.encode("utf-8", "surrogateescape") for a in sys.argv[3:]]
text = open(out, "rb").read().decode("utf-8")
objs = [json.loads(l) for l in text.splitlines() if l.strip()] if text.count("\n") > 1 else [json.loads(text)]
got = []
for o in objs:
    for f in field.split(","):
        if f in o:
            got.append(o[f].encode("utf-8", "surrogateescape"))
sys.exit(0 if got == want else "%r != %r" % (got, want))' "$@"
}

group_file() {
    A=$(printf '%s/n\377m.pt' "$TMP")
    B=$(printf '%s/caf\351.pt' "$TMP")
    BAD=$(printf '%s/bad\376.pt' "$TMP")
    cp "$FIX/nul.pt" "$A" && cp "$FIX/keys.pt" "$B" && printf 'not a checkpoint' >"$BAD" || exit 1
    for c in "ls --json" "show --json" "info --json" "verify --json" "scan --json"; do
        # shellcheck disable=SC2086
        "$CKPT" $c "$A" "$B" "$BAD" >"$TMP/o" 2>"$TMP/e"
        files_ok "$TMP/o" file "$A" "$B" "$BAD" 2>"$TMP/e2"
        check $? "$c A B BAD: each \"file\" the path's bytes (\\udcff), the error line's too $(cat "$TMP/e2")"
        grep -q 'u00ff\|u00e9\|u00fe' "$TMP/o"
        check $((!$?)) "$c: no byte turned into a latin-1 character (\\u00ff)"
    done
    "$CKPT" diff --json "$A" "$B" >"$TMP/o" 2>"$TMP/e"
    files_ok "$TMP/o" a,b "$A" "$B" 2>"$TMP/e2"
    check $? "diff --json: \"a\" and \"b\" the paths' bytes $(cat "$TMP/e2")"
}

# ---------------------------------------------------------------------------
group_key() {
    F=$FIX/keys.pt
    # --key PATH, NAME under it, torch's key path
    for c in 'model.fc:b:["model", "fc", "b"]' 'model:fc.w:["model", "fc.w"]' \
             'model.fc.w::["model", "fc.w"]' 'optimizer.state.0:exp_avg:["optimizer", "state", 0, "exp_avg"]' \
             'optimizer.state:0.exp_avg:["optimizer", "state", 0, "exp_avg"]' 'x.y:z:["x.y", "z"]'; do
        key=${c%%:*}
        rest=${c#*:}
        name=${rest%%:*}
        path=${rest#*:}
        want=$(answer "$F" "$path" sha256)
        "$CKPT" cat --key "$key" "$F" "$name" --force -o "$TMP/c" 2>"$TMP/e"
        st=$?
        [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$want" ]
        check $? "cat --key $key FILE '$name': torch's $path (exit $st: $(first_line "$TMP/e"))"
        rm -f "$TMP/x.npy"
        "$CKPT" extract --key "$key" "$F" "$name" -o "$TMP/x.npy" 2>"$TMP/e"
        st=$?
        [ $st = 0 ] && [ "$(npy_sha "$TMP/x.npy")" = "$want" ]
        check $? "extract --key $key FILE '$name' -o: torch's $path (exit $st: $(first_line "$TMP/e"))"
        "$CKPT" ls --key "$key" --filter "$name" "$F" >"$TMP/o" 2>"$TMP/e"
        [ "$(lines "$TMP/o")" = 2 ]
        check $? "ls --key $key lists '$name' as cat reads it"
    done
    rm -rf "$TMP/d"
    "$CKPT" extract --key optimizer.state "$F" -d "$TMP/d" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(npy_sha "$TMP/d/0.exp_avg.npy")" = "$(answer "$F" '["optimizer", "state", 0, "exp_avg"]' sha256)" ]
    check $? "extract --key optimizer.state -d: 0.exp_avg.npy (exit $st: $(first_line "$TMP/e"))"
    rm -f "$TMP/k.safetensors"
    "$CKPT" convert --key model.fc "$F" "$TMP/k.safetensors" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(st_matches "$TMP/k.safetensors" "$F" '["model", "fc"]')" = OK ]
    check $? "convert --key model.fc: torch's ['model']['fc'], names relative (exit $st: $(first_line "$TMP/e"))"
    "$CKPT" diff --key model.fc "$F" "$F" >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && grep -q '^1 compared, 1 identical, 0 differ, 0 only in A, 0 only in B$' "$TMP/o"
    check $? "diff --key model.fc: the one tensor under the path (exit $st: $(first_line "$TMP/e"))"
    "$CKPT" cat --key model.nope "$F" b >"$TMP/o" 2>"$TMP/e"
    st=$?
    [ $st = 1 ] && grep -q "no key 'model.nope', as a top-level key or a path of keys" "$TMP/e"
    check $? "cat --key with a path that is not there: the message ls gives (exit $st)"
    # escapes in K, as ls shows names
    N=$FIX/nul.pt
    "$CKPT" cat --key 'a\x00b' "$N" '' --force -o "$TMP/c" 2>"$TMP/e"
    st=$?
    [ $st = 0 ] && [ "$(sha "$TMP/c")" = "$(answer "$N" '["a\u0000b"]' sha256)" ]
    check $? "cat --key 'a\\x00b' FILE '': the key holding a NUL (exit $st: $(first_line "$TMP/e"))"
    "$CKPT" ls --key 'w\x00evil' "$N" >"$TMP/o" 2>"$TMP/e"
    [ "$(lines "$TMP/o")" = 2 ] && grep -q '^""  *float32  \[2\]' "$TMP/o"
    check $? "ls --key 'w\\x00evil': that tensor alone, not 'w'"
}

case $GROUP in
nul | clash | bidi | file | key) "group_$GROUP" ;;
*)
    echo "usage: $0 CKPT SOURCE_DIR nul|clash|bidi|file|key" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
