#!/usr/bin/python3
"""The compact ZIP index (issue 14, helper Z): a record's name length, its
local header's place and its central directory entry's place are derived,
not stored, and the latter only while every entry is 46 bytes plus its
name.  These archives break that assumption in each place it can break:
torch 1.13's own torch.save, rewritten with Python's zipfile with central
directory comments and extra fields (all records, one in the middle, the
last one), and with a record stored twice before or after them.  Expected
values are torch's tensors and the offsets Python finds by walking the
archive's bytes itself.

    zipmem_test.py CKPT
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings
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


def run(*args):
    p = subprocess.run([ckpt, *args], capture_output=True)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def central_entries(data):
    """(offset, name, local header offset) of each central directory entry,
    from the end record (no ZIP64 here)."""
    eocd = data.rindex(b"PK\x05\x06")
    n, _size, off = struct.unpack_from("<HII", data, eocd + 10)
    out = []
    p = off
    for _ in range(n):
        assert data[p:p + 4] == b"PK\x01\x02"
        nlen, xlen, clen = struct.unpack_from("<HHH", data, p + 28)
        (loc,) = struct.unpack_from("<I", data, p + 42)
        out.append((p, data[p + 46:p + 46 + nlen].decode(), loc))
        p += 46 + nlen + xlen + clen
    return out


def data_offset(data, loc):
    nlen, xlen = struct.unpack_from("<HH", data, loc + 26)
    return loc + 30 + nlen + xlen


torch.manual_seed(14)
sd = {
    "a.weight": torch.randn(3, 4),
    "a.bias": torch.arange(4, dtype=torch.int64),
    "b": torch.randn(5).half(),
    "c.scale": torch.tensor(2.5, dtype=torch.float64),
    "d": torch.ones(2, 2, dtype=torch.bool),
}
for i in range(40):  # names of many lengths, keys of one and two digits
    sd["layer%d.%s" % (i, "w" * (i % 7 + 1))] = torch.full((i % 5 + 1,), float(i))

tmp = tempfile.mkdtemp()
orig = os.path.join(tmp, "orig.pt")
torch.save(sd, orig)
with zipfile.ZipFile(orig) as z:
    records = [(i, z.read(i)) for i in z.infolist()]
root = records[0][0].filename.split("/")[0]


def rewrite(name, commented, dup=None):
    """Records in torch's order; `commented(k)` says which get a central
    directory comment and an extra field; `dup` = (record name, where) adds
    a second copy of that record at index `where`."""
    path = os.path.join(tmp, name)
    items = [(zi.filename, body) for zi, body in records]
    if dup:
        items.insert(dup[1], (root + "/" + dup[0], dict(items)[root + "/" + dup[0]]))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for k, (fn, body) in enumerate(items):
            zi = zipfile.ZipInfo(fn, date_time=(2020, 1, 1, 0, 0, 0))
            if commented(k):
                zi.comment = b"c" * (k * 7 % 50 + 1)
                zi.extra = struct.pack("<HH", 0xCAFE, k % 9) + b"x" * (k % 9)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the duplicate
                z.writestr(zi, body)
    with open(path, "rb") as f:
        return path, f.read()


n = len(records)
cases = {
    "plain": lambda k: False,
    "all_commented": lambda k: True,
    "middle_commented": lambda k: k == n // 2,
    "last_commented": lambda k: k == n - 1,
    "first_commented": lambda k: k == 0,
}
for label, commented in cases.items():
    path, data = rewrite(label + ".pt", commented)
    cd = central_entries(data)
    offs = {nm: data_offset(data, loc) for _, nm, loc in cd}
    rc, out, err = run("ls", "--json", path)
    check(rc == 0, "%s: ls exits 0 (%s)" % (label, err.strip()))
    if rc != 0:
        continue
    listing = json.loads(out)
    got = {t["name"]: t for t in listing["tensors"]}
    check(sorted(got) == sorted(sd), "%s: torch's tensor names" % label)
    good = True
    for k, t in sd.items():
        g = got.get(k)
        if not g or g["shape"] != list(t.shape) or g["dtype"] != str(t.dtype)[6:]:
            good = False
    check(good, "%s: torch's dtypes and shapes" % label)
    # each storage's bytes start where Python finds its record's data
    data_offs = sorted(offs[nm] for nm in offs if nm.startswith(root + "/data/"))
    check(sorted({t["file_offset"] for t in listing["tensors"]}) == data_offs,
          "%s: file offsets are the records' data offsets" % label)
    same = True
    for k, t in sd.items():
        rc, out, err = run("cat", path, k)
        same &= rc == 0 and out == t.contiguous().numpy().tobytes()
    check(same, "%s: every tensor's bytes are torch's" % label)
    rc, out, err = run("verify", path)
    check(rc == 0, "%s: verify passes (%s)" % (label, err.strip()))

# a record stored twice: the error names the second copy's central
# directory entry, before, across and after the entries that carry comments
dups = {
    "dup_plain": (lambda k: False, n),
    "dup_after_comments": (lambda k: True, n),
    "dup_before_comment": (lambda k: k == n - 1, n - 2),
    "dup_after_comment": (lambda k: k == 2, n - 1),
}
for label, (commented, where) in dups.items():
    path, data = rewrite(label + ".pt", commented, ("data/3", where))
    cd = central_entries(data)
    second = [p for p, nm, _ in cd if nm == root + "/data/3"][1]
    rc, out, err = run("ls", path)
    want = "ZIP record '%s/data/3' appears twice (byte %d)" % (root, second)
    check(rc == 1 and want in err, "%s: %s (got: %s)" % (label, want, err.strip()))

shutil.rmtree(tmp)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
