#!/usr/bin/python3
"""Differential test of TorchScript archives against torch.jit.load on fresh
files: random module trees (Linear, Conv, norms, Embedding, LSTM, ParameterList,
Sequential, nested ModuleList/ModuleDict, parameters shared between submodules, buffers
persistent or not, dtypes, transposed parameters, quantized Conv/ConvReLU/Linear
modules, whose state_dict() is empty), scripted or traced; also quantized
modules as the root and a model through torch.ao.quantization's flow,
saved with torch.jit.save (and the lite interpreter's .ptl); each file's
answer is torch.jit.load(f).state_dict(), checked by tests/test_fixtures.py
(names in order, dtype, shape, strides, storage sharing, sha256 of bytes).

    /usr/bin/python3 tests/difftest_script.py CKPT [ROUNDS]

Exit 77 (skipped) without torch.
"""

import os
import random
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
try:
    import torch
    import torch.nn as nn
except ImportError:
    print("SKIP: no torch on this python")
    sys.exit(77)
sys.path.insert(0, here)
import gen_script  # noqa: E402  (the fixture generator's answer writer)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.uint8, torch.bool]


def leaf(rng):
    k = rng.randrange(10)
    d = rng.randint(1, 5)
    if k == 0:
        return nn.Linear(d, rng.randint(1, 5), bias=rng.random() < 0.7)
    if k == 1:
        return nn.Conv1d(d, rng.randint(1, 4), rng.randint(1, 3))
    if k == 2:
        return nn.BatchNorm1d(d)
    if k == 3:
        return nn.LayerNorm(d)
    if k == 4:
        return nn.Embedding(rng.randint(2, 6), d)
    if k == 5:
        return nn.LSTM(d, rng.randint(1, 3), num_layers=rng.randint(1, 2))
    if k == 6:
        return nn.ParameterList([nn.Parameter(torch.randn(rng.randint(1, 3)))
                                 for _ in range(rng.randint(0, 3))])
    if k == 7:
        return nn.Sequential(nn.Linear(d, d), nn.Sequential(nn.LayerNorm(d)))
    if k == 8:
        return rng.choice(gen_script.quantized_modules())
    return nn.ReLU()


class Node(nn.Module):
    def __init__(self, rng, depth):
        super().__init__()
        n = rng.randint(0, 3)
        for i in range(n):
            r = rng.random()
            if depth < 3 and r < 0.25:
                setattr(self, "sub%d" % i, Node(rng, depth + 1))
            elif depth < 3 and r < 0.4:
                self.add_module("list%d" % i, nn.ModuleList(
                    [Node(rng, depth + 1) if rng.random() < 0.3 else leaf(rng)
                     for _ in range(rng.randint(0, 3))]))
            elif depth < 3 and r < 0.5:
                self.add_module("dict%d" % i, nn.ModuleDict(
                    {"k%d" % j: leaf(rng) for j in range(rng.randint(0, 3))}))
            else:
                setattr(self, "leaf%d" % i, leaf(rng))
        for i in range(rng.randint(0, 2)):
            dt = rng.choice(DTYPES)
            t = (torch.randn(rng.randint(1, 4), rng.randint(1, 4)) * 10).to(dt)
            if rng.random() < 0.3:
                t = t.t()
            self.register_buffer("buf%d" % i, t, persistent=rng.random() < 0.7)
        if rng.random() < 0.5:
            p = torch.randn(rng.randint(1, 4), rng.randint(1, 4))
            self.p = nn.Parameter(p.t() if rng.random() < 0.5 else p)
        self.plain = torch.zeros(2)  # not in state_dict

    def forward(self, x):
        return x + self.plain.sum()


def share(rng, root):
    """Tie some parameters: one Parameter object under two modules."""
    mods = [m for m in root.modules() if isinstance(m, (nn.Linear, nn.Embedding))]
    for _ in range(rng.randint(0, 2)):
        if len(mods) < 2:
            break
        a, b = rng.sample(mods, 2)
        if a.weight.shape == b.weight.shape:
            b.weight = a.weight
        else:
            b.weight = nn.Parameter(a.weight.detach().clone().reshape(-1)[:0].new_empty(
                b.weight.shape).normal_())


def main():
    ckpt = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    seed = int(os.environ.get("DIFFTEST_SEED", "1234"))
    rng = random.Random(seed)
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as d:
        made = 0
        for i in range(rounds):
            r = rng.random()
            if r < 0.1:  # scripted: traced ones are in tests/fixtures/script
                m, example = rng.choice(gen_script.quantized_modules()), None
            elif r < 0.15:
                m, example = gen_script.quantized_model(), torch.randn(2, 2, 6, 6)
            else:
                m, example = Node(rng, 0), torch.randn(2)
                share(rng, m)
            m.eval()
            try:
                if example is not None and rng.random() < 0.3:
                    sm = torch.jit.trace(m, example)
                else:
                    sm = torch.jit.script(m)
            except Exception as e:  # a random tree TorchScript refuses
                print("# round %d: not scriptable or traceable (%s)" % (i, str(e).splitlines()[0][:80]))
                continue
            path = os.path.join(d, "r%03d.pt" % i)
            extra = {"round.txt": str(i)} if rng.random() < 0.5 else {}
            torch.jit.save(sm, path, _extra_files=extra)
            gen_script.script_answer(path)
            made += 1
            if rng.random() < 0.3:
                ptl = os.path.join(d, "r%03d.ptl" % i)
                sm._save_for_lite_interpreter(ptl)
                gen_script.script_answer(ptl)
                made += 1
        print("# %d archives (seed %d)" % (made, seed))
        r = subprocess.run([sys.executable, os.path.join(here, "test_fixtures.py"), ckpt, d])
        return r.returncode


if __name__ == "__main__":
    sys.exit(main())
