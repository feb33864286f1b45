#!/bin/sh
# cli_defects33_composite_test.sh - issue 33's defects of composite inputs
# and safetensors, through the CLI, one group each:
#
#     tests/cli_defects33_composite_test.sh CKPT SOURCE_DIR GROUP
#
#   tied    what `ckpt convert FILE OUTDIR/` writes reads back as FILE: the
#           tied weights it writes once ("alias": "kept" in __metadata__)
#           are listed again under their names, so diff, ls and cat of the
#           export equal the source (they said "only in A: enc.weight");
#           metadata that ckpt did not write, or that would alias a name
#           the file holds, is not taken for aliases
#   fds     folders of 1,200 .distcp files and of 1,200 shards read,
#           verified (--jobs 2) and converted under `ulimit -n 64` (every
#           part used to stay open: "Too many open files")
#
# Inputs are written here (tests/dcp_craft.py and Python's standard
# library; nothing is unpickled).  Prints "ok"/"not ok" lines and
# "N passed, M failed".

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

TMP=$(mktemp -d "${TMPDIR:-/tmp}/ckpt-defects33.XXXXXX") || exit 1
trap 'rm -rf "$TMP"' EXIT
trap 'rm -rf "$TMP"; exit 1' HUP INT TERM

# names DIR: the tensor names `ls --json` gives, one a line, in its order
names() {
    "$CKPT" ls --json "$1" | $PY -c "
import json, sys
for t in json.load(sys.stdin)['tensors']:
    print(t['name'])"
}

# st FILE HEADER-JSON DATA-LEN: a safetensors file
st() {
    $PY -c "
import struct, sys
h = sys.argv[2].encode()
h += b' ' * (-len(h) % 8)
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h + bytes(range(int(sys.argv[3]))))" "$@"
}

# ---------------------------------------------------------------------------
group_tied() {
    SRCPT=$FIX/tied_zip.pt # enc.weight and dec.weight: one storage, one view
    "$CKPT" convert "$SRCPT" "$TMP/one/" >"$TMP/o" 2>"$TMP/e"
    check $? "convert tied_zip.pt to a folder"
    grep -q "'enc.weight' -> 'dec.weight'" "$TMP/e"
    check $? "convert wrote enc.weight once, as an alias of dec.weight"
    "$CKPT" diff "$SRCPT" "$TMP/one/" >"$TMP/o" 2>"$TMP/e"
    check $? "diff tied_zip.pt OUTDIR/ exits 0 ($(head -c 200 "$TMP/o"))"
    grep -q "3 compared, 3 identical, 0 differ, 0 only in A, 0 only in B" "$TMP/o"
    check $? "diff compares all three tensors"
    # the alias is listed right after the tensor it names, over its storage
    [ "$(names "$TMP/one" | tr '\n' ' ')" = "dec.weight enc.weight other " ]
    check $? "ls lists dec.weight, its alias enc.weight, other"
    "$CKPT" ls --json "$TMP/one" | $PY -c "
import json, sys
t = {x['name']: x for x in json.load(sys.stdin)['tensors']}
e, d = t['enc.weight'], t['dec.weight']
sys.exit(0 if e['storage'] == d['storage'] and e['shape'] == d['shape'] == [5, 3]
         and e['dtype'] == d['dtype'] == 'float32' else 1)"
    check $? "the alias shares the kept tensor's storage, dtype and shape"
    names "$SRCPT" | sort >"$TMP/a"
    names "$TMP/one" | sort >"$TMP/b"
    cmp -s "$TMP/a" "$TMP/b"
    check $? "ls of the export names what ls of the source names"
    "$CKPT" cat "$SRCPT" enc.weight >"$TMP/a" && "$CKPT" cat "$TMP/one" enc.weight >"$TMP/b" &&
        cmp -s "$TMP/a" "$TMP/b"
    check $? "cat of the alias gives the source tensor's bytes"
    "$CKPT" verify "$TMP/one" >"$TMP/o" 2>&1
    [ $? = 0 ] && grep -q "1 tied tensor name listed from __metadata__" "$TMP/o" &&
        grep -q "3 tensors in 2 storages" "$TMP/o"
    check $? "verify of the export: 3 tensors in 2 storages, the alias noted"

    # shards: the alias is in the shard of the tensor it names, not in the index
    "$CKPT" convert --max-shard-size 20 "$SRCPT" "$TMP/shards/" >"$TMP/o" 2>"$TMP/e"
    check $? "convert tied_zip.pt to shards"
    [ -f "$TMP/shards/model.safetensors.index.json" ] &&
        ! grep -q enc.weight "$TMP/shards/model.safetensors.index.json"
    check $? "the index maps no alias"
    "$CKPT" diff "$SRCPT" "$TMP/shards/" >"$TMP/o" 2>"$TMP/e"
    check $? "diff tied_zip.pt SHARDS/ exits 0 ($(head -c 200 "$TMP/o"))"
    "$CKPT" verify "$TMP/shards" >"$TMP/o" 2>&1
    [ $? = 0 ] && ! grep -q "total_size\|not in the index" "$TMP/o"
    check $? "verify of the shards: total_size agrees, no alias reported missing from the index"

    # converted again, the aliases are written once again
    "$CKPT" convert "$TMP/one/model.safetensors" "$TMP/again/" >"$TMP/o" 2>"$TMP/e" &&
        "$CKPT" diff "$SRCPT" "$TMP/again/" >"$TMP/o" 2>&1
    check $? "an export of the export still equals the source"

    # a file ckpt did not write: its metadata stays metadata
    st "$TMP/foreign.safetensors" \
        '{"__metadata__":{"format":"pt","b":"a"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}' 2
    [ "$(names "$TMP/foreign.safetensors" | tr '\n' ' ')" = "a " ]
    check $? "metadata of a file ckpt did not write is not taken for aliases"
    # ckpt's marker, but an entry naming a tensor of the file: a note
    st "$TMP/clash.safetensors" \
        '{"__metadata__":{"format":"pt","ckpt.source_format":"zip","ckpt.tied":"1","b":"a"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}' 3
    "$CKPT" verify "$TMP/clash.safetensors" >"$TMP/o" 2>&1
    [ $? = 0 ] && grep -q "the tied name 'b' is itself a tensor of the file: not taken" "$TMP/o" &&
        [ "$(names "$TMP/clash.safetensors" | tr '\n' ' ')" = "a b " ]
    check $? "an alias of a name the file holds is noted, not taken"
    # a value of the source that names a tensor is metadata, not an alias:
    # only the "ckpt.tied" entries after the marker are taken
    st "$TMP/value.safetensors" \
        '{"__metadata__":{"format":"pt","ckpt.source_format":"zip","cfg.tie":"a"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}' 2
    [ "$(names "$TMP/value.safetensors" | tr '\n' ' ')" = "a " ]
    check $? "a converted value whose text is a tensor name is not taken for an alias"
    st "$TMP/count.safetensors" \
        '{"__metadata__":{"format":"pt","ckpt.source_format":"zip","ckpt.tied":"1","b":"a","cfg.tie":"a"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}' 2
    [ "$(names "$TMP/count.safetensors" | tr '\n' ' ')" = "a b " ]
    check $? "ckpt.tied 1: the one entry after it is an alias, the value after that is not"
    $PY - "$TMP/one/model.safetensors" <<'PYEOF'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    meta = list(json.loads(f.read(n))["__metadata__"].items())
i = [k for k, _ in meta].index("ckpt.tied")
sys.exit(0 if meta[i] == ("ckpt.tied", "1") and meta[i + 1] == ("enc.weight", "dec.weight") else 1)
PYEOF
    check $? "convert writes \"ckpt.tied\": \"1\" right before its one alias"
    # ckpt's marker: the aliases are the counted entries, then metadata
    st "$TMP/config.safetensors" \
        '{"__metadata__":{"format":"pt","ckpt.source_format":"zip","ckpt.tied":"1","c":"a","epoch":"7","d":"a"},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}' 2
    [ "$(names "$TMP/config.safetensors" | tr '\n' ' ')" = "a c " ]
    check $? "only the ckpt.tied entries right after the marker are aliases"
    "$CKPT" show "$TMP/config.safetensors" >"$TMP/o" 2>&1 && grep -q 'epoch: "7"' "$TMP/o"
    check $? "the metadata is still shown as values"
}

