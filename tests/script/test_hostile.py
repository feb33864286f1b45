#!/usr/bin/env python3
"""Hostile TorchScript archives, built byte by byte (never unpickled):
module graphs with a cycle, sharing that doubles at every level, nesting
past max_depth, a class with no code record, broken __parameters__ lines.
Each must end quickly with exit 0 and the listing torch's rules give, or
exit 1 and one line on stderr: never a crash or a hang.

    python3 tests/script/test_hostile.py CKPT
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

CKPT = sys.argv[1]
passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    print("%s - %s%s" % ("ok" if ok else "not ok", what, "" if ok else ": " + detail))
    if ok:
        passed += 1
    else:
        failed += 1


def s(text):  # BINUNICODE
    b = text.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def tensor(key):
    """_rebuild_tensor_v2(('storage', FloatStorage, key, 'cpu', 2), 0, (2,), (1,), False, OrderedDict())"""
    return (b"ctorch._utils\n_rebuild_tensor_v2\n(" +
            b"(" + s("storage") + b"ctorch\nFloatStorage\n" + s(key) + s("cpu") + b"K\x02tQ" +
            b"K\x00" + b"K\x02\x85" + b"K\x01\x85" + b"\x89" +
            b"ccollections\nOrderedDict\n)R" + b"tR")


def module(cls, attrs):
    """GLOBAL __torch__ cls, NEWOBJ, BUILD with {name: value...}"""
    body = b"".join(s(k) + v for k, v in attrs)
    return b"c__torch__\n" + cls.encode() + b"\n)\x81}(" + body + b"ub"


def archive(path, data_pkl, code, nstorages=1):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("m/data.pkl", data_pkl)
        z.writestr("m/constants.pkl", b"\x80\x02).")
        z.writestr("m/version", b"3\n")
        if code is not None:
            z.writestr("m/code/__torch__.py", code)
        for i in range(nstorages):
            z.writestr("m/data/%d" % i, b"\x00" * 8)


def ls(path):
    try:
        p = subprocess.run([CKPT, "ls", "--json", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
    except subprocess.TimeoutExpired:
        return None, None, "timeout"
    names = None
    if p.returncode == 0:
        try:
            names = [t["name"] for t in json.loads(p.stdout)["tensors"]]
        except (ValueError, KeyError, TypeError) as e:
            return p.returncode, None, "bad json: %s" % e
    return p.returncode, names, p.stderr.decode("utf-8", "replace")


def one_line_error(rc, err):
    return rc == 1 and err.count("\n") == 1 and err.startswith("ckpt: ")


CODE = ('class M(Module):\n  __parameters__ = ["w", ]\n  __buffers__ = []\n'
        '  w : Tensor\n  me : __torch__.M\n  a : __torch__.M\n  b : __torch__.M\n')

with tempfile.TemporaryDirectory() as d:
    # 1. a module that is its own attribute: BINPUT the object, BINGET it inside
    pkl = (b"\x80\x02c__torch__\nM\n)\x81q\x01}(" + s("w") + tensor("0") + s("me") + b"h\x01" +
           b"ub.")
    p = os.path.join(d, "cycle.pt")
    archive(p, pkl, CODE)
    rc, names, err = ls(p)
    check(rc == 0 and names == ["w"], "a module that contains itself lists its weight once",
          "%r %r %s" % (rc, names, err))

    # 1b. an extra file past max_pickle_bytes: the archive still opens
    with zipfile.ZipFile(p, "a", zipfile.ZIP_STORED) as z:
        z.writestr("m/extra/big.bin", b"x" * 5000)
        z.writestr("m/extra/small.txt", b"hi")
    i = subprocess.run([CKPT, "info", "--max-pickle-size", "4000", p], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = i.stdout.decode("utf-8", "replace")
    check(i.returncode == 0 and "extra files: big.bin (not read: too large), small.txt (2 bytes)"
          in out, "an extra file past --max-pickle-size is named, not read",
          "%r %s %s" % (i.returncode, out, i.stderr))

    # 2. sharing that doubles the names at every level: 60 levels
    inner = module("M", [("w", tensor("0"))]) + b"q\x00"
    for i in range(60):  # M(a=<previous, memo 0>, b=<memo 0 again>), put at memo 0
        inner = b"c__torch__\nM\n)\x81}(" + s("a") + inner + s("b") + b"h\x00" + b"ubq\x00"
    p = os.path.join(d, "doubling.pt")
    archive(p, b"\x80\x02" + inner + b".", CODE)
    rc, names, err = ls(p)
    print("# doubling: exit %r, %s names, %s" % (rc, len(names) if names else 0, err.strip()))
    check(rc is not None and (one_line_error(rc, err) or (rc == 0 and len(names) < 10 ** 6)),
          "2^60 names through shared submodules: bounded", "%r %s" % (rc, err))

    # 3. nesting past max_depth (1000)
    pkl = b"\x80\x02" + b"c__torch__\nM\n)\x81}(" + s("w") + tensor("0")
    depth = 1500
    for i in range(depth):
        pkl += s("a") + b"c__torch__\nM\n)\x81}("
    pkl += b"ub" * depth + b"ub."
    p = os.path.join(d, "deep.pt")
    archive(p, pkl, CODE)
    rc, names, err = ls(p)
    print("# deep: exit %r, %s" % (rc, err.strip()))
    check(rc is not None and (one_line_error(rc, err) or rc == 0),
          "modules nested 1500 deep: a limit error or a listing, no crash", "%r %s" % (rc, err))

    # 4. no code record: every tensor attribute is listed
    pkl = b"\x80\x02" + module("M", [("w", tensor("0")), ("x", tensor("1"))]) + b"."
    p = os.path.join(d, "nocode.pt")
    archive(p, pkl, None, 2)
    rc, names, err = ls(p)
    check(rc == 0 and names == ["w", "x"], "no code record: tensor attributes listed",
          "%r %r %s" % (rc, names, err))

    # 5. broken __parameters__ lines: an unterminated quote, no closing bracket
    for code in ['class M(Module):\n  __parameters__ = ["w', 'class M(Module):\n  __parameters__ = [',
                 'class M(Module):\n  __buffers__ = ["w", "\\', 'class M(Module', 'class ']:
        pkl = b"\x80\x02" + module("M", [("w", tensor("0"))]) + b"."
        p = os.path.join(d, "broken.pt")
        archive(p, pkl, code)
        rc, names, err = ls(p)
        check(rc == 0 and names is not None and names in ([], ["w"]),
              "code %r: read, no crash" % code[:40], "%r %r %s" % (rc, names, err))

    # 6. .pt2 whose nested state dict is missing its data.pkl, or is not a ZIP
    for inner, what in ((b"PK\x05\x06" + b"\x00" * 18, "an empty nested ZIP"),
                        (b"not a zip at all", "a nested record that is no ZIP")):
        p = os.path.join(d, "bad.pt2")
        with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
            z.writestr("serialized_exported_program.json", b"{}")
            z.writestr("serialized_state_dict.pt", inner)
            z.writestr("version", b"8.2")
        rc, names, err = ls(p)
        check(one_line_error(rc, err), ".pt2 with %s: one error line" % what, "%r %s" % (rc, err))

    # 7. .pt2 whose nested archive holds a record with a wrong CRC (the outer
    #    record's own CRC is right): verify checks the nested records too
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
        z.writestr("archive/version", b"3\n")
    inner = bytearray(buf.getvalue())
    crc = struct.pack("<I", zipfile.crc32(b"\x80\x02}q\x00.") ^ 0x55)
    lh = inner.find(b"PK\x03\x04")
    cd = inner.find(b"PK\x01\x02")
    inner[lh + 14:lh + 18] = crc
    inner[cd + 16:cd + 20] = crc
    p = os.path.join(d, "crc.pt2")
    with zipfile.ZipFile(p, "w", zipfile.ZIP_STORED) as z:
        z.writestr("serialized_exported_program.json", b"{}")
        z.writestr("serialized_state_dict.pt", bytes(inner))
        z.writestr("version", b"8.2")
    rc, names, err = ls(p)
    check(rc == 0 and names == [], ".pt2 with an empty state dict lists nothing",
          "%r %r %s" % (rc, names, err))
    v = subprocess.run([CKPT, "verify", p], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    verr = v.stderr.decode("utf-8", "replace")
    check(v.returncode == 1 and "crc mismatch" in verr and "serialized_state_dict.pt" in verr,
          ".pt2 verify: a nested record's bad CRC is found", "%r %s" % (v.returncode, verr))

    # 8. modules pickled with their __getstate__ (a tuple, not attribute
    #    slots), as quantized Conv/Linear are: torch.jit.load runs their
    #    __setstate__ code, which ckpt does not, so none of their tensors is
    #    listed; a class that declares parameters or buffers gets a note
    def info_notes(path):
        i = subprocess.run([CKPT, "info", "--json", path], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        try:
            return json.loads(i.stdout).get("notes")
        except ValueError:
            return None

    def getstate(cls, items):  # GLOBAL __torch__ cls, NEWOBJ, BUILD with a tuple
        return b"c__torch__\n" + cls.encode() + b"\n)\x81(" + b"".join(items) + b"tb"

    qcode = ('class Q(Module):\n  __parameters__ = []\n  __buffers__ = []\n'
             'class P(Module):\n  __parameters__ = ["w", ]\n  __buffers__ = []\n'
             'class R(Module):\n  __parameters__ = ["b", ]\n  __buffers__ = []\n')
    for what, pkl, want, noted in (
            ("a root Q (declares none)",
             getstate("Q", [b"K\x02", tensor("0"), tensor("1")]), [], False),
            ("a root P (declares w)", getstate("P", [tensor("0"), b"\x88"]), [], True),
            ("Q inside R", module("R", [("b", tensor("0")),
                                        ("q", getstate("Q", [tensor("1"), b"N"]))]),
             ["b"], False)):
        p = os.path.join(d, "getstate.pt")
        archive(p, b"\x80\x02" + pkl + b".", qcode, 2)
        rc, names, err = ls(p)
        notes = info_notes(p) or []
        hit = any("__setstate__" in n for n in notes)
        check(rc == 0 and names == want and hit == noted,
              "%s pickled by __getstate__: lists %r%s" % (what, want, ", noted" if noted else ""),
              "%r %r %r %s" % (rc, names, notes, err))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
