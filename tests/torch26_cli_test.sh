#!/bin/sh
# info, verify, show --json, extract -d and convert on the files PyTorch 2.6 wrote
# (tests/fixtures/torch26/, made by tests/gen_torch26.py), against torch
# 2.6's recorded answers (*.expected.json).  Needs python3 (stdlib only).
#
#   sh tests/torch26_cli_test.sh CKPT FIXTURES_DIR
CKPT=$1
DIR=$2
[ -x "$CKPT" ] && [ -d "$DIR" ] || { echo "usage: $0 CKPT FIXTURES_DIR" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-t26.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
notok() { fail=$((fail + 1)); echo "not ok - $1"; [ -n "$2" ] && echo "#   $2"; }

# check.py JOBS: the checks of outputs against the expectations, one per
# line of JOBS ("LABEL<TAB>WHAT<TAB>FIXTURE<TAB>OUT"), in one process (a
# python3 per check cost most of this test's time); prints "ok<TAB>LABEL" or
# "not ok<TAB>LABEL<TAB>why" per line.
cat >"$TMP/check.py" <<'EOF'
import hashlib, json, os, sys
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.environ["HERE"])
from test_fixtures import lookup  # dotted names whose keys contain dots


class Failed(Exception):
    pass


def numel(t):
    n = 1
    for s in t["shape"]:
        n *= s
    return n


def die(msg):
    raise Failed(msg)


def check(what, fx, out):
    exp = json.load(open(fx + ".expected.json", encoding="utf-8"))
    ts = exp["tensors"]
    if what == "verify":
        import re
        text = open(out, encoding="utf-8").read()
        m = re.search(r"^ok: (.*?): (\w+)[ ,].*? (\d+) tensors? in ", text, re.M)
        if not m or m.group(1) != fx or m.group(2) != exp["format"]:
            die("verify said %r, want ok: %s: %s" % (text.strip()[-200:], fx, exp["format"]))
        # with a key the file holds more than the expectation lists
        if exp["key"] is None and int(m.group(3)) != len(ts):
            die("verify counted %s tensors, want %d" % (m.group(3), len(ts)))
    elif what == "info":
        text = open(out, encoding="utf-8").read()
        p = sum(numel(t) for t in ts)
        b = sum(t["nbytes"] for t in ts)
        for want in ("tensors:     %d in " % len(ts), "parameters:  {:,} ({:,} bytes".format(p, b),
                     "format:      %s" % exp["format"]):
            if want not in text:
                die("info lacks %r" % want)
        if exp["format"] == "zip" and "little-endian" not in text:
            die("info lacks little-endian")
        sect = text.split("dtypes:", 1)[1].split("keys:", 1)[0] if "dtypes:" in text else ""
        for dt in sorted({t["dtype"] for t in ts}):
            n = sum(1 for t in ts if t["dtype"] == dt)
            line = [l for l in sect.splitlines() if l.split()[:1] == [dt]]
            if not line or line[0].split()[1] != str(n):
                die("info dtypes: %s %r, want %d tensors" % (dt, line, n))
    elif what == "show":
        doc = json.load(open(out, encoding="utf-8"))
        seen = {}

        def walk(v):
            if isinstance(v, dict):
                if "$tensor" in v and v["$tensor"] is not None:
                    seen.setdefault(v["$tensor"], v)
                for x in v.values():
                    walk(x)
            elif isinstance(v, list):
                for x in v:
                    walk(x)
        walk(doc)
        for t in ts:
            name = t["name"] if exp["key"] is None else exp["key"] + "." + t["name"]
            g = seen.get(name)
            if g is None:
                die("show --json has no $tensor %r" % name)
            if g.get("dtype") != t["dtype"] or g.get("shape") != t["shape"]:
                die("show --json %r: %s %s, want %s %s" % (name, g.get("dtype"), g.get("shape"),
                                                             t["dtype"], t["shape"]))
        for p, v in exp["values"].items():
            found, act = lookup(doc, p.split("."))
            if not found or act != v:
                die("show --json %s = %r, want %r" % (p, act, v))
    elif what == "extract":
        # out: the directory; the printed lines are in out + ".lines"
        lines = open(out + ".lines", encoding="utf-8").read().splitlines()
        if len(lines) != len(ts):
            die("extract -d printed %d lines, want %d" % (len(lines), len(ts)))
        descr = {"float64": "<f8", "float32": "<f4", "float16": "<f2", "bfloat16": "<u2",
                 "int64": "<i8", "int32": "<i4", "int16": "<i2", "int8": "|i1", "uint8": "|u1",
                 "bool": "|b1", "complex64": "<c8", "complex128": "<c16", "complex32": "<f2",
                 "uint16": "<u2", "uint32": "<u4", "uint64": "<u8", "bits16": "<u2"}
        for t, line in zip(ts, lines):
            name, _, path = line.partition(" -> ")
            if json.loads(name) != t["name"]:
                die("extract -d line %r, want tensor %r" % (line, t["name"]))
            raw = open(path, "rb").read()
            if raw[:6] != b"\x93NUMPY":
                die("%s is not .npy" % path)
            hl = int.from_bytes(raw[8:10], "little")
            head = eval(raw[10:10 + hl].decode("latin1"), {"__builtins__": {}})  # a dict literal
            data = raw[10 + hl:]
            want_d = descr.get(t["dtype"], "|u1")  # float8 and 1-byte bits: raw |u1
            shape = t["shape"] + ([2] if t["dtype"] == "complex32" else [])
            if head["descr"] != want_d or list(head["shape"]) != shape or head["fortran_order"]:
                die("%s header %r, want %s %s" % (path, head, want_d, shape))
            if hashlib.sha256(data).hexdigest() != t["sha256"]:
                die("%s bytes differ from torch's (%r)" % (path, t["name"]))
    elif what == "convert":
        # every tensor convert wrote (it leaves out dtypes safetensors lacks)
        import struct
        raw = open(out, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        head = json.loads(raw[8:8 + n])
        data = raw[8 + n:]
        byname = {(t["name"] if exp["key"] is None else t["name"]): t for t in ts}
        written = [k for k in head if k != "__metadata__"]
        # the dtypes safetensors has must all be there
        has = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
               "uint8", "bool", "uint16", "uint32", "uint64", "float8_e4m3fn", "float8_e5m2"}
        missing = [t["name"] for t in ts if t["dtype"] in has and t["name"] not in head]
        if missing:
            die("convert left out %r" % missing[:5])
        for k in written:
            t = byname.get(k)
            if t is None:
                die("convert wrote %r, which torch does not list" % k)
            a, b = head[k]["data_offsets"]
            if head[k]["shape"] != t["shape"] or \
                    hashlib.sha256(data[a:b]).hexdigest() != t["sha256"]:
                die("convert %r: shape %s or bytes differ from torch's" % (k, head[k]["shape"]))
    else:
        die("unknown check " + what)


