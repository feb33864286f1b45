#!/bin/sh
# Multi-file checkpoints and safetensors input through the CLI: shard
# indexes, DCP folders, .safetensors files, and malformed ones built here
# from the fixtures of tests/gen_sharded.py (bytes edited in place, nothing
# unpickled).  Usage: sharded_test.sh CKPT FIXTURES/sharded
CKPT=$1
FX=$2
PY=${PYTHON3:-python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }

# expect_ok NAME CMD...: exit 0
expect_ok() {
    name=$1; shift
    if "$@" >"$T/out" 2>"$T/err"; then ok "$name"; else bad "$name: exit $? $(head -c 300 "$T/err")"; fi
}
# expect_err NAME SUBSTRING CMD...: exit 1, one stderr line 'ckpt: ...' holding SUBSTRING
expect_err() {
    name=$1; sub=$2; shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    lines=$(grep -c . "$T/err")
    if [ "$rc" -eq 1 ] && [ "$lines" -eq 1 ] && grep -q "^ckpt: " "$T/err" &&
        grep -qF -- "$sub" "$T/err" && [ ! -s "$T/out" ]; then
        ok "$name: $(cat "$T/err")"
    else
        bad "$name: exit $rc, stderr: $(head -c 300 "$T/err")"
    fi
}

# ---- what works --------------------------------------------------------------
expect_ok "ls of an index file" "$CKPT" ls "$FX/hf_bin/pytorch_model.bin.index.json"
expect_ok "ls of a safetensors index" "$CKPT" ls "$FX/hf_st/model.safetensors.index.json"
"$CKPT" ls --json "$FX/hf_bin" >"$T/ls.json" 2>&1
if grep -q '"part": "[^"]*/hf_bin/pytorch_model-00002-of-00003.bin"' "$T/ls.json" &&
    grep -q '"format": "sharded"' "$T/ls.json"; then
    ok "ls --json gives each tensor's part"
else
    bad "ls --json part: $(head -c 300 "$T/ls.json")"
fi
for d in hf_bin hf_st dcp_model dcp_optim dcp_split single.safetensors; do
    expect_ok "verify $d" "$CKPT" verify "$FX/$d"
done
"$CKPT" info "$FX/dcp_split" >"$T/info" 2>&1
if grep -q "format: *dcp" "$T/info"; then ok "info names the DCP format"; else bad "info dcp: $(head -c 200 "$T/info")"; fi
"$CKPT" show "$FX/dcp_optim" >"$T/show" 2>&1
if grep -q "^step: 7$" "$T/show"; then ok "DCP non-tensor value read"; else bad "show dcp_optim: $(grep step "$T/show")"; fi
# extract agrees with cat on a tensor assembled from two chunks (Shard(1))
if "$CKPT" extract "$FX/dcp_split" e -o "$T/e.npy" >/dev/null 2>&1 &&
    "$CKPT" cat "$FX/dcp_split" e >"$T/e.raw" 2>/dev/null &&
    $PY -c "import sys; a=open(sys.argv[1],'rb').read(); b=open(sys.argv[2],'rb').read(); sys.exit(0 if a.endswith(b) and len(b)==48 else 1)" "$T/e.npy" "$T/e.raw"; then
    ok "extract of a chunked tensor matches cat"
else
    bad "extract of a chunked tensor"
fi

cp -r "$FX/hf_bin" "$T/unmapped"
$PY -c "
import json, sys
d = json.load(open(sys.argv[1]))
del d['weight_map']['extra.mask']
json.dump(d, open(sys.argv[2], 'w'))" "$FX/hf_bin/pytorch_model.bin.index.json" "$T/unmapped/pytorch_model.bin.index.json"
"$CKPT" verify "$T/unmapped" >"$T/out" 2>&1
if grep -q "tensor 'extra.mask' is in pytorch_model-00003-of-00003.bin but not in the index's weight_map" "$T/out" &&
    "$CKPT" ls "$T/unmapped" | grep -q "^extra.mask "; then
    ok "a tensor missing from the weight_map is listed and reported"
else
    bad "unmapped tensor: $(head -c 300 "$T/out")"
fi
"$CKPT" scan "$FX/dcp_optim" >"$T/out" 2>&1
if grep -q "0 dangerous" "$T/out" && grep -q "DCP_MOD\|torch.distributed.checkpoint.metadata.Metadata" "$T/out"; then
    ok "scan of a DCP folder lists the .metadata's globals"
else
    bad "scan dcp: $(tail -c 300 "$T/out")"
fi

