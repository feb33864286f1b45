#!/bin/sh
# cli_defects33_composite_test.sh - issue 33's defects of composite inputs
# and safetensors, through the CLI, one group each:
#
#     tests/cli_defects33_composite_test.sh CKPT SOURCE_DIR GROUP
#
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
fds) group_fds ;;
*)
    echo "unknown group '$GROUP'" >&2
    exit 2
    ;;
esac
echo "$PASSED passed, $FAILED failed"
[ "$FAILED" = 0 ]
