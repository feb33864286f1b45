#!/usr/bin/python3
"""Differential test: random checkpoints written by torch vs. the ckpt CLI.

    /usr/bin/python3 tests/difftest.py CKPT_BINARY [SEED] [COUNT]

Needs torch (Debian's python3-torch); without it prints
`SKIPPED: torch not importable` and exits 77.  Writes COUNT (default 40)
random checkpoints into a temp dir -- random 1.13-savable dtypes, shapes
(incl. 0-d and empty), views (slices, steps, transposes, permutes, expand,
select), Parameters, tied tensors, nested dicts/lists/tuples with plain
values, ZIP and legacy, pickle protocol 2/4/5 -- then compares every tensor
of `ckpt ls --json` and `ckpt cat` with torch.load: names in order, dtype,
shape, stride, storage_offset, nbytes, storage sharing and bytes.

The seed (argv or time) is printed first so that a failure reproduces; on
failure the temp dir is kept and its path printed.  Final line:
`N passed, M failed`; exit 1 on failure.
"""

import collections
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

try:
    warnings.filterwarnings("ignore")
    import torch
    import torch.nn as nn
except Exception:
    print("SKIPPED: torch not importable")
    sys.exit(77)

TIMEOUT = 120

DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16,
          torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
          torch.bool, torch.complex64, torch.complex128]


# ---------------------------------------------------------------- walking

def key_str(k):
    if isinstance(k, int) and not isinstance(k, bool):
        return str(k)
    if isinstance(k, str):
        return k
    raise TypeError(k)


def walk(obj, prefix, out):
    if isinstance(obj, torch.Tensor):
        out.append(("" if prefix is None else prefix, obj))
    elif isinstance(obj, nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            out.append((k if prefix is None else prefix + "." + k, v))
    elif isinstance(obj, dict):
        for k, v in obj.items():
            walk(v, key_str(k) if prefix is None else prefix + "." + key_str(k), out)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            walk(v, str(i) if prefix is None else prefix + "." + str(i), out)


def tensor_bytes(t):
    t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    # a fresh 1-d buffer: .contiguous() may keep odd strides on size-1 dims
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.reshape(-1))
    return flat.view(torch.uint8).numpy().tobytes()


def storage_identity(t):
    st = t.storage()
    ust = st._storage if hasattr(st, "_storage") else st
    if ust.nbytes() > 0:
        return ("ptr", ust.data_ptr())
    return ("cdata", ust._cdata)


# ---------------------------------------------------------------- random data

def rand_tensor(rng, dtype, shape):
    g = torch.Generator().manual_seed(rng.getrandbits(31))
    if dtype.is_complex:
        return torch.randn(tuple(shape), dtype=dtype, generator=g)
    if dtype.is_floating_point:
        return (torch.randn(tuple(shape), generator=g) * rng.choice([1, 10, 1000])).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=g).bool()
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -2**62), min(info.max, 2**62)
    return torch.randint(lo, hi, tuple(shape), dtype=dtype, generator=g)


def rand_shape(rng):
    nd = rng.choice([0, 1, 1, 2, 2, 3, 4])
    return [rng.choice([0, 1, 2, 3, 4, 5]) if rng.random() < 0.08 else rng.randint(1, 5)
            for _ in range(nd)]


def rand_view(rng, t):
    """Apply 0..3 random view operations."""
    for _ in range(rng.randint(0, 3)):
        if t.dim() == 0:
            break
        op = rng.choice(["slice", "step", "t", "perm", "expand", "select", "narrow"])
        d = rng.randrange(t.dim())
        n = t.shape[d]
        if op == "slice" and n > 0:
            a = rng.randrange(n)
            t = t.narrow(d, a, rng.randint(0, n - a))
        elif op == "step" and n > 0:
            idx = [slice(None)] * t.dim()
            idx[d] = slice(rng.randrange(n), None, rng.randint(1, 3))
            t = t[tuple(idx)]
        elif op == "t" and t.dim() >= 2:
            t = t.transpose(d, (d + 1) % t.dim())
        elif op == "perm" and t.dim() >= 2:
            p = list(range(t.dim()))
            rng.shuffle(p)
            t = t.permute(*p)
        elif op == "expand" and t.dim() < 4:
            t = t.unsqueeze(d).expand(*(list(t.shape[:d]) + [rng.randint(1, 3)] + list(t.shape[d:])))
        elif op == "select" and n > 0:
            t = t.select(d, rng.randrange(n))
        elif op == "narrow" and n > 1:
            t = t.narrow(d, 1, n - 1)
    return t


def rand_name(rng, used):
    while True:
        n = rng.choice(["w", "b", "layer", "enc", "dec", "x", "emb", "head", "p", "q"]) \
            + str(rng.randrange(100))
        if n not in used:
            used.add(n)
            return n


def rand_value(rng):
    return rng.choice([None, True, False, rng.randint(-10**6, 10**6), 2**rng.randint(62, 90),
                       rng.uniform(-1, 1), "s%d" % rng.randrange(1000), 0.5])


