#!/usr/bin/python3
"""A data.pkl of several MiB read while the pickle machine gives its pages
back behind it (ck_pickle_in.discard, issue 14): torch 1.13 saves a state
dict of 40,000 tensors (a 4 MiB data.pkl) at test time; `ckpt ls --json`
and `ckpt cat --filter '*'` must give torch's names, dtypes, shapes,
strides, offsets and bytes for the file as torch wrote it (data.pkl stored:
read into ckpt's own buffer), rewritten with every record deflated
(inflated into ckpt's buffer) and read from standard input.

    discard_test.py CKPT
"""
import collections
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile

try:
    import torch
except ImportError:
    print("skipped: torch is not installed")
    sys.exit(77)

ckpt = sys.argv[1]
passed = failed = 0


def check(ok, what):
    global passed, failed
    print(("ok - " if ok else "not ok - ") + what)
    if ok:
        passed += 1
    else:
        failed += 1


torch.manual_seed(14)
sd = collections.OrderedDict()
base = torch.arange(4096, dtype=torch.float64)
for i in range(40000):
    k = i % 7
    if k == 0:  # views of one storage: offsets and strides across the pickle
        sd["views.%d" % i] = base[i % 4000:i % 4000 + 6:2]
    elif k == 1:
        sd["blocks.%d.int" % i] = torch.randint(-9, 9, (i % 5 + 1, 2), dtype=torch.int32)
    else:
        sd["blocks.%d.layer%d.weight" % (i // 100, i % 100)] = torch.randn(i % 9 + 1)
sd["zzz.last"] = torch.tensor([1.5, -2.5], dtype=torch.float16).t()

want_names = list(sd)
h = hashlib.sha256()
for t in sd.values():
    h.update(t.contiguous().numpy().tobytes())
want_hash = h.hexdigest()

with tempfile.TemporaryDirectory() as d:
    stored = os.path.join(d, "stored.pt")
    torch.save(sd, stored)
    with zipfile.ZipFile(stored) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")][0]
        pkl_size = z.getinfo(pkl).file_size
    check(pkl_size > 3 * 2**20, "data.pkl is %d bytes, more than 3 MiB" % pkl_size)
    deflated = os.path.join(d, "deflated.pt")
    with zipfile.ZipFile(stored) as src, zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, src.read(info.filename))

    for label, path, stdin in (("stored", stored, None), ("deflated", deflated, None),
                               ("standard input", "-", stored)):
        def run(*args):
            if stdin is None:
                return subprocess.run([ckpt, *args], capture_output=True)
            with open(stdin, "rb") as f:
                return subprocess.run([ckpt, *args], stdin=f, capture_output=True)

        r = run("ls", "--json", path)
        check(r.returncode == 0, "%s: ls --json exits 0 (%s)" % (label, r.stderr.decode()[:200]))
        if r.returncode != 0:
            continue
        got = json.loads(r.stdout)["tensors"]
        check([t["name"] for t in got] == want_names, "%s: every name, in torch's order" % label)
        bad = [t["name"] for t in got if t["name"] in sd and (
            t["dtype"] != str(sd[t["name"]].dtype).replace("torch.", "")
            or t["shape"] != list(sd[t["name"]].shape)
            or t["stride"] != list(sd[t["name"]].stride())
            or t["storage_offset"] != sd[t["name"]].storage_offset())]
        check(not bad, "%s: dtype, shape, stride and offset of every tensor as torch's %s"
              % (label, bad[:3]))
        r = run("cat", "-o", "-", "--filter", "*", path)
        check(r.returncode == 0 and hashlib.sha256(r.stdout).hexdigest() == want_hash,
              "%s: the bytes of every tensor as torch's (sha256)" % label)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
