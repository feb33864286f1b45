#!/usr/bin/python3
"""Measure ckpt against its peers; see bench/README.md.  Run by bench/run.sh:

    /usr/bin/python3 bench/bench.py CKPT DATADIR OUTDIR [list|read|convert]

With CKPT_BENCH_BASE_BIN set (run.sh sets it), main's ckpt is measured in
the same rounds as a listing peer.

The last argument runs only the listing, the reading or the conversion rows.

Every command runs under /usr/bin/time -f %M (peak RSS); its CPU time
(user + system) comes from its rusage (os.wait4); wall time is taken around
it here.
Python peers report the time of the operation itself (after interpreter
start-up and imports), which favours them.  The tools of one group run
round-robin, 5 times each (3 when the first run took 2 s or more, 1 when 10 s
or more); the best
wall and CPU times are kept, with the largest peak RSS seen.  The input is
read (warm page cache) before every run; outputs are deleted, and `sync`
run, before every conversion or copy, outside the timing.
"""
import json
import os
import re
import shutil
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
    ("d", "model_100k_modules.pt", "torch.save(model) of 100,000 nn.Linear(4, 4), ZIP"),
    ("e", "sd_1m.pt", "1,000,000 one-element tensors, ZIP"),
]
BASE = os.environ.get("CKPT_BENCH_BASE_BIN")  # main's ckpt, built by run.sh


def pickle_bytes(path):
    """Size of data.pkl in a ZIP checkpoint (None for other files)."""
    import zipfile
    try:
        with zipfile.ZipFile(path) as z:
            for i in z.infolist():
                if i.filename.endswith("/data.pkl"):
                    return i.file_size
    except zipfile.BadZipFile:
        return None
    return None


def xr(a, b):
    """a / b as text, "-" when b is 0."""
    return "%.2f" % (a / b) if b > 0 else "-"


def run_once(argv, prep=None):
    """(wall seconds, peak RSS MiB, CPU seconds, whole-process wall seconds,
    minor page faults) of one run of argv.  CPU (user + system) and the
    faults come from the child's rusage (os.wait4: microseconds, where
    /usr/bin/time gives 10 ms; time(1)'s own ~100 faults included);
    a Python peer's time and CPU are those of its operation alone.  Peak RSS
    is /usr/bin/time's %M: the rusage of a child forked from this Python
    process would start from this process's own resident size."""
    if prep:
        prep()
    tfile = os.path.join(OUTDIR, ".time")
    sout = os.path.join(OUTDIR, ".stdout")
    serr = os.path.join(OUTDIR, ".stderr")
    # only the Python peers' output is read (their TIME line): every other
    # tool writes to /dev/null itself, as the table says
    peer = argv[0] == PY
    with open(sout if peer else os.devnull, "wb") as so, open(serr, "wb") as se:
        t0 = time.perf_counter()
        p = subprocess.Popen(["/usr/bin/time", "-o", tfile, "-f", "%M"] + argv,
                             stdout=so, stderr=se)
        _, status, ru = os.wait4(p.pid, 0)
        wall = proc_wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        with open(serr, "rb") as f:
            err = f.read().decode("utf-8", "replace").strip()
        sys.exit("bench: %s failed (status %d): %s" % (" ".join(argv), p.returncode, err[-500:]))
    with open(tfile) as f:
        rss = int(f.read().split()[-1]) / 1024.0
    cpu = ru.ru_utime + ru.ru_stime  # of time(1) and the tool: time's own is ~0
    with open(sout if peer else os.devnull, "rb") as f:
        for line in f.read().decode("utf-8", "replace").splitlines():
            if line.startswith("TIME "):  # a Python peer timed its operation itself
                wall = float(line.split()[1])
            if line.startswith("CPU "):  # and its CPU time
                cpu = float(line.split()[1])
    return wall, rss, cpu, proc_wall, ru.ru_minflt


def measure_group(cmds):
    """Run each (argv, prep, input) of cmds round-robin, so that they share the
    machine's conditions, until each has run 5 times (3 when its first run
    took 2 s or more, once when 10 s or more).  Returns [(best wall, max RSS, best CPU, runs,
    best whole-process wall, fewest page faults)]."""
    res = [[] for _ in cmds]
    want = [None] * len(cmds)
    while any(w is None or len(r) < w for w, r in zip(want, res)):
        for i, (argv, prep, inp) in enumerate(cmds):
            if want[i] is not None and len(res[i]) >= want[i]:
                continue
            warm(inp)
            res[i].append(run_once(argv, prep))
            if want[i] is None:
                t = res[i][0][0]
                want[i] = 5 if t < 2.0 else 3 if t < 10.0 else 1
    return [(min(x[0] for x in r), max(x[1] for x in r), min(x[2] for x in r), len(r),
             min(x[3] for x in r), min(x[4] for x in r)) for r in res]