def rand_tree(rng, depth, pool):
    """A nested structure of tensors and plain values; `pool` collects tensors
    so that some can be reused (tied / views of the same base)."""
    def leaf():
        r = rng.random()
        if pool and r < 0.12:
            return rng.choice(pool)                        # same object again
        if pool and r < 0.25:
            base = rng.choice(pool)
            v = rand_view(rng, base.detach())              # view of an existing base
            pool.append(v)
            return v
        if r < 0.35:
            return rand_value(rng)
        dt = rng.choice(DTYPES)
        t = rand_view(rng, rand_tensor(rng, dt, rand_shape(rng)))
        if dt.is_floating_point and rng.random() < 0.15:
            t = nn.Parameter(t.detach().clone(), requires_grad=rng.random() < 0.7)
        pool.append(t)
        return t

    if depth <= 0 or rng.random() < 0.3:
        return leaf()
    kind = rng.choice(["dict", "dict", "odict", "list", "tuple", "intdict"])
    n = rng.randint(0, 5)
    if kind in ("dict", "odict"):
        d = {} if kind == "dict" else collections.OrderedDict()
        used = set()
        for _ in range(n):
            d[rand_name(rng, used)] = rand_tree(rng, depth - 1, pool)
        return d
    if kind == "intdict":
        return {i * 3: rand_tree(rng, depth - 1, pool) for i in range(n)}
    items = [rand_tree(rng, depth - 1, pool) for _ in range(n)]
    return items if kind == "list" else tuple(items)


def rand_checkpoint(rng):
    pool = []
    r = rng.random()
    if r < 0.08:
        return rand_view(rng, rand_tensor(rng, rng.choice(DTYPES), rand_shape(rng)))
    obj = collections.OrderedDict()
    used = set()
    for _ in range(rng.randint(1, 6)):
        obj[rand_name(rng, used)] = rand_tree(rng, 3, pool)
    if rng.random() < 0.3:
        obj["epoch"] = rng.randrange(100)
    return obj


# ---------------------------------------------------------------- running

def run(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout"
    except OSError as e:
        return None, b"", str(e).encode()
    return p.returncode, p.stdout, p.stderr


def short(b, n=300):
    s = b.decode("utf-8", "replace").strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


def main():
    if len(sys.argv) < 2:
        print("usage: %s CKPT_BINARY [SEED] [COUNT]" % sys.argv[0], file=sys.stderr)
        return 2
    ckpt = sys.argv[1]
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else int(time.time())
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    print("seed: %d (rerun: %s %s %d %d)" % (seed, sys.argv[0], ckpt, seed, count))
    sys.stdout.flush()
    rng = random.Random(seed)
    torch.manual_seed(seed)
    tmp = tempfile.mkdtemp(prefix="ckpt-difftest-")
    passed = failed = 0

    def fail(fx, msg):
        nonlocal failed
        failed += 1
        print("FAIL %s: %s" % (fx, msg))
        sys.stdout.flush()

    for i in range(count):
        obj = rand_checkpoint(rng)
        zip_ = rng.random() < 0.6
        proto = rng.choice([2, 2, 4, 5])
        fx = "ck%02d_%s_p%d.pt" % (i, "zip" if zip_ else "legacy", proto)
        path = os.path.join(tmp, fx)
        torch.save(obj, path, _use_new_zipfile_serialization=zip_, pickle_protocol=proto)
        loaded = torch.load(path)
        tensors = []
        walk(loaded, None, tensors)

        rc, out, err = run([ckpt, "ls", "--json", path])
        if rc != 0:
            fail(fx, "ls exit code %r: %s" % (rc, short(err)))
            continue
        try:
            got = json.loads(out.decode("utf-8"))
            gts = got["tensors"]
        except Exception as e:
            fail(fx, "ls --json output unusable (%s): %s" % (e, short(out)))
            continue
        errs = []
        want_fmt = "zip" if zip_ else "legacy"
        if got.get("format") != want_fmt:
            errs.append("format %r, want %r" % (got.get("format"), want_fmt))
        if got.get("byteorder") != "little":
            errs.append("byteorder %r, want 'little'" % got.get("byteorder"))
        gnames = [t.get("name") for t in gts]
        enames = [n for n, _ in tensors]
        if gnames != enames:
            errs.append("names %r, want %r" % (gnames[:6], enames[:6]))
        else:
            groups, e2g, g2e = {}, {}, {}
            for (n, t), gt in zip(tensors, gts):
                want = {"dtype": str(t.dtype).replace("torch.", ""), "shape": list(t.shape),
                        "stride": list(t.stride()), "storage_offset": t.storage_offset(),
                        "nbytes": t.numel() * t.element_size()}
                for k, v in want.items():
                    if gt.get(k) != v:
                        errs.append("%r %s %r, want %r" % (n, k, gt.get(k), v))
                grp = groups.setdefault(storage_identity(t), len(groups))
                sid = gt.get("storage")
                if e2g.setdefault(grp, sid) != sid or g2e.setdefault(sid, grp) != grp:
                    errs.append("%r storage sharing differs" % n)
        if errs:
            fail(fx, "ls: " + "; ".join(errs[:6]))
        else:
            passed += 1

        for n, t in tensors:
            rc, out, err = run([ckpt, "cat", path, n])
            want = tensor_bytes(t)
            if rc != 0:
                fail(fx, "cat %r exit code %r: %s" % (n, rc, short(err)))
            elif out != want:
                fail(fx, "cat %r: %d bytes sha256 %s, want %d bytes sha256 %s" % (
                    n, len(out), hashlib.sha256(out).hexdigest()[:16], len(want),
                    hashlib.sha256(want).hexdigest()[:16]))
            else:
                passed += 1

    if failed:
        print("kept checkpoints in %s" % tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
