#!/usr/bin/env python3
"""Write the PyTorch Mobile flatbuffer fixtures of tests/fixtures/mobile/
with the answers of the torch that wrote them.

    python3 tests/gen_mobile.py OUTDIR          # with the running torch
    python3 tests/gen_mobile.py --both OUTDIR   # host torch (1.13) and the
                                                # torch 2.6 chroot (CHROOT)

Files are NAME_t1.* / NAME_t2.* (torch 1.x / 2.x), each flatbuffer ("PTMF"
at byte 4) with NAME.expected.json in the format of
tests/fixtures/*.expected.json (tests/test_fixtures.py checks it):

  model      torch.jit.save_jit_module_to_flatbuffer() of gen_script.py's
             Model (tied weights, ModuleList/ModuleDict, a non-persistent
             buffer, a transposed parameter, a plain tensor attribute, a
             tensor constant) with two _extra_files
  model_lite the same through _save_for_lite_interpreter(f, _use_flatbuffer=True)
  dtypes     every dtype this torch saves in a buffer, a view sharing a storage
  quant      quantized buffers, per tensor and per channel (1.13 only: 2.6
             writes the same bytes)
  attrs      attributes of every IValue kind (int, float, bool, str, lists,
             dict, tuple, device, None, a tensor list), checked by `show`

For all of them the tensors are torch.jit.load(f).state_dict(), as torch
reads the file back, and "values" are getattr() of the loaded module.

  lite_only  a flatbuffer of the lite interpreter's own module (no TorchScript
             sources: torch.jit.load refuses it); its tensors are what a
             method of the module returns when the lite interpreter runs it
             on the loaded file (torch's bytes), named as ckpt names a module
             whose classes it cannot see: every tensor attribute, in slot
             order (here the eager module's state_dict order, asserted).

Nothing here is hostile: tests/mobile/test_mobile.py builds those by hand.
"""

import os
import shutil
import subprocess
import sys
import warnings

CHROOT = "/work/torch2"


def both(outdir):
    here = os.path.abspath(__file__)
    os.makedirs(outdir, exist_ok=True)
    subprocess.run(["/usr/bin/python3", here, outdir], check=True)
    tmp = os.path.join(CHROOT, "tmp", "mobile")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    shutil.copy(here, os.path.join(tmp, "gen_mobile.py"))
    shutil.copy(os.path.join(os.path.dirname(here), "gen_script.py"),
                os.path.join(tmp, "gen_script.py"))
    subprocess.run(["chroot", CHROOT, "/usr/bin/python3", "/tmp/mobile/gen_mobile.py",
                    "/tmp/mobile/out"], check=True)
    out2 = os.path.join(tmp, "out")
    for n in sorted(os.listdir(out2)):
        shutil.copy(os.path.join(out2, n), os.path.join(outdir, n))
    shutil.rmtree(tmp)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--both":
    both(sys.argv[2])
    sys.exit(0)

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.argv, _argv = sys.argv[:1], sys.argv  # gen_script reads argv on import
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from typing import Dict, List, Optional, Tuple  # noqa: E402
from gen_script import Dtypes, Model, write_expected  # noqa: E402
sys.argv = _argv

MAJOR = int(torch.__version__.split(".")[0])
TAG = "_t%d" % MAJOR
QSCHEMES = {torch.per_tensor_affine: "per_tensor_affine",
            torch.per_channel_affine: "per_channel_affine"}


def loaded_answer(path, values=None):
    """torch.jit.load(f).state_dict(), as torch reads the flatbuffer back
    (a quantized tensor as its int_repr(): patch_quantized() adds the rest)."""
    with open(path, "rb") as f:
        assert f.read(8)[4:] == b"PTMF", path
    m = torch.jit.load(path)
    items = [(k, v.int_repr() if v.is_quantized else v)
             for k, v in m.state_dict(keep_vars=True).items()]
    write_expected(path, "mobile", items, values)
    return m


def patch_quantized(path, m):
    """write_expected() records a tensor's bytes; for a quantized tensor
    ckpt gives int_repr()'s and lists the scheme: rewrite those entries."""
    import json
    exp_path = path + ".expected.json"
    with open(exp_path) as f:
        exp = json.load(f)
    sd = m.state_dict()
    for e in exp["tensors"]:
        t = sd[e["name"]]
        if not t.is_quantized:
            continue
        e["dtype"] = str(t.dtype).replace("torch.", "")
        e["qscheme"] = QSCHEMES[t.qscheme()]
        if t.qscheme() == torch.per_tensor_affine:
            e["scale"] = float(t.q_scale())
            e["zero_point"] = int(t.q_zero_point())
        else:
            e["axis"] = int(t.q_per_channel_axis())
            e["scales"] = [float(x) for x in t.q_per_channel_scales().tolist()]
            e["zero_points"] = [int(x) for x in t.q_per_channel_zero_points().tolist()]
    lines = ["{"]
    for k in ("format", "byteorder", "key"):
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(exp[k])))
    lines.append(' "tensors": [')
    for i, e in enumerate(exp["tensors"]):
        lines.append("  " + json.dumps(e, separators=(",", ":"))
                     + ("," if i + 1 < len(exp["tensors"]) else ""))
    lines.append(" ],")
    lines.append(' "values": {},')
    lines.append(' "error": null')
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == exp
    with open(exp_path, "w") as f:
        f.write(text)


