#!/usr/bin/python3
"""Tensor tables and names (issue 14, helper T): the name index behind
ckpt_find() (`ckpt cat FILE NAME`), tensors listed under more names than
there were rebuilds (the table and the index grow past their first size),
names of every length around the hash's 8-byte words, names that are not
plain ASCII, and a walk nested deeper than 253 levels with cycles (the
one-byte cycle guard's look-up along the path).  The file, the names and
the bytes are torch's own (Debian's torch 1.13, at test time).

    names_test.py CKPT
"""
import json
import os
import subprocess
import sys
import tempfile

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
sd = {}
want = {}  # name -> tensor
shared = []
for i in range(600):
    name = ("k" * (i % 41)) + "." + str(i)  # 2..45 bytes
    t = torch.arange(i % 7 + 1, dtype=torch.float32) + i
    sd[name] = t
    want[name] = t
    shared.append(t)
for i, t in enumerate(shared):  # the same tensors again: one rebuild, two names
    sd["again.%d" % i] = t
    want["again.%d" % i] = t
for i, name in enumerate(["é", "naïve.weight", "日本語.bias", "tab\there", "quote\"d", "back\\slash"]):
    t = torch.full((2, 3), float(i))
    sd[name] = t
    want[name] = t
# nested 300 deep, tensors on the way, cycles back up the path
root = []
cur = root
anc = []
path = []
for i in range(300):
    n = [i]
    cur.append(n)
    path.append(str(len(cur) - 1))
    anc.append(n)
    cur = n
    if i % 60 == 59:
        t = torch.ones(i % 5 + 1) * i
        n.append(t)
        want[".".join(["deep"] + path + [str(len(n) - 1)])] = t
cur.append(anc[280])
cur.append(anc[7])
anc[270].append(anc[262])
sd["deep"] = root

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "names.pt")
    torch.save(sd, path)
    r = subprocess.run([ckpt, "ls", "--json", path], stdout=subprocess.PIPE)
    check(r.returncode == 0, "ls --json exits 0")
    listed = [t["name"] for t in json.loads(r.stdout.decode("utf-8"))["tensors"]]
    check(len(listed) == len(set(listed)), "every name listed once (%d)" % len(listed))
    check(set(listed) == set(want), "the names are torch's keys and paths (%d)" % len(want))
    names = sorted(want)
    sample = names[::37] + [n for n in names if not n.isascii() or "\\" in n or "deep" in n]
    sample += ["again.599", ".0", ".41", "kkkkkkkk.8", "kkkkkkkkkkkkkkkk.16"]
    for name in sample:
        got = subprocess.run([ckpt, "cat", path, name], stdout=subprocess.PIPE).stdout
        check(got == want[name].numpy().tobytes(), "cat finds %r: torch's bytes" % name)
    for name in ["kkk", "again.600", "again.59.", ".59 ", "deep.0", "é.x", ""]:
        r = subprocess.run([ckpt, "cat", path, name], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        check(r.returncode != 0 and not r.stdout, "cat of %r (no such tensor) fails" % name)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