for line in open(sys.argv[1], encoding="utf-8").read().splitlines():
    label, what, fx, out = line.split("\t")
    try:
        check(what, fx, out)
        print("ok\t" + label)
    except Exception as e:  # Failed, or a harness error: a failure either way
        msg = str(e) if isinstance(e, Failed) else "harness error: %r" % (e,)
        print("not ok\t%s\t%s" % (label, msg.replace("\n", " ")))
EOF
export HERE

TAB=$(printf '\t')
: >"$TMP/jobs"
check() { # LABEL WHAT FIXTURE OUT: checked by check.py after the loop
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$TMP/jobs"
}

# each fixture's key ("" for none), read once: FIXTURE<TAB>KEY lines
python3 -c '
import json, sys
for e in sys.argv[1:]:
    print("%s\t%s" % (e, json.load(open(e, encoding="utf-8"))["key"] or ""))
' "$DIR"/*.expected.json >"$TMP/keys"

n=0
for exp in "$DIR"/*.expected.json; do
    f=${exp%.expected.json}
    b=$(basename "$f")
    n=$((n + 1))
    key=$(grep -F "$exp$TAB" "$TMP/keys" | cut -f2)

    if "$CKPT" verify "$f" >"$TMP/verify$n" 2>"$TMP/err"; then
        check "verify $b" verify "$f" "$TMP/verify$n"
    else
        notok "verify $b" "exit $?: $(head -c 300 "$TMP/err")"
    fi

    if "$CKPT" info ${key:+--key "$key"} "$f" >"$TMP/info$n" 2>"$TMP/err"; then
        check "info $b" info "$f" "$TMP/info$n"
    else
        notok "info $b" "exit $?: $(head -c 300 "$TMP/err")"
    fi

    if "$CKPT" show --json "$f" >"$TMP/show$n" 2>"$TMP/err"; then
        check "show --json $b" show "$f" "$TMP/show$n"
    else
        notok "show --json $b" "exit $?: $(head -c 300 "$TMP/err")"
    fi

    d="$TMP/x$n"
    if "$CKPT" extract ${key:+--key "$key"} "$f" -d "$d" >"$d.lines" 2>"$TMP/err"; then
        check "extract -d $b" extract "$f" "$d"
    else
        notok "extract -d $b" "exit $?: $(head -c 300 "$TMP/err")"
    fi

    if "$CKPT" convert --skip-unsupported ${key:+--key "$key"} "$f" "$d.safetensors" \
        >/dev/null 2>"$TMP/err"; then
        check "convert $b" convert "$f" "$d.safetensors"
    else
        notok "convert $b" "exit $?: $(head -c 300 "$TMP/err")"
    fi
done
[ "$n" -gt 0 ] && ok "$n fixtures found" || notok "no fixtures in $DIR"
python3 "$TMP/check.py" "$TMP/jobs" >"$TMP/checked" 2>&1
prc=$?
while IFS= read -r line; do
    case $line in
    "ok$TAB"*) ok "${line#ok"$TAB"}" ;;
    "not ok$TAB"*) line=${line#not ok"$TAB"}; notok "${line%%"$TAB"*}" "${line#*"$TAB"}" ;;
    *) notok "check.py" "$line" ;;
    esac
done <"$TMP/checked"
[ "$prc" -eq 0 ] || notok "check.py exit status $prc"
[ "$(grep -c . "$TMP/jobs")" = "$(grep -c . "$TMP/checked")" ] ||
    notok "check.py answered $(grep -c . "$TMP/checked") of $(grep -c . "$TMP/jobs") checks"

# what 2.6 writes beside data.pkl: .data/serialization_id (read, no warning)
f="$DIR/dtypes_zip.pt"
if "$CKPT" verify "$f" 2>&1 | grep -q 'serialization_id'; then
    notok "verify is silent on .data/serialization_id"
else
    ok "verify is silent on .data/serialization_id"
fi

# set_crc32_options(False): records carry CRC 0; verify says so and passes
f="$DIR/nocrc_zip.pt"
out=$("$CKPT" verify "$f" 2>&1)
rc=$?
case "$out" in
*"no crc recorded for nocrc_zip/data/0"*) [ $rc -eq 0 ] && ok "verify notes missing CRCs and passes" ||
    notok "verify notes missing CRCs and passes" "exit $rc" ;;
*) notok "verify notes missing CRCs and passes" "$out" ;;
esac

# a conj view: its stored bytes are not the tensor's, so no file offset
f="$DIR/views_zip.pt"
if "$CKPT" ls --json "$f" | python3 -c '
import json, sys
ts = {t["name"]: t for t in json.load(sys.stdin)["tensors"]}
assert ts["c64_conj"]["file_offset"] is None, ts["c64_conj"]
assert ts["neg_i64"]["file_offset"] is None, ts["neg_i64"]
assert isinstance(ts["base"]["file_offset"], int), ts["base"]
assert ts["c64_conj"].get("conj") is True and "neg" not in ts["c64_conj"], ts["c64_conj"]
assert ts["neg_i64"].get("neg") is True and "conj" not in ts["neg_i64"], ts["neg_i64"]
assert "conj" not in ts["base"] and "neg" not in ts["base"], ts["base"]
'; then ok "ls --json: conj/neg views have file_offset null and say conj/neg"; else notok "ls --json: conj/neg views have file_offset null and say conj/neg"; fi

# the globals 2.6's weights_only unpickler allows, as values
f="$DIR/safe_globals_zip.pt"
if "$CKPT" show --json "$f" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["dtype"] == {"$global": "torch.bfloat16"}, d["dtype"]
assert d["dtypes"][2] == {"$global": "torch.bits8"}, d["dtypes"]
assert d["device"]["$object"] == "torch.device" and d["device"]["args"] == ["cpu"], d["device"]
assert d["size"] == [2, 3], d["size"]
assert d["config"]["state"]["width"] == 8, d["config"]
'; then ok "show --json: torch.device, dtypes, Size, allowed user class"; else notok "show --json: torch.device, dtypes, Size, allowed user class"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