def instructions(argv, functions=()):
    """Instructions one run of argv executes, counted by valgrind's callgrind
    (the same on any host), or None when valgrind is missing or fails.  With
    `functions`: (total, {name: inclusive count}) for those of them that ran
    as functions of their own (callgrind_annotate; a name inlined away, or
    not called, is left out, and all are without callgrind_annotate), or
    None."""
    vg = shutil.which("valgrind")
    if not vg:
        return None
    annotate = shutil.which("callgrind_annotate") if functions else None
    out = os.path.join(OUTDIR, ".callgrind") if annotate else "/dev/null"
    r = subprocess.run([vg, "--tool=callgrind", "--callgrind-out-file=" + out] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    m = re.search(rb"refs:\s+([0-9,]+)", r.stderr)
    total = int(m.group(1).replace(b",", b"")) if r.returncode == 0 and m else None
    if not functions:
        return total
    found = {}
    if total is not None and annotate:
        a = subprocess.run([annotate, "--inclusive=yes", "--threshold=100", out],
                           capture_output=True)
        for line in a.stdout.decode("utf-8", "replace").splitlines():
            # "343,937,739 (79.52%)  ???:ckpt_open [/path/ckpt]" (a file name
            # in place of ??? when the build has debug info)
            f = re.match(r"\s*([0-9,]+) .*:([A-Za-z_][A-Za-z0-9_]*) \[", line)
            if f and f.group(2) in functions and f.group(2) not in found:
                found[f.group(2)] = int(f.group(1).replace(",", ""))
    if annotate:
        try:
            os.unlink(out)
        except OSError:
            pass
    return None if total is None else (total, found)


# Where listing (a)'s instructions go, from callgrind's inclusive counts of
# these library functions (global and called from other files, or, like
# torch_fast, through a hook's pointer: none is inlined in a build without
# LTO): the budget a faster listing works from.
PHASES = ("ckpt_open", "ck_pickle_run", "torch_fast", "ck_catalogue")


def phase_rows(total, inc):
    """(phase, instructions) rows of listing (a), or [] when a function is
    missing from the counts."""
    if any(f not in inc for f in PHASES):
        return []
    return [("the ZIP index and the rest of the open",
             inc["ckpt_open"] - inc["ck_pickle_run"] - inc["ck_catalogue"]),
            ("data.pkl: the pickle machine and its hooks, tensor rebuilds excepted",
             inc["ck_pickle_run"] - inc["torch_fast"]),
            ("data.pkl: the tensor rebuilds read from their bytes (torch_fast)",
             inc["torch_fast"]),
            ("naming the tensors and checking their extents (ck_catalogue)",
             inc["ck_catalogue"]),
            ("the listing's JSON, after the open", total - inc["ckpt_open"])]


def largest_tensor(ckpt, path):
    """The largest tensor's nbytes (read_all's buffer), from ckpt ls --json."""
    out = subprocess.run([ckpt, "ls", "--json", path], check=True, capture_output=True).stdout
    return max(t["nbytes"] for t in json.loads(out)["tensors"])


def mib(n):
    return "%dM" % (n >> 20) if n % (1 << 20) == 0 else str(n)


def warm(path):
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def main():
    global OUTDIR
    ckpt, datadir, OUTDIR = sys.argv[1], sys.argv[2], sys.argv[3]
    only = sys.argv[4] if len(sys.argv) > 4 else None
    if only not in (None, "list", "read", "convert"):
        sys.exit("bench: the last argument is 'list', 'read' or 'convert', not %r" % only)
    read_all = os.path.join(os.path.dirname(ckpt), "read_all")

    def input_path(tag):
        return os.path.join(datadir, dict((t, n) for t, n, _ in INPUTS)[tag])
    os.makedirs(OUTDIR, exist_ok=True)
    rows = []   # (input, operation, tool, (wall, rss, cpu, runs), ratio text)
    res = {}
    dd_tool = {}  # input -> the name of its dd row (its block size)

    def add(inp, op, tool, m, ratio=""):
        rows.append((inp, op, tool, m, ratio))
        res[(inp, op, tool)] = m
        print("  %-2s %-8s %-20s %8.3f s %8.1f MiB  cpu %7.3f s  process %7.3f s  "
              "(best of %d) %s" % (inp, op, tool, m[0], m[1], m[2], m[4], m[3], ratio),
              flush=True)

    for tag, name, _ in INPUTS if only in (None, "list") else []:
        path = os.path.join(datadir, name)
        tools = [("ckpt ls --json", [ckpt, "ls", "--json", path])]
        if BASE:
            tools.append(("main: ckpt ls --json", [BASE, "ls", "--json", path]))
        if tag in ("a", "b", "c"):  # torch.load of (d) and (e) takes minutes
            tools.append(("torch.load", [PY, PEERS, "torchload", path]))
        if tag in ("a", "b", "c"):
            tools.append(("CPython unpickler", [PY, PEERS, "unpickle", path]))
        if tag in ("a", "d", "e"):
            tools.append(("CPython Unpickler.load()", [PY, PEERS, "parse", path]))
        tools.append(("cat > /dev/null", ["cat", path]))
        ms = measure_group([(argv, None, path) for _, argv in tools])
        pk = pickle_bytes(path)
        add(tag, "list", tools[0][0], ms[0],
            "%.2f bytes of peak RSS per data.pkl byte" % (ms[0][1] * 1048576 / pk)
            if pk and pk > (1 << 20) else "")
        for (tool, _), m in zip(tools[1:], ms[1:]):
            add(tag, "list", tool, m, "ckpt %.1fx faster (CPU: %s)"
                % (m[0] / ms[0][0], xr(m[2], ms[0][2])))

    for tag, name, _ in INPUTS if only in (None, "read") else []:
        if tag not in ("b", "c"):
            continue
        path = os.path.join(datadir, name)
        # the whole-tensor loop copies into a buffer the size of the largest
        # tensor; dd with that block size makes the same copy with no ckpt
        # in it, as cat (128 KiB) and the chunked loop copy into a small one
        big = largest_tensor(ckpt, path)
        dd_tool[tag] = "dd bs=%s" % mib(big)
        tools = [("ckpt cat (every tensor)", [ckpt, "cat", "-o", "/dev/null", "--filter", "*", path]),
                 ("C API read loop", [read_all, path]),
                 ("C API loop, 1 MiB pieces", [read_all, "--chunk", str(1 << 20), path]),
                 (dd_tool[tag], ["dd", "if=" + path, "of=/dev/null", "bs=%d" % big, "status=none"]),
                 ("cat > /dev/null", ["cat", path])]
        ms = measure_group([(argv, None, path) for _, argv in tools])
        by = dict((tool, m) for (tool, _), m in zip(tools, ms))
        cat, dd = by["cat > /dev/null"], by[dd_tool[tag]]
        for (tool, _), m in zip(tools, ms):
            ratio = "" if tool in ("cat > /dev/null", dd_tool[tag]) else \
                "%s/cat = %.2f (CPU: %s)" % (tool.split(" ")[0], m[0] / cat[0], xr(m[2], cat[2]))
            if tool == "C API read loop":
                ratio += "; C/dd = %.2f (CPU: %s)" % (m[0] / dd[0], xr(m[2], dd[2]))
            add(tag, "read", tool, m, ratio)

    out = os.path.join(OUTDIR, "out.safetensors")
    cpo = os.path.join(OUTDIR, "cp.out")

    def clean():
        for p in (out, cpo):
            if os.path.exists(p):
                os.unlink(p)
        subprocess.run(["sync"])

    for tag, name, _ in INPUTS if only in (None, "convert") else []:
        if tag not in ("a", "b", "c"):
            continue
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

    if only in (None, "list"):
        # speed targets are judged by CPU time (user + system), which other
        # jobs on a shared VM disturb far less than wall time; both are shown
        ck_a = res[("a", "list", "ckpt ls --json")]

        def faster(peer, want, text):
            cpu = peer[2] / ck_a[2] if ck_a[2] > 0 else float("inf")
            target(text, "%.1fx (wall %.1fx)" % (cpu, peer[0] / ck_a[0]), cpu >= want)

        faster(res[("a", "list", "CPython unpickler")], 10,
               "listing (a) >= 10x faster than CPython's unpickler (listing), by CPU")
        faster(res[("a", "list", "CPython Unpickler.load()")], 15,
               "listing (a) >= 15x faster than CPython's Unpickler.load() alone, by CPU")
        if BASE:
            faster(res[("a", "list", "main: ckpt ls --json")], 3,
                   "listing (a) >= 3x faster than main, by CPU")
        target("listing (a) peak RSS <= 32 MiB", "%.1f MiB" % ck_a[1], ck_a[1] <= 32)
        for tag in ("a", "d", "e"):
            m = res[(tag, "list", "ckpt ls --json")]
            pk = pickle_bytes(input_path(tag))
            per = m[1] * 1048576 / pk
            target("listing (%s): <= 4 bytes of memory per pickle byte (peak RSS / data.pkl, "
                   "an upper bound)" % tag, "%.2f" % per, per <= 4)
        target("listing (d), a 100,000-module torch.save(model), under the default limits",
               "listed, %.1f MiB" % res[("d", "list", "ckpt ls --json")][1], True)
        ck_e = res[("e", "list", "ckpt ls --json")]
        target("listing (e), 1M tensors, peak RSS <= 256 MiB", "%.1f MiB" % ck_e[1],
               ck_e[1] <= 256)
        ck_b = res[("b", "list", "ckpt ls --json")]
        target("listing (b) peak RSS <= 16 MiB", "%.1f MiB" % ck_b[1], ck_b[1] <= 16)
    for tag in ("b", "c") if only in (None, "read") else ():
        cat = res[(tag, "read", "cat > /dev/null")]
        dd = res[(tag, "read", dd_tool[tag])]
        for tool, peer, pname in (("ckpt cat (every tensor)", cat, "cat"),
                                  ("C API loop, 1 MiB pieces", cat, "cat"),
                                  ("C API read loop", cat, "cat"),
                                  ("C API read loop", dd, "dd with its buffer size")):
            m = res[(tag, "read", tool)]
            cpu = m[2] / peer[2] if peer[2] > 0 else float("inf")
            target("reading (%s): %s <= 1.2x %s, by CPU" % (tag, tool, pname),
                   "%.2fx (wall %.2fx)" % (cpu, m[0] / peer[0]), cpu <= 1.2)
    for tag in ("b", "c") if only in (None, "convert") else ():
        ck = res[(tag, "convert", "ckpt convert")]
        cp = res[(tag, "convert", "cp")]
        target("converting (%s) <= 1.5x cp time (CRC-32 checked)" % tag,
               "%.2fx" % (ck[0] / cp[0]), ck[0] / cp[0] <= 1.5)
        target("converting (%s) peak RSS <= 64 MiB" % tag, "%.1f MiB" % ck[1], ck[1] <= 64)
    if only in (None, "list") and BASE:
        # what the CPU ratio against main is made of, in counts no host
        # changes: a fault's price and an instruction's move with the VM
        ck_a = res[("a", "list", "ckpt ls --json")]
        main_a = res[("a", "list", "main: ckpt ls --json")]
        argv_a = ["ls", "--json", input_path("a")]
        counted = instructions([ckpt] + argv_a, PHASES)
        ins = [counted[0] if counted else None, instructions([BASE] + argv_a)]
        print()
        print("| listing (a), counts | ckpt | main | main / ckpt |")
        print("|---------------------|-----:|-----:|------------:|")
        if None not in ins:
            print("| instructions (callgrind) | {:,.1f}M | {:,.1f}M | {:.2f} |".format(
                ins[0] / 1e6, ins[1] / 1e6, ins[1] / ins[0]))
        else:
            print("| instructions (callgrind) | - | - "
                  "| not counted (valgrind missing or failed) |")
        print("| page faults (fewest of its runs) | {:,} | {:,} | {} |".format(
            ck_a[5], main_a[5], xr(main_a[5], ck_a[5])))
        rows = phase_rows(*counted) if counted else []
        if rows:
            print()
            print("| listing (a) by ckpt, where its instructions go | instructions | share |")
            print("|------------------------------------------------|-------------:|------:|")
            for what, n in rows:
                print("| {} | {:,.1f}M | {:.1f}% |".format(what, n / 1e6, 100.0 * n / counted[0]))
    for p in (".stdout", ".stderr", ".time"):
        try:
            os.unlink(os.path.join(OUTDIR, p))
        except OSError:
            pass


if __name__ == "__main__":
    main()
