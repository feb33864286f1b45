#!/usr/bin/python3
"""Generate the checkpoint fixtures used by tests/test_fixtures.py.

Run with Debian's torch (1.13):

    /usr/bin/python3 tests/gen_fixtures.py [OUTDIR]      # default: tests/fixtures/

Every fixture F gets a sibling F.expected.json.  Unless stated otherwise the
expectation is torch's OWN answer: the written file is loaded back with
torch.load (or pickle.load / torch.jit.load) and the loaded object is walked.
Two fixtures cannot be checked that way:

  * bigendian_zip.pt   torch 1.13 ignores the `byteorder` record, so the
                       expectation is torch.load of the ORIGINAL little-endian
                       file before its storages were byte-swapped (what a
                       byteorder-aware loader returns).  The generator checks
                       that torch 1.13 reading the swapped file sees exactly the
                       byte-swapped elements.
  * newdtypes_zip.pt   float8 / uint16-64 / complex32 cannot be saved or loaded
                       by torch 1.13 (no _rebuild_tensor_v3, no such dtypes), so
                       the file is crafted by hand in torch 2.x's layout and the
                       expectation comes from the generator's own known bytes.

Determinism: every fixture seeds torch and `random` itself, so re-running
produces the same tensor bytes.  File bytes may still differ between runs:
legacy files name storages after memory addresses, and zip timestamps vary.

Expected JSON schema (see the brief in the repository history / test_fixtures):
  format, byteorder, key, tensors[{name, dtype, shape, stride, storage_offset,
  requires_grad, nbytes, sha256, storage_group}], values{dotted.path: value},
  error.

Naming rules (the reader implements the same walk):
  * dict keys (str as is, int in decimal) and list/tuple indices join with ".";
  * an nn.Module contributes its state_dict() entries (params, then persistent
    buffers, recursing submodules in order; None entries and non-persistent
    buffers omitted) under its own prefix;
  * a bare tensor at the root is named "";
  * the same tensor object reached twice is listed twice;
  * any other object that has instance attributes (a user class, an
    argparse.Namespace, ...) is walked through its attribute dict, so a tensor
    attribute `w` of an object stored under key "holder" is "holder.w".
  * sets, numpy arrays and other foreign objects are not walked (the fixtures
    never put tensors inside them).

"values" policy:
  * recorded only for plain leaves (None, bool, int of any size, finite
    float, str) and for EMPTY plain containers ({} / []), reached exclusively
    through plain containers: dict / OrderedDict / list / tuple.  Anything
    below a foreign object (Namespace, user class, defaultdict, set, nn.Module
    attributes, numpy) is not recorded.
  * non-finite floats (nan / inf) and bytes are SKIPPED, never encoded.
  * paths are always from the file's root object, even when "key" is set
    (`ckpt show --json FILE` prints the whole object).
  * dict keys containing "." never occur in value paths of these fixtures.

storage_group: tensors whose untyped storage has the same data_ptr() after
load share a group; for 0-byte storages (data_ptr 0) the storage's identity
(StorageImpl address) is used instead so that distinct empty storages are not
merged.  Groups are numbered 0,1,2... by first appearance in the tensor list.
"""

import argparse
import collections
import copy
import hashlib
import io
import json
import os
import pathlib
import pickle
import random
import shutil
import struct
import sys
import tarfile
import tempfile
import warnings
import zipfile

warnings.filterwarnings("ignore")

import numpy as np
import torch
import torch.nn as nn

import gen_kinds  # tests/gen_kinds.py: numpy arrays and the once-refused kinds

TORCH_VERSION = torch.__version__

# --------------------------------------------------------------------------
# helpers: expected-json computation
# --------------------------------------------------------------------------

PLAIN_DICTS = (dict, collections.OrderedDict)


def dtype_name(dt):
    return str(dt).replace("torch.", "")


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


def join(prefix, comp):
    return comp if prefix is None else prefix + "." + comp


def key_str(k):
    if isinstance(k, bool):
        raise TypeError("bool dict key not supported by the naming rules")
    if isinstance(k, int):
        return str(k)
    if isinstance(k, str):
        return k
    raise TypeError("unsupported dict key type %r" % type(k))


def is_plain_leaf(v):
    # exact types: numpy scalars (np.float64 subclasses float) are foreign objects
    return v is None or type(v) in (bool, int, float, str)


