#!/usr/bin/env python3
"""Hold `ckpt scan` to the attack corpus of tests/scan/ (see gen_attacks.py).

For each row of manifest.tsv: run `ckpt scan FILE`, check the exit status,
and for attacks (exit 3) that the named global is listed with verdict
`dangerous`; for honest files (exit 0, global "-") that nothing is
dangerous; for files that name a global yet exit 0 that it is listed; for files
ckpt cannot read (exit 1) that the error on stderr names the member.
Every file under files/ must have a manifest row.
Usage: run_scan_corpus.py CKPT_BINARY [SCAN_DIR]
"""
import os
import subprocess
import sys


def main():
    ckpt = sys.argv[1]
    here = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    files = os.path.join(here, "files")
    passed = failed = 0
    seen = set()

    def check(ok, what):
        nonlocal passed, failed
        print(("ok - " if ok else "not ok - ") + what)
        if ok:
            passed += 1
        else:
            failed += 1

    # a ckpt built without libarchive, or one that cannot load it (it is
    # loaded with dlopen() for a scan), must refuse the archives only it
    # reads (exit 1, saying why), never pass them as clean
    probe = subprocess.run([ckpt, "scan", os.path.join(files, "tar_of_pickles.tar")],
                           capture_output=True, text=True)
    nolib = probe.returncode == 1 and ("without libarchive" in probe.stderr or
                                       "cannot be loaded" in probe.stderr)
    if nolib:
        print("# ckpt has no libarchive (" + probe.stderr.strip() + "): archive rows expect exit 1")
    archive_exts = (".zip", ".tar", ".tar.gz", ".pkl.gz", ".7z", ".npz")

    with open(os.path.join(here, "manifest.tsv"), encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip() and not l.startswith("#")]
    for name, want, glob, source in rows:
        seen.add(name)
        p = subprocess.run([ckpt, "scan", os.path.join(files, name)], capture_output=True, text=True)
        if nolib and name.endswith(archive_exts):
            check(p.returncode == 1 and "libarchive" in p.stderr,
                  f"{name}: without libarchive, exit 1 naming it (got {p.returncode})")
            continue
        check(p.returncode == int(want),
              f"{name}: exit {p.returncode}, expected {want} ({source})")
        verdicts = {}
        for line in p.stdout.splitlines():
            cols = line.split()
            if len(cols) >= 2 and cols[0] in ("safe", "unknown", "dangerous"):
                verdicts.setdefault(cols[1], set()).add(cols[0])
        if want == "1":
            # a file ckpt cannot read to the end: the error names the member
            check(glob in p.stderr and p.stderr.startswith("ckpt: "),
                  f"{name}: stderr names {glob} (got {p.stderr.strip()!r})")
        elif want == "0" and glob != "-":
            # exit 0 and still named: not dangerous where it is (a Python 2
            # name that protocol does not rename, a pickle kept as bytes)
            check(glob in verdicts, f"{name}: {glob} listed (got {sorted(verdicts)})")
        elif glob != "-":
            check("dangerous" in verdicts.get(glob, set()),
                  f"{name}: {glob} listed as dangerous (got {sorted(verdicts.get(glob, []))})")
        else:
            bad = [g for g, v in verdicts.items() if "dangerous" in v]
            check(not bad and verdicts, f"{name}: honest, no dangerous global (got {bad})")
    extra = sorted(set(os.listdir(files)) - seen)
    check(not extra, f"every corpus file has a manifest row (missing: {extra})")
    check(len(rows) >= 10, f"corpus has {len(rows)} files")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
