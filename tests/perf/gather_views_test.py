#!/usr/bin/python3
"""Tensors wider than the read buffer (issue 14).  `ckpt cat` reads a strided
view 4 MiB at a time, so each view here spans more than 4x the bytes asked
for plus 1 MiB and is read by one pass over its span in blocks
(gather_blocks() in src/torch/catalogue.c); a contiguous tensor it reads
256 KiB at a time, so the last two are written in many pieces, the last
piece short, one of them from an offset into its storage.  The expected
bytes are torch's own (`.contiguous()`), written by Debian's torch 1.13 at
test time.

    gather_views_test.py CKPT
"""
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
x = torch.randn(2560, 2048)  # 20 MiB
views = {
    "transposed": x.t(),  # runs of one element, stride 2048
    "transposed_slice": x.t()[1::3, 7:2500],  # an offset, steps, a partial span
    "pairs": torch.randn(1200, 2048, 2).permute(1, 0, 2),  # runs of 2 elements
    "double_t": x.double().t()[:, 100:],  # 8-byte elements
    "rows": x[3:],  # contiguous from element 6144 of x's storage: 80 pieces
    "odd_half": torch.randn(300001).half(),  # 600,002 bytes: 2 whole pieces and a short one
}
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "views.pt")
    torch.save(views, path)
    for name, v in views.items():
        want = v.contiguous().numpy().tobytes()
        got = subprocess.run([ckpt, "cat", path, name], stdout=subprocess.PIPE).stdout
        check(got == want, "cat %s %s: torch's %d bytes" % (name, list(v.shape), len(want)))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