def walk(obj, prefix, tensors, values, plain=True):
    """prefix None means root.  Appends (name, tensor) / sets values[path]."""
    if isinstance(obj, torch.Tensor):
        tensors.append(("" if prefix is None else prefix, obj))
        return
    if isinstance(obj, nn.Module):
        for k, v in obj.state_dict(keep_vars=True).items():
            tensors.append((join(prefix, k), v))
        return
    if isinstance(obj, dict):
        sub_plain = plain and type(obj) in PLAIN_DICTS
        if not obj and sub_plain and prefix is not None:
            values[prefix] = {}
        for k, v in obj.items():
            walk(v, join(prefix, key_str(k)), tensors, values, sub_plain)
        return
    if isinstance(obj, (list, tuple)):
        sub_plain = plain and type(obj) in (list, tuple)
        if not obj and sub_plain and prefix is not None:
            values[prefix] = []
        for i, v in enumerate(obj):
            walk(v, join(prefix, str(i)), tensors, values, sub_plain)
        return
    if is_plain_leaf(obj):
        if plain and prefix is not None:
            if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
                return  # non-finite floats are skipped
            values[prefix] = obj
        return
    if isinstance(obj, np.ndarray) and obj.dtype.str[1:] in gen_kinds.NP_DTYPES:
        tensors.append(("" if prefix is None else prefix, obj))  # ckpt lists numpy arrays
        return
    if isinstance(obj, (bytes, bytearray, set, frozenset, np.ndarray, np.generic,
                        pathlib.PurePath, type)):
        return
    d = getattr(obj, "__dict__", None)
    if isinstance(d, dict):
        walk(d, prefix, tensors, values, plain=False)


def storage_identity(t):
    st = t.storage()  # TypedStorage in 1.13
    ust = st._storage if hasattr(st, "_storage") else st
    if ust.nbytes() > 0:
        return ("ptr", ust.data_ptr())
    return ("cdata", ust._cdata)


def describe(obj, fmt, key=None, byteorder="little", error=None):
    tensors, values = [], {}
    walk(obj, None, [], values)
    root = obj[key] if key is not None else obj
    walk(root, None, tensors, {})
    groups = {}
    out = []
    if error is None:
        for name, t in tensors:
            if isinstance(t, np.ndarray):  # bytes inside the pickle: no storage
                d = gen_kinds.Describer()
                d.numpy(name, t)
                out += d.tensors
                continue
            sid = storage_identity(t)
            if sid not in groups:
                groups[sid] = len(groups)
            b = tensor_bytes(t)
            assert len(b) == t.numel() * t.element_size()
            out.append({
                "name": name,
                "dtype": dtype_name(t.dtype),
                "shape": list(t.shape),
                "stride": list(t.stride()),
                "storage_offset": t.storage_offset(),
                "requires_grad": bool(t.requires_grad),
                "nbytes": t.numel() * t.element_size(),
                "sha256": hashlib.sha256(b).hexdigest(),
                "storage_group": groups[sid],
            })
    else:
        values = {}
    return {
        "format": fmt,
        "byteorder": byteorder,
        "key": key,
        "tensors": out,
        "values": values,
        "error": error,
    }


def write_expected(path, exp):
    # one tensor per line keeps the 3000-tensor expectations small and diffable
    lines = ["{"]
    for k in ("format", "byteorder", "key"):
        lines.append(" %s: %s," % (json.dumps(k), json.dumps(exp[k])))
    ts = exp["tensors"]
    if ts:
        lines.append(' "tensors": [')
        for i, t in enumerate(ts):
            lines.append("  " + json.dumps(t, separators=(",", ":"), ensure_ascii=False)
                         + ("," if i + 1 < len(ts) else ""))
        lines.append(" ],")
    else:
        lines.append(' "tensors": [],')
    lines.append(' "values": ' + json.dumps(exp["values"], indent=1, ensure_ascii=False)
                 .replace("\n", "\n ") + ",")
    lines.append(' "error": %s' % json.dumps(exp["error"]))
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == json.loads(json.dumps(exp))
    with open(path + ".expected.json", "w", encoding="utf-8") as f:
        f.write(text)


def tload(path):
    return torch.load(path, map_location="cpu")


def save_and_describe(outdir, fname, obj, zip_=True, key=None, error=None, **kw):
    path = os.path.join(outdir, fname)
    torch.save(obj, path, _use_new_zipfile_serialization=zip_, **kw)
    loaded = tload(path)
    fmt = "zip" if zip_ else "legacy"
    check_format(path, fmt)
    write_expected(path, describe(loaded, fmt, key=key, error=error))
    return path


def check_format(path, fmt):
    with open(path, "rb") as f:
        head = f.read(4)
    if fmt in ("zip", "torchscript"):
        assert head == b"PK\x03\x04", path
    else:
        assert head != b"PK\x03\x04", path


def seed(n):
    torch.manual_seed(n)
    random.seed(n)
    np.random.seed(n)


def both(outdir, base, obj_fn, **kw):
    """Write base_zip.pt and base_legacy.pt from a fresh obj each (same seed)."""
    for zip_, suffix in ((True, "zip"), (False, "legacy")):
        obj = obj_fn()
        save_and_describe(outdir, "%s_%s.pt" % (base, suffix), obj, zip_=zip_, **kw)


# --------------------------------------------------------------------------
# zip helpers
# --------------------------------------------------------------------------