# ---------------------------------------------------------------------------
group_fds() {
    N=1200
    $PY "$SRC/tests/dcp_craft.py" "$TMP/dcp" many $N >"$TMP/dcp.hex"
    check $? "write a DCP folder of $N .distcp files"
    (
        ulimit -n 64 || exit 3
        "$CKPT" verify --jobs 2 "$TMP/dcp" >"$TMP/o" 2>"$TMP/e" || exit 1
        "$CKPT" cat "$TMP/dcp" m >"$TMP/m.raw" || exit 2
    )
    check $? "verify and cat of $N .distcp files under ulimit -n 64 ($(head -c 200 "$TMP/e"))"
    [ "$(od -An -v -tx1 "$TMP/m.raw" | tr -d ' \n')" = "$(cat "$TMP/dcp.hex")" ]
    check $? "the tensor read from $N files has its bytes"

    $PY -c "
import json, os, struct, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d)
wm = {}
for i in range(n):
    name, f = 'layers.%d.w' % i, 'model-%05d-of-%05d.safetensors' % (i + 1, n)
    h = json.dumps({'__metadata__': {'format': 'pt'},
                    name: {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}).encode()
    h += b' ' * (-len(h) % 8)
    with open(os.path.join(d, f), 'wb') as o:
        o.write(struct.pack('<Q', len(h)) + h + struct.pack('<2f', i, -i))
    wm[name] = f
json.dump({'metadata': {'total_size': 8 * n}, 'weight_map': wm},
          open(os.path.join(d, 'model.safetensors.index.json'), 'w'))" "$TMP/shards" $N
    check $? "write a folder of $N shards"
    (
        ulimit -n 64 || exit 3
        "$CKPT" verify --jobs 2 "$TMP/shards" >"$TMP/o" 2>"$TMP/e" || exit 1
        "$CKPT" convert --jobs 2 "$TMP/shards" "$TMP/all.safetensors" 2>"$TMP/e" || exit 2
        "$CKPT" diff "$TMP/shards" "$TMP/all.safetensors" >"$TMP/o" 2>"$TMP/e" || exit 4
    )
    check $? "verify, convert and diff of $N shards under ulimit -n 64 ($(head -c 200 "$TMP/e"))"
    grep -q "$N compared, $N identical" "$TMP/o"
    check $? "every shard's tensor compared"
}

case $GROUP in
tied) group_tied ;;
fds) group_fds ;;
*)
    echo "unknown group '$GROUP'" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
