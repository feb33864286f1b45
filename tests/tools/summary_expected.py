#!/usr/bin/python3
"""Write what test_summary.c must find in a checkpoint, from torch.load
(Debian's python3-torch), one fact per line:

    walk VISITS SHARED MAXDEPTH      the value walk: references visited,
                                     containers/tensors met again, deepest level
    totals TENSORS ELEMENTS BYTES STORAGES STORAGE_BYTES
    dtype NAME TENSORS ELEMENTS BYTES      (in torch's dtype order below)
    key NAME TENSORS ELEMENTS               (top-level keys, in order)
    module PATH DEPTH TENSORS ELEMENTS      (depth first, first-seen order)
    under KEY ...                           (the same lines again, for the
                                             tensors under KEY, names relative)

Tensor names are ckpt's: dict keys and list indices joined by '.'.  A
container met again is not entered again.  The totals, dtypes and modules
of the whole file count every name a tensor is saved under (tied weights
twice, as torch's state_dict() lists them); a key's row and the tensors
under KEY count each tensor object once (a value shared within them is
one tensor).

    /usr/bin/python3 tests/tools/summary_expected.py examples/sample.pt optimizer \\
        > tests/tools/sample.summary.expected
"""
import sys

import torch

# ckpt_dtype numbering (include/ckpt.h), for the order of the dtype rows
DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool,
          torch.complex64, torch.complex128, torch.complex32]

obj = torch.load(sys.argv[1], map_location="cpu")
under_keys = sys.argv[2:]


def walk(v, prefix, out, seen, stats, depth=0, names=False):
    """Tensors under v as (name, tensor) in walk order; stats: visits,
    shared, maxdepth.  names: a tensor met again is listed again."""
    stats[0] += 1
    stats[2] = max(stats[2], depth)
    if isinstance(v, (torch.Tensor, dict, list, tuple, set)):
        if id(v) in seen:
            stats[1] += 1
            if names and isinstance(v, torch.Tensor):
                out.append((prefix, v))
            return
        seen[id(v)] = v
    if isinstance(v, torch.Tensor):
        out.append((prefix, v))
    elif isinstance(v, dict):
        for k, x in v.items():
            walk(x, "%s.%s" % (prefix, k) if prefix else str(k), out, seen, stats, depth + 1,
                 names)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            walk(x, "%s.%d" % (prefix, i) if prefix else str(i), out, seen, stats, depth + 1,
                 names)
    elif not (v is None or isinstance(v, (bool, int, float, str, bytes))):
        sys.exit("summary_expected.py: a %s: not described here" % type(v).__name__)


def facts(root, lines, top):
    tensors, stats = [], [0, 0, 0]
    walk(root, "", tensors, {}, stats, names=top)
    if top:
        lines.append("walk %d %d %d" % tuple(stats))
    storages = {}
    for _, t in tensors:
        s = t.storage()
        storages[s.data_ptr()] = s.nbytes()
    lines.append("totals %d %d %d %d %d" % (
        len(tensors), sum(t.numel() for _, t in tensors),
        sum(t.numel() * t.element_size() for _, t in tensors),
        len(storages), sum(storages.values())))
    for d in DTYPES:
        ts = [t for _, t in tensors if t.dtype == d]
        if ts:
            lines.append("dtype %s %d %d %d" % (str(d).replace("torch.", ""), len(ts),
                                                sum(t.numel() for t in ts),
                                                sum(t.numel() * t.element_size() for t in ts)))
    for k, v in root.items():
        ts = []
        walk(v, "", ts, {}, [0, 0, 0])
        lines.append("key %s %d %d" % (k, len(ts), sum(t.numel() for _, t in ts)))
    children, counts = {}, {}
    for name, t in tensors:
        parts = name.split(".")
        for i in range(1, len(parts)):
            path, parent = ".".join(parts[:i]), ".".join(parts[:i - 1]) if i > 1 else None
            if path not in counts:
                counts[path] = [0, 0]
                children.setdefault(parent, []).append(path)
            counts[path][0] += 1
            counts[path][1] += t.numel()

    def emit(parent, depth):
        for path in children.get(parent, []):
            lines.append("module %s %d %d %d" % (path, depth, counts[path][0], counts[path][1]))
            emit(path, depth + 1)
    emit(None, 0)


out = []
facts(obj, out, True)
for key in under_keys:
    v = obj
    for part in key.split("."):
        v = v[int(part)] if isinstance(v, (list, tuple)) else v[part]
    sub = []
    facts(v, sub, False)
    out += ["under %s %s" % (key, line) for line in sub]
print("\n".join(out))