def write_aligned_zip(path, records):
    """Stored (uncompressed) zip whose record data starts at 64-byte offsets,
    padded like torch does with an extra field id 'FB' filled with 'Z'."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, data in records:
            zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_STORED
            off = zf.fp.tell()
            base = off + 30 + len(name.encode("utf-8")) + 4
            pad = (-base) % 64
            zi.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            zf.writestr(zi, data)
    # verify the alignment
    with open(path, "rb") as f:
        raw = f.read()
    with zipfile.ZipFile(path) as zf:
        for zi in zf.infolist():
            h = zi.header_offset
            n, m = struct.unpack("<HH", raw[h + 26:h + 30])
            assert (h + 30 + n + m) % 64 == 0, (path, zi.filename)


def zip_records(path):
    with zipfile.ZipFile(path) as zf:
        return [(zi.filename, zf.read(zi.filename)) for zi in zf.infolist()]


class _Stub:
    def __init__(self, *a, **k):
        self.args = a


class StorageScanner(pickle.Unpickler):
    """Reads a torch data.pkl without building tensors; records storage
    (key -> element size) from the persistent ids."""

    def __init__(self, f):
        super().__init__(f)
        self.storages = {}

    def persistent_load(self, pid):
        assert pid[0] == "storage"
        cls, key, loc, numel = pid[1], pid[2], pid[3], pid[4]
        esize = torch._utils._element_size(cls.dtype)
        self.storages[key] = (esize, numel, cls.dtype)
        return None

    def find_class(self, module, name):
        if module == "torch._utils" and name.startswith("_rebuild"):
            return lambda *a, **k: None
        return super().find_class(module, name)


def byteswap(data, unit):
    if unit == 1:
        return data
    a = np.frombuffer(data, dtype=np.dtype("u%d" % unit))
    return a.byteswap().tobytes()


# --------------------------------------------------------------------------
# fixture 1..10, 15..18: torch.save based
# --------------------------------------------------------------------------

def rand_tensor(dtype, shape):
    if dtype.is_complex:
        return torch.randn(*shape, dtype=dtype)
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=torch.uint8)
    if dtype == torch.int8:
        return torch.randint(-128, 128, shape, dtype=torch.int8)
    if dtype == torch.int16:
        return torch.randint(-32768, 32768, shape, dtype=torch.int16)
    if dtype == torch.int32:
        return torch.randint(-2**31, 2**31 - 1, shape, dtype=torch.int32)
    if dtype == torch.int64:
        return torch.randint(-2**62, 2**62, shape, dtype=torch.int64)
    raise ValueError(dtype)


SAVABLE_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16,
                  torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                  torch.bool, torch.complex64, torch.complex128]


def can_save(dtype):
    try:
        b = io.BytesIO()
        torch.save(torch.zeros(2, dtype=dtype), b)
        b.seek(0)
        torch.load(b)
        return True
    except Exception:
        return False


def obj_dtypes():
    seed(1)
    d = collections.OrderedDict()
    for dt in SAVABLE_DTYPES:
        t = rand_tensor(dt, (3, 4))
        if dt.is_floating_point or dt.is_complex:
            t = t * 3  # wider range
        d[dtype_name(dt)] = t
    # a few extreme values
    d["float32_special"] = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"),
                                         1e-45, 3.4028235e38], dtype=torch.float32)
    d["int64_extremes"] = torch.tensor([-2**63, 2**63 - 1, -1, 0], dtype=torch.int64)
    return d


def obj_scalars_empty():
    seed(2)
    base = torch.randn(4)
    return {
        "s_float32": torch.tensor(3.5),
        "s_float64": torch.tensor(-2.25, dtype=torch.float64),
        "s_int64": torch.tensor(-7),
        "s_bool": torch.tensor(True),
        "s_bfloat16": torch.tensor(-1.5, dtype=torch.bfloat16),
        "s_complex64": torch.tensor(1 - 2j, dtype=torch.complex64),
        "e_0": torch.zeros(0),
        "e_3_0_2": torch.zeros(3, 0, 2),
        "e_int64": torch.zeros(0, dtype=torch.int64),
        "e_bool_0_5": torch.zeros(0, 5, dtype=torch.bool),
        "base4": base,
        "e_view": base[4:4],
        "s_view": base[2],  # 0-d view with storage offset 2
    }


def obj_views():
    seed(3)
    base = torch.randn(6, 8)
    flat = base.view(-1)
    t3 = torch.randn(2, 3, 4)
    t4 = torch.randn(2, 3, 4, 5, dtype=torch.float64)
    i16 = torch.arange(24, dtype=torch.int16).view(4, 6)
    return {
        "base": base,
        "offset": flat[5:],
        "transposed": base.t(),
        "stepped": flat[::2],
        "cols": base[:, 1::3],
        "rows": base[2:4],
        "expand": torch.arange(3).view(3, 1).expand(3, 4),
        "perm3": t3.permute(2, 0, 1),
        "perm4": t4.permute(0, 2, 3, 1),
        "i16_t_slice": i16.t()[1:, ::2],
        "bf16_view": torch.randn(5, 5).to(torch.bfloat16)[1:4, 2:],
    }


def obj_params():
    seed(4)
    return {
        "weight": nn.Parameter(torch.randn(3, 4)),
        "frozen": nn.Parameter(torch.randn(4), requires_grad=False),
        "plain": torch.randn(2),
        "grad_tensor": torch.randn(2, 2).requires_grad_(True),
        "half_param": nn.Parameter(torch.randn(2, 3).half()),
    }


class TinyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.bn = nn.BatchNorm1d(8)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.bn(self.fc1(x))))


def trained_model_and_opt():
    seed(5)
    model = TinyNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(6, 4)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    return model, opt


def obj_training():
    model, opt = trained_model_and_opt()
    return {
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "epoch": 7,
        "step": 123456789012,
        "loss": 0.25,
        "config": {
            "lr": 1e-3,
            "name": "resnet",
            "flag": True,
            "none": None,
            "layers": [64, 128],
            "tuple": (1, 2.5, "x"),
            "big": 2 ** 100,
            "neg_big": -(2 ** 70),
            "nan": float("nan"),   # skipped in values
            "empty_list": [],
            "empty_dict": {},
            "unicode": "résumé ✓",
        },
    }


def obj_training_key():
    model, _ = trained_model_and_opt()
    return {"state_dict": model.state_dict(), "epoch": 1}


class Net(nn.Module):
    """Full-model save: pickled as __main__.Net."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)
        self.proj = nn.Linear(6, 5, bias=False)      # bias is a None parameter
        self.seq = nn.Sequential(nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 2))
        self.heads = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 1)])
        self.register_buffer("scale", torch.tensor([0.5, 2.0]))           # persistent
        self.register_buffer("cache", torch.ones(3), persistent=False)     # non-persistent
        self.register_buffer("maybe", None)                                 # None buffer
        self.register_parameter("extra", None)                              # None parameter
        self.gain = nn.Parameter(torch.tensor(1.5))
        self.name = "net"

    def forward(self, x):
        x = self.proj(self.bn(self.fc(x)))
        x = self.seq(x)
        for h in self.heads:
            x = h(x)
        return x


