#!/usr/bin/env python3
"""Write the TorchScript and torch.export fixtures of tests/fixtures/script/
with the answers of the torch that wrote them.

    python3 tests/gen_script.py OUTDIR          # with the running torch
    python3 tests/gen_script.py --both OUTDIR   # host torch (1.13) and the
                                                # torch 2.6 chroot at /tmp/torch2

Files are named NAME_t1.pt / NAME_t2.pt (torch 1.x / 2.x).  Each gets
NAME.expected.json in the format of tests/fixtures/*.expected.json
(tests/test_fixtures.py checks it): for TorchScript the tensors are
torch.jit.load(f).state_dict(), for a .pt2 ep.state_dict then ep.constants,
as torch.export.load(f) gives them.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys

CHROOT = "/tmp/torch2"


def both(outdir):
    here = os.path.abspath(__file__)
    os.makedirs(outdir, exist_ok=True)
    subprocess.run(["/usr/bin/python3", here, outdir], check=True)
    tmp = os.path.join(CHROOT, "tmp", "script")
    os.makedirs(tmp, exist_ok=True)
    shutil.copy(here, os.path.join(tmp, "gen_script.py"))
    out2 = os.path.join(tmp, "out")
    shutil.rmtree(out2, ignore_errors=True)
    subprocess.run(["chroot", CHROOT, "/usr/bin/python3", "/tmp/script/gen_script.py",
                    "/tmp/script/out"], check=True)
    for n in sorted(os.listdir(out2)):
        shutil.copy(os.path.join(out2, n), os.path.join(outdir, n))


if len(sys.argv) == 3 and sys.argv[1] == "--both":
    both(sys.argv[2])
    sys.exit(0)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

MAJOR = int(torch.__version__.split(".")[0])
TAG = "_t%d" % MAJOR


def tensor_bytes(t):
    t = t.detach()
    flat = torch.empty(t.numel(), dtype=t.dtype)
    flat.copy_(t.reshape(-1))
    return bytes(flat.view(torch.uint8).tolist())


def storage_identity(t):
    if hasattr(t, "untyped_storage"):
        ust = t.untyped_storage()
    else:
        st = t.storage()
        ust = st._storage if hasattr(st, "_storage") else st
    return ust.data_ptr() if ust.nbytes() > 0 else ("cdata", id(ust))


def write_expected(path, fmt, items, values=None):
    groups, out = {}, []
    for name, t in items:
        sid = storage_identity(t)
        groups.setdefault(sid, len(groups))
        b = tensor_bytes(t)
        assert len(b) == t.numel() * t.element_size()
        out.append({
            "name": name,
            "dtype": str(t.dtype).replace("torch.", ""),
            "shape": list(t.shape),
            "stride": list(t.stride()),
            "storage_offset": t.storage_offset(),
            "requires_grad": bool(t.requires_grad),
            "nbytes": t.numel() * t.element_size(),
            "sha256": hashlib.sha256(b).hexdigest(),
            "storage_group": groups[sid],
        })
    exp = {"format": fmt, "byteorder": "little", "key": None, "tensors": out,
           "values": values or {}, "error": None}
    lines = ["{"]
    for k in ("format", "byteorder", "key"):
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(exp[k])))
    if out:
        lines.append(' "tensors": [')
        for i, t in enumerate(out):
            lines.append("  " + json.dumps(t, separators=(",", ":"))
                         + ("," if i + 1 < len(out) else ""))
        lines.append(" ],")
    else:
        lines.append(' "tensors": [],')
    lines.append(' "values": ' + json.dumps(exp["values"], indent=1).replace("\n", "\n ") + ",")
    lines.append(' "error": null')
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == exp
    with open(path + ".expected.json", "w") as f:
        f.write(text)


def script_answer(path, values=None):
    """torch.jit.load(f).state_dict(), the tensors ckpt must list."""
    m = torch.jit.load(path)
    sd = m.state_dict(keep_vars=True)  # keep_vars: requires_grad as saved
    write_expected(path, "torchscript", list(sd.items()), values)


def write_constants(path):
    """NAME.constants.txt: the tensors of constants.pkl as torch reads them
    (the constants table of the loaded module's code), one line each:
    dtype, shape, hex of the row-major bytes; checked by tests/script/."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        root = z.namelist()[0].split("/")[0]
        raw = z.read(root + "/constants.pkl")
    loaded = torch.jit.load(path)
    # torch.jit.load's constants table: the module's code says CONSTANTS.cN
    tensors = []
    i = 0
    while True:
        try:
            t = getattr(loaded.code_with_constants[1], "c%d" % i)
        except (AttributeError, KeyError):
            break
        tensors.append(t)
        i += 1
    assert raw and tensors
    with open(path + ".constants.txt", "w") as f:
        for t in tensors:
            f.write("%s %s %s\n" % (str(t.dtype).replace("torch.", ""),
                                    ",".join(str(n) for n in t.shape), tensor_bytes(t).hex()))


# ---- models ----------------------------------------------------------------

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.proj = nn.Linear(d, d)
        self.register_buffer("scale", torch.full((d,), 0.5))
        self.register_buffer("mask", torch.tril(torch.ones(d, d)), persistent=False)

    def forward(self, x):
        return self.proj(self.norm(x)) * self.scale + x @ self.mask


class Model(nn.Module):
    """Several submodules, a parameter shared by two of them (tied
    embedding/head), a ModuleList, a ModuleDict, buffers, a non-persistent
    buffer, a transposed parameter, a bias-free Linear, a tensor attribute
    that is neither parameter nor buffer, and a tensor constant in code."""

    def __init__(self, vocab=11, d=6):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.heads = nn.ModuleDict({"lm": nn.Linear(d, vocab, bias=False),
                                    "cls": nn.Linear(d, 3)})
        self.heads["lm"].weight = self.embed.weight
        self.bn = nn.BatchNorm1d(d)
        self.act = nn.GELU()
        self.pos = nn.Parameter(torch.randn(d, 4).t())  # non-contiguous strides
        self.cache = torch.zeros(3)  # plain attribute: not in state_dict
        self.register_buffer("steps", torch.tensor(7, dtype=torch.int64))

    def forward(self, ids):
        x = self.embed(ids)
        for b in self.blocks:
            x = b(x)
        x = self.act(self.bn(x)) + self.pos.sum() + self.cache.sum()
        return self.heads["lm"](x) + self.heads["cls"](x).sum() + torch.tensor([1.0, 2.0]).sum()


class Dtypes(nn.Module):
    def __init__(self):
        super().__init__()
        dts = [torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
               torch.int16, torch.int32, torch.bool, torch.complex64]
        base = torch.arange(-6, 6, dtype=torch.float32).reshape(3, 4)
        for dt in dts:
            name = "t_" + str(dt).replace("torch.", "")
            if dt == torch.bool:
                t = base > 0
            elif dt == torch.complex64:
                t = torch.complex(base, -base)
            else:
                t = base.to(dt)
            self.register_buffer(name, t)
        full = torch.arange(20.0)
        self.register_buffer("full", full)
        self.register_buffer("view", full[5:11].view(2, 3))  # shares full's storage

    def forward(self, x):
        return x + self.full.sum()


class Consts(nn.Module):
    """Traced: the tensors its code uses (a plain attribute, a literal)
    become constants.pkl entries with storages under constants/."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.k = torch.arange(3.0)

    def forward(self, x):
        return self.lin(x) * self.k + torch.tensor([1.0, 2.0, 3.0])


class Empty(nn.Module):
    def forward(self, x):
        return x * 2


def gen_script(outdir):
    torch.manual_seed(11)
    m = Model().eval()
    path = os.path.join(outdir, "model%s.pt" % TAG)
    torch.jit.save(torch.jit.script(m), path,
                   _extra_files={"config.json": '{"d": 6}', "notes.txt": "tiny"})
    script_answer(path)
    # lite interpreter: bytecode.pkl beside the same data.pkl
    s = torch.jit.script(m)
    ptl = os.path.join(outdir, "model_lite%s.ptl" % TAG)
    s._save_for_lite_interpreter(ptl)
    script_answer(ptl)
    # traced: classes mangled differently
    tr = torch.jit.trace(Block(4).eval(), torch.randn(2, 4))
    path = os.path.join(outdir, "traced%s.pt" % TAG)
    torch.jit.save(tr, path)
    script_answer(path)
    path = os.path.join(outdir, "consts%s.pt" % TAG)
    torch.jit.save(torch.jit.trace(Consts().eval(), torch.randn(2, 3)), path)
    script_answer(path)
    write_constants(path)
    path = os.path.join(outdir, "dtypes%s.pt" % TAG)
    torch.jit.save(torch.jit.script(Dtypes()), path)
    script_answer(path)
    path = os.path.join(outdir, "empty%s.pt" % TAG)
    torch.jit.save(torch.jit.script(Empty()), path)
    script_answer(path)


# ---- quantized modules --------------------------------------------------------
# A quantized Conv or Linear has a __getstate__ method: TorchScript pickles
# the module as what it returns (a tuple holding the weight and bias), not
# as attribute slots, and its class declares no parameters or buffers, so
# torch.jit.load(f).state_dict() has none of them; the packed weights are
# values of the module graph (show).

def quantized_modules():
    import torch.ao.nn.quantized as nnq
    try:
        import torch.ao.nn.intrinsic.quantized as nniq
    except ImportError:  # torch 1.13
        import torch.nn.intrinsic.quantized as nniq

    def qw(shape, per_channel=False):
        w = torch.randn(*shape)
        if per_channel:
            return torch.quantize_per_channel(
                w, torch.rand(shape[0], dtype=torch.float64) / 10 + 0.01,
                torch.zeros(shape[0], dtype=torch.int64), 0, torch.qint8)
        return torch.quantize_per_tensor(w, 0.05, 0, torch.qint8)

    conv2d = nnq.Conv2d(2, 3, 3)
    conv2d.set_weight_bias(qw((3, 2, 3, 3), per_channel=True), torch.randn(3))
    conv3d = nnq.Conv3d(2, 2, (1, 2, 2))
    conv3d.set_weight_bias(qw((2, 2, 1, 2, 2)), None)
    convrelu = nniq.ConvReLU2d(2, 2, 1)
    convrelu.set_weight_bias(qw((2, 2, 1, 1)), torch.randn(2))
    linear = nnq.Linear(4, 3)
    linear.set_weight_bias(qw((3, 4), per_channel=True), torch.randn(3))
    return conv2d, conv3d, convrelu, linear


class QModel(nn.Module):
    """torch.ao.quantization's flow over a model: a QuantStub (its scale and
    zero_point are buffers), a fused ConvReLU2d, a Conv3d, a Linear."""

    def __init__(self):
        super().__init__()
        import torch.ao.quantization as tq
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(2, 3, 3)
        self.relu = nn.ReLU()
        self.conv3 = nn.Conv3d(3, 2, 1)
        self.lin = nn.Linear(4, 2)
        self.dequant = tq.DeQuantStub()

    def forward(self, x):
        x = self.relu(self.conv(self.quant(x)))
        x = self.conv3(x.unsqueeze(2)).squeeze(2)
        x = self.lin(x.reshape(x.shape[0], x.shape[1], -1)[..., :4])
        return self.dequant(x)


def quantized_model():
    """QModel through prepare (calibrated once) and convert."""
    import torch.ao.quantization as tq
    m = QModel().eval()
    m.qconfig = tq.get_default_qconfig("fbgemm")
    tq.fuse_modules(m, [["conv", "relu"]], inplace=True)
    m = tq.prepare(m)
    m(torch.randn(2, 2, 6, 6))
    return tq.convert(m)


def gen_quantized(outdir):
    """Quantized modules as the root of a TorchScript archive (as a
    submodule, difftest_script.py checks them too)."""
    torch.manual_seed(14)
    conv2d, conv3d, convrelu, linear = quantized_modules()

    def qin(*shape):
        return torch.quantize_per_tensor(torch.randn(*shape), 0.1, 0, torch.quint8)

    saves = [("qconv2d_script", torch.jit.script(conv2d)),
             ("qconv2d_trace", torch.jit.trace(conv2d, qin(1, 2, 5, 5))),
             ("qconv3d_trace", torch.jit.trace(conv3d, qin(1, 2, 2, 3, 3))),
             ("qconvrelu_script", torch.jit.script(convrelu)),
             ("qlinear_script", torch.jit.script(linear))]
    for name, sm in saves:
        path = os.path.join(outdir, "%s%s.pt" % (name, TAG))
        torch.jit.save(sm, path)
        script_answer(path)


class Exported(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.bn = nn.BatchNorm1d(2)
        self.register_buffer("np", torch.ones(2), persistent=False)
        self.const = torch.arange(6.0).reshape(2, 3)

    def forward(self, x):
        return self.bn(self.lin(x)) + self.np + self.const.sum()


class Tied(nn.Module):
    """Tied embedding and head, a half-precision buffer, a transposed
    parameter, a tensor constant."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("h", torch.arange(6.0).reshape(2, 3).half())
        self.pt = nn.Parameter(torch.randn(3, 4).t())
        self.k = torch.tensor([0.5, 1.5])

    def forward(self, ids):
        return self.head(self.emb(ids)) + self.h.float().sum() + self.pt.sum() + self.k.sum()


def export_one(path, model, args):
    ep = torch.export.export(model.eval(), args)
    torch.export.save(ep, path)
    ep2 = torch.export.load(path)
    items = list(ep2.state_dict.items()) + [
        (k, v) for k, v in ep2.constants.items() if isinstance(v, torch.Tensor)]
    write_expected(path, "pt2", items)


def gen_export(outdir):
    torch.manual_seed(13)
    export_one(os.path.join(outdir, "export_tied%s.pt2" % TAG), Tied(),
               (torch.tensor([[1, 2, 3]]),))


def gen_export_first(outdir):
    torch.manual_seed(12)
    ep = torch.export.export(Exported().eval(), (torch.randn(4, 3),))
    path = os.path.join(outdir, "export%s.pt2" % TAG)
    torch.export.save(ep, path)
    ep2 = torch.export.load(path)
    items = list(ep2.state_dict.items()) + [
        (k, v) for k, v in ep2.constants.items() if isinstance(v, torch.Tensor)]
    write_expected(path, "pt2", items)


def main():
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    gen_script(outdir)
    gen_quantized(outdir)
    if MAJOR >= 2:
        gen_export_first(outdir)
        gen_export(outdir)


if __name__ == "__main__":
    main()
