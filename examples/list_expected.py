#!/usr/bin/python3
"""Write what examples/list.c must print for a checkpoint, from torch.load
(Debian's python3-torch): every tensor as `name dtype ndim= nbytes=` in
ckpt's naming (dict keys and list indices joined by '.'), the first element
of model.fc1.weight and the epoch.

    /usr/bin/python3 examples/list_expected.py examples/sample.pt > examples/list.expected
"""
import sys

import torch

obj = torch.load(sys.argv[1], map_location="cpu")
lines = []


def walk(prefix, v):
    if isinstance(v, torch.Tensor):
        dtype = str(v.dtype).replace("torch.", "")
        lines.append("%s %s ndim=%d nbytes=%d" % (prefix, dtype, v.dim(), v.numel() * v.element_size()))
    elif isinstance(v, dict):
        for k, x in v.items():
            walk("%s.%s" % (prefix, k) if prefix else str(k), x)
    elif isinstance(v, (list, tuple)):
        for k, x in enumerate(v):
            walk("%s.%d" % (prefix, k) if prefix else str(k), x)


walk("", obj)
lines.append("first element: %g" % float(obj["model"]["fc1.weight"].flatten()[0]))
lines.append("epoch %d" % obj["epoch"])
print("\n".join(lines))