# raw-byte chunks (a layout torch 2.6 does not write: crafted by tests/dcp_craft.py)
if $PY "$(dirname "$0")/dcp_craft.py" "$T/raw" raw >"$T/raw.hex" &&
    [ "$("$CKPT" cat "$T/raw" t | od -An -v -tx1 | tr -d ' \n')" = "$(sed -n 1p "$T/raw.hex")" ] &&
    [ "$("$CKPT" cat "$T/raw" u | od -An -v -tx1 | tr -d ' \n')" = "$(sed -n 2p "$T/raw.hex")" ]; then
    ok "DCP raw-byte chunks assembled (row and column splits, out of order)"
else
    bad "DCP raw-byte chunks"
fi
$PY "$(dirname "$0")/dcp_craft.py" "$T/gap" gap
expect_err "DCP chunks leaving a gap" "DCP tensor 't': its chunks cover 6 of its 12 elements (a gap)" "$CKPT" ls "$T/gap"
$PY "$(dirname "$0")/dcp_craft.py" "$T/past" outside
expect_err "DCP chunk past its tensor" "DCP tensor 't': chunk 1 reaches past the tensor in dimension 0" "$CKPT" ls "$T/past"

$PY "$(dirname "$0")/dcp_craft.py" "$T/laughs" laughs
expect_err "DCP value whose pickle shares its way to 2**64 values" "DCP value 'x'" "$CKPT" ls "$T/laughs"

cp -r "$FX/hf_st" "$T/total"
sed 's/"total_size": [0-9]*/"total_size": 7/' "$FX/hf_st/model.safetensors.index.json" >"$T/total/model.safetensors.index.json"
if "$CKPT" verify "$T/total" 2>&1 | grep -q "index metadata.total_size is 7 bytes, its tensors hold 185" &&
    ! "$CKPT" verify "$FX/hf_st" 2>&1 | grep -q "total_size"; then
    ok "an index whose total_size disagrees is noted"
else
    bad "total_size note"
fi

cp -r "$FX/dcp_model" "$T/crc"
$PY -c "
import struct, sys
p = sys.argv[1] + '/__0_0.distcp'
b = bytearray(open(p, 'rb').read())
i = b.find(b'PK\x03\x04')
while i >= 0:
    n, x = struct.unpack('<HH', b[i + 26:i + 30])
    if b[i + 30:i + 30 + n].endswith(b'/data/0'):
        b[i + 30 + n + x] ^= 1  # a bit of the first record's tensor data
        break
    i = b.find(b'PK\x03\x04', i + 4)
open(p, 'wb').write(b)" "$T/crc"
expect_err "verify names the DCP record whose CRC fails" "__0_0.distcp, record at byte 0: crc mismatch" "$CKPT" verify "$T/crc"

# ---- malformed shard folders -------------------------------------------------------
cp -r "$FX/hf_bin" "$T/missing" && rm "$T/missing/pytorch_model-00002-of-00003.bin"
expect_err "missing shard" "'pytorch_model-00002-of-00003.bin', which is missing" "$CKPT" ls "$T/missing"

cp -r "$FX/hf_bin" "$T/outside"
sed 's#"pytorch_model-00003-of-00003.bin"#"../pytorch_model-00003-of-00003.bin"#' \
    "$FX/hf_bin/pytorch_model.bin.index.json" >"$T/outside/pytorch_model.bin.index.json"
expect_err "index naming a file outside the folder" "which leaves the folder" "$CKPT" ls "$T/outside"

cp -r "$FX/hf_bin" "$T/absolute"
sed 's#"pytorch_model-00003-of-00003.bin"#"/etc/passwd"#' \
    "$FX/hf_bin/pytorch_model.bin.index.json" >"$T/absolute/pytorch_model.bin.index.json"
expect_err "index naming an absolute path" "an absolute path" "$CKPT" ls "$T/absolute"

cp -r "$FX/hf_bin" "$T/dotted"
sed 's#"pytorch_model-00003-of-00003.bin"#"./pytorch_model-00003-of-00003.bin"#' \
    "$FX/hf_bin/pytorch_model.bin.index.json" >"$T/dotted/pytorch_model.bin.index.json"
expect_err "index naming a file two ways" "not a plain relative path" "$CKPT" ls "$T/dotted"

cp -r "$FX/hf_bin" "$T/symlink" && mv "$T/symlink/pytorch_model-00003-of-00003.bin" "$T/elsewhere.bin" &&
    ln -s ../elsewhere.bin "$T/symlink/pytorch_model-00003-of-00003.bin"
expect_err "shard that is a symbolic link out of the folder" "leads outside the folder" "$CKPT" ls "$T/symlink"

cp -r "$FX/hf_bin" "$T/notheld"
sed 's#"weight_map": {#"weight_map": {"ghost.weight": "pytorch_model-00001-of-00003.bin", #' \
    "$FX/hf_bin/pytorch_model.bin.index.json" >"$T/notheld/pytorch_model.bin.index.json"
