#!/usr/bin/python3
"""The Python peers the benchmark compares ckpt with.  Each prints, as its
last lines, "TIME <seconds>" and "CPU <seconds>": the wall and CPU time of
the operation itself, measured inside the process after the interpreter
started and after `import torch` (so Python's start-up is NOT counted
against the peers).

    peers.py unpickle FILE   list the tensors the way converters do without
                             torch: zipfile (or the legacy stream's pickles)
                             + a pickle.Unpickler subclass (CPython's C
                             unpickler) whose find_class and persistent_load
                             return stubs; then write the listing (name,
                             dtype, shape, stride, storage, offset, nbytes) as
                             JSON to /dev/null, like `ckpt ls --json`
    peers.py parse FILE      the stricter peer: the same unpickler (CPython's C
                             Unpickler.load() with the stub find_class and
                             persistent_load) on the same data.pkl, read into
                             memory first, and nothing else: no walk, no JSON
    peers.py torchload FILE  torch.load(FILE, map_location="cpu") (torch 1.13's
                             default, weights_only=False)
"""
import collections
import io
import json
import pickle
import sys
import time
import zipfile

ELSIZE = {"DoubleStorage": ("float64", 8), "FloatStorage": ("float32", 4),
          "HalfStorage": ("float16", 2), "BFloat16Storage": ("bfloat16", 2),
          "LongStorage": ("int64", 8), "IntStorage": ("int32", 4),
          "ShortStorage": ("int16", 2), "CharStorage": ("int8", 1),
          "ByteStorage": ("uint8", 1), "BoolStorage": ("bool", 1)}


class StorageType:
    def __init__(self, name):
        self.dtype, self.elsize = ELSIZE.get(name, ("?", 1))


class Storage:
    __slots__ = ("key", "stype", "numel")

    def __init__(self, key, stype, numel):
        self.key, self.stype, self.numel = key, stype, numel


class Tensor:
    __slots__ = ("storage", "offset", "size", "stride")

    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride


class Stub:
    """Any other class or function: keeps its arguments, accepts any state."""

    def __init__(self, *args, **kwargs):
        self.args = args

    def __setstate__(self, state):
        self.state = state


def rebuild_tensor(storage, offset, size, stride, *rest):
    return Tensor(storage, offset, size, stride)


def rebuild_parameter(data, *rest):
    return data


class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if module == "torch._utils":
            if name in ("_rebuild_tensor_v2", "_rebuild_tensor"):
                return rebuild_tensor
            if name in ("_rebuild_parameter", "_rebuild_parameter_with_state"):
                return rebuild_parameter
        if module == "torch" and name.endswith("Storage"):
            return StorageType(name)
        if module == "collections" and name == "OrderedDict":
            return collections.OrderedDict
        if module in ("builtins", "__builtin__") and name in ("set", "frozenset", "dict", "list"):
            return getattr(__builtins__, name, Stub) if not isinstance(__builtins__, dict) \
                else __builtins__.get(name, Stub)
        return Stub

    def persistent_load(self, pid):
        # ZIP: ('storage', cls, key, location, numel)
        # legacy: ('storage', cls, key, location, numel, view_metadata)
        if isinstance(pid, tuple) and pid and pid[0] == "storage":
            return Storage(pid[2], pid[1], pid[4])
        return Stub(pid)


def walk(obj, prefix, out, seen):
    if isinstance(obj, Tensor):
        st = obj.storage
        numel = 1
        for d in obj.size:
            numel *= d
        out.append({"name": prefix, "dtype": st.stype.dtype, "shape": list(obj.size),
                    "stride": list(obj.stride), "storage": st.key,
                    "storage_offset": obj.offset, "nbytes": numel * st.stype.elsize})
        return
    if id(obj) in seen:
        return
    if isinstance(obj, dict):
        seen.add(id(obj))
        for k, v in obj.items():
            walk(v, "%s.%s" % (prefix, k) if prefix else str(k), out, seen)
    elif isinstance(obj, (list, tuple)):
        seen.add(id(obj))
        for i, v in enumerate(obj):
            walk(v, "%s.%d" % (prefix, i) if prefix else str(i), out, seen)


def unpickle(path):
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        if magic == b"PK\x03\x04":
            zf = zipfile.ZipFile(f)
            name = next(n for n in zf.namelist() if n.endswith("/data.pkl"))
            obj = Unpickler(io.BytesIO(zf.read(name))).load()
        else:  # legacy stream: magic, protocol, sys_info, object, storage keys
            for _ in range(3):
                pickle.load(f)
            obj = Unpickler(f).load()
            pickle.load(f)
    out = []
    walk(obj, "", out, set())
    with open("/dev/null", "w") as null:
        json.dump({"format": "zip" if magic == b"PK\x03\x04" else "legacy",
                   "tensors": out}, null)
    return len(out)


def parse(path):
    """Unpickler.load() of data.pkl only (ZIP) or of the object pickle
    (legacy); the ZIP record is read into memory before the clock starts."""
    with open(path, "rb") as f:
        magic = f.read(4)
        f.seek(0)
        if magic == b"PK\x03\x04":
            zf = zipfile.ZipFile(f)
            name = next(n for n in zf.namelist() if n.endswith("/data.pkl"))
            data = zf.read(name)
            t0, c0 = time.perf_counter(), time.process_time()
            Unpickler(io.BytesIO(data)).load()
            return time.perf_counter() - t0, time.process_time() - c0
        for _ in range(3):
            pickle.load(f)
        t0, c0 = time.perf_counter(), time.process_time()
        Unpickler(f).load()
        return time.perf_counter() - t0, time.process_time() - c0


def main():
    what, path = sys.argv[1], sys.argv[2]
    if what == "parse":
        dt, dc = parse(path)
    elif what == "torchload":
        import torch
        t0, c0 = time.perf_counter(), time.process_time()
        torch.load(path, map_location="cpu")
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
    else:
        t0, c0 = time.perf_counter(), time.process_time()
        n = unpickle(path)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print("%d tensors" % n)
    print("TIME %.6f" % dt)
    print("CPU %.6f" % dc)  # process_time(): this process's user + system CPU


if __name__ == "__main__":
    main()