def obj_fullmodel():
    seed(6)
    m = Net()
    m(torch.randn(4, 4))  # updates the BatchNorm running stats / num_batches_tracked
    return m


def obj_small_sd():
    seed(7)
    lin = nn.Linear(4, 3)
    sd = lin.state_dict()
    sd["meta"] = {"version": 2, "note": "proto"}
    return sd


def obj_many():
    seed(8)
    d = collections.OrderedDict()
    dts = [torch.float32, torch.int8, torch.float16, torch.int64, torch.bool]
    for i in range(3000):
        dt = dts[i % len(dts)]
        d["l.%d" % i] = rand_tensor(dt, (2,))
    return d


class Holder:
    def __init__(self, w):
        self.w = w
        self.tag = "holder"


def obj_foreign():
    seed(9)
    dd = collections.defaultdict(list)
    dd["a"].append(1)
    dd["b"].append("two")
    return {
        "weight": torch.randn(2, 3),
        "args": argparse.Namespace(lr=0.1, name="x"),
        "np_array": np.arange(6, dtype=np.float32).reshape(2, 3),
        "np_scalar": np.float64(1.5),
        "np_int": np.int64(42),
        "dd": dd,
        "a_set": {1, 2, 3},
        "path": pathlib.PurePosixPath("/tmp/x"),
        "raw": b"\x00\x01abc\xff",
        "holder": Holder(torch.arange(4, dtype=torch.int32).view(2, 2)),
        "epoch": 3,
        "after": torch.ones(2, dtype=torch.float64),
    }


def obj_tied():
    seed(10)
    w = torch.randn(5, 3)
    return {"enc.weight": w, "dec.weight": w, "other": torch.randn(3)}


def obj_root_tensor():
    seed(11)
    return torch.randn(3, 5).t()


# --------------------------------------------------------------------------
# 11: TAR (pre-0.1.10) built by hand
# --------------------------------------------------------------------------

class TRef:
    def __init__(self, key):
        self.key = key


class TarPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, TRef):
            return str(obj.key)
        return None


STORAGE_CLASS = {
    torch.float64: torch.DoubleStorage, torch.float32: torch.FloatStorage,
    torch.float16: torch.HalfStorage, torch.int64: torch.LongStorage,
    torch.int32: torch.IntStorage, torch.int16: torch.ShortStorage,
    torch.int8: torch.CharStorage, torch.uint8: torch.ByteStorage,
}
TENSOR_CLASS = {
    torch.float64: torch.DoubleTensor, torch.float32: torch.FloatTensor,
    torch.float16: torch.HalfTensor, torch.int64: torch.LongTensor,
    torch.int32: torch.IntTensor, torch.int16: torch.ShortTensor,
    torch.int8: torch.CharTensor, torch.uint8: torch.ByteTensor,
}


