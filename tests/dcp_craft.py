#!/usr/bin/env python3
"""Write a torch.distributed.checkpoint folder by hand (stdlib only).

    python3 tests/dcp_craft.py OUTDIR CASE [N]

torch 2.6 stores every chunk as a torch.save record; other writers store raw
bytes.  To test the raw layout and defects torch never writes, this script
PICKLES (never unpickles) stand-ins of DCP's dataclasses under their real
module and class names, so the .metadata has the layout torch's has:
Metadata(state_dict_metadata={fqn: TensorStorageMetadata(TensorProperties
(dtype, ...), Size, [ChunkStorageMetadata(offsets, sizes)])}, storage_data=
{MetadataIndex(fqn, offset, index): _StorageInfo(path, offset, length)}).

CASE: raw   tensor 't' float32 [4, 3], chunks rows 0-1 and 2-3 (raw bytes,
            in that order in __0_0.distcp) and 'u' int16 [2, 4] in two
            column chunks (Shard(1)), stored second-chunk-first; prints the
            expected row-major bytes of t then u as hex on stdout
      gap   't' with its second chunk missing (rows 2-3 uncovered)
      outside  't' with a chunk reaching past row 4
      laughs   'raw' plus a non-tensor item 'x' whose record (a torch.save
            ZIP) pickles 64 levels of [a, a] sharing: 2**64 values if copied
      many N   tensor 'm' float32 [N, 2] split along dimension 0, row i raw in
            its own __i_0.distcp (N files); prints the row-major bytes as hex
"""
import io
import zipfile
import pickle
import struct
import sys
import types

MOD = "torch.distributed.checkpoint."


def module(name):
    m = types.ModuleType(name)
    sys.modules[name] = m
    return m


torch = module("torch")
meta = module(MOD + "metadata")
fs = module(MOD + "filesystem")


class Size(tuple):
    def __reduce__(self):
        return (Size, (tuple(self),))


class float32:
    pass


class int16:
    pass


for c in (Size, float32, int16):
    c.__module__ = "torch"
    setattr(torch, c.__name__, c)


def dataclass(mod, name, fields, getstate=None):
    def init(self, *a):
        for k, v in zip(fields, a):
            setattr(self, k, v)
    ns = {"__init__": init}
    if getstate:
        ns["__getstate__"] = getstate
    c = type(name, (), ns)
    c.__module__ = mod.__name__
    setattr(mod, name, c)
    return c


Metadata = dataclass(meta, "Metadata", ["state_dict_metadata", "planner_data", "storage_data"])
TSM = dataclass(meta, "TensorStorageMetadata", ["properties", "size", "chunks"])
CSM = dataclass(meta, "ChunkStorageMetadata", ["offsets", "sizes"])
TP = dataclass(meta, "TensorProperties", ["dtype"],
               getstate=lambda self: (self.dtype, None, False, 0, False))
MI = dataclass(meta, "MetadataIndex", ["fqn", "offset", "index"])
BSM = dataclass(meta, "BytesStorageMetadata", [])
SI = dataclass(fs, "_StorageInfo", ["relative_path", "offset", "length"])


def many(out, n):
    """One .distcp file a row: a folder of n files."""
    import os
    sd, chunks, allb = {}, [], b""
    for i in range(n):
        row = struct.pack("<2f", float(i), i + 0.5)
        path = "__%d_0.distcp" % i
        with open(os.path.join(out, path), "wb") as f:
            f.write(row)
        sd[MI("m", Size((i, 0)), i)] = SI(path, 0, len(row))
        chunks.append(CSM(Size((i, 0)), Size((1, 2))))
        allb += row
    sdm = {"m": TSM(TP(float32), Size((n, 2)), chunks)}
    with open(os.path.join(out, ".metadata"), "wb") as f:
        pickle.dump(Metadata(sdm, None, sd), f, protocol=2)
    print(allb.hex())


def main():
    out, case = sys.argv[1], sys.argv[2]
    import os
    os.makedirs(out, exist_ok=True)
    if case == "many":
        many(out, int(sys.argv[3]))
        return
    t = [float(i) + 0.5 for i in range(12)]  # [4, 3] row-major
    u = list(range(-4, 4))  # [2, 4] row-major
    tb = struct.pack("<12f", *t)
    ub = struct.pack("<8h", *u)
    # t: rows 0-1 then rows 2-3; u: columns 2-3 first, then columns 0-1
    u_cols = lambda c0: struct.pack("<4h", u[c0], u[c0 + 1], u[4 + c0], u[5 + c0])
    blobs = [("t", (0, 0), (2, 3), tb[:24]), ("t", (2, 0), (2, 3), tb[24:]),
             ("u", (0, 2), (2, 2), u_cols(2)), ("u", (0, 0), (2, 2), u_cols(0))]
    if case == "gap":
        blobs = blobs[:1] + blobs[2:]
    if case == "outside":
        blobs[1] = ("t", (3, 0), (2, 3), tb[24:])
    data, sd, chunks = b"", {}, {"t": [], "u": []}
    for i, (fqn, off, size, b) in enumerate(blobs):
        sd[MI(fqn, Size(off), i)] = SI("__0_0.distcp", len(data), len(b))
        chunks[fqn].append(CSM(Size(off), Size(size)))
        data += b
    sdm = {"t": TSM(TP(float32), Size((4, 3)), chunks["t"]),
           "u": TSM(TP(int16), Size((2, 4)), chunks["u"])}
    if case == "laughs":
        a = []
        for _ in range(64):
            a = [a, a]
        rec = io.BytesIO()
        with zipfile.ZipFile(rec, "w") as z:
            z.writestr("archive/data.pkl", pickle.dumps(a, protocol=2))
            z.writestr("archive/version", "3\n")
        rec = rec.getvalue()
        sd[MI("x", None, None)] = SI("__0_0.distcp", len(data), len(rec))
        sdm["x"] = BSM()
        data += rec
    with open(os.path.join(out, ".metadata"), "wb") as f:
        pickle.dump(Metadata(sdm, None, sd), f, protocol=2)
    with open(os.path.join(out, "__0_0.distcp"), "wb") as f:
        f.write(data)
    if case == "raw":
        print(tb.hex())
        print(ub.hex())


if __name__ == "__main__":
    main()
