#!/usr/bin/python3
"""Write the benchmark inputs (needs torch: run with Debian's /usr/bin/python3).

    /usr/bin/python3 bench/gen.py OUTDIR

  small_100k_zip.pt   100,000 small float32 tensors (1..64 elements) in one
                      state dict, torch.save's ZIP format
  big_1g_zip.pt       1 GiB in 64 float32 tensors of 16 MiB, ZIP
  big_1g_legacy.pt    the same tensors as a legacy stream
                      (_use_new_zipfile_serialization=False)
  model_100k_modules.pt
                      torch.save(model) of a whole model (not its state
                      dict): nn.Sequential of 100,000 nn.Linear(4, 4)
  sd_1m.pt            a state dict of 1,000,000 one-element float32 tensors

A file that already exists with a matching OUTDIR/.stamp-NAME is kept, so the
inputs are made once per workdir.
"""
import collections
import os
import sys

import torch

VERSION = "1"  # bump when the files change


def stamp_ok(outdir, name):
    p = os.path.join(outdir, name)
    s = os.path.join(outdir, ".stamp-" + name)
    return os.path.exists(p) and os.path.exists(s) and open(s).read() == VERSION


def save(outdir, name, obj, **kw):
    p = os.path.join(outdir, name)
    tmp = p + ".tmp"
    torch.save(obj, tmp, **kw)
    os.replace(tmp, p)
    with open(os.path.join(outdir, ".stamp-" + name), "w") as f:
        f.write(VERSION)
    print("wrote %s (%d bytes)" % (p, os.path.getsize(p)))


def small(n=100_000):
    g = torch.Generator().manual_seed(1)
    sd = collections.OrderedDict()
    sizes = torch.randint(1, 65, (n,), generator=g).tolist()
    for i, k in enumerate(sizes):
        sd["blocks.%d.layer%d.weight" % (i // 100, i % 100)] = torch.randn(k, generator=g)
    return sd


def big():
    g = torch.Generator().manual_seed(2)
    sd = collections.OrderedDict()
    for i in range(64):
        sd["layers.%d.weight" % i] = torch.randn(2048, 2048, generator=g)  # 16 MiB
    return sd


def model(n=100_000):
    torch.manual_seed(3)
    return torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(n)])


def million(n=1_000_000):
    sd = collections.OrderedDict()
    z = torch.zeros(1)
    for i in range(n):
        sd["l%d.w" % i] = z.clone()
    return sd


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    if not stamp_ok(outdir, "small_100k_zip.pt"):
        save(outdir, "small_100k_zip.pt", small())
    if not stamp_ok(outdir, "model_100k_modules.pt"):
        save(outdir, "model_100k_modules.pt", model())
    if not stamp_ok(outdir, "sd_1m.pt"):
        save(outdir, "sd_1m.pt", million())
    need_zip = not stamp_ok(outdir, "big_1g_zip.pt")
    need_legacy = not stamp_ok(outdir, "big_1g_legacy.pt")
    if need_zip or need_legacy:
        sd = big()
        if need_zip:
            save(outdir, "big_1g_zip.pt", sd)
        if need_legacy:
            save(outdir, "big_1g_legacy.pt", sd, _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()