def build_tar(path, storages, views, tensors, obj):
    """storages: list of (key, dtype, data_tensor_1d)
    views:    list of (view_key, root_key, offset, numel)
    tensors:  list of (key, storage_key, dtype, size, stride, offset)
    obj:      picklable object using TRef(tensor_key) for tensors."""
    def p(o):
        return pickle.dumps(o, protocol=2)

    sys_info = p({"protocol_version": 1000, "little_endian": True,
                  "type_sizes": {"short": 2, "int": 4, "long": 8}})

    s = io.BytesIO()
    s.write(p(len(storages)))
    for key, dt, data in storages:
        s.write(p((key, "cpu", STORAGE_CLASS[dt])))
        s.write(struct.pack("<q", data.numel()))
        s.write(data.contiguous().view(torch.uint8).numpy().tobytes())
    s.write(p(list(views)))

    t = io.BytesIO()
    t.write(p(len(tensors)))
    for key, skey, dt, size, stride, off in tensors:
        t.write(p((key, skey, TENSOR_CLASS[dt])))
        t.write(struct.pack("<i", len(size)))
        t.write(b"\0\0\0\0")
        t.write(struct.pack("<%dq" % len(size), *size))
        t.write(struct.pack("<%dq" % len(stride), *stride))
        t.write(struct.pack("<q", off))

    pk = io.BytesIO()
    TarPickler(pk, protocol=2).dump(obj)

    # historical member order of torch < 0.1.10: sys_info, pickle, tensors, storages
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in (("sys_info", sys_info), ("pickle", pk.getvalue()),
                           ("tensors", t.getvalue()), ("storages", s.getvalue())):
            ti = tarfile.TarInfo(name)
            ti.size = len(data)
            ti.mtime = 0
            ti.mode = 0o644
            tar.addfile(ti, io.BytesIO(data))


def gen_tar(outdir):
    # (a) flat dict of a few dtypes, incl. a 0-d tensor and a transposed one
    seed(12)
    storages, tensors, obj = [], [], collections.OrderedDict()
    skey, tkey = 1, 1001
    for dt in [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
               torch.int16, torch.int8, torch.uint8]:
        data = rand_tensor(dt, (6,))
        storages.append((skey, dt, data))
        tensors.append((tkey, skey, dt, [2, 3], [3, 1], 0))
        obj[dtype_name(dt)] = TRef(tkey)
        skey += 1
        tkey += 1
    # 0-d tensor on its own storage
    storages.append((skey, torch.float32, torch.tensor([4.0, 9.5])))
    tensors.append((tkey, skey, torch.float32, [], [], 1))
    obj["scalar"] = TRef(tkey)
    skey += 1
    tkey += 1
    # transposed view of the float32 storage (key 1)
    tensors.append((tkey, 1, torch.float32, [3, 2], [1, 3], 0))
    obj["float32_t"] = TRef(tkey)
    obj["epoch"] = 12
    obj["note"] = "tar"
    path = os.path.join(outdir, "dtypes_tar.pt")
    build_tar(path, storages, [], tensors, obj)
    assert tarfile.is_tarfile(path)
    write_expected(path, describe(tload(path), "tar"))

    # (b) shared storage, storage view, offsets, non-contiguous strides
    seed(13)
    root = torch.randn(24)
    storages = [(1, torch.float32, root), (2, torch.int64, torch.arange(10))]
    views = [(3, 1, 4, 12)]            # storage 3 = elements [4, 16) of storage 1
    tensors = [
        (101, 1, torch.float32, [4, 6], [6, 1], 0),      # the whole root
        (102, 1, torch.float32, [3, 4], [1, 6], 2),      # offset + non-contiguous
        (103, 3, torch.float32, [3, 4], [4, 1], 0),      # on the view storage
        (104, 3, torch.float32, [5], [2], 1),            # view storage, offset, step
        (105, 2, torch.int64, [2, 3], [1, 2], 3),        # transposed window
        (106, 2, torch.int64, [4, 2], [0, 1], 8),        # stride 0 (expanded)
    ]
    obj = {
        "root": TRef(101),
        "strided": TRef(102),
        "window": TRef(103),
        "window_step": TRef(104),
        "ints_t": TRef(105),
        "expanded": TRef(106),
        "root_again": TRef(101),
        "list": [TRef(104), 5],
    }
    path = os.path.join(outdir, "views_tar.pt")
    build_tar(path, storages, views, tensors, obj)
    assert tarfile.is_tarfile(path)
    loaded = tload(path)
    assert loaded["root"].data_ptr() + 4 * 4 == loaded["window"].data_ptr()
    write_expected(path, describe(loaded, "tar"))


