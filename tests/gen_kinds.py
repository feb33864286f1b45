#!/usr/bin/env python3
"""Write the tensor-kind fixtures and torch's own answers for them.

    /usr/bin/python3 tests/gen_kinds.py OUTDIR            (torch 1.13: *_t1.pt)
    chroot /tmp/torch2 /usr/bin/python3 /tmp/kinds/gen_kinds.py /tmp/kinds/out  (2.6: *_t2.pt)

Every file is written here, by this torch, from objects built here; the
answers (*.expected.json, the format tests/test_fixtures.py checks) come from
the objects this generator built and from torch.load of its own files, never
from a file it did not write.  Kinds: quantized per tensor and per channel
(qint8, quint8, qint32, quint4x2), per channel with float zero points
(quantized embeddings), a quantized Linear's state dict, sparse COO
(coalesced and not), CSR, CSC, BSR, BSC, meta, nested (2.x), numpy arrays
(pickle protocols 2 and 5, and Python 2 pickles written byte by byte: 1.x
run only) and one file mixing dense, sparse and quantized tensors.  For a quantized tensor the bytes
are int_repr()'s; for a sparse tensor each component is a tensor of its own
(NAME.indices, NAME.values, ...); a meta or nested tensor is listed with
"readable": false and no bytes.

Also `--supersede DIR`: rewrite the expectations of the old refusal fixtures
DIR/quantized_*.pt and DIR/sparse_*.pt (written by gen_fixtures.py) so that
they now expect the tensors.
"""

import collections
import hashlib
import io
import json
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")

T2 = int(torch.__version__.split(".")[0]) >= 2
SUFFIX = "_t2" if T2 else "_t1"

QDTYPES = {torch.qint8: "qint8", torch.quint8: "quint8", torch.qint32: "qint32"}
if hasattr(torch, "quint4x2"):
    QDTYPES[torch.quint4x2] = "quint4x2"
QSCHEMES = {torch.per_tensor_affine: "per_tensor_affine",
            torch.per_channel_affine: "per_channel_affine",
            torch.per_tensor_symmetric: "per_tensor_symmetric",
            torch.per_channel_symmetric: "per_channel_symmetric",
            torch.per_channel_affine_float_qparams: "per_channel_affine_float_qparams"}


# numpy dtype (without byte order) -> torch's name, as ckpt lists arrays
NP_DTYPES = {"f8": "float64", "f4": "float32", "f2": "float16", "i8": "int64", "i4": "int32",
             "i2": "int16", "i1": "int8", "u1": "uint8", "u2": "uint16", "u4": "uint32",
             "u8": "uint64", "b1": "bool", "c8": "complex64", "c16": "complex128"}
# numpy scalars ckpt gives as numbers
NP_SCALARS = ("f8", "f4", "i8", "i4", "i2", "i1", "u1", "u2", "u4", "b1")


def dtype_name(dt):
    if dt in QDTYPES:
        return QDTYPES[dt]
    return str(dt)[len("torch."):]


def le_bytes(t):
    """Row-major little-endian bytes of a dense tensor."""
    t = t.detach().contiguous()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    a = t.numpy()
    if a.dtype.byteorder == ">":
        a = a.byteswap()
    return a.tobytes()


def storage_key(t):
    try:
        return t.untyped_storage().data_ptr()
    except AttributeError:
        return t.storage().data_ptr()


