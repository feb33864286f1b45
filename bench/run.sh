#!/bin/sh
# bench/run.sh [WORKDIR [list|read|convert]] - build ckpt (Release) and main's
# ckpt, make the inputs (once), and measure ckpt against main, torch.load,
# CPython's unpickler, cat and cp.
# See bench/README.md.  Needs cmake, pkg-config, a C compiler, zlib, jansson
# and Debian's python3-torch at /usr/bin/python3 (read_all also links
# libarchive when CMake found it).  WORKDIR defaults to /tmp/ckpt-bench and
# needs about 3.6 GiB free (inputs 2.5 GiB + one 1 GiB output at a time).
# A second argument runs only the listing, reading or conversion rows.
set -eu

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
W=${1:-/tmp/ckpt-bench}
ONLY=${2:-}
PY=/usr/bin/python3

if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "bench: $PY cannot import torch (apt-get install python3-torch)" >&2
    exit 1
fi
mkdir -p "$W"
W=$(cd "$W" && pwd)

echo "== building ckpt (Release) in $W/build"
cmake -S "$REPO" -B "$W/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$W/build" --target ckpt ckpt_static -j 2 >/dev/null
sh "$HERE/link_read_all.sh" "$W/build" "$W/build/read_all"

# main's ckpt, measured in the same rounds (CKPT_BENCH_BASE=none: skip; any
# git ref: that one), rebuilt only when the ref moves
BASE_REF=${CKPT_BENCH_BASE:-main}
if [ "$BASE_REF" != none ] && rev=$(git -C "$REPO" rev-parse --verify -q "$BASE_REF^{commit}"); then
    if [ "$(cat "$W/base/.rev" 2>/dev/null)" != "$rev" ]; then
        echo "== building $BASE_REF ($rev) in $W/base"
        rm -rf "$W/base"
        mkdir -p "$W/base/src"
        git -C "$REPO" archive "$rev" | tar -x -C "$W/base/src"
        cmake -S "$W/base/src" -B "$W/base/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
        cmake --build "$W/base/build" --target ckpt -j 2 >/dev/null
        echo "$rev" >"$W/base/.rev"
    fi
    CKPT_BENCH_BASE_BIN="$W/base/build/ckpt"
    export CKPT_BENCH_BASE_BIN
fi

echo "== inputs in $W/data (kept between runs)"
"$PY" "$HERE/gen.py" "$W/data"

echo "== measuring (warm page cache; best of 5, of 3 from 2 s, 1 run from 10 s)"
echo "   $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" "$HERE/bench.py" "$W/build/ckpt" "$W/data" "$W/out" $ONLY