# --------------------------------------------------------------------------
# 12: big-endian ZIP
# --------------------------------------------------------------------------

def gen_bigendian(outdir, tmp):
    seed(14)
    base = torch.randn(3, 4, dtype=torch.float32)
    obj = collections.OrderedDict()
    for dt in SAVABLE_DTYPES:
        obj[dtype_name(dt)] = rand_tensor(dt, (2, 3))
    obj["f32_base"] = base
    obj["f32_view"] = base.t()[1:]
    obj["scalar_i64"] = torch.tensor(-123456789)
    obj["empty_f64"] = torch.zeros(0, 2, dtype=torch.float64)
    obj["epoch"] = 5
    src = os.path.join(tmp, "bigendian_zip.pt")
    torch.save(obj, src)
    original = tload(src)
    exp = describe(original, "zip", byteorder="big")

    recs = zip_records(src)
    root = recs[0][0].split("/")[0]
    pkl = dict(recs)[root + "/data.pkl"]
    sc = StorageScanner(io.BytesIO(pkl))
    sc.load()
    out = []
    for name, data in recs:
        parts = name.split("/")
        if len(parts) == 3 and parts[1] == "data":
            esize, numel, dt = sc.storages[parts[2]]
            unit = esize // 2 if dt.is_complex else esize
            assert len(data) == esize * numel
            data = byteswap(data, unit)
        out.append((name, data))
    out.append((root + "/byteorder", b"big"))
    path = os.path.join(outdir, "bigendian_zip.pt")
    write_aligned_zip(path, out)

    # torch 1.13 ignores `byteorder`: it must see exactly the swapped elements
    swapped = tload(path)
    for k, v in original.items():
        if not isinstance(v, torch.Tensor):
            continue
        w = swapped[k]
        unit = v.element_size() // 2 if v.is_complex() else v.element_size()
        assert byteswap(tensor_bytes(v), unit) == tensor_bytes(w), k
    write_expected(path, exp)


# --------------------------------------------------------------------------
# 14: newer dtypes in torch 2.x layout, crafted without torch
# --------------------------------------------------------------------------

class PickleWriter:
    """Minimal protocol-2 pickle emitter (only what data.pkl needs)."""

    def __init__(self):
        self.b = bytearray(b"\x80\x02")

    def op(self, s):
        self.b += s

    def glob(self, module, name):
        self.b += b"c" + module.encode() + b"\n" + name.encode() + b"\n"

    def str_(self, s):
        e = s.encode("utf-8")
        self.b += b"X" + struct.pack("<I", len(e)) + e

    def int_(self, v):
        if 0 <= v < 256:
            self.b += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.b += b"M" + struct.pack("<H", v)
        elif -2**31 <= v < 2**31:
            self.b += b"J" + struct.pack("<i", v)
        else:
            n = (v.bit_length() + 8) // 8
            self.b += b"\x8a" + bytes([n]) + v.to_bytes(n, "little", signed=True)

    def tuple_(self, items):
        self.b += b"("
        for it in items:
            self.int_(it)
        self.b += b"t"


def strided_gather(data, esize, size, stride, offset):
    out = bytearray()
    if any(s == 0 for s in size):
        return bytes(out)
    idx = [0] * len(size)
    while True:
        e = offset + sum(i * s for i, s in zip(idx, stride))
        out += data[e * esize:(e + 1) * esize]
        d = len(size) - 1
        while d >= 0:
            idx[d] += 1
            if idx[d] < size[d]:
                break
            idx[d] = 0
            d -= 1
        if d < 0:
            return bytes(out)


NEW_DTYPES = [  # name, element size
    ("float8_e4m3fn", 1), ("float8_e5m2", 1), ("float8_e4m3fnuz", 1),
    ("float8_e5m2fnuz", 1), ("float8_e8m0fnu", 1), ("uint16", 2), ("uint32", 4),
    ("uint64", 8), ("complex32", 4),
]