expect_err "index naming a tensor its shard lacks" "maps tensor 'ghost.weight' to pytorch_model-00001-of-00003.bin, which does not hold it" "$CKPT" ls "$T/notheld"

cp -r "$FX/hf_bin" "$T/badjson" && printf '{"weight_map": {"a": "b",}}' >"$T/badjson/pytorch_model.bin.index.json"
expect_err "index that is not JSON" "index file is not valid JSON" "$CKPT" ls "$T/badjson"

mkdir "$T/twoidx" && cp "$FX"/hf_bin/* "$FX"/hf_st/* "$T/twoidx/"
expect_err "folder with two indexes" "name the one to open" "$CKPT" ls "$T/twoidx"
mkdir "$T/empty"
expect_err "folder with nothing to open" "no *.index.json, no DCP .metadata" "$CKPT" ls "$T/empty"

# ---- malformed DCP folders ------------------------------------------------------------
# edit_meta DIR PYTHON-EXPR: rewrite DIR/.metadata as EXPR of its bytes b
edit_meta() {
    $PY -c "
import re, sys
p = sys.argv[1] + '/.metadata'
b = open(p, 'rb').read()
n = $2
assert n != b and len(n) == len(b), 'edit did not apply'
open(p, 'wb').write(n)" "$1"
}
cp -r "$FX/dcp_split" "$T/overlap"
# the second chunk of 'w' starts at row 3: make it row 2 (same opcode sizes)
edit_meta "$T/overlap" "b.replace(b'h+h!K\x03K\x00\x86', b'h+h!K\x02K\x00\x86', 1)" &&
    expect_err "overlapping chunks" "DCP tensor 'w': chunks 0 and 1 overlap" "$CKPT" ls "$T/overlap" ||
    bad "overlapping chunks: the edit did not apply"

cp -r "$FX/dcp_split" "$T/pastend"
# the last _StorageInfo: its length (BININT2) made 65535, past its file
edit_meta "$T/pastend" "(lambda m: b[:m.start(1)] + b'\xff\xff' + b[m.end(1):])(list(re.finditer(rb'M(..)ub', b, re.S))[-1])" &&
    expect_err "chunk past the end of its file" "is past the end of" "$CKPT" ls "$T/pastend" ||
    bad "chunk past the end: the edit did not apply"

cp -r "$FX/dcp_model" "$T/escape"
edit_meta "$T/escape" "b.replace(b'__0_0.distcp', b'../0_0.distc')" &&
    expect_err "DCP path leaving the folder" "which leaves the folder" "$CKPT" ls "$T/escape" ||
    bad "DCP path leaving the folder: the edit did not apply"

cp -r "$FX/dcp_model" "$T/hostile"
printf '\200\002cos\nsystem\nq\000X\004\000\000\000echoq\001\205q\002Rq\003.' >"$T/hostile/.metadata"
expect_err "metadata with a hostile global" "names the global os.system" "$CKPT" ls "$T/hostile"

cp -r "$FX/dcp_model" "$T/nodistcp" && rm "$T/nodistcp/__0_0.distcp"
expect_err "DCP folder missing its .distcp" "'__0_0.distcp', which is missing" "$CKPT" ls "$T/nodistcp"

# ---- malformed safetensors -------------------------------------------------------------
# st NAME HEADER-JSON DATA-LEN: a safetensors file
st() {
    $PY -c "
import struct, sys
h = sys.argv[2].encode()
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(int(sys.argv[3])))" "$T/$1" "$2" "$3"
}
st overlap.safetensors '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' 12
expect_err "safetensors overlap" "overlapping the tensor that ends at 8" "$CKPT" ls "$T/overlap.safetensors"
st gap.safetensors '{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}' 8
expect_err "safetensors gap" "leaving a gap" "$CKPT" ls "$T/gap.safetensors"
st size.safetensors '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
expect_err "safetensors size against shape" "its shape needs 12" "$CKPT" ls "$T/size.safetensors"
st dup.safetensors '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}' 1
expect_err "safetensors duplicate key" "duplicate object key" "$CKPT" ls "$T/dup.safetensors"
st dtype.safetensors '{"a":{"dtype":"F4","shape":[1],"data_offsets":[0,1]}}' 1
expect_err "safetensors unknown dtype" "dtype 'F4' is not supported" "$CKPT" ls "$T/dtype.safetensors"
st past.safetensors '{"a":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}}' 4
expect_err "safetensors offsets past the data" "outside the 4 data bytes" "$CKPT" ls "$T/past.safetensors"
st deep.safetensors "{\"__metadata__\":$(printf '[%.0s' $(seq 100))}" 0
expect_err "safetensors header nesting" "nests deeper than" "$CKPT" ls "$T/deep.safetensors"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
