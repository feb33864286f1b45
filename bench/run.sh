#!/bin/sh
# bench/run.sh [WORKDIR [list|convert]] - build ckpt (Release), make the inputs (once), and
# measure ckpt against torch.load, CPython's unpickler, cat and cp.
# See bench/README.md.  Needs cmake, a C compiler, zlib and Debian's
# python3-torch at /usr/bin/python3.  WORKDIR defaults to /tmp/ckpt-bench and
# needs about 3.2 GiB free (inputs 2.1 GiB + one 1 GiB output at a time).
# A second argument runs only the listing or only the conversion rows.
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
cmake --build "$W/build" --target ckpt -j 2 >/dev/null

echo "== inputs in $W/data (kept between runs)"
"$PY" "$HERE/gen.py" "$W/data"

echo "== measuring (warm page cache; best of 3, of 5 when under 2 s)"
echo "   $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" "$HERE/bench.py" "$W/build/ckpt" "$W/data" "$W/out" $ONLY