def gen_newdtypes(outdir):
    """torch 1.13 cannot verify this file (no such dtypes, no _rebuild_tensor_v3):
    the expectation is computed from the generator's own bytes."""
    rng = random.Random(15)
    root = "newdtypes_zip"
    w = PickleWriter()
    w.op(b"}")   # EMPTY_DICT
    w.op(b"(")   # MARK
    entries = []  # (name, dtype, key, size, stride, offset)
    storages = collections.OrderedDict()  # key -> (bytes, esize)
    k = 0
    for name, esize in NEW_DTYPES:
        if name == "uint64":
            vals = [rng.getrandbits(64) for _ in range(6)]
            vals[0] = 2**64 - 1
            vals[1] = 2**63 + 5
            data = b"".join(struct.pack("<Q", v) for v in vals)
        elif name == "complex32":
            halves = [rng.uniform(-4, 4) for _ in range(12)]
            data = b"".join(struct.pack("<e", h) for h in halves)
        else:
            data = bytes(rng.getrandbits(8) for _ in range(6 * esize))
        storages[str(k)] = (data, esize)
        entries.append((name, name, str(k), [2, 3], [3, 1], 0))
        k += 1
    # views over the uint16 storage (key "5"): transposed, and an offset slice
    entries.append(("uint16_t", "uint16", "5", [3, 2], [1, 3], 0))
    entries.append(("uint16_tail", "uint16", "5", [4], [1], 2))
    # uint32 0-d and empty on their own storages
    storages[str(k)] = (struct.pack("<I", 4000000000), 4)
    entries.append(("uint32_scalar", "uint32", str(k), [], [], 0))
    k += 1
    storages[str(k)] = (b"", 1)
    entries.append(("float8_e5m2_empty", "float8_e5m2", str(k), [0, 4], [4, 1], 0))
    k += 1

    for name, dt, key, size, stride, off in entries:
        data, esize = storages[key]
        w.str_(name)
        w.glob("torch._utils", "_rebuild_tensor_v3")
        w.op(b"(")                       # MARK args
        w.op(b"(")                       # MARK persistent id tuple
        w.str_("storage")
        w.glob("torch.storage", "UntypedStorage")
        w.str_(key)
        w.str_("cpu")
        w.int_(len(data))                # numel of an UntypedStorage is in bytes
        w.op(b"t")
        w.op(b"Q")                       # BINPERSID
        w.int_(off)
        w.tuple_(size)
        w.tuple_(stride)
        w.op(b"\x89")                    # NEWFALSE requires_grad
        w.glob("collections", "OrderedDict")
        w.op(b")R")                      # EMPTY_TUPLE REDUCE -> backward hooks
        w.glob("torch", dt)              # torch.<dtype>
        w.op(b"t")                       # TUPLE
        w.op(b"R")                       # REDUCE
    w.str_("note")
    w.str_("torch 2.x layout, crafted")
    w.op(b"u")   # SETITEMS
    w.op(b".")   # STOP
    pkl = bytes(w.b)

    import pickletools
    pickletools.dis(pkl, out=io.StringIO())  # well-formedness check

    recs = [(root + "/data.pkl", pkl), (root + "/byteorder", b"little")]
    for key, (data, esize) in storages.items():
        recs.append((root + "/data/" + key, data))
    recs.append((root + "/version", b"3\n"))
    path = os.path.join(outdir, "newdtypes_zip.pt")
    write_aligned_zip(path, recs)

    groups = {}
    tensors = []
    for name, dt, key, size, stride, off in entries:
        data, _ = storages[key]
        esize = dict(NEW_DTYPES)[dt]
        b = strided_gather(data, esize, size, stride, off)
        numel = 1
        for s in size:
            numel *= s
        assert len(b) == numel * esize
        if key not in groups:
            groups[key] = len(groups)
        tensors.append({
            "name": name, "dtype": dt, "shape": size, "stride": stride,
            "storage_offset": off, "requires_grad": False, "nbytes": numel * esize,
            "sha256": hashlib.sha256(b).hexdigest(), "storage_group": groups[key],
        })
    write_expected(path, {"format": "zip", "byteorder": "little", "key": None,
                          "tensors": tensors,
                          "values": {"note": "torch 2.x layout, crafted"},
                          "error": None})


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------

