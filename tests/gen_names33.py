#!/usr/bin/env python3
"""Write the fixtures of issue 33's names items and torch's own answers.

    /usr/bin/python3 tests/gen_names33.py [OUTDIR]   (default tests/fixtures/names33)

torch 1.13 (Debian's python3-torch) saves each object built here, then
torch.load()s its own file back; FILE.expected.json records what torch gave:
every tensor in the order torch.load's object holds it, with its key path
(the dict keys from the root, as JSON: a key holding NUL or U+202E comes
back exactly with json.load), the name ckpt lists it under (the path joined
by '.'), dtype, shape and the sha256 of its bytes (contiguous,
little-endian).  The files:

  nul.pt    {'w\\x00evil', 'w', 'a', 'a\\x00b'}: names are byte strings
  clash.pt  {'model.fc.weight': t, 'model': {'fc.weight': u}, 'other': v}:
            two key paths, one flattened name
  bidi.pt   keys with U+202E, U+200B and the C1 control U+009B
  keys.pt   nested keys, a key holding dots at two levels, an int key:
            what --key reaches as a path of keys

Small (a few KiB each); deterministic tensors (arange), so the files are the
same each time but for the ZIP's record times, which torch does not write.
"""

import hashlib
import json
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def t(n, start, shape=None):
    x = torch.arange(start, start + n, dtype=torch.float32)
    return x.reshape(shape) if shape else x


OBJECTS = {
    "nul.pt": {"w\x00evil": t(2, 0), "w": t(3, 10), "a": t(4, 20), "a\x00b": t(5, 30)},
    "clash.pt": {"model.fc.weight": t(4, 0, (2, 2)), "model": {"fc.weight": t(4, 100, (2, 2))},
                 "other": t(3, 200)},
    "bidi.pt": {"\u202egnp.exe": t(2, 0), "zero\u200bwidth": t(2, 10), "csi\u009b2J": t(2, 20),
                "plain": t(2, 30)},
    "keys.pt": {"model": {"fc.w": t(4, 0, (2, 2)), "fc": {"b": t(2, 10)}},
                "optimizer": {"state": {0: {"exp_avg": t(3, 20)}}},
                "x.y": {"z": t(2, 30)}},
}


def flatten(obj, path):
    """(key path, tensor) in the order the object holds them."""
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from flatten(v, path + [k])


def answer(path, x):
    data = x.contiguous().numpy().astype(x.numpy().dtype.newbyteorder("<")).tobytes()
    return {"path": path, "name": ".".join(str(k) for k in path),
            "dtype": str(x.dtype)[len("torch."):], "shape": list(x.shape),
            "sha256": hashlib.sha256(data).hexdigest()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "fixtures", "names33")
    os.makedirs(out, exist_ok=True)
    for fname, obj in OBJECTS.items():
        path = os.path.join(out, fname)
        torch.save(obj, path)
        back = torch.load(path)  # our own file, just written
        tensors = [answer(p, x) for p, x in flatten(back, [])]
        exp = {"written_by": "torch " + torch.__version__, "tensors": tensors}
        with open(path + ".expected.json", "w") as f:
            json.dump(exp, f, indent=1)
            f.write("\n")
    print("wrote %d fixtures to %s" % (len(OBJECTS), out))


if __name__ == "__main__":
    main()