class Describer:
    def __init__(self):
        self.groups = {}
        self.tensors = []
        self.values = {}
        self.in_pickle = False  # pickle.dump: each tensor's bytes inside the pickle

    def group(self, t):
        return self.groups.setdefault(storage_key(t), len(self.groups))

    def dense(self, name, t, extra=None):
        e = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
             "stride": list(t.stride()), "storage_offset": t.storage_offset(),
             "requires_grad": bool(t.requires_grad)}
        b = le_bytes(t)
        e["nbytes"] = len(b)
        e["sha256"] = hashlib.sha256(b).hexdigest()
        e["storage_group"] = None if self.in_pickle else self.group(t)
        if extra:
            e.update(extra)
        self.tensors.append(e)

    def quantized(self, name, t):
        qs = t.qscheme()
        rep = t.int_repr()
        b = le_bytes(rep)
        e = {"name": name, "dtype": dtype_name(t.dtype), "shape": list(t.shape),
             "stride": list(t.stride()), "storage_offset": t.storage_offset(),
             "requires_grad": False, "nbytes": len(b),
             "sha256": hashlib.sha256(b).hexdigest(), "storage_group": self.group(t),
             "qscheme": QSCHEMES[qs]}
        if qs in (torch.per_tensor_affine, torch.per_tensor_symmetric):
            e["scale"] = float(t.q_scale())
            e["zero_point"] = int(t.q_zero_point())
        else:
            e["axis"] = int(t.q_per_channel_axis())
            e["scales"] = [float(x) for x in t.q_per_channel_scales().tolist()]
            zp = t.q_per_channel_zero_points()
            e["zero_points"] = [float(x) if zp.is_floating_point() else int(x)
                                for x in zp.tolist()]
        self.tensors.append(e)

    def sparse(self, name, t):
        lay = t.layout
        size = list(t.shape)
        if lay == torch.sparse_coo:
            parts = [("indices", t._indices()), ("values", t._values())]
            lname = "sparse_coo"
        elif lay in (torch.sparse_csr, torch.sparse_bsr):
            parts = [("crow_indices", t.crow_indices()), ("col_indices", t.col_indices()),
                     ("values", t.values())]
            lname = "sparse_csr" if lay == torch.sparse_csr else "sparse_bsr"
        else:
            parts = [("ccol_indices", t.ccol_indices()), ("row_indices", t.row_indices()),
                     ("values", t.values())]
            lname = "sparse_csc" if lay == torch.sparse_csc else "sparse_bsc"
        for pn, p in parts:
            self.dense(name + "." + pn, p, {"layout": lname, "component": pn, "size": size})

    def unreadable(self, name, t, reason, shape=None, stride=None):
        self.tensors.append({"name": name, "dtype": dtype_name(t.dtype),
                             "shape": list(t.shape) if shape is None else shape,
                             "stride": list(t.stride()) if stride is None else stride,
                             "storage_offset": 0, "requires_grad": bool(t.requires_grad),
                             "nbytes": 0, "readable": False, "reason": reason,
                             "storage_group": None})

    def numpy(self, name, a):
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<")).tobytes()
        self.tensors.append({"name": name, "dtype": NP_DTYPES[a.dtype.str[1:]],
                             "shape": list(a.shape),
                             "stride": [s // a.itemsize for s in a.strides],
                             "storage_offset": 0, "requires_grad": False, "nbytes": len(b),
                             "sha256": hashlib.sha256(b).hexdigest(), "storage_group": None})

    def walk(self, name, v):
        if isinstance(v, np.ndarray) and v.dtype.str[1:] in NP_DTYPES:
            self.numpy(name, v)
        elif isinstance(v, np.generic) and v.dtype.str[1:] in NP_SCALARS:
            self.values[name] = v.item()
        elif isinstance(v, torch.Tensor):
            if v.is_quantized:
                self.quantized(name, v)
            elif v.layout != torch.strided:
                self.sparse(name, v)
            elif getattr(v, "is_nested", False):
                self.unreadable(name, v, "nested", shape=[v.size(0)], stride=[1])
            elif v.device.type == "meta":
                self.unreadable(name, v, "meta")
            else:
                self.dense(name, v)
        elif isinstance(v, dict):
            for k, x in v.items():
                self.walk(str(k) if not name else name + "." + str(k), x)
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                self.walk(str(i) if not name else name + "." + str(i), x)
        elif isinstance(v, (int, float, str)) and name:
            self.values[name] = v


def describe(obj, fmt):
    d = Describer()
    d.in_pickle = fmt == "pickle"
    d.walk("", obj)
    return {"format": fmt, "byteorder": "little", "key": None, "tensors": d.tensors,
            "values": d.values, "error": None, "torch": torch.__version__}


def write_expected(path, exp):
    with open(path + ".expected.json", "w", encoding="utf-8") as f:
        f.write("{\n")
        items = list(exp.items())
        for i, (k, v) in enumerate(items):
            if k == "tensors":
                f.write(' "tensors": [\n')
                for j, t in enumerate(v):
                    f.write("  " + json.dumps(t, separators=(",", ":")) +
                            ("," if j + 1 < len(v) else "") + "\n")
                f.write(" ]")
            else:
                f.write(" %s: %s" % (json.dumps(k), json.dumps(v)))
            f.write(",\n" if i + 1 < len(items) else "\n")
        f.write("}\n")


# objects() saved with another pickle protocol than torch.save's 2
PROTOCOL = {"numpy_p5": 5}


def save(outdir, base, obj, zip_=True):
    fname = base + SUFFIX + ("" if zip_ else "_legacy") + ".pt"
    path = os.path.join(outdir, fname)
    torch.save(obj, path, _use_new_zipfile_serialization=zip_,
               pickle_protocol=PROTOCOL.get(base, 2))
    # the answers from what torch reads back of its own file
    kw = {"weights_only": False} if T2 else {}
    loaded = torch.load(path, **kw)
    write_expected(path, describe(loaded, "zip" if zip_ else "legacy"))
    return path


def save_pickled(outdir, seed=1234, suffix=""):
    """pickle.dump of tensors (no torch.save): each tensor's storage is
    torch.storage._load_from_bytes of a legacy stream inside the pickle."""
    import pickle
    torch.manual_seed(seed)
    t = torch.randn(3, 4)
    obj = {"t": t, "view": t[1:, 2:], "i": torch.tensor([1, -2, 3]),
           "bf": torch.randn(2).bfloat16(), "n": 5, "nested": [torch.arange(4).reshape(2, 2).t()]}
    path = os.path.join(outdir, "pickled" + SUFFIX + suffix + ".pkl")
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)
    with open(path, "rb") as f:  # the generator's own file
        loaded = pickle.load(f)
    write_expected(path, describe(loaded, "pickle"))


