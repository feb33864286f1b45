#!/bin/sh
# cli_defects5_test.sh - the CLI defects left by session 4, one group each:
#
#     tests/cli_defects5_test.sh CKPT SOURCE_DIR GROUP
#
#   diff        a failed write to stdout is trouble (exit 2, one line), not
#               "differ" (1)
#   unreadable  convert names each unreadable tensor and why (the reason
#               'ckpt ls --json' gives), not "no dtype"
#   show        show --json has TorchScript's "constants" and "extra", as
#               torch saved them (constants.txt recorded from torch.jit.load;
#               the extra files are the archive's extra/ records)
#   stale       convert --force into a folder of an earlier export removes its
#               leftover shards, index or model.safetensors, and nothing else
#   thread      convert of records over 64 KiB (the export's CRC thread) from
#               a file torch writes here: the bytes are torch's (run under
#               ThreadSanitizer this is the crash of session 4; needs torch)
#   bench       bench/link_read_all.sh links read_all against this build's
#               libckpt.a (jansson; -ldl where dlopen needs it) and it reads a fixture
#
# Prints "ok"/"not ok" lines and "N passed, M failed"; exits 77 when what a
# group needs is missing (torch for thread).

case $1 in /*) CKPT=$1 ;; *) CKPT=$(pwd)/$1 ;; esac
SRC=$(cd "$2" && pwd)
GROUP=$3
FIX=$SRC/tests/fixtures
PY=${CKPT_TEST_PYTHON:-python3}
PASSED=0
FAILED=0
ok() { PASSED=$((PASSED + 1)); echo "ok - $1"; }
nok() { FAILED=$((FAILED + 1)); echo "not ok - $1"; }
check() { if [ "$1" = 0 ]; then ok "$2"; else nok "$2"; fi; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-defects5.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

lines() { wc -l <"$1" | tr -d ' '; }

# ---------------------------------------------------------------------------
group_diff() {
    A=$FIX/dtypes_zip.pt
    B=$FIX/dtypes_legacy.pt
    C=$FIX/many_zip.pt
    "$CKPT" diff "$A" "$B" >"$TMP/o" 2>"$TMP/e"
    check $? "diff of equal files exits 0"
    "$CKPT" diff "$A" "$C" >"$TMP/o" 2>"$TMP/e"
    [ $? = 1 ] && [ -s "$TMP/o" ]
    check $? "diff of different files exits 1 with output"
    if [ -w /dev/full ]; then
        for args in "$A $B" "$A $C" "--json $A $C" "--max-abs $A $B"; do
            # shellcheck disable=SC2086
            "$CKPT" diff $args >/dev/full 2>"$TMP/e"
            st=$?
            [ $st = 2 ]
            check $? "diff $args >/dev/full exits 2 (trouble), not $st"
            [ "$(lines "$TMP/e")" = 1 ] && grep -q '^ckpt: write error: No space left on device$' "$TMP/e"
            check $? "diff $args >/dev/full: one line 'ckpt: write error: ...' ($(head -c 200 "$TMP/e"))"
        done
        # the other commands keep exit 1 for it
        "$CKPT" ls "$A" >/dev/full 2>"$TMP/e"
        check $(($? != 1)) "ls >/dev/full still exits 1"
    else
        echo "skip - /dev/full is not writable here"
    fi
}

# ---------------------------------------------------------------------------
# the unreadable tensors of FILE as "name<TAB>reason", from ls --json
unreadable_of() {
    "$CKPT" ls --json "$1" | "$PY" -c '
import json, sys
for t in json.load(sys.stdin)["tensors"]:
    if t.get("readable", True) is False:
        print(t["name"] + "\t" + t["reason"])
'
}

group_unreadable() {
    for f in kinds/meta_t1.pt kinds/meta_t2.pt kinds/mixed_t1.pt kinds/mixed_t2_legacy.pt \
             kinds/nested_t2.pt; do
        unreadable_of "$FIX/$f" >"$TMP/u"
        # torch's own answer: which tensors have no data
        "$PY" -c '
import json, sys
exp = json.load(open(sys.argv[1]))
names = sorted(t["name"] for t in exp["tensors"] if t.get("readable", True) is False)
got = sorted(l.split("\t")[0] for l in open(sys.argv[2]).read().splitlines())
sys.exit(0 if names and names == got else 1)
' "$FIX/$f.expected.json" "$TMP/u"
        check $? "$f: ls --json marks the tensors torch saved without data unreadable"
        "$CKPT" convert "$FIX/$f" "$TMP/out.safetensors" >"$TMP/o" 2>"$TMP/e"
        st=$?
        [ $st = 1 ] && [ "$(lines "$TMP/e")" = 1 ] && [ ! -e "$TMP/out.safetensors" ]
        check $? "$f: convert refuses it (exit 1, one line, no OUT; got $st)"
        ! grep -q 'no dtype' "$TMP/e"
        check $? "$f: the message does not say 'no dtype' for them"
        all=0
        while IFS="	" read -r name why; do
            grep -qF "$name ($why)" "$TMP/e" || all=1
        done <"$TMP/u"
        check $all "$f: the message names each with its reason: $(cat "$TMP/e")"
        grep -q 'that cannot be read' "$TMP/e" && grep -q -- '--skip-unsupported' "$TMP/e"
        check $? "$f: the message says they cannot be read and how to leave them out"

        "$CKPT" convert --skip-unsupported "$FIX/$f" "$TMP/out.safetensors" >"$TMP/o" 2>"$TMP/e"
        check $? "$f: convert --skip-unsupported succeeds"
        all=0
        while IFS="	" read -r name why; do
            grep -qF "$name ($why)" "$TMP/e" || all=1
            "$CKPT" ls --json "$TMP/out.safetensors" | "$PY" -c '
import json, sys
sys.exit(1 if any(t["name"] == sys.argv[1] for t in json.load(sys.stdin)["tensors"]) else 0)
' "$name" || all=1
        done <"$TMP/u"
        check $all "$f: --skip-unsupported leaves them out and its warning names them with why"
        rm -f "$TMP/out.safetensors"
    done
    # a tensor safetensors has no dtype for keeps its message
    "$CKPT" convert --skip-unsupported "$FIX/kinds/mixed_t1.pt" "$TMP/out.safetensors" 2>"$TMP/e"
    grep -q 'no dtype for: q (quint8)' "$TMP/e"
    check $? "mixed_t1.pt: the quantized tensor without a safetensors dtype is still 'no dtype'"
}

# ---------------------------------------------------------------------------
group_show() {
    S=$FIX/script
    for f in consts_t1.pt consts_t2.pt; do
        "$CKPT" show --json "$S/$f" >"$TMP/o" 2>"$TMP/e"
        check $? "show --json $f exits 0"
        # torch.jit.load's constants table, recorded: "dtype numel hex" per line
        "$PY" -c '
import json, sys
v = json.load(open(sys.argv[1]))
want = [l.split() for l in open(sys.argv[2]).read().splitlines()]
c = v.get("constants")
ok = isinstance(c, list) and len(c) == len(want) and "$object" in v and "state" in v
for t, (dt, numel, _) in zip(c or [], want):
    n = 1
    for d in t.get("shape", []): n *= d
    ok = ok and t.get("dtype") == dt and n == int(numel)
sys.exit(0 if ok else 1)
' "$TMP/o" "$S/$f.constants.txt"
        check $? "show --json $f: \"constants\" holds torch's constants (dtype, size), beside the module"
        grep -q '^  "constants": \[$' "$TMP/o"
        check $? "show --json $f: \"constants\" is a member of the root object, indented as one"
    done
    for f in model_t1.pt model_t2.pt; do
        "$CKPT" show --json "$S/$f" >"$TMP/o" 2>"$TMP/e"
        check $? "show --json $f exits 0"
        "$PY" -c '
import base64, json, sys, zipfile
v = json.load(open(sys.argv[1]))
z = zipfile.ZipFile(sys.argv[2])
want = {}
for n in z.namelist():
    parts = n.split("/")
    if len(parts) == 3 and parts[1] == "extra":
        want[parts[2]] = z.read(n)
e = v.get("extra")
got = {k: base64.b64decode(x["$bytes"]) for k, x in (e or {}).items()}
sys.exit(0 if want and got == want and "constants" not in v else 1)
' "$TMP/o" "$S/$f"
        check $? "show --json $f: \"extra\" holds every _extra_files record's bytes"
    done
    # several files: JSON Lines, the members inside "value"
    "$CKPT" show --json "$S/model_t1.pt" "$S/consts_t1.pt" "$FIX/dtypes_zip.pt" >"$TMP/o" 2>"$TMP/e"
    check $? "show --json of three files exits 0"
    "$PY" -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ok = len(rows) == 3
ok = ok and "extra" in rows[0]["value"] and "constants" not in rows[0]["value"]
ok = ok and "constants" in rows[1]["value"] and "extra" not in rows[1]["value"]
ok = ok and "constants" not in rows[2]["value"] and "extra" not in rows[2]["value"]
sys.exit(0 if ok else 1)
' "$TMP/o"
    check $? "show --json of several files: \"constants\"/\"extra\" in each TorchScript's \"value\" only"
    # the text show prints the same parts
    "$CKPT" show "$S/model_t1.pt" | grep -q '^extra files:$'
    check $? "show (text) still prints the extra files"
    # a failed write leaves nothing half-written: exit 1, one line
    if [ -w /dev/full ]; then
        "$CKPT" show --json "$S/model_t1.pt" >/dev/full 2>"$TMP/e"
        [ $? = 1 ] && [ "$(lines "$TMP/e")" = 1 ]
        check $? "show --json >/dev/full: exit 1, one line"
    fi
}

# ---------------------------------------------------------------------------
group_stale() {
    F=$FIX/dtypes_zip.pt # 14 tensors, complex128 left out: 13 in 552 bytes
    D=$TMP/out
    conv() { "$CKPT" convert --skip-unsupported "$@" "$F" "$D/" 2>"$TMP/e"; }
    listing() { (cd "$D" && ls -A | LC_ALL=C sort | tr '\n' ' '); }
    conv --max-shard-size 100
    check $? "convert into a new folder: 7 shards"
    [ "$(ls "$D" | grep -c '^model-0000[1-7]-of-00007\.safetensors$')" = 7 ]
    check $? "7 shards written: $(listing)"
    # bystanders an earlier export did not write, some looking like it
    : >"$D/notes.txt"
    : >"$D/other.safetensors"
    : >"$D/model-1-of-3.safetensors"
    : >"$D/model-00002-of-00001.safetensors"
    : >"$D/model-00001-of-00009.safetensors.bak"
    : >"$D/pytorch_model-00001-of-00002.bin"
    mkdir "$D/model-00001-of-00004.safetensors"
    bystanders="model-00001-of-00004.safetensors model-00001-of-00009.safetensors.bak model-00002-of-00001.safetensors model-1-of-3.safetensors notes.txt other.safetensors pytorch_model-00001-of-00002.bin"
    has_bystanders() {
        for b in $bystanders; do [ -e "$D/$b" ] || return 1; done
    }

    conv --force --max-shard-size 200
    check $? "--force, 3 shards over 7 exits 0"
    [ "$(listing)" = "model-00001-of-00003.safetensors model-00001-of-00004.safetensors model-00001-of-00009.safetensors.bak model-00002-of-00001.safetensors model-00002-of-00003.safetensors model-00003-of-00003.safetensors model-1-of-3.safetensors model.safetensors.index.json notes.txt other.safetensors pytorch_model-00001-of-00002.bin " ]
    check $? "--force, 3 over 7: the 7 old shards are gone, the rest stays: $(listing)"
    # the index and its shards agree, and every listed tensor reads back
    "$PY" -c '
import json, os, sys
d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
shards = sorted(set(idx["weight_map"].values()))
on_disk = sorted(n for n in os.listdir(d) if n.endswith(".safetensors") and n.startswith("model-0000") and os.path.isfile(os.path.join(d, n)) and n.endswith("-of-00003.safetensors"))
sys.exit(0 if shards == on_disk and len(shards) == 3 else 1)
' "$D"
    check $? "the index lists exactly the shards on disk"
    [ "$("$CKPT" ls "$D/" 2>/dev/null | tail -n +2 | wc -l)" = 13 ]
    check $? "ckpt ls of the folder gives the 13 tensors"

    conv --force
    check $? "--force, one model.safetensors over 3 shards exits 0"
    [ "$(listing)" = "model-00001-of-00004.safetensors model-00001-of-00009.safetensors.bak model-00002-of-00001.safetensors model-1-of-3.safetensors model.safetensors notes.txt other.safetensors pytorch_model-00001-of-00002.bin " ]
    check $? "--force, one file over 3 shards: old shards and index gone: $(listing)"

    conv --max-shard-size 200
    check $? "without --force, 3 shards beside model.safetensors: written"
    [ -f "$D/model.safetensors" ] && grep -q 'warning: model.safetensors, from an earlier export, is still there (--force removes it)' "$TMP/e"
    check $? "without --force nothing is removed, a warning names it"
    conv --force --max-shard-size 200
    check $? "--force, 3 shards over 3 shards and model.safetensors exits 0"
    [ ! -e "$D/model.safetensors" ] && [ -f "$D/model.safetensors.index.json" ] && has_bystanders
    check $? "--force: the stale model.safetensors (transformers would load it first) is gone: $(listing)"

    # symlinks named like a stale shard are removed as links, their target kept
    : >"$TMP/target"
    ln -s "$TMP/target" "$D/model-00001-of-00002.safetensors"
    conv --force --max-shard-size 200
    [ ! -e "$D/model-00001-of-00002.safetensors" ] && [ ! -L "$D/model-00001-of-00002.safetensors" ] && [ -f "$TMP/target" ]
    check $? "a stale shard that is a symlink: the link goes, its target stays"
    has_bystanders
    check $? "after every run, nothing else in the folder was touched"

    # a failed export (a damaged record, found while shards are written)
    # removes nothing of the earlier one
    "$PY" -c '
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
i = [i for i in z.infolist() if i.filename.endswith("/data/12")][0]
b = bytearray(open(sys.argv[1], "rb").read())
hdr = i.header_offset
nlen = int.from_bytes(b[hdr + 26:hdr + 28], "little")
xlen = int.from_bytes(b[hdr + 28:hdr + 30], "little")
b[hdr + 30 + nlen + xlen] ^= 0xFF
open(sys.argv[2], "wb").write(bytes(b))
' "$F" "$TMP/bad.pt"
    before=$(listing)
    "$CKPT" convert --skip-unsupported --force --max-shard-size 100 "$TMP/bad.pt" "$D/" 2>"$TMP/e"
    st=$?
    [ $st = 1 ] && grep -q 'crc mismatch' "$TMP/e" && [ "$(listing)" = "$before" ]
    check $? "a failed --force export removes nothing (exit $st): $(listing)"
}

# ---------------------------------------------------------------------------
group_thread() {
    if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
        echo "skip - /usr/bin/python3 cannot import torch"
        exit 77
    fi
    /usr/bin/python3 -c '
import sys, torch
torch.manual_seed(0)
w = torch.randn(100000)
v = torch.randn(50000)
sd = {"w": w, "v": v[::2], "s": torch.arange(20000, dtype=torch.int32)[::4], "small": torch.ones(3)}
torch.save(sd, sys.argv[1])
with open(sys.argv[2], "wb") as f:
    for k in sorted(sd):
        f.write(sd[k].contiguous().numpy().tobytes())
' "$TMP/big.pt" "$TMP/want.bin"
    check $? "torch writes a file with records of 200-400 KB"
    for jobs in 1 4; do
        "$CKPT" convert --jobs $jobs "$TMP/big.pt" "$TMP/out$jobs.safetensors" 2>"$TMP/e"
        check $? "convert --jobs $jobs of it exits 0 $(cat "$TMP/e")"
        "$PY" -c '
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = b[8 + n:]
got = b"".join(data[h[k]["data_offsets"][0]:h[k]["data_offsets"][1]] for k in sorted(h) if k != "__metadata__")
sys.exit(0 if got == open(sys.argv[2], "rb").read() else 1)
' "$TMP/out$jobs.safetensors" "$TMP/want.bin"
        check $? "convert --jobs $jobs: every tensor holds torch's bytes"
    done
    # a damaged record is found by the check (the thread's or the copy's)
    "$PY" -c '
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
i = [i for i in z.infolist() if i.filename.endswith("/data/1")][0]
b = bytearray(open(sys.argv[1], "rb").read())
hdr = i.header_offset
nlen = int.from_bytes(b[hdr + 26:hdr + 28], "little")
xlen = int.from_bytes(b[hdr + 28:hdr + 30], "little")
b[hdr + 30 + nlen + xlen + 1000] ^= 0xFF
open(sys.argv[2], "wb").write(bytes(b))
' "$TMP/big.pt" "$TMP/bad.pt"
    "$CKPT" convert "$TMP/bad.pt" "$TMP/bad.safetensors" 2>"$TMP/e"
    [ $? = 1 ] && grep -q 'crc mismatch' "$TMP/e" && [ ! -e "$TMP/bad.safetensors" ]
    check $? "a damaged record over 64 KiB: crc mismatch, exit 1, no OUT"
}

# ---------------------------------------------------------------------------
group_bench() {
    B=$(dirname "$CKPT")
    if [ ! -f "$B/libckpt.a" ]; then
        echo "skip - no $B/libckpt.a"
        exit 77
    fi
    sh "$SRC/bench/link_read_all.sh" "$B" "$TMP/read_all" 2>"$TMP/e"
    check $? "bench/link_read_all.sh links read_all against libckpt.a $(head -c 300 "$TMP/e")"
    want=$("$CKPT" ls --json "$FIX/dtypes_zip.pt" | "$PY" -c '
import json, sys
t = json.load(sys.stdin)["tensors"]
print("%d tensors, %d bytes" % (len(t), sum(x["nbytes"] for x in t)))')
    got=$("$TMP/read_all" "$FIX/dtypes_zip.pt" 2>&1)
    [ "$got" = "$want" ]
    check $? "read_all reads every tensor ($got; ls --json: $want)"
    grep -q 'link_read_all.sh' "$SRC/bench/run.sh"
    check $? "bench/run.sh links read_all through it"
}

case $GROUP in
diff | unreadable | show | stale | thread | bench) "group_$GROUP" ;;
*)
    echo "usage: $0 CKPT SOURCE_DIR diff|unreadable|show|stale|thread|bench" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
