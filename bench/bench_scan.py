#!/usr/bin/env python3
"""bench/bench_scan.py - files scanned per second: `ckpt scan` against
picklescan on the same mixed folder (issue 12).

The folder: the honest fixtures of tests/fixtures/ (torch.save ZIP, legacy,
TAR, TorchScript, plain pickles) and the attack corpus of tests/scan/files/
(pickles, ZIPs, TARs, .npy/.npz; not its .7z file: picklescan needs py7zr,
which Debian does not package), copied round-robin under new names
(extension kept) until it holds N files (default 1000).  Nothing is ever
unpickled: both tools only parse.

    bench/bench_scan.py CKPT [--files N] [--picklescan SRC] [--repeat R] [--workdir DIR]

CKPT is a built `ckpt` (a Release build for numbers worth keeping).  SRC is
a picklescan source tree (its src/ folder goes on PYTHONPATH, run with
/usr/bin/python3 -m picklescan --path FOLDER); without it only ckpt is
measured.  Each tool scans the whole folder in one process (ckpt: every file
on one command line, in batches of 500 to stay under ARG_MAX); the best of R
runs is kept.  Prints one row per tool: files in the folder, files the tool
reported on, seconds, files/s, and the ratio.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def make_folder(dst, n):
    srcs = []
    for d in (os.path.join(ROOT, "tests", "fixtures"), os.path.join(ROOT, "tests", "scan", "files")):
        for f in sorted(os.listdir(d)):
            p = os.path.join(d, f)
            # .7z left out: picklescan needs py7zr for it, which Debian lacks
            if os.path.isfile(p) and not f.endswith((".json", ".7z")):
                srcs.append(p)
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(dst):
        os.unlink(os.path.join(dst, f))
    names = []
    for i in range(n):
        p = srcs[i % len(srcs)]
        base = os.path.basename(p)
        # keep the whole extension (.tar.gz, .pkl.gz): picklescan picks by it
        stem, dot, ext = base.partition(".")
        name = f"{i:05d}_{stem}{dot}{ext}"
        shutil.copyfile(p, os.path.join(dst, name))
        names.append(name)
    return names


def run_ckpt(ckpt, folder, names):
    t0 = time.perf_counter()
    reported = 0
    for k in range(0, len(names), 500):
        batch = [os.path.join(folder, x) for x in names[k:k + 500]]
        p = subprocess.run([ckpt, "scan", "--json"] + batch, stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        if p.returncode not in (0, 1, 3):
            sys.exit(f"ckpt scan failed with exit status {p.returncode}")
        reported += sum(1 for line in p.stdout.splitlines() if line.startswith("{"))
    return time.perf_counter() - t0, reported


def run_picklescan(src, folder):
    env = dict(os.environ, PYTHONPATH=os.path.join(src, "src"))
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/python3", "-m", "picklescan", "--path", folder],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    dt = time.perf_counter() - t0
    m = re.search(r"Scanned files:\s*(\d+)", p.stdout)
    if not m:
        sys.exit("picklescan did not print its summary:\n" + p.stdout[-2000:])
    return dt, int(m.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("ckpt")
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--picklescan", help="picklescan source tree (with src/picklescan)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workdir")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="ckpt-bench-scan-")
    folder = os.path.join(work, "mixed")
    names = make_folder(folder, a.files)
    size = sum(os.path.getsize(os.path.join(folder, x)) for x in names)
    print(f"folder: {len(names)} files, {size / 1e6:.1f} MB ({folder})")
    rows = []
    best = min((run_ckpt(a.ckpt, folder, names) for _ in range(a.repeat)), key=lambda r: r[0])
    rows.append(("ckpt scan", best[0], best[1]))
    if a.picklescan:
        best = min((run_picklescan(a.picklescan, folder) for _ in range(a.repeat)),
                   key=lambda r: r[0])
        rows.append(("picklescan", best[0], best[1]))
    print(f"{'tool':<12} {'files':>6} {'reported':>8} {'seconds':>8} {'files/s':>8}")
    for tool, dt, rep in rows:
        print(f"{tool:<12} {len(names):>6} {rep:>8} {dt:>8.2f} {len(names) / dt:>8.0f}")
    if len(rows) == 2:
        print(f"ratio (ckpt files/s / picklescan files/s): {rows[1][1] / rows[0][1]:.1f}")
    if not a.workdir:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