def save_qmodule(outdir, seed=1234):
    """torch.save of whole quantized modules: Linear keeps its weight in a
    packed-params ScriptObject, Conv2d pickles a __getstate__ tuple.  The
    answer is the module's state_dict() without scale/zero_point,
    which the full pickle holds as Python numbers (values, not tensors)."""
    try:
        import torch.ao.nn.quantized as nnq
    except ImportError:
        import torch.nn.quantized as nnq
    torch.manual_seed(seed)
    lin = nnq.Linear(4, 3)
    lin.set_weight_bias(torch.quantize_per_tensor(torch.randn(3, 4), 0.05, 0, torch.qint8),
                        torch.randn(3))
    conv = nnq.Conv2d(2, 2, 3)
    conv.set_weight_bias(torch.quantize_per_channel(
        torch.randn(2, 2, 3, 3), torch.tensor([0.01, 0.02], dtype=torch.float64),
        torch.tensor([0, 0]), 0, torch.qint8), torch.randn(2))
    path = os.path.join(outdir, "qmodule" + SUFFIX + ".pt")
    model = torch.nn.Sequential(lin, conv)
    torch.save(model, path)
    # torch.load of a whole quantized Conv2d gives a module whose state_dict()
    # fails (its __setstate__ skips Module's own attributes): the answer is
    # the saved module's
    sd = model.state_dict()
    sd = {k: v for k, v in sd.items()
          if not k.endswith((".scale", ".zero_point")) and not isinstance(v, torch.dtype)}
    write_expected(path, describe(sd, "zip"))


