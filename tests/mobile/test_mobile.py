#!/usr/bin/env python3
"""PyTorch Mobile flatbuffer modules (src/formats/mobile.c) through the CLI.

    python3 tests/mobile/test_mobile.py CKPT FIXTURES_DIR

  fixtures  every command on the files of tests/fixtures/mobile (written by
            torch: tests/gen_mobile.py): ls, show, info, verify, scan (exit 0,
            no global, the note that says what it does not scan), convert to
            safetensors (every tensor's bytes equal torch's), extract -d.
  hostile   flatbuffers built here byte by byte (a small builder below, not
            torch's): offsets, vtables and vectors past the end, indices past
            their tables, references to ivalues not parsed yet (None, as
            torch's loader gives them: no cycle can be made), sharing that
            doubles at every level, nesting past max_depth, malformed
            tensors and quantization parameters.  Each must end with exit 0
            and the listing expected, or exit 1 and one "ckpt: " line on
            stderr naming what is wrong; never a crash or a hang.

Standard library only; prints "ok"/"not ok" per check, then a summary.
"""
import hashlib
import json
import os
import struct
import subprocess
import sys
import tempfile

CKPT, FIX = sys.argv[1], sys.argv[2]
TIMEOUT = 60
SAFETENSORS_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16",
                      "int8", "uint8", "bool", "uint16", "uint32", "uint64", "float8_e4m3fn",
                      "float8_e5m2", "complex64")
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    print("%s - %s%s" % ("ok" if ok else "not ok", what, "" if ok else ": " + detail))
    sys.stdout.flush()
    if ok:
        passed += 1
    else:
        failed += 1


