#!/bin/sh
# bench_parallel.sh - what the read threads (--jobs) gain on this machine.
#
#     bench/bench_parallel.sh [CKPT] [WORKDIR]
#
# CKPT defaults to build/ckpt (build it Release for numbers worth keeping),
# WORKDIR to /tmp/ckpt-bench-parallel.  Needs Debian's torch at
# /usr/bin/python3 to write the inputs (once; kept in WORKDIR):
#   - m.pt: 128 MiB in 32 float32 tensors of 4 MiB (torch.save, stored ZIP);
#   - m_deflated.pt: the same records deflated (python's zipfile), as
#     zip tools or some writers leave them: reading them costs CPU;
#   - v1..v4.pt: four deflated files of 32 MiB for verify;
#   - sharded/: the same four files as Hugging Face shards
#     (pytorch_model-0000K-of-00004.bin and pytorch_model.bin.index.json),
#     read as one checkpoint: its parts are checked on the threads.
# Rows: convert of the deflated file to a folder (with the CRC check, and
# with --no-verify), convert of the stored file (copy_file_range: no
# threads used, for reference), verify of the four deflated files, verify
# and convert of the sharded checkpoint;
# each with --jobs 1 and --jobs 2, best wall time of 3 runs (and the CPU
# time of that run), outputs removed between runs.  Prints a Markdown
# table and the load average: threads only gain wall time on idle cores.
CKPT=${1:-build/ckpt}
W=${2:-/tmp/ckpt-bench-parallel}
PY=/usr/bin/python3
mkdir -p "$W" || exit 1
if [ ! -f "$W/.stamp" ]; then
    "$PY" - "$W" <<'PYEOF' || exit 1
import sys, torch, zipfile
w = sys.argv[1]
def deflate(src, dst):
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info), compress_type=zipfile.ZIP_DEFLATED)
g = torch.Generator().manual_seed(0)
# values with few distinct bytes deflate well, but inflating them still costs CPU
sd = {"layer.%d.weight" % i: (torch.randn(1 << 20, generator=g) * 8).round() / 8 for i in range(32)}
torch.save(sd, w + "/m.pt")
deflate(w + "/m.pt", w + "/m_deflated.pt")
for k in range(1, 5):
    torch.save({n: t for n, t in list(sd.items())[8 * (k - 1):8 * k]}, w + "/s.pt")
    deflate(w + "/s.pt", w + "/v%d.pt" % k)
PYEOF
    touch "$W/.stamp"
fi
if [ ! -f "$W/.stamp_sharded" ]; then
    "$PY" - "$W" <<'PYEOF' || exit 1
import sys, os, shutil, json, zipfile
w = sys.argv[1]
d = w + "/sharded"
os.makedirs(d, exist_ok=True)
weight_map, total = {}, 0
for k in range(1, 5):
    name = "pytorch_model-%05d-of-00004.bin" % k
    shutil.copyfile(w + "/v%d.pt" % k, d + "/" + name)
    for i in range(8 * (k - 1), 8 * k):
        weight_map["layer.%d.weight" % i] = name
        total += 4 << 20
with open(d + "/pytorch_model.bin.index.json", "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f)
PYEOF
    touch "$W/.stamp_sharded"
fi

# best COMMAND...: "WALL CPU" of the run with the best wall time of 3
# (CPU: user + system, from /usr/bin/time), in seconds
best() {
    b=
    for run in 1 2 3; do
        rm -rf "$W/out" "$W/out.safetensors"
        sync
        /usr/bin/time -f "%e %U %S" -o "$W/time" "$@" >/dev/null 2>&1 || {
            echo "failed: $*" >&2
            echo "- -"
            return
        }
        read -r e u s <"$W/time"
        c=$(echo "$u + $s" | bc)
        if [ -z "$b" ] || [ "$(echo "$e < $b" | bc)" = 1 ]; then
            b=$e
            bc_=$c
        fi
    done
    echo "$b $bc_"
}

cat "$W"/*.pt "$W"/sharded/* >/dev/null # warm the page cache
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
echo
echo "| operation | --jobs 1 wall (s) | CPU (s) | --jobs 2 wall (s) | CPU (s) | wall gain |"
echo "|-----------|------------------:|--------:|------------------:|--------:|----------:|"
row() { # row LABEL ARGS... (ARGS get --jobs N appended)
    label=$1
    shift
    set -- $(best "$CKPT" "$@" --jobs 1) $(best "$CKPT" "$@" --jobs 2) "$@"
    a=$1 ac=$2 b=$3 bc2=$4
    g=$(echo "scale=2; $a / $b" | bc)
    echo "| $label | $a | $ac | $b | $bc2 | ${g}x |"
}
row "convert deflated 128 MiB -> OUTDIR/ (CRC checked)" convert "$W/m_deflated.pt" "$W/out/"
row "convert deflated 128 MiB -> OUTDIR/ --no-verify" convert --no-verify "$W/m_deflated.pt" "$W/out/"
row "convert deflated 128 MiB -> 4 shards (--max-shard-size 32MiB)" convert --max-shard-size 32MiB "$W/m_deflated.pt" "$W/out/"
row "convert stored 128 MiB -> OUTDIR/ (kernel copy, no threads)" convert "$W/m.pt" "$W/out/"
row "verify 4 deflated files of 32 MiB" verify "$W/v1.pt" "$W/v2.pt" "$W/v3.pt" "$W/v4.pt"
row "verify sharded/: 4 deflated shards of 32 MiB + index" verify "$W/sharded"
row "convert sharded/ -> OUTDIR/ (parts checked first)" convert "$W/sharded" "$W/out/"
row "convert sharded/ -> OUTDIR/ --no-verify" convert --no-verify "$W/sharded" "$W/out/"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
