#!/bin/sh
# parverify_test.sh CKPT FIXTURES - `ckpt verify --jobs N` of a checkpoint of
# several files (shard folders, index files, DCP folders) checks its parts
# on threads and prints the same bytes (stdout, stderr, exit status) as
# --jobs 1: on torch 2.6's fixtures, and on copies with damaged parts
# (the error names the first bad part's record, whichever thread found it).
CKPT=$1
FX=$2
PY=${PYTHON3:-python3}
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# run J OPERANDS...: output of verify --jobs J into $T/out.J
run() {
    j=$1
    shift
    "$CKPT" verify --jobs "$j" "$@" >"$T/out.$j" 2>"$T/err.$j"
    echo "rc=$?" >>"$T/out.$j"
}

same() { # what
    for j in 2 4; do
        if cmp -s "$T/out.1" "$T/out.$j" && cmp -s "$T/err.1" "$T/err.$j"; then
            ok "$1: --jobs $j prints what --jobs 1 prints"
        else
            bad "$1: --jobs $j differs from --jobs 1"
            diff "$T/out.1" "$T/out.$j"
            diff "$T/err.1" "$T/err.$j"
        fi
    done
}

for d in hf_bin hf_st hf_bin/pytorch_model.bin.index.json dcp_model dcp_optim dcp_split; do
    for j in 1 2 4; do run $j "$FX/$d"; done
    if grep -q '^rc=0$' "$T/out.1" && grep -q '^ok: ' "$T/out.1"; then
        ok "$d: intact"
    else
        bad "$d: not found intact"
        cat "$T/out.1" "$T/err.1"
    fi
    same "$d"
done
for j in 1 2 4; do run $j --json "$FX/hf_bin" "$FX/dcp_optim"; done
same "--json, two folders"

# damaged copies: a flipped byte in the first storage of the given parts
damage() { # FILE...: flip a byte of each file's first data record
    "$PY" - "$@" <<'PY' || exit 1
import sys, zipfile, struct
for p in sys.argv[1:]:
    z = zipfile.ZipFile(p)
    i = [i for i in z.infolist() if "/data/" in i.filename][0]
    with open(p, "r+b") as f:
        f.seek(i.header_offset)
        h = f.read(30)
        n, e = struct.unpack("<HH", h[26:30])
        off = i.header_offset + 30 + n + e
        f.seek(off)
        b = f.read(1)
        f.seek(off)
        f.write(bytes([b[0] ^ 0x40]))
PY
}
cp -r "$FX/hf_bin" "$T/bin2"
damage "$T/bin2/pytorch_model-00002-of-00003.bin"
cp -r "$FX/hf_bin" "$T/bin23"
damage "$T/bin23/pytorch_model-00002-of-00003.bin" "$T/bin23/pytorch_model-00003-of-00003.bin"
for c in bin2 bin23; do
    for j in 1 2 4; do run $j "$T/$c"; done
    if grep -q '^rc=1$' "$T/out.1" && grep -q 'pytorch_model-00002-of-00003.bin: crc mismatch in .*/data/' "$T/err.1" &&
        grep -q '00001-of-00003.bin: intact' "$T/out.1" && ! grep -q '00003-of-00003.bin: intact' "$T/out.1"; then
        ok "$c: the second shard is named, the first found intact"
    else
        bad "$c: not the second shard's error"
        cat "$T/out.1" "$T/err.1"
    fi
    same "$c"
done
# DCP: records in both .distcp files damaged: the first file's is named
"$PY" - "$FX/dcp_optim" "$T/dcp" <<'PY' || exit 1
import sys, shutil, zipfile, os
src, dst = sys.argv[1], sys.argv[2]
shutil.copytree(src, dst)
for name in ("__0_0.distcp", "__0_1.distcp"):
    p = os.path.join(dst, name)
    data = bytearray(open(p, "rb").read())
    # the first embedded torch.save record's first data entry: find its
    # local header by signature after the record's "data.pkl" entry
    k = data.find(b"PK\x03\x04", data.find(b"/data/0") - 64)
    n = int.from_bytes(data[k + 26:k + 28], "little")
    e = int.from_bytes(data[k + 28:k + 30], "little")
    assert b"/data/" in data[k + 30:k + 30 + n]
    data[k + 30 + n + e] ^= 0x40
    open(p, "wb").write(bytes(data))
PY
for j in 1 2 4; do run $j "$T/dcp"; done
if grep -q '^rc=1$' "$T/out.1" && grep -q '__0_0.distcp, record at byte' "$T/err.1"; then
    ok "dcp: the first .distcp file's record is named"
else
    bad "dcp: not the first file's record"
    cat "$T/out.1" "$T/err.1"
fi
same "dcp, two damaged files"

# convert checks the parts of a source of several files first, on --jobs
# threads: a damaged part stops it with the error --jobs 1 gives
for c in bin2 bin23 dcp; do
    for j in 1 2; do
        "$CKPT" convert --jobs $j "$T/$c" "$T/conv$j.safetensors" >/dev/null 2>"$T/cerr.$j"
        echo "rc=$?" >>"$T/cerr.$j"
    done
    if grep -q '^rc=1$' "$T/cerr.1" && grep -q 'the file is damaged; --no-verify converts it anyway' "$T/cerr.1" &&
        [ ! -e "$T/conv1.safetensors" ] && [ ! -e "$T/conv2.safetensors" ]; then
        ok "convert $c: refused, nothing written"
        case $c in bin*)
            if grep -q 'pytorch_model-00002-of-00003.bin: crc mismatch' "$T/cerr.1"; then
                ok "convert $c: the second shard is named"
            else
                bad "convert $c: the second shard is not named"
            fi ;;
        esac
    else
        bad "convert $c: not refused"
        cat "$T/cerr.1"
    fi
    if cmp -s "$T/cerr.1" "$T/cerr.2"; then
        ok "convert $c: --jobs 2 reports what --jobs 1 reports"
    else
        bad "convert $c: --jobs 2 differs"
        diff "$T/cerr.1" "$T/cerr.2"
    fi
done
if "$CKPT" convert --no-verify --jobs 2 "$T/bin2" "$T/nv.safetensors" 2>/dev/null && [ -s "$T/nv.safetensors" ]; then
    ok "convert --no-verify: converts the damaged shards anyway"
else
    bad "convert --no-verify: did not convert"
fi
for j in 1 2; do
    "$CKPT" convert --jobs $j "$FX/hf_bin" "$T/good$j.safetensors" 2>/dev/null || bad "convert hf_bin --jobs $j failed"
done
if cmp -s "$T/good1.safetensors" "$T/good2.safetensors"; then
    ok "convert hf_bin: --jobs 1 and 2 write the same bytes"
else
    bad "convert hf_bin: --jobs 1 and 2 differ"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