def objects(seed=1234):
    torch.manual_seed(seed)
    x = torch.randn(4, 6)
    out = {}
    q = {}
    for dt in QDTYPES:
        zp = 0 if dt == torch.qint8 else 3
        q["pt_" + QDTYPES[dt]] = torch.quantize_per_tensor(x, 0.05, zp, dt)
    q["pt_qint8_view"] = torch.quantize_per_tensor(x, 0.1, 0, torch.qint8)[1:3]
    q["pc_qint8"] = torch.quantize_per_channel(x, torch.tensor([0.1, 0.05, 0.2, 0.025],
                                                                dtype=torch.float64),
                                               torch.tensor([0, 0, 0, 0]), 0, torch.qint8)
    q["pc_quint8_axis1"] = torch.quantize_per_channel(
        x, torch.linspace(0.01, 0.06, 6, dtype=torch.float64),
        torch.tensor([1, 2, 3, 4, 5, 6]), 1, torch.quint8)
    out["quantized"] = q
    import torch.nn as nn
    try:
        import torch.ao.nn.quantized as nnq
    except ImportError:
        import torch.nn.quantized as nnq
    lin = nnq.Linear(6, 3)
    lin.set_weight_bias(torch.quantize_per_tensor(torch.randn(3, 6), 0.02, 0, torch.qint8),
                        torch.randn(3))
    out["qlinear"] = lin.state_dict()
    d = torch.randn(5, 4).relu()
    sp = {"coo": d.to_sparse(), "coo_coalesced": d.to_sparse().coalesce()}
    idx = torch.tensor([[0, 2, 0], [1, 0, 1]])
    sp["coo_uncoalesced"] = torch.sparse_coo_tensor(idx, torch.tensor([1.0, 2.0, 3.0]), (3, 3))
    sp["csr"] = d.to_sparse_csr()
    if hasattr(d, "to_sparse_csc"):
        sp["csc"] = d.to_sparse_csc()
    if hasattr(d, "to_sparse_bsr"):
        b = torch.randn(4, 6).relu()
        sp["bsr"] = b.to_sparse_bsr((2, 3))
        sp["bsc"] = b.to_sparse_bsc((2, 3))
    for k in list(sp):  # torch 1.13 cannot save the CSC and block layouts
        try:
            torch.save(sp[k], io.BytesIO())
        except RuntimeError:
            del sp[k]
    out["sparse"] = sp
    out["meta"] = {"w": torch.empty(3, 5, device="meta"),
                   "h": torch.empty(2, dtype=torch.float16, device="meta")}
    if T2:
        out["nested"] = {"nt": torch.nested.nested_tensor([torch.randn(2, 3),
                                                           torch.randn(4, 3)]),
                         "after": torch.arange(3)}
    rs = np.random.RandomState(seed)
    out["numpy"] = {"c_f32": rs.randn(3, 4).astype(np.float32),
                    "f_f64": np.asfortranarray(rs.randn(3, 5)),
                    "i64": np.arange(6, dtype=np.int64).reshape(2, 3),
                    "u8": rs.randint(0, 255, size=(5,)).astype(np.uint8),
                    "bool": rs.randn(2, 3) > 0,
                    "be_f4": rs.randn(4).astype(">f4"),
                    "be_i4_f": np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3)),
                    "scalar_f8": np.float64(1.5), "scalar_f4": np.float32(0.25),
                    "scalar_i4": np.int32(-7), "scalar_b": np.bool_(True),
                    "objects": np.array([1, "a", None], dtype=object),
                    "t": torch.arange(3)}
    out["mixed"] = {"dense": torch.randn(2, 3), "sparse": d.to_sparse(),
                    "q": torch.quantize_per_tensor(torch.randn(3), 0.1, 2, torch.quint8),
                    "meta": torch.empty(2, device="meta"),
                    "list": [torch.arange(4), torch.randn(2).to_sparse()],
                    "last": torch.ones(2, dtype=torch.int32)}
    out["qembed"] = qembed()
    out["qparams64"] = qparams64()
    out["numpy_p5"] = numpy_p5(rs)
    return out


def numpy_p5(rs):
    """numpy arrays as pickle protocol 5 writes them (torch.save's
    pickle_protocol=5): a contiguous array is
    numpy.core.numeric._frombuffer(buffer, dtype, shape, 'C' or 'F')
    (numpy 2: numpy._core), its buffer BYTEARRAY8, or bytes when the array
    is read-only; others _reconstruct as before.  Drawn after objects()'s
    others."""
    ro = rs.randn(2, 2).astype(np.float32)
    ro.setflags(write=False)
    return {"c_f32": rs.randn(3, 4).astype(np.float32),
            "f_f64": np.asfortranarray(rs.randn(3, 5)),
            "be_i4_f": np.asfortranarray(np.arange(6, dtype=">i4").reshape(2, 3)),
            "be_f8": rs.randn(3).astype(">f8"),
            "i16": np.arange(-3, 3, dtype=np.int16),
            "bool": rs.randn(5) > 0,
            "f16": rs.randn(2, 2).astype(np.float16),
            "c128": (rs.randn(2) + 1j * rs.randn(2)),
            "zero_d": np.array(2.5),
            "empty": np.zeros((0, 3), dtype=np.float32),
            "readonly": ro,
            "strided": rs.randn(3, 4)[:, ::2],
            "scalar_f8": np.float64(-0.75), "scalar_i8": np.int64(-12),
            "objects": np.array([1, "a"], dtype=object),
            "t": torch.arange(4)}


# objects() whose legacy files torch.load misreads: difftest_kinds.py saves
# them as ZIP files only.  torch's legacy loader fills the storages after
# the unpickling, so a quantizer that copies its float64 parameters to
# float32 (qparams64) copies uninitialised memory.
ZIP_ONLY = ("qparams64",)