class NewDtypes(Dtypes):
    """Dtypes, plus the ones torch 2.x added (complex32 in 1.13 too)."""

    def __init__(self):
        super().__init__()
        base = torch.arange(-3, 3, dtype=torch.float32).reshape(2, 3)
        names = ["complex32"]
        if MAJOR >= 2:
            names += ["float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz",
                      "uint16", "uint32", "uint64"]
        for n in names:
            dt = getattr(torch, n)
            if n.startswith("uint"):
                t = (base + 3).to(torch.int64).to(dt)
            elif n == "complex32":
                t = torch.complex(base, -base).to(dt)
            else:
                t = base.to(dt)
            self.register_buffer("t_" + n, t)


class Quant(nn.Module):
    def __init__(self):
        super().__init__()
        x = torch.arange(-6.0, 6.0).reshape(3, 4)
        self.register_buffer("per_tensor", torch.quantize_per_tensor(x, 0.5, 3, torch.quint8))
        self.register_buffer("per_channel", torch.quantize_per_channel(
            x, torch.tensor([0.1, 0.2, 0.3], dtype=torch.double), torch.tensor([0, 1, 2]), 0,
            torch.qint8))
        self.w = nn.Parameter(torch.arange(4.0))

    def forward(self, x):
        return x + self.w


class Attrs(nn.Module):
    """Attributes of every IValue kind the flatbuffer has a table for."""

    def __init__(self):
        super().__init__()
        self.i: int = -7
        self.big: int = 2 ** 40 + 3
        self.f: float = 2.5
        self.flag: bool = True
        self.s: str = "h\u00e9llo"
        self.ints: List[int] = [1, -2, 3]
        self.floats: List[float] = [0.5, -1.25]
        self.bools: List[bool] = [True, False, True]
        self.strs: List[str] = ["a", "bc"]
        self.d: Dict[str, int] = {"x": 1, "y": 2}
        self.t: Tuple[int, str, float] = (4, "five", 6.0)
        self.dev = torch.device("cpu")
        self.none: Optional[int] = None
        self.tl: List[torch.Tensor] = [torch.ones(2), torch.zeros(1)]
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) * self.f + self.i + len(self.s) + len(self.ints) + len(self.floats) \
            + len(self.bools) + len(self.strs) + self.d["x"] + self.t[0] + self.tl[0].sum() \
            + (1 if self.flag else 0) + (0 if self.none is None else 1) + self.big


class LiteOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(6.0).reshape(2, 3))
        self.register_buffer("scale", torch.full((3,), 0.25))
        self.lin = nn.Linear(3, 2)

    def forward(self, x):
        return self.lin(x @ self.w.t() @ torch.ones(2, 3) * self.scale)

    @torch.jit.export
    def tensors(self) -> List[torch.Tensor]:
        return [self.w, self.scale, self.lin.weight, self.lin.bias]


def gen(outdir):
    torch.manual_seed(21)
    m = torch.jit.script(Model().eval())
    path = os.path.join(outdir, "model%s.ff" % TAG)
    torch.jit.save_jit_module_to_flatbuffer(
        m, path, _extra_files={"config.json": '{"d": 6}', "notes.txt": "tiny"})
    loaded_answer(path)
    path = os.path.join(outdir, "model_lite%s.ptl" % TAG)
    m._save_for_lite_interpreter(path, _use_flatbuffer=True)
    loaded_answer(path)

    path = os.path.join(outdir, "dtypes%s.ff" % TAG)
    torch.jit.save_jit_module_to_flatbuffer(torch.jit.script(NewDtypes()), path)
    loaded_answer(path)

    if MAJOR < 2:  # torch 2.6 writes the very same bytes
        path = os.path.join(outdir, "quant%s.ff" % TAG)
        torch.jit.save_jit_module_to_flatbuffer(torch.jit.script(Quant()), path)
        patch_quantized(path, loaded_answer(path))

    path = os.path.join(outdir, "attrs%s.ff" % TAG)
    torch.jit.save_jit_module_to_flatbuffer(torch.jit.script(Attrs().eval()), path)
    a = torch.jit.load(path)
    values = {"state.i": a.i, "state.big": a.big, "state.f": a.f, "state.flag": a.flag,
              "state.s": a.s, "state.ints": list(a.ints), "state.floats": list(a.floats),
              "state.bools": list(a.bools), "state.strs": list(a.strs),
              "state.d.x": a.d["x"], "state.d.y": a.d["y"], "state.t": list(a.t),
              "state.none": a.none, "state.training": a.training}
    loaded_answer(path, values)

    # the lite interpreter's own module, re-saved: no jit_sources
    eager = LiteOnly().eval()
    s = torch.jit.script(eager)
    tmp = os.path.join(outdir, "lite_only.tmp")
    s._save_for_lite_interpreter(tmp, _use_flatbuffer=True)
    from torch.jit.mobile import _load_for_lite_interpreter
    lite = _load_for_lite_interpreter(tmp)
    os.remove(tmp)
    if MAJOR >= 2:
        raw = torch._C._save_mobile_module_to_bytes(lite._c, {})
    else:
        import torch._C_flatbuffer as ff
        raw = ff._save_mobile_module_to_bytes(lite._c, {})
    path = os.path.join(outdir, "lite_only%s.ff" % TAG)
    with open(path, "wb") as f:
        f.write(raw)
    try:
        torch.jit.load(path)
        raise AssertionError("torch.jit.load read a flatbuffer without sources")
    except RuntimeError:
        pass
    # the module owns the file's bytes its tensors view: keep it alive
    lite2 = _load_for_lite_interpreter(path)
    back = [t.clone() for t in lite2.run_method("tensors")]
    del lite2
    names = list(eager.state_dict().keys())
    assert len(names) == len(back)
    for n, t in zip(names, back):
        assert torch.equal(t, eager.state_dict()[n]), n
    write_expected(path, "mobile", list(zip(names, back)))


if __name__ == "__main__":
    os.makedirs(sys.argv[1], exist_ok=True)
    gen(sys.argv[1])
