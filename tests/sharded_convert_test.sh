#!/bin/sh
# Issue 13's "done when" for every layout: a DCP folder converts to the same
# safetensors tensors as torch 2.6's own dcp_to_torch_save output (committed
# beside each folder as NAME.dcp_to_torch_save.pt, written by
# tests/gen_dcp_torch_save.py), and a sharded checkpoint converted to a folder
# reads back equal to its source.  `ckpt diff` is the judge (exit 0: equal).
#   sh tests/sharded_convert_test.sh CKPT FIXTURES/sharded
CKPT=${1:?usage: sharded_convert_test.sh CKPT DIR}
DIR=${2:?usage: sharded_convert_test.sh CKPT DIR}
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }
check() { # description, command...
  what=$1; shift
  if "$@" >"$T/out" 2>&1; then ok "$what"; else bad "$what: $(head -3 "$T/out" | tr '\n' ' ')"; fi
}

for d in dcp_model dcp_optim dcp_split; do
  src="$DIR/$d" ref="$DIR/$d.dcp_to_torch_save.pt"
  check "$d: ckpt diff against dcp_to_torch_save" "$CKPT" diff "$src" "$ref"
  check "$d: convert the folder" "$CKPT" convert "$src" "$T/$d.a.safetensors"
  check "$d: convert torch's dcp_to_torch_save file" "$CKPT" convert "$ref" "$T/$d.b.safetensors"
  check "$d: both conversions hold the same tensors" "$CKPT" diff "$T/$d.a.safetensors" "$T/$d.b.safetensors"
  check "$d: convert to a folder" "$CKPT" convert "$src" "$T/$d.out/"
  check "$d: the folder reads back equal to the source" "$CKPT" diff "$T/$d.out" "$src"
done

for d in hf_bin hf_st; do
  check "$d: convert shards to a folder" "$CKPT" convert "$DIR/$d" "$T/$d.out/" --max-shard-size 100
  if [ -f "$T/$d.out/model.safetensors.index.json" ]; then ok "$d: written as shards with an index"
  else bad "$d: no model.safetensors.index.json in $(ls "$T/$d.out" | tr '\n' ' ')"; fi
  check "$d: the shards read back equal to the source" "$CKPT" diff "$T/$d.out" "$DIR/$d"
  check "$d: verify of the written folder" "$CKPT" verify "$T/$d.out"
done

# A changed tensor is seen across layouts (the judge can fail).
"$CKPT" convert "$DIR/dcp_model" "$T/changed.safetensors" >/dev/null 2>&1
python3 - "$T/changed.safetensors" <<'PY'
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
name = sorted(k for k in h if k != "__metadata__")[0]
b[8 + n + h[name]["data_offsets"][0]] ^= 0x40
open(p, "wb").write(b)
PY
"$CKPT" diff "$T/changed.safetensors" "$DIR/dcp_model" >"$T/out" 2>&1
rc=$?
if [ $rc -eq 1 ]; then ok "a flipped bit after conversion: diff exits 1"
else bad "a flipped bit after conversion: diff exit $rc: $(head -2 "$T/out")"; fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