_KEEP = []


def qembed():
    """per_channel_affine_float_qparams (float zero points): quantized
    Embedding / EmbeddingBag state dicts (quint8, 4-bit quint4x2), as
    float_qparams_weight_only_qconfig makes them, and quantize_per_channel
    with float zero points.  torch's __reduce_ex__ writes the scheme as
    per_channel_affine; torch.load makes float qparams from the zero points'
    dtype.  Drawn after objects()'s others: their values stay the same.
    The modules are kept: torch 1.13's unpacked weights (state_dict())
    point at the packed ones' qparams, freed with the module."""
    import torch.nn as nn
    import torch.ao.quantization as tq
    m = nn.Sequential(nn.Embedding(7, 4), nn.EmbeddingBag(5, 4, mode="sum"),
                      nn.EmbeddingBag(6, 8, mode="sum"))
    m[0].qconfig = m[1].qconfig = tq.float_qparams_weight_only_qconfig
    m[2].qconfig = tq.float_qparams_weight_only_qconfig_4bit
    m = tq.convert(tq.prepare(m))
    _KEEP.append(m)
    x = torch.randn(3, 5)
    return {"emb": m.state_dict(),
            "pc_float": torch.quantize_per_channel(
                x, torch.tensor([0.1, 0.05, 0.2]), torch.tensor([0.5, -1.25, 3.0]), 0,
                torch.quint8),
            "pc_float_axis1": torch.quantize_per_channel(
                x, torch.linspace(0.01, 0.05, 5), torch.linspace(-2.5, 2.5, 5), 1,
                torch.quint8)}


class _Float64QParams:
    """Pickles quantized tensor q as torch does but with float64 scales and
    zero points."""

    def __init__(self, q, scales, zero_points):
        self.q, self.scales, self.zero_points = q, scales, zero_points

    def __reduce_ex__(self, proto):
        q = self.q
        params = (torch.per_channel_affine, self.scales, self.zero_points,
                  q.q_per_channel_axis())
        return (torch._utils._rebuild_qtensor,
                (q.storage(), q.storage_offset(), tuple(q.size()), q.stride(), params, False,
                 collections.OrderedDict()))


def qparams64():
    """A quantized tensor pickled with float64 scales and float zero points
    (torch writes float32 ones): torch.load's quantizer rounds them to
    float32."""
    s64 = torch.tensor([0.1, 0.3, 0.7], dtype=torch.float64)
    z64 = torch.tensor([0.1, -0.2, 0.3], dtype=torch.float64)
    q = torch.quantize_per_channel(torch.randn(3, 5), s64.float(), z64.float(), 0, torch.quint8)
    return {"pc_float64": _Float64QParams(q, s64, z64)}


# ---- Python 2 pickles, written byte by byte ---------------------------------
# What Python 2's cPickle wrote for numpy arrays and scalars (numpy.core's
# _reconstruct + BUILD, scalar(dtype, data)) and for a torch.save of such
# a dict (the legacy stream): their data is a Python 2 str (STRING,
# BINSTRING, SHORT_BINSTRING), which Python 3 reads as text: with
# encoding='latin1' (torch.load(f, encoding='latin1'); its default, utf-8,
# fails on most arrays) numpy's __setstate__ encodes it back to the bytes.
# These files reference only numpy, torch's rebuild and collections: the
# answers come from pickle.loads / torch.load(encoding='latin1') of them.

class Py2Str(bytes):
    """A Python 2 str: its bytes."""


class Text(str):
    """A unicode string (UNICODE, BINUNICODE): numpy encodes one given as
    array data as latin-1."""


class G:
    def __init__(self, module, name):
        self.module, self.name = module, name


class Call:
    def __init__(self, fn, args):
        self.fn, self.args = fn, args


class Build:
    def __init__(self, obj, state):
        self.obj, self.state = obj, state


class PersId:
    def __init__(self, pid):
        self.pid = pid


def py2_repr(b):
    """Python 2's repr() of a str, as protocol 0's STRING writes it."""
    q = b'"' if b"'" in b and b'"' not in b else b"'"
    out = bytearray(q)
    for c in b:
        ch = bytes([c])
        if ch in (b"\\", q):
            out += b"\\" + ch
        elif ch == b"\t":
            out += b"\\t"
        elif ch == b"\n":
            out += b"\\n"
        elif ch == b"\r":
            out += b"\\r"
        elif c < 0x20 or c >= 0x7f:
            out += b"\\x%02x" % c
        else:
            out += ch
    return bytes(out + q)


