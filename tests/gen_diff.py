#!/usr/bin/python3
"""gen_diff.py OUTDIR - pairs of checkpoints for `ckpt diff`, with torch's answer.
gen_diff.py --float8 OUTDIR - the float8 pair (torch 2.x: run in the torch 2.6
root; its output is committed in tests/fixtures/diffconv/).

Writes OUTDIR/PAIR_a.pt, OUTDIR/PAIR_b.pt and OUTDIR/PAIR.expected.json for
each pair: {"equal", "compared", "identical", "only_a", "only_b",
"changed": {name: {"what": "dtype"|"shape"|"values", "max_abs": x|null}}}.
Every answer is torch's own: which names each side has (torch.load), dtype
and shape equality, byte equality of the contiguous elements, and
(a.double() - b.double()).abs().max() (complex128 for complex tensors).
Exit 77 when torch is missing.
"""
import json
import math
import os
import sys

try:
    import torch
except ImportError:
    print("skip - torch is not installed")
    sys.exit(77)



def raw(t):
    t = t.detach().contiguous().reshape(-1)
    if t.dtype == torch.bool:
        t = t.to(torch.uint8)
    if t.is_complex():
        t = torch.view_as_real(t).reshape(-1)
    return t.view(torch.uint8).numpy().tobytes() if t.numel() else b""


def max_abs(a, b):
    if a.is_floating_point():
        d = (a.double() - b.double()).abs()
    elif a.is_complex():
        d = (a.to(torch.complex128) - b.to(torch.complex128)).abs()
    else:
        return None
    if d.numel() == 0:
        return 0.0
    return d.max().item()


def answer(pa, pb):
    a = torch.load(pa)
    b = torch.load(pb)
    out = {"only_a": [k for k in a if k not in b], "only_b": [k for k in b if k not in a],
           "changed": {}, "compared": 0, "identical": 0}
    for k in a:
        if k not in b:
            continue
        out["compared"] += 1
        x, y = a[k], b[k]
        if x.dtype != y.dtype:
            out["changed"][k] = {"what": "dtype", "max_abs": None}
        elif tuple(x.shape) != tuple(y.shape):
            out["changed"][k] = {"what": "shape", "max_abs": None}
        elif raw(x) == raw(y):
            out["identical"] += 1
        else:
            m = max_abs(x, y)
            if m is not None and math.isnan(m):
                m = "nan"
            out["changed"][k] = {"what": "values", "max_abs": m}
    out["equal"] = not out["changed"] and not out["only_a"] and not out["only_b"]
    return out


def float8(out):
    g = torch.Generator().manual_seed(8)
    a, b = {}, {}
    for name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz"):
        dt = getattr(torch, name)
        x = torch.randn(12, generator=g)
        a[name] = x.to(dt)
        y = x.clone()
        y[5] += 1.5
        b[name] = y.to(dt)
        a[name + "_same"] = x.to(dt)
        b[name + "_same"] = x.to(dt)
    torch.save(a, os.path.join(out, "f8_a.pt"))
    torch.save(b, os.path.join(out, "f8_b.pt"))
    with open(os.path.join(out, "f8.expected.json"), "w") as f:
        json.dump(answer(os.path.join(out, "f8_a.pt"), os.path.join(out, "f8_b.pt")), f,
                  indent=1, sort_keys=True)
        f.write("\n")


def main():
    if sys.argv[1] == "--float8":
        os.makedirs(sys.argv[2], exist_ok=True)
        float8(sys.argv[2])
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    g = torch.Generator().manual_seed(13)
    base = {
        "f32": torch.randn(4, 5, generator=g),
        "f16": torch.randn(7, generator=g).half(),
        "bf16": torch.randn(3, 3, generator=g).bfloat16(),
        "f64": torch.randn(6, generator=g).double(),
        "c64": torch.randn(5, generator=g, dtype=torch.complex64),
        "i64": torch.arange(10),
        "flag": torch.tensor([True, False, True]),
        "dtype_change": torch.ones(3),
        "shape_change": torch.zeros(2, 3),
        "gone": torch.ones(2),
        "zero_sign": torch.zeros(4),
        "nan_both": torch.tensor([float("nan"), 1.0, 2.0]),
        "big": torch.randn(300000, generator=g),  # 1.2 MB: several 1 MiB chunks
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
    }
    torch.save(base, os.path.join(out, "same_a.pt"))
    # the same tensors, as a legacy stream and with a view in place of a copy
    same = dict(base)
    backing = torch.zeros(10, 5)
    backing[2:6] = base["f32"]
    same["f32"] = backing[2:6]
    torch.save(same, os.path.join(out, "same_b.pt"), _use_new_zipfile_serialization=False)

    torch.save(base, os.path.join(out, "changed_a.pt"))
    ch = {k: v.clone() for k, v in base.items()}
    ch["f32"][1, 2] += 0.25
    ch["f16"][0] = -ch["f16"][0]
    ch["bf16"][2, 2] += 1.0
    ch["f64"][5] = 1e-3
    ch["c64"][3] += complex(0.5, -1.5)
    ch["i64"][9] = -4
    ch["flag"][1] = True
    ch["dtype_change"] = torch.ones(3).half()
    ch["shape_change"] = torch.zeros(3, 2)
    del ch["gone"]
    ch["added"] = torch.ones(1)
    ch["zero_sign"][2] = -0.0
    ch["nan_both"][2] = 2.5
    ch["big"][299999] += 2.0  # in the last chunk
    torch.save(ch, os.path.join(out, "changed_b.pt"))

    for pair in ("same", "changed"):
        pa = os.path.join(out, pair + "_a.pt")
        pb = os.path.join(out, pair + "_b.pt")
        with open(os.path.join(out, pair + ".expected.json"), "w") as f:
            json.dump(answer(pa, pb), f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