def run(*args):
    try:
        p = subprocess.run([CKPT] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout"
    return p.returncode, p.stdout, p.stderr


def short(b, n=300):
    s = b.decode("utf-8", "replace").strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


# ---- a flatbuffer builder ----------------------------------------------------
# Objects are laid out front to back, each child after the field that refers
# to it, so that every offset is a positive forward one as the format wants.

class Table:
    """fields: a list of (type, value) or None (absent); type is one of
    u8 i32 u32 i64 f64, or 'off' (value: a child object) or 'raw' (a u32
    written as it is in an offset's place).  soffset / vtable override the
    table's header for hostile cases."""

    def __init__(self, fields, soffset=None, vtable=None):
        self.fields, self.soffset, self.vtable = fields, soffset, vtable


class Vec:
    """A vector of u8 i32 u32 i64 f64 or 'off' items; count overrides its
    length field."""

    def __init__(self, etype, items, count=None):
        self.etype, self.items, self.count = etype, list(items), count


class Str:
    def __init__(self, text, count=None):
        self.data = text.encode() if isinstance(text, str) else text
        self.count = count


class Struct:  # a union member that is a struct (Int, Bool, Double, ...)
    def __init__(self, data):
        self.data = data


SIZES = {"u8": 1, "i32": 4, "u32": 4, "i64": 8, "f64": 8, "off": 4, "raw": 4}
FMT = {"u8": "<B", "i32": "<i", "u32": "<I", "i64": "<q", "f64": "<d", "raw": "<I"}


def build(root, ident=b"PTMF"):
    out = bytearray(8)
    out[4:8] = ident
    pending = [(0, root)]

    def align(n):
        while len(out) % n:
            out.append(0)

    def place(obj):
        if isinstance(obj, Table):
            present = [(i, f) for i, f in enumerate(obj.fields) if f is not None]
            nf = len(obj.fields)
            # table layout: soffset, then fields in order, each aligned
            layout, size = [], 4
            for i, (t, v) in present:
                a = SIZES[t]
                size = (size + a - 1) // a * a
                layout.append((i, t, v, size))
                size += a
            size = (size + 7) // 8 * 8
            vt = struct.pack("<HH", 4 + 2 * nf, size)
            offs = [0] * nf
            for i, t, v, o in layout:
                offs[i] = o
            vt += b"".join(struct.pack("<H", o) for o in offs)
            if obj.vtable is not None:
                vt = obj.vtable
            align(8)
            vpos = len(out)
            out.extend(vt)
            align(8)
            tpos = len(out)
            out.extend(b"\0" * size)
            so = tpos - vpos if obj.soffset is None else obj.soffset
            struct.pack_into("<i", out, tpos, so)
            for i, t, v, o in layout:
                if t == "off":
                    pending.append((tpos + o, v))
                else:
                    struct.pack_into(FMT[t], out, tpos + o, v)
            return tpos
        if isinstance(obj, Vec):
            es = SIZES[obj.etype]
            align(8)
            if es == 8:
                out.extend(b"\0" * 4)  # the data 8-aligned
            pos = len(out)
            n = len(obj.items) if obj.count is None else obj.count
            out.extend(struct.pack("<I", n))
            for it in obj.items:
                if obj.etype == "off":
                    pending.append((len(out), it))
                    out.extend(b"\0" * 4)
                else:
                    out.extend(struct.pack(FMT[obj.etype], it))
            return pos
        if isinstance(obj, Str):
            align(4)
            pos = len(out)
            n = len(obj.data) if obj.count is None else obj.count
            out.extend(struct.pack("<I", n) + obj.data + b"\0")
            return pos
        if isinstance(obj, Struct):
            align(8)
            pos = len(out)
            out.extend(obj.data)
            return pos
        if isinstance(obj, bytes):  # storage data: 16-aligned as torch writes it
            align(16)
            out.extend(b"\0" * 12)
            pos = len(out)
            out.extend(struct.pack("<I", len(obj)) + obj)
            return pos
        raise TypeError(obj)

    while pending:
        at, obj = pending.pop(0)
        pos = place(obj)
        struct.pack_into("<I", out, at, pos - at)
    return bytes(out)


# ---- the schema's tables ----------------------------------------------------

def iv(t, val=None):
    return Table([("u8", t), ("off", val) if val is not None else None])


def iv_int(x):
    return iv(1, Struct(struct.pack("<q", x)))


def iv_bool(b):
    return iv(2, Struct(struct.pack("<B", b) + b"\0" * 7))


def tensor(sidx, st, sizes, strides, off=0, rg=0, q=None):
    return Table([("u32", sidx), ("u8", st), ("i32", off), ("off", Vec("i32", sizes)),
                  ("off", Vec("i32", strides)), ("u8", rg),
                  ("off", q) if q is not None else None])


def iv_tensor(*a, **k):
    return iv(5, tensor(*a, **k))


def iv_list(items, t=7):
    return iv(t, Table([("off", Vec("u32", items))]))


def iv_object(tidx, attrs, state=None):
    return iv(10, Table([("u32", tidx), ("u32", state) if state is not None else None,
                         ("off", Vec("u32", attrs)) if attrs is not None else None]))


def otype(name, names, kind=1):
    return Table([("off", Str(name)), ("u8", kind), ("off", Vec("off", [Str(n) for n in names]))])


def source(name, text):
    return Table([("off", Str(name)), ("off", Str(text))])


CODE_M = ('class M(Module):\n  __parameters__ = ["w", ]\n  __buffers__ = ["b", ]\n'
          '  w : Tensor\n  b : Tensor\n')
W = struct.pack("<6f", *[0.5 * i for i in range(6)])
B = struct.pack("<4q", 1, 2, 3, 4)


def module(ivalues, state, types, storages, sources=(), nmob=None, constants=None,
           extra=None, ivals_vec=None, nstor=None):
    return Table([
        ("u32", 9),
        ("off", Vec("off", [Table([("off", Str(k)), ("off", Str(v))]) for k, v in extra]))
        if extra else None,
        None,
        ("u32", state),
        ("off", ivals_vec if ivals_vec is not None else Vec("off", ivalues)),
        ("i32", len(storages) if nstor is None else nstor),
        ("off", Vec("off", [d if isinstance(d, Table) else Table([("off", d)])
                            for d in storages])),
        ("off", Vec("off", types)),
        ("off", Vec("off", list(sources))),
        ("off", Vec("u32", constants)) if constants is not None else None,
        ("u32", 1),
        ("u32", nmob) if nmob is not None else None,
    ])


def good(**over):
    """ivalues: 0 None, 1 w (float32 [2, 3]), 2 b (int64 [4]), 3 False,
    4 the module M {w, b, training}."""
    kw = dict(ivalues=[iv(0), iv_tensor(0, 6, [2, 3], [3, 1], rg=1), iv_tensor(1, 4, [4], [1]),
                       iv_bool(0), iv_object(0, [1, 2, 3])],
              state=4, types=[otype("__torch__.M", ["w", "b", "training"])],
              storages=[W, B], sources=[source("__torch__", CODE_M)])
    kw.update(over)
    return build(module(**kw))


def one_tensor_module(t, storages=(W,), q_types=None):
    """A module M whose one attribute w is the tensor table t."""
    return build(module([iv(0), iv(5, t), iv_object(0, [1])], 2,
                        [otype("__torch__.M", ["w"])], list(storages),
                        [source("__torch__", CODE_M)]))


def nested_lists(depth):
    """ivalue k+1 = [ivalue k, ivalue k]: 2^depth paths to the tensor."""
    ivs = [iv(0), iv_tensor(0, 6, [2, 3], [3, 1])]
    for k in range(depth):
        ivs.append(iv_list([1 + k, 1 + k]))
    ivs.append(iv_object(0, [1, len(ivs) - 1]))
    return build(module(ivs, len(ivs) - 1, [otype("__torch__.M", ["w", "x"])], [W],
                        [source("__torch__", CODE_M)]))


def deep_modules(depth):
    """module k+1 has module k as attribute 'sub': depth modules deep."""
    ivs = [iv(0), iv_tensor(0, 6, [2, 3], [3, 1]), iv_object(0, [1])]
    for _ in range(depth):
        ivs.append(iv_object(1, [len(ivs) - 1]))
    code = CODE_M + 'class S(Module):\n  __parameters__ = []\n  __buffers__ = []\n'
    return build(module(ivs, len(ivs) - 1, [otype("__torch__.M", ["w"]),
                                           otype("__torch__.S", ["sub"])], [W],
                        [source("__torch__", code)]))


def deep_values(depth):
    ivs = [iv(0), iv_tensor(0, 6, [2, 3], [3, 1]), iv_list([])]
    for _ in range(depth):
        ivs.append(iv_list([len(ivs) - 1]))
    ivs.append(iv_object(0, [1, len(ivs) - 1]))
    return build(module(ivs, len(ivs) - 1, [otype("__torch__.M", ["w", "x"])], [W],
                        [source("__torch__", CODE_M)]))


def hostile_cases():
    g = good()
    root = struct.unpack_from("<I", g, 0)[0]
    cases = [
        # name, bytes, expected names (a list) or an error substring
        ("good", g, ["w", "b"]),
        ("no_sources_all_tensors_listed", good(sources=[]), ["w", "b"]),
        ("eight_bytes", b"\x08\0\0\0PTMF", "root table offset"),
        ("root_past_end", b"\xf0\xff\xff\x7fPTMF" + b"\0" * 8, "root table offset"),
        ("truncated_module", g[:root + 6], "runs past the end"),
        ("vtable_outside", build(Table([("u32", 9)], soffset=-0x7fffffff)), "vtable"),
        ("vtable_odd", build(Table([("u32", 9)], vtable=struct.pack("<HHH", 7, 8, 4))),
         "vtable"),
        ("field_outside_table", build(Table([("u32", 9)], vtable=struct.pack("<HHH", 6, 8, 200))),
         "lies outside"),
        ("ivalues_count_huge", good(ivals_vec=Vec("off", [iv(0)], count=0xFFFFFFFF)),
         "runs past the end"),
        ("offset_past_end", build(Table([None, None, None, ("u32", 0), ("raw", 0x7ffffff0)])),
         "points past the end"),
        ("attr_index_past_table", good(ivalues=[iv(0), iv_object(0, [7, 0, 0])], state=1),
         "past the 2 ivalues"),
        # references to ivalues not parsed yet are None in torch's loader
        ("forward_reference_is_none",
         good(ivalues=[iv(0), iv_object(0, [2, 3, 0]), iv_tensor(0, 6, [2, 3], [3, 1]),
                       iv_tensor(1, 4, [4], [1])], state=1), []),
        ("self_reference_is_none",
         good(ivalues=[iv(0), iv_tensor(1, 4, [4], [1]), iv_list([2]),
                       iv_object(0, [0, 1, 2])], state=3), ["b"]),
        ("mobile_ivalue_size_past", good(nmob=9), "mobile_ivalue_size 9"),
        ("mobile_ivalue_size_short", good(nmob=4), "state_obj 4 is past"),
        ("state_not_object", good(state=3), "not the module's object"),
        ("state_past", good(state=40), "state_obj 40"),
        ("unknown_ivalue_type", good(ivalues=[iv(0), iv(40, Table([])), iv_object(0, [0, 0, 0])],
                                     state=2), "unknown type 40"),
        ("ivalue_without_value", good(ivalues=[iv(0), iv(5), iv_object(0, [1, 0, 0])], state=2),
         "has no value"),
        ("dict_keys_values_differ",
         good(ivalues=[iv(0), iv(9, Table([("off", Vec("u32", [0, 0])), ("off", Vec("u32", [0]))])),
                       iv_object(0, [0, 0, 1])], state=2), "2 keys and 1 values"),
        ("object_type_past", good(ivalues=[iv(0), iv_object(5, [0])], state=1),
         "type 5, past the 1 object types"),
        ("more_attrs_than_names", good(ivalues=[iv(0), iv_object(0, [0, 0, 0, 0])], state=1),
         "has 4 attributes, its type names 3"),
        ("object_kind_not_object",
         good(types=[otype("__torch__.M", ["w", "b", "training"], kind=4)]), "type kind 4"),
        ("setstate_object_kept_inert",
         good(ivalues=[iv(0), iv_int(3), iv_object(0, None, state=1)], state=2,
              types=[otype("__torch__.M", [], kind=3)]), []),
        ("storage_index_past",
         one_tensor_module(tensor(3, 6, [2], [1])), "storage 3, past the 1 storages"),
        # torch checks the index against storage_data_size too
        ("storage_data_size_short", good(nstor=1), "storage 1, past the 1 storages"),
        ("storage_data_size_negative", good(nstor=-1), "storage 0, past the 0 storages"),
        ("storage_without_data",
         one_tensor_module(tensor(0, 6, [2], [1]), storages=[Table([None])]), "has no data"),
        ("negative_size", one_tensor_module(tensor(0, 6, [-2], [1])), "negative size"),
        ("negative_stride", one_tensor_module(tensor(0, 6, [2], [-1])), "negative stride"),
        ("negative_storage_offset", one_tensor_module(tensor(0, 6, [2], [1], off=-4)),
         "negative storage_offset"),
        ("rank_65", one_tensor_module(tensor(0, 6, [1] * 65, [1] * 65)), "65 dimensions"),
        ("sizes_strides_differ", one_tensor_module(tensor(0, 6, [2, 3], [1])),
         "2 sizes but 1 strides"),
        ("extent_past_storage", one_tensor_module(tensor(0, 6, [100], [1])),
         "reaches byte 400 of storage '0', which holds 24 bytes"),
        ("offset_past_storage", one_tensor_module(tensor(0, 6, [2], [1], off=6)),
         "reaches byte 32 of storage"),
        ("unknown_scalar_type", one_tensor_module(tensor(0, 99, [2], [1])), "scalar type 99"),
        ("quantized_without_schema", one_tensor_module(tensor(0, 12, [2], [1])),
         "has no quantization parameters"),
        ("schema_on_float", one_tensor_module(tensor(0, 6, [2], [1], q=Table([("u8", 0)]))),
         "has quantization parameters"),
        ("qscheme_refused", one_tensor_module(tensor(0, 12, [2], [1], q=Table([("u8", 2)]))),
         "quantization scheme 2"),
        ("qaxis_past", one_tensor_module(tensor(0, 12, [2], [1], q=Table(
            [("u8", 1), None, None, ("off", tensor(0, 7, [2], [1])),
             ("off", tensor(0, 4, [2], [1])), ("i32", 3)]))), "axis 3 of 1 dimensions"),
        ("qparams_quantized", one_tensor_module(tensor(0, 12, [2], [1], q=Table(
            [("u8", 1), None, None, ("off", tensor(0, 12, [2], [1], q=Table([("u8", 0)]))),
             ("off", tensor(0, 4, [2], [1]))]))), "quantized themselves"),
        ("per_tensor_ok", one_tensor_module(tensor(0, 12, [4], [1], q=Table(
            [("u8", 0), ("f64", 0.25), ("i32", -3)]))), ["w"]),
        ("string_count_huge",
         good(ivalues=[iv(0), iv(6, Table([("off", Str("x", count=0x7ffffff0))])),
                       iv_object(0, [0, 0, 1])], state=2), "runs past the end"),
        ("every_value_kind", good(ivalues=[
            iv(0), iv_tensor(0, 6, [2, 3], [3, 1]), iv_int(-5), iv(3, Struct(struct.pack("<d", 1.5))),
            iv(4, Struct(struct.pack("<dd", 1.0, -2.0))), iv(6, Table([("off", Str("s"))])),
            iv(11, Table([("off", Vec("i64", [1, 2]))])),
            iv(12, Table([("off", Vec("f64", [0.5]))])), iv(13, Table([("off", Vec("u8", [1, 0]))])),
            iv(14, Table([("off", Str("cpu"))])), iv(15, Table([("off", Str("__torch__.E")),
                                                              ("u32", 2)])),
            iv(16, Table([("off", Str("__torch__.M.forward"))])), iv_list([2, 3, 4, 5], t=8),
            iv(9, Table([("off", Vec("u32", [5])), ("off", Vec("u32", [6]))])),
            iv_list([7, 8, 9, 10, 11, 12, 13]),
            iv_object(0, [1, 14, 0])], state=15), ["w"]),
    ]
    return cases


def fixture_checks():
    for name in sorted(os.listdir(FIX)):
        if not name.endswith(".expected.json"):
            continue
        path = os.path.join(FIX, name[:-len(".expected.json")])
        with open(os.path.join(FIX, name)) as f:
            exp = json.load(f)
        fx = os.path.basename(path)
        rc, out, err = run("info", path)
        check(rc == 0 and b"format:      mobile, version " in out, "%s: info" % fx, short(out + err))
        rc, out, err = run("show", path)
        check(rc == 0 and out.startswith(b"__torch__."), "%s: show" % fx, short(out + err))
        rc, out, err = run("verify", path)
        check(rc == 0 and b"\nok: " in b"\n" + out and b"no checksums" in out + err,
              "%s: verify" % fx, short(out + err))
        rc, out, err = run("scan", path)
        check(rc == 0 and b"holds no pickle and names no Python global" in out
              and b"0 globals" in out and b"nothing dangerous" in out,
              "%s: scan" % fx, short(out + err))
        rc, out, err = run("scan", "--json", path)
        check(rc == 0 and b'"globals": []' in out.replace(b"\n", b"") or rc == 0 and b"[]" in out,
              "%s: scan --json" % fx, short(out + err))
        with tempfile.TemporaryDirectory() as d:
            st = os.path.join(d, "out.safetensors")
            # safetensors has no dtype for some (quantized, complex32, the
            # fnuz float8s): those are left out, the rest must be there
            rc, out, err = run("convert", "--skip-unsupported", path, st)
            errs = [] if rc == 0 else ["exit %r: %s" % (rc, short(err))]
            if rc == 0:
                data = open(st, "rb").read()
                hl = struct.unpack_from("<Q", data, 0)[0]
                hdr = json.loads(data[8:8 + hl])
                base = 8 + hl
                for t in exp["tensors"]:
                    e = hdr.get(t["name"])
                    if e is None:
                        if t["dtype"] in SAFETENSORS_DTYPES:
                            errs.append("no %r" % t["name"])
                        continue
                    b, en = e["data_offsets"]
                    if hashlib.sha256(data[base + b:base + en]).hexdigest() != t["sha256"]:
                        errs.append("%r bytes differ" % t["name"])
                if hdr.get("__metadata__", {}).get("ckpt.source_format") != "mobile":
                    errs.append("metadata %r" % hdr.get("__metadata__"))
            check(not errs, "%s: convert" % fx, "; ".join(errs))
            rc, out, err = run("extract", path, "-d", os.path.join(d, "x"))
            n = len(os.listdir(os.path.join(d, "x"))) if rc == 0 else -1
            check(rc == 0 and n == len(exp["tensors"]), "%s: extract -d" % fx,
                  "exit %r, %d files: %s" % (rc, n, short(err)))
    # a file torch saved without sources: the script.c note says so
    lite = os.path.join(FIX, "lite_only_t1.ff")
    rc, out, err = run("verify", lite)
    check(rc == 0 and b"has no code record" in out, "lite_only_t1.ff: verify notes no sources",
          short(out))


def hostile_checks():
    with tempfile.TemporaryDirectory() as d:
        for name, data, want in hostile_cases():
            path = os.path.join(d, name + ".ff")
            with open(path, "wb") as f:
                f.write(data)
            rc, out, err = run("ls", "--json", path)
            lines = [ln for ln in err.decode("utf-8", "replace").splitlines() if ln.strip()]
            if isinstance(want, list):
                try:
                    names = [t["name"] for t in json.loads(out)["tensors"]] if rc == 0 else None
                except ValueError:
                    names = None
                check(rc == 0 and names == want, "hostile %s: lists %r" % (name, want),
                      "exit %r, names %r: %s" % (rc, names, short(err)))
                # show, show --json, info, verify and scan finish cleanly
                for cmd in (["show"], ["show", "--json"], ["info"], ["verify"], ["scan"]):
                    rc2, o2, e2 = run(*(cmd + [path]))
                    check(rc2 == 0, "hostile %s: %s" % (name, " ".join(cmd)),
                          "exit %r: %s" % (rc2, short(e2)))
            else:
                check(rc == 1 and not out and len(lines) == 1 and lines[0].startswith("ckpt: ")
                      and want in lines[0], "hostile %s: refused (%s)" % (name, want),
                      "exit %r, stdout %r, stderr %s" % (rc, short(out, 80), short(err)))
        # sharing that doubles 60 times: ls names w alone; show prints each
        # shared list once (later: <ref ...>), never walks 2^60 paths
        path = os.path.join(d, "laughs.ff")
        with open(path, "wb") as f:
            f.write(nested_lists(60))
        rc, out, err = run("ls", path)
        check(rc == 0 and b"\nw " in out, "laughs: ls", short(out + err))
        for cmd in ("show", "show --json"):
            rc, out, err = run(*(cmd.split() + [path]))
            check(rc == 0 and len(out) < 100000 and (b"<ref x.0>" in out or
                                                     b'{"$ref": "state.x.0"}' in out),
                  "laughs: %s prints shared lists once" % cmd, "exit %r, %d bytes: %s"
                  % (rc, len(out), short(err)))
        # values 3000 deep: show refuses past max_depth, ls is unaffected
        path = os.path.join(d, "deep_values.ff")
        with open(path, "wb") as f:
            f.write(deep_values(3000))
        rc, out, err = run("ls", path)
        check(rc == 0 and b"\nw " in out, "deep values: ls", short(out + err))
        rc, out, err = run("show", "--json", path)
        check(rc == 1 and b"deeper" in err, "deep values: show refuses", short(err))
        # modules 3000 deep: naming refuses past max_depth
        path = os.path.join(d, "deep_modules.ff")
        with open(path, "wb") as f:
            f.write(deep_modules(3000))
        rc, out, err = run("ls", path)
        check(rc == 1 and b"nest deeper" in err, "deep modules: ls refuses", short(err))
        rc, out, err = run("ls", "--max-depth", "2048", path)
        check(rc == 1 and b"nest deeper than 2048" in err,
              "deep modules: ls --max-depth 2048 refuses", short(err))
        # truncations of the good file (every 16th length and the last 16; the
        # fixtures get every length under 4 KiB in-process: mobile.mutate)
        g = good()
        bad = []
        cuts = sorted(set(range(0, len(g), 16)) | set(range(len(g) - 16, len(g))))
        for n in cuts:
            path = os.path.join(d, "cut.ff")
            with open(path, "wb") as f:
                f.write(g[:n])
            rc, out, err = run("ls", path)
            if rc != 1 or not err.startswith(b"ckpt: ") or err.count(b"\n") != 1:
                bad.append("%d: exit %r %s" % (n, rc, short(err, 80)))
        check(not bad, "%d truncations of the good file refused" % len(cuts), "; ".join(bad[:5]))


fixture_checks()
hostile_checks()
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