def main():
    here = os.path.dirname(os.path.abspath(__file__))
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "fixtures")
    os.makedirs(outdir, exist_ok=True)
    for f in os.listdir(outdir):
        p = os.path.join(outdir, f)
        if os.path.isfile(p) and f.endswith((".pt", ".pkl", ".expected.json")):
            os.remove(p)
    tmp = tempfile.mkdtemp(prefix="ckpt-gen-")
    notes = []
    try:
        # 1 dtypes (complex32 probe: 1.13 raises KeyError on save)
        for dt in SAVABLE_DTYPES:
            assert can_save(dt), dt
        if can_save(torch.complex32):
            notes.append("complex32 is savable by this torch; not in dtypes fixture")
        else:
            notes.append("torch %s cannot save complex32 (covered by newdtypes_zip.pt)"
                         % TORCH_VERSION)
        both(outdir, "dtypes", obj_dtypes)
        # 2
        both(outdir, "scalars_empty", obj_scalars_empty)
        # 3
        both(outdir, "views", obj_views)
        # 4
        both(outdir, "params", obj_params)
        # 5
        both(outdir, "training", obj_training)
        both(outdir, "training_key", obj_training_key, key="state_dict")
        # 6
        both(outdir, "fullmodel", obj_fullmodel)
        # 7
        for proto in (2, 4, 5):
            for zip_, suffix in ((True, "zip"), (False, "legacy")):
                try:
                    save_and_describe(outdir, "protocol%d_%s.pt" % (proto, suffix),
                                      obj_small_sd(), zip_=zip_, pickle_protocol=proto)
                except Exception as e:  # pragma: no cover
                    notes.append("protocol %d %s failed: %r" % (proto, suffix, e))
        # 8
        both(outdir, "many", obj_many)
        # 9 deflate
        src = os.path.join(tmp, "deflate_zip.pt")
        torch.save(obj_views(), src)
        path = os.path.join(outdir, "deflate_zip.pt")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in zip_records(src):
                zi = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                zi.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(zi, data)
        with zipfile.ZipFile(path) as zf:
            assert all(zi.compress_type == zipfile.ZIP_DEFLATED for zi in zf.infolist())
        write_expected(path, describe(tload(path), "zip"))
        # 10 unusual root names
        seed(16)
        save_and_describe(outdir, "weird-Name.v2.pt", {"w": torch.randn(2, 2), "n": 1})
        with zipfile.ZipFile(os.path.join(outdir, "weird-Name.v2.pt")) as zf:
            assert zf.namelist()[0].startswith("weird-Name.v2/"), zf.namelist()
        seed(17)
        buf = io.BytesIO()
        torch.save({"w": torch.randn(3), "b": torch.arange(2)}, buf)
        path = os.path.join(outdir, "buffer_root_zip.pt")
        with open(path, "wb") as f:
            f.write(buf.getvalue())
        with zipfile.ZipFile(path) as zf:
            assert zf.namelist()[0].startswith("archive/"), zf.namelist()
        write_expected(path, describe(tload(path), "zip"))
        # root tensor
        both(outdir, "root_tensor", obj_root_tensor)
        # 11 TAR
        gen_tar(outdir)
        # 12 big-endian
        gen_bigendian(outdir, tmp)
        # 13 plain pickles
        cfg = {"lr": 0.01, "layers": [1, 2, 3], "name": "cfg", "nested": {"a": None, "b": True,
               "t": (1, "two", 3.0)}, "big": 2 ** 65, "neg": -5, "inf": float("inf"),
               "ints": {1: "one", 2: "two"}}
        for proto in (2, 4):
            path = os.path.join(outdir, "config_p%d.pkl" % proto)
            with open(path, "wb") as f:
                pickle.dump(cfg, f, protocol=proto)
            with open(path, "rb") as f:
                loaded = pickle.load(f)
            write_expected(path, describe(loaded, "pickle"))
        # 14 crafted new dtypes
        gen_newdtypes(outdir)
        # 15 sparse and quantized (once refused)
        for zip_, suffix in ((True, "zip"), (False, "legacy")):
            seed(18)
            save_and_describe(outdir, "sparse_%s.pt" % suffix,
                              {"bad": torch.randn(3, 3).relu().to_sparse()},
                              zip_=zip_, error="sparse")
            seed(19)
            save_and_describe(outdir, "quantized_%s.pt" % suffix,
                              {"bad": torch.quantize_per_tensor(torch.randn(4), 0.1, 0,
                                                                torch.qint8)},
                              zip_=zip_, error="quantized")
        for f in ("sparse_zip.pt", "sparse_legacy.pt"):
            assert tload(os.path.join(outdir, f))["bad"].is_sparse
        for f in ("quantized_zip.pt", "quantized_legacy.pt"):
            assert tload(os.path.join(outdir, f))["bad"].is_quantized
        # no longer refused: their components / int_repr() (tests/gen_kinds.py)
        gen_kinds.supersede(outdir)
        # 16 TorchScript
        seed(20)
        path = os.path.join(outdir, "torchscript.pt")
        torch.jit.save(torch.jit.script(TinyNet().eval()), path)
        with zipfile.ZipFile(path) as zf:
            assert any(n.endswith("/constants.pkl") for n in zf.namelist())
        # its tensors: torch.jit.load(f).state_dict() (describe() walks a module so)
        write_expected(path, describe(torch.jit.load(path), "torchscript"))
        # 17 foreign objects
        both(outdir, "foreign", obj_foreign)
        # 18 tied weights
        both(outdir, "tied", obj_tied)

        # examples/sample.pt
        repo = os.path.dirname(here)
        if os.path.abspath(outdir) == os.path.join(here, "fixtures"):
            os.makedirs(os.path.join(repo, "examples"), exist_ok=True)
            shutil.copyfile(os.path.join(outdir, "training_zip.pt"),
                            os.path.join(repo, "examples", "sample.pt"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    total = 0
    n = 0
    for f in sorted(os.listdir(outdir)):
        if f.endswith(".expected.json"):
            n += 1
        total += os.path.getsize(os.path.join(outdir, f))
    for line in notes:
        print("note:", line)
    print("%d fixtures, %d bytes in %s" % (n, total, outdir))


if __name__ == "__main__":
    main()