def py2_dump(v, proto):
    """The opcodes of value v as Python 2's pickle writes them (0 or 2)."""
    import struct
    if v is None:
        return b"N"
    if isinstance(v, bool):
        return (b"\x88" if v else b"\x89") if proto >= 2 else (b"I01\n" if v else b"I00\n")
    if isinstance(v, int):
        if proto < 2:
            return b"I%d\n" % v
        if 0 <= v < 256:
            return b"K" + bytes([v])
        if 0 <= v < 65536:
            return b"M" + struct.pack("<H", v)
        return b"J" + struct.pack("<i", v)
    if isinstance(v, float):
        return b"G" + struct.pack(">d", v) if proto >= 2 else b"F" + repr(v).encode() + b"\n"
    if isinstance(v, Py2Str):
        if proto < 2:
            return b"S" + py2_repr(bytes(v)) + b"\n"
        if len(v) < 256:
            return b"U" + bytes([len(v)]) + bytes(v)
        return b"T" + struct.pack("<i", len(v)) + bytes(v)
    if isinstance(v, Text):
        if proto < 2:
            for c in "\\\0\n\r\x1a":  # as pickle's protocol 0 escapes them
                v = Text(v.replace(c, "\\u%04x" % ord(c)))
            return b"V" + v.encode("raw_unicode_escape") + b"\n"
        return b"X" + struct.pack("<i", len(v.encode())) + v.encode()
    if isinstance(v, tuple):
        body = b"".join(py2_dump(x, proto) for x in v)
        if proto >= 2 and not v:
            return b")"
        if proto >= 2 and len(v) <= 3:
            return body + (b"\x85", b"\x86", b"\x87")[len(v) - 1]
        return b"(" + body + b"t"
    if isinstance(v, list):
        return b"(" + b"".join(py2_dump(x, proto) for x in v) + b"l"
    if isinstance(v, dict):
        return b"(" + b"".join(py2_dump(k, proto) + py2_dump(x, proto)
                               for k, x in v.items()) + b"d"
    if isinstance(v, G):
        return b"c" + v.module.encode() + b"\n" + v.name.encode() + b"\n"
    if isinstance(v, Call):
        return py2_dump(v.fn, proto) + py2_dump(v.args, proto) + b"R"
    if isinstance(v, Build):
        return py2_dump(v.obj, proto) + py2_dump(v.state, proto) + b"b"
    if isinstance(v, PersId):
        return py2_dump(v.pid, proto) + b"Q"
    raise TypeError(type(v))


def py2_pickle(v, proto):
    return (b"\x80\x02" if proto >= 2 else b"") + py2_dump(v, proto) + b"."


def py2_dtype(dt):
    """numpy.dtype(descr, 0, 1) + BUILD (3, byteorder, ...), as Python 2's
    numpy pickled a dtype."""
    order = "|" if dt.itemsize == 1 else (">" if dt.byteorder == ">" else "<")
    return Build(Call(G("numpy", "dtype"), (Py2Str(dt.str[1:].encode()), 0, 1)),
                 (3, Py2Str(order.encode()), None, None, None, -1, -1, 0))


def py2_array(a, text=False):
    fortran = bool(a.flags.f_contiguous and not a.flags.c_contiguous)
    data = a.tobytes(order="F" if fortran else "C")
    data = Text(data.decode("latin-1")) if text else Py2Str(data)
    arr = Call(G("numpy.core.multiarray", "_reconstruct"),
               (G("numpy", "ndarray"), (0,), Py2Str(b"b")))
    return Build(arr, (1, tuple(a.shape), py2_dtype(a.dtype), fortran, data))


def py2_scalar(x, text=False):
    data = Text(x.tobytes().decode("latin-1")) if text else Py2Str(x.tobytes())
    return Call(G("numpy.core.multiarray", "scalar"), (py2_dtype(x.dtype), data))


