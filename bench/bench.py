#!/usr/bin/python3
"""Measure ckpt against its peers; see bench/README.md.  Run by bench/run.sh:

    /usr/bin/python3 bench/bench.py CKPT DATADIR OUTDIR [list|convert]

The last argument runs only the listing or only the conversion rows.

Every command runs under /usr/bin/time -f "%e %M %U %S": peak RSS is its
%M, CPU time %U + %S; wall time is taken around it here (finer than %e).
Python peers report the time of the operation itself (after interpreter
start-up and imports), which favours them.  The tools of one group run
round-robin, 5 times each (3 when the first run took 2 s or more); the best
wall and CPU times are kept, with the largest peak RSS seen.  The input is
read (warm page cache) before every run; outputs are deleted, and `sync`
run, before every conversion or copy, outside the timing.
"""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
PEERS = os.path.join(HERE, "peers.py")

INPUTS = [
    ("a", "small_100k_zip.pt", "100k small tensors, ZIP"),
    ("b", "big_1g_zip.pt", "1 GiB in 64 tensors, ZIP"),
    ("c", "big_1g_legacy.pt", "1 GiB in 64 tensors, legacy"),
]


def run_once(argv, prep=None):
    """(wall seconds, peak RSS MiB, CPU seconds, whole-process wall seconds)
    of one run of argv."""
    if prep:
        prep()
    tfile = os.path.join(OUTDIR, ".time")
    sout = os.path.join(OUTDIR, ".stdout")
    serr = os.path.join(OUTDIR, ".stderr")
    with open(sout, "wb") as so, open(serr, "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-o", tfile, "-f", "%e %M %U %S"] + argv,
                           stdout=so, stderr=se)
        wall = proc_wall = time.perf_counter() - t0
    if p.returncode != 0:
        with open(serr, "rb") as f:
            err = f.read().decode("utf-8", "replace").strip()
        sys.exit("bench: %s failed (status %d): %s" % (" ".join(argv), p.returncode, err[-500:]))
    with open(tfile) as f:
        fields = f.read().split()[-4:]
    rss = int(fields[1]) / 1024.0
    cpu = float(fields[2]) + float(fields[3])
    with open(sout, "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            if line.startswith("TIME "):  # a Python peer timed its operation itself
                wall = float(line.split()[1])
    return wall, rss, cpu, proc_wall


def measure_group(cmds):
    """Run each (argv, prep, input) of cmds round-robin, so that they share the
    machine's conditions, until each has run 5 times (3 when its first run
    took 2 s or more).  Returns [(best wall, max RSS, best CPU, runs,
    best whole-process wall)]."""
    res = [[] for _ in cmds]
    want = [None] * len(cmds)
    while any(w is None or len(r) < w for w, r in zip(want, res)):
        for i, (argv, prep, inp) in enumerate(cmds):
            if want[i] is not None and len(res[i]) >= want[i]:
                continue
            warm(inp)
            res[i].append(run_once(argv, prep))
            if want[i] is None:
                want[i] = 5 if res[i][0][0] < 2.0 else 3
    return [(min(x[0] for x in r), max(x[1] for x in r), min(x[2] for x in r), len(r),
             min(x[3] for x in r)) for r in res]


def warm(path):
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def main():
    global OUTDIR
    ckpt, datadir, OUTDIR = sys.argv[1], sys.argv[2], sys.argv[3]
    only = sys.argv[4] if len(sys.argv) > 4 else None
    if only not in (None, "list", "convert"):
        sys.exit("bench: the last argument is 'list' or 'convert', not %r" % only)
    os.makedirs(OUTDIR, exist_ok=True)
    rows = []   # (input, operation, tool, (wall, rss, cpu, runs), ratio text)
    res = {}

    def add(inp, op, tool, m, ratio=""):
        rows.append((inp, op, tool, m, ratio))
        res[(inp, op, tool)] = m
        print("  %-2s %-8s %-20s %8.3f s %8.1f MiB  cpu %7.3f s  process %7.3f s  "
              "(best of %d) %s" % (inp, op, tool, m[0], m[1], m[2], m[4], m[3], ratio),
              flush=True)

    for tag, name, _ in INPUTS if only != "convert" else []:
        path = os.path.join(datadir, name)
        tools = [("ckpt ls --json", [ckpt, "ls", "--json", path]),
                 ("torch.load", [PY, PEERS, "torchload", path]),
                 ("CPython unpickler", [PY, PEERS, "unpickle", path]),
                 ("cat > /dev/null", ["cat", path])]
        ms = measure_group([(argv, None, path) for _, argv in tools])
        add(tag, "list", tools[0][0], ms[0])
        for (tool, _), m in zip(tools[1:], ms[1:]):
            add(tag, "list", tool, m, "ckpt %.1fx faster" % (m[0] / ms[0][0]))

    out = os.path.join(OUTDIR, "out.safetensors")
    cpo = os.path.join(OUTDIR, "cp.out")

    def clean():
        for p in (out, cpo):
            if os.path.exists(p):
                os.unlink(p)
        subprocess.run(["sync"])

    for tag, name, _ in INPUTS if only != "list" else []:
        path = os.path.join(datadir, name)
        # convert checks the CRC-32 of ZIP records (legacy files have none:
        # there --no-verify changes nothing)
        ms = measure_group([([ckpt, "convert", path, out], clean, path),
                            ([ckpt, "convert", "--no-verify", path, out], clean, path),
                            (["cp", path, cpo], clean, path),
                            (["sh", "-c", 'cp "$1" "$2" && sync "$2"', "sh", path, cpo],
                             clean, path)])
        add(tag, "convert", "ckpt convert", ms[0])
        add(tag, "convert", "ckpt convert --no-verify", ms[1],
            "ckpt/(ckpt --no-verify) = %.2f; --no-verify/cp = %.2f"
            % (ms[0][0] / ms[1][0], ms[1][0] / ms[2][0]))
        add(tag, "convert", "cp", ms[2], "ckpt/cp = %.2f" % (ms[0][0] / ms[2][0]))
        add(tag, "convert", "cp + sync", ms[3], "ckpt/(cp+sync) = %.2f" % (ms[0][0] / ms[3][0]))
    clean()

    print()
    print("| in | operation | tool | time (s) | process wall (s) | peak RSS (MiB) "
          "| CPU (s) | runs | vs ckpt (time) |")
    print("|----|-----------|------|---------:|-----------------:|---------------:"
          "|--------:|-----:|----------------|")
    for inp, op, tool, m, ratio in rows:
        print("| %s | %s | %s | %.3f | %.3f | %.1f | %.3f | %d | %s |"
              % (inp, op, tool, m[0], m[4], m[1], m[2], m[3], ratio))
    print()
    print("Inputs: " + "; ".join("(%s) %s" % (t, d) for t, _, d in INPUTS))
    print()
    print("| target | measured | result |")
    print("|--------|----------|--------|")

    def target(text, value, ok):
        print("| %s | %s | %s |" % (text, value, "met" if ok else "MISSED"))

    if only != "convert":
        ck_a = res[("a", "list", "ckpt ls --json")]
        up_a = res[("a", "list", "CPython unpickler")]
        target("listing (a) >= 10x faster than CPython's unpickler",
               "%.1fx" % (up_a[0] / ck_a[0]), up_a[0] / ck_a[0] >= 10)
        ck_b = res[("b", "list", "ckpt ls --json")]
        target("listing (b) peak RSS <= 16 MiB", "%.1f MiB" % ck_b[1], ck_b[1] <= 16)
    for tag in ("b", "c") if only != "list" else ():
        ck = res[(tag, "convert", "ckpt convert")]
        cp = res[(tag, "convert", "cp")]
        target("converting (%s) <= 1.5x cp time (CRC-32 checked)" % tag,
               "%.2fx" % (ck[0] / cp[0]), ck[0] / cp[0] <= 1.5)
        target("converting (%s) peak RSS <= 64 MiB" % tag, "%.1f MiB" % ck[1], ck[1] <= 64)
    for p in (".stdout", ".stderr", ".time"):
        try:
            os.unlink(os.path.join(OUTDIR, p))
        except OSError:
            pass


if __name__ == "__main__":
    main()