def py2_objects(rs):
    """Arrays whose bytes hold quotes, backslashes, newlines and bytes above
    0x7f (STRING escapes them all), in every order and byte order."""
    arrays = {"c_f64": rs.randn(3, 4),
              "f_f32": np.asfortranarray(rs.randn(2, 3).astype(np.float32)),
              "be_i4": np.arange(-3, 3, dtype=">i4").reshape(3, 2),
              "u8": np.frombuffer(b"'\"\\\n\r\t\x00\x7f\x80\xe9\xff", dtype=np.uint8).copy(),
              "long": np.arange(300, dtype=np.int16),  # > 255 bytes: BINSTRING
              "bool": rs.randn(4) > 0,
              "zero_d": np.array(7, dtype=np.int64)}
    scalars = {"s_f8": np.float64(0.1), "s_f4": np.float32(-2.5), "s_i8": np.int64(-5),
               "s_u1": np.uint8(200), "s_b": np.bool_(True)}
    v = {Py2Str(k.encode()): py2_array(a) for k, a in arrays.items()}
    v.update({Py2Str(k.encode()): py2_scalar(x) for k, x in scalars.items()})
    # data as unicode text, which no numpy wrote but numpy reads
    v[Py2Str(b"u8_text")] = py2_array(arrays["u8"], text=True)
    v[Py2Str(b"c_text")] = py2_array(arrays["c_f64"][:2], text=True)
    v[Py2Str(b"s_text")] = py2_scalar(np.float64(-0.3), text=True)
    v[Py2Str(b"epoch")] = 3
    v[Py2Str(b"name")] = Py2Str(b"py2 run")
    return v


def save_py2(outdir, seed=1234):
    """numpy_py2_p0.pkl, numpy_py2_p2.pkl (pickle.dump of Python 2 at
    protocols 0 and 2) and numpy_py2_legacy.pt (its torch.save: the legacy
    stream, protocol 2, with one tensor beside the arrays)."""
    import pickle
    rs = np.random.RandomState(seed)
    v = py2_objects(rs)
    for proto in (0, 2):
        path = os.path.join(outdir, "numpy_py2_p%d.pkl" % proto)
        data = py2_pickle(v, proto)
        with open(path, "wb") as f:
            f.write(data)
        # benign by construction (only the globals above): the oracle
        write_expected(path, describe(pickle.loads(data, encoding="latin1"), "pickle"))
    t = rs.randn(2, 3).astype(np.float32)
    v[Py2Str(b"weight")] = Call(
        G("torch._utils", "_rebuild_tensor_v2"),
        (PersId((Py2Str(b"storage"), G("torch", "FloatStorage"), Py2Str(b"0"), Py2Str(b"cpu"),
                 t.size, None)),
         0, (2, 3), (3, 1), False, Call(G("collections", "OrderedDict"), ())))
    sys_info = {Py2Str(b"protocol_version"): 1001, Py2Str(b"little_endian"): True,
                Py2Str(b"type_sizes"): {Py2Str(b"short"): 2, Py2Str(b"int"): 4,
                                        Py2Str(b"long"): 8}}
    magic = b"\x80\x02\x8a\x0a" + (0x1950a86a20f9469cfc6c).to_bytes(10, "little") + b"."
    data = (magic + py2_pickle(1001, 2) + py2_pickle(sys_info, 2) + py2_pickle(v, 2) +
            py2_pickle([Py2Str(b"0")], 2) + t.size.to_bytes(8, "little") + t.tobytes())
    path = os.path.join(outdir, "numpy_py2_legacy.pt")
    with open(path, "wb") as f:
        f.write(data)
    kw = {"weights_only": False} if T2 else {}
    write_expected(path, describe(torch.load(path, encoding="latin1", **kw), "legacy"))


def supersede(fdir):
    """The old refusal fixtures now expect their tensors."""
    for base in ("quantized", "sparse"):
        for fmt in ("zip", "legacy"):
            path = os.path.join(fdir, "%s_%s.pt" % (base, fmt))
            exp = describe(torch.load(path), fmt)
            del exp["torch"]
            write_expected(path, exp)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--supersede":
        supersede(sys.argv[2])
        return
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    objs = objects()
    for base, obj in objs.items():
        save(outdir, base, obj)
    save(outdir, "mixed", objs["mixed"], zip_=False)
    save(outdir, "quantized", objs["quantized"], zip_=False)
    save(outdir, "numpy_p5", objs["numpy_p5"], zip_=False)
    save_pickled(outdir)
    save_qmodule(outdir)
    if not T2:  # the same bytes from either torch
        save_py2(outdir)


if __name__ == "__main__":
    main()
