#!/usr/bin/env python3
"""Check `ckpt scan`, `ckpt verify`, `ckpt info` and `ckpt extract`.

    python3 tests/test_inspect.py CKPT_BINARY FIXTURES_DIR

Standard library only.  When /usr/bin/python3 can import numpy, every .npy
written by `extract` is also loaded with numpy.load(allow_pickle=False) in a
subprocess of /usr/bin/python3; otherwise those checks print "skipped".

  scan     every fixture: exit 0, nothing dangerous (full-model saves: unknown
           globals, and exit 3 with --strict); hostile pickles crafted here
           byte by byte (os.system, posix.system, builtins.eval,
           subprocess.Popen, STACK_GLOBAL through the memo, __builtin__.exec,
           inside a ZIP's data.pkl, a legacy stream's object pickle, a TAR
           'pickle' member, after a refused sparse tensor, in a truncated
           pickle, ...): exit 3 and the global named.  NOTHING IS EVER
           UNPICKLED HERE: the hostile bytes only go to the ckpt binary.
  verify   every fixture ok; one flipped bit in a stored record of a ZIP
           fixture: exit 1 and one stderr line naming that record.
  info     the parameter count is the sum of numel of the expected tensors.
  extract  every tensor of every fixture as .npy: header parsed here (and by
           numpy when available), bytes' sha256 equal to torch's, dtype and
           shape as documented; -d names are path-safe and never escape DIR.

Prints one line per failure, then `N passed, M failed`; exits 1 on failure.
"""

import ast
import glob
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile

TIMEOUT = 120
SYSTEM_PYTHON = "/usr/bin/python3"

# torch dtype -> (numpy descr, extra trailing dimension)
NPY = {
    "float64": ("<f8", []), "float32": ("<f4", []), "float16": ("<f2", []),
    "bfloat16": ("<u2", []), "int64": ("<i8", []), "int32": ("<i4", []),
    "int16": ("<i2", []), "int8": ("|i1", []), "uint8": ("|u1", []),
    "bool": ("|b1", []), "complex64": ("<c8", []), "complex128": ("<c16", []),
    "complex32": ("<f2", [2]), "float8_e4m3fn": ("|u1", []),
    "float8_e5m2": ("|u1", []), "float8_e4m3fnuz": ("|u1", []),
    "float8_e5m2fnuz": ("|u1", []), "float8_e8m0fnu": ("|u1", []),
    "uint16": ("<u2", []), "uint32": ("<u4", []), "uint64": ("<u8", []),
    "qint8": ("|i1", []), "quint8": ("|u1", []), "qint32": ("<i4", []),
}


def run(argv, timeout=TIMEOUT):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout after %ds" % timeout
    except OSError as e:
        return None, b"", str(e).encode()
    return p.returncode, p.stdout, p.stderr


def short(b, n=300):
    if isinstance(b, bytes):
        b = b.decode("utf-8", "replace")
    s = b.strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


def stderr_lines(err):
    return [l for l in err.decode("utf-8", "replace").splitlines() if l.strip()]


# ---------------------------------------------------------------------------
# Pickle bytes, written by hand (never produced by or given to `pickle`)
# ---------------------------------------------------------------------------

P2 = b"\x80\x02"          # PROTO 2
P4 = b"\x80\x04"          # PROTO 4


def u(s):
    """BINUNICODE"""
    b = s.encode("utf-8")
    return b"X" + struct.pack("<I", len(b)) + b


def glob_op(module, name):
    """GLOBAL 'module name'"""
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def call1(module, name, arg):
    """GLOBAL, one string argument, TUPLE1, REDUCE (no STOP)"""
    return glob_op(module, name) + u(arg) + b"\x85R"


def plain(module, name, arg="id"):
    """A whole protocol-2 pickle calling module.name(arg)."""
    return P2 + call1(module, name, arg) + b"."


def tensor_entry(i):
    """_rebuild_tensor_v2(('storage', FloatStorage, str(i), 'cpu', 1), 0,
    (1,), (1,), False, OrderedDict())"""
    return (glob_op("torch._utils", "_rebuild_tensor_v2") + b"("
            + b"(" + u("storage") + glob_op("torch", "FloatStorage") + u(str(i))
            + u("cpu") + b"K\x01tQ"
            + b"K\x00" + b"K\x01\x85" + b"K\x01\x85" + b"\x89"
            + glob_op("collections", "OrderedDict") + b")R" + b"tR")


def data_pkl(names, extra=b""):
    """{name: tensor, ..., <extra SETITEMS pairs>}"""
    body = P2 + b"}("
    for i, n in enumerate(names):
        body += u(n) + tensor_entry(i)
    return body + extra + b"u."


def write_zip(path, pkl, nstorages, root="archive"):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr(root + "/data.pkl", pkl)
        for i in range(nstorages):
            z.writestr("%s/data/%d" % (root, i), struct.pack("<f", float(i) + 0.5))
        z.writestr(root + "/version", b"3\n")


MAGIC = P2 + b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little") + b"."
LEGACY_PROTO = P2 + b"M\xe9\x03."


def sys_info(version):
    return (P2 + b"}(" + u("protocol_version") + b"M" + struct.pack("<H", version)
            + u("little_endian") + b"\x88" + u("type_sizes") + b"}("
            + u("short") + b"K\x02" + u("int") + b"K\x04" + u("long") + b"K\x04"
            + b"uu.")


def write_legacy(path, object_pickle):
    with open(path, "wb") as f:
        f.write(MAGIC + LEGACY_PROTO + sys_info(1001) + object_pickle + P2 + b"].")


def write_tar(path, pickle_member):
    def add(t, name, data):
        ti = tarfile.TarInfo(name)
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as t:
        add(t, "sys_info", sys_info(1000))
        add(t, "storages", P2 + b"K\x00." + P2 + b"].")
        add(t, "tensors", P2 + b"K\x00.")
        add(t, "pickle", pickle_member)


# ---------------------------------------------------------------------------
# .npy parsing (stdlib): header via ast.literal_eval, never pickle
# ---------------------------------------------------------------------------

def parse_npy(data):
    if data[:8] != b"\x93NUMPY\x01\x00":
        raise ValueError("bad magic/version %r" % data[:8])
    hlen = struct.unpack("<H", data[8:10])[0]
    if (10 + hlen) % 64 != 0:
        raise ValueError("data not 64-aligned (header %d bytes)" % (10 + hlen))
    text = data[10:10 + hlen].decode("latin-1")
    if not text.endswith("\n"):
        raise ValueError("header does not end with a newline")
    h = ast.literal_eval(text)
    if set(h) != {"descr", "fortran_order", "shape"} or h["fortran_order"] is not False:
        raise ValueError("unexpected header %r" % text)
    return h["descr"], list(h["shape"]), data[10 + hlen:]


class Runner:
    def __init__(self, ckpt, fixtures):
        self.ckpt = ckpt
        self.fixtures = fixtures
        self.passed = 0
        self.failed = 0
        self.tmp = tempfile.mkdtemp(prefix="ckpt-inspect-")
        self.numpy = self.have_numpy()

    def have_numpy(self):
        if not os.path.exists(SYSTEM_PYTHON):
            return False
        rc, _, _ = run([SYSTEM_PYTHON, "-c", "import numpy"])
        return rc == 0

    def fail(self, what, why):
        self.failed += 1
        print("FAIL %s: %s" % (what, why))
        sys.stdout.flush()

    def check(self, what, errs):
        if errs:
            self.fail(what, "; ".join(errs[:6]) +
                      ("; ... %d more" % (len(errs) - 6) if len(errs) > 6 else ""))
        else:
            self.passed += 1

    def ckpt_run(self, *args):
        return run([self.ckpt] + list(args))

    def expectations(self):
        out = []
        for p in sorted(glob.glob(os.path.join(self.fixtures, "*.expected.json"))):
            with open(p, encoding="utf-8") as f:
                out.append((p[:-len(".expected.json")], json.load(f)))
        return out

    # -- scan ---------------------------------------------------------------

    def scan_json(self, path, *extra):
        rc, out, err = self.ckpt_run("scan", "--json", *extra, path)
        try:
            doc = json.loads(out.decode("utf-8"))
        except Exception:
            doc = None
        return rc, doc, out, err

    def test_scan_fixtures(self):
        for path, exp in self.expectations():
            fx = os.path.basename(path)
            errs = []
            rc, doc, out, err = self.scan_json(path)
            if doc is None:
                self.fail("scan " + fx, "output is not JSON (exit %r): %s %s"
                          % (rc, short(out), short(err)))
                continue
            if rc != 0:
                errs.append("exit %r, want 0: %s" % (rc, short(err)))
            if doc.get("complete") is not True:
                errs.append("not complete: %r" % doc.get("error"))
            bad = [g["global"] for g in doc.get("globals", [])
                   if g.get("verdict") == "dangerous"]
            if bad:
                errs.append("dangerous globals %r" % bad)
            if doc.get("counts", {}).get("dangerous") != 0:
                errs.append("counts %r" % doc.get("counts"))
            if exp["format"] != "pickle" and not doc.get("globals"):
                errs.append("no globals reported")
            unknown = doc.get("counts", {}).get("unknown", 0)
            if fx.startswith("fullmodel") and not unknown:
                errs.append("a full-model save has no unknown globals")
            # the table form agrees
            rc2, out2, err2 = self.ckpt_run("scan", path)
            if rc2 != rc:
                errs.append("table exit %r, JSON exit %r" % (rc2, rc))
            last = out2.decode("utf-8", "replace").strip().splitlines()[-1:]
            if not last or not last[0].startswith("summary: "):
                errs.append("no summary line: %s" % short(out2))
            # --strict: unknown globals become exit 3
            rc3, _, err3 = self.ckpt_run("scan", "--strict", path)
            want = 3 if unknown else 0
            if rc3 != want:
                errs.append("--strict exit %r, want %r (%d unknown)" % (rc3, want, unknown))
            self.check("scan " + fx, errs)

    def hostile_cases(self):
        """(file name, bytes or writer, global that must be named dangerous)"""
        cases = [
            ("os_system.pkl", plain("os", "system", "echo pwned"), "os.system"),
            ("posix_system.pkl", plain("posix", "system"), "posix.system"),
            ("nt_system.pkl", plain("nt", "system"), "nt.system"),
            ("builtins_eval.pkl", plain("builtins", "eval", "1+1"), "builtins.eval"),
            ("subprocess_popen.pkl", plain("subprocess", "Popen"), "subprocess.Popen"),
            ("builtin_exec.pkl", plain("__builtin__", "exec", "pass"), "builtins.exec"),
            ("builtins_getattr.pkl", plain("builtins", "getattr"), "builtins.getattr"),
            ("builtins_import.pkl", plain("builtins", "__import__", "os"), "builtins.__import__"),
            ("importlib.pkl", plain("importlib", "import_module", "os"), "importlib.import_module"),
            ("pickle_loads.pkl", plain("pickle", "loads", "x"), "pickle.loads"),
            ("runpy.pkl", plain("runpy", "run_path", "x"), "runpy.run_path"),
            ("socket.pkl", plain("socket", "create_connection", "x"), "socket.create_connection"),
            ("shutil.pkl", plain("shutil", "rmtree", "/"), "shutil.rmtree"),
            ("webbrowser.pkl", plain("webbrowser", "open", "x"), "webbrowser.open"),
            ("ctypes.pkl", plain("ctypes", "CDLL", "x"), "ctypes.CDLL"),
            ("attrgetter.pkl", plain("operator", "attrgetter", "x"), "operator.attrgetter"),
            ("torch_hub.pkl", plain("torch.hub", "load", "x"), "torch.hub.load"),
            # protocol 2: Python's unpickler renames commands to subprocess
            ("commands_py2.pkl", plain("commands", "getoutput", "id"), "subprocess.getoutput"),
            # STACK_GLOBAL whose strings come back through the memo:
            # 'os' MEMOIZE POP 'system' MEMOIZE POP BINGET 0 BINGET 1 STACK_GLOBAL
            ("stack_global_memo.pkl",
             P4 + b"\x8c\x02os\x94" + b"0" + b"\x8c\x06system\x94" + b"0"
             + b"h\x00h\x01\x93" + u("id") + b"\x85R.", "os.system"),
            # a protocol-4 dotted name resolved with getattr: torch.serialization.os
            ("dotted_name.pkl",
             P4 + b"\x8c\x05torch\x8c\x17serialization.os.system\x93" + u("id")
             + b"\x85R.", "torch.serialization.os.system"),
            # cut off before STOP: the global was met, the file is broken
            ("truncated.pkl", P2 + glob_op("os", "system") + b"X\x10\x00\x00\x00ech",
             "os.system"),
        ]
        evil_pair = u("x") + call1("os", "system", "echo pwned")
        cases.append(("zip_data_pkl.pt",
                      lambda p: write_zip(p, data_pkl(["w"], evil_pair), 1), "os.system"))
        cases.append(("legacy_object.pt",
                      lambda p: write_legacy(p, plain("subprocess", "Popen")),
                      "subprocess.Popen"))
        cases.append(("tar_pickle.pt",
                      lambda p: write_tar(p, plain("builtins", "eval", "1")),
                      "builtins.eval"))
        sparse = (u("sp") + glob_op("torch._utils", "_rebuild_sparse_tensor")
                  + glob_op("torch", "sparse_coo") + b")" + b"\x86R")
        cases.append(("after_sparse.pt",
                      lambda p: write_zip(p, data_pkl(["w"], sparse + u("x")
                                                      + call1("posix", "system", "id")), 1),
                      "posix.system"))
        # a truncated data.pkl inside a ZIP
        cases.append(("zip_truncated.pt",
                      lambda p: write_zip(p, P2 + b"}(" + evil_pair + b"X\xff\x00\x00\x00ab", 0),
                      "os.system"))
        return cases

    def test_scan_hostile(self):
        d = os.path.join(self.tmp, "hostile")
        os.mkdir(d)
        for name, content, glob_name in self.hostile_cases():
            path = os.path.join(d, name)
            if callable(content):
                content(path)
            else:
                with open(path, "wb") as f:
                    f.write(content)
            errs = []
            rc, out, err = self.ckpt_run("scan", path)
            if rc != 3:
                errs.append("exit %r, want 3: %s" % (rc, short(err)))
            text = out.decode("utf-8", "replace")
            rows = [l for l in text.splitlines() if l.startswith("dangerous ")]
            if not any((" %s " % glob_name) in l for l in rows):
                errs.append("table does not name %s as dangerous: %s" % (glob_name, short(out)))
            lines = stderr_lines(err)
            if len(lines) > 1 or any(not l.startswith("ckpt: ") for l in lines):
                errs.append("stderr not one 'ckpt: ' line: %s" % short(err))
            rc2, doc, out2, _ = self.scan_json(path)
            if rc2 != 3 or doc is None:
                errs.append("--json exit %r / not JSON: %s" % (rc2, short(out2)))
            else:
                hits = [g for g in doc["globals"] if g["global"] == glob_name]
                if not hits or hits[0]["verdict"] != "dangerous":
                    errs.append("JSON lacks %s as dangerous" % glob_name)
                elif name != "truncated.pkl" and not name.endswith("truncated.pt") \
                        and not hits[0]["called"]:
                    errs.append("%s not marked called" % glob_name)
                if doc["verdict"] != "dangerous":
                    errs.append("verdict %r" % doc["verdict"])
                complete = "truncated" not in name
                if doc["complete"] is not complete:
                    errs.append("complete %r, want %r" % (doc["complete"], complete))
            self.check("scan hostile " + name, errs)

        # the odd sparse tensor is listed as unreadable, and scan sees past it
        rc, out, err = self.ckpt_run("ls", os.path.join(d, "after_sparse.pt"))
        self.check("ls lists after_sparse.pt's sparse tensor as unreadable",
                   [] if rc == 0 and b"unreadable: sparse" in out
                   else ["ls exit %r: %s %s" % (rc, short(out), short(err))])

        # functools.partial alone is only unknown; an unreadable file is 1
        benign = os.path.join(d, "partial.pkl")
        with open(benign, "wb") as f:
            f.write(P2 + glob_op("functools", "partial") + glob_op("builtins", "print")
                    + b"\x85R.")
        rc, doc, out, err = self.scan_json(benign)
        self.check("scan partial(print) is unknown, exit 0",
                   [] if rc == 0 and doc and doc["counts"]["dangerous"] == 0
                   and doc["counts"]["unknown"] == 2
                   else ["exit %r: %s" % (rc, short(out))])
        rc, _, _ = self.ckpt_run("scan", "--strict", benign)
        self.check("scan --strict partial(print) exit 3",
                   [] if rc == 3 else ["exit %r" % rc])
        garbage = os.path.join(d, "garbage.pt")
        with open(garbage, "wb") as f:
            f.write(b"hello, not a checkpoint\n")
        rc, out, err = self.ckpt_run("scan", garbage)
        lines = stderr_lines(err)
        self.check("scan unreadable file exit 1",
                   [] if rc == 1 and len(lines) == 1 and lines[0].startswith("ckpt: ")
                   else ["exit %r: %s" % (rc, short(err))])

    # -- verify -------------------------------------------------------------

    def test_verify(self):
        for path, exp in self.expectations():
            fx = os.path.basename(path)
            rc, out, err = self.ckpt_run("verify", path)
            lines = out.decode("utf-8", "replace").strip().splitlines()
            ok = rc == 0 and lines and lines[-1].startswith("ok: ") and not err.strip()
            self.check("verify " + fx, [] if ok else
                       ["exit %r: %s %s" % (rc, short(out), short(err))])
        flipdir = os.path.join(self.tmp, "flip")
        os.mkdir(flipdir)
        for path, exp in self.expectations():
            if exp["format"] not in ("zip", "torchscript"):
                continue
            fx = os.path.basename(path)
            with open(path, "rb") as f:
                data = f.read()
            with zipfile.ZipFile(path) as z:
                infos = [i for i in z.infolist()
                         if i.compress_type == zipfile.ZIP_STORED and i.file_size > 0]
            if len(infos) > 40:  # many_zip: data.pkl, version and a sample
                keep = [i for i in infos if not "/data/" in i.filename]
                rest = [i for i in infos if "/data/" in i.filename]
                infos = keep + rest[::max(1, len(rest) // 30)]
            errs = []
            for info in infos:
                lh = info.header_offset
                nlen, xlen = struct.unpack("<HH", data[lh + 26:lh + 30])
                start = lh + 30 + nlen + xlen
                for bit in sorted({0, info.file_size * 4, info.file_size * 8 - 1}):
                    b = bytearray(data)
                    b[start + bit // 8] ^= 1 << (bit % 8)
                    flipped = os.path.join(flipdir, "flipped.pt")
                    with open(flipped, "wb") as f:
                        f.write(b)
                    rc, out, err = self.ckpt_run("verify", flipped)
                    lines = stderr_lines(err)
                    if rc != 1 or len(lines) != 1 or info.filename not in lines[0] \
                            or not lines[0].startswith("ckpt: "):
                        errs.append("%s bit %d: exit %r: %s" % (info.filename, bit, rc,
                                                                 short(err)))
            self.check("verify flipped bits in %s (%d records)" % (fx, len(infos)), errs)

    # -- info ---------------------------------------------------------------

    def test_info(self):
        for path, exp in self.expectations():
            fx = os.path.basename(path)
            keyargs = ["--key", exp["key"]] if exp.get("key") is not None else []
            rc, out, err = self.ckpt_run("info", "--json", *keyargs, path)
            errs = []
            try:
                doc = json.loads(out.decode("utf-8"))
            except Exception:
                self.fail("info " + fx, "exit %r, not JSON: %s %s" % (rc, short(out), short(err)))
                continue
            want = 0
            for t in exp["tensors"]:
                n = 1
                for s in t["shape"]:
                    n *= s
                want += n
            if rc != 0:
                errs.append("exit %r: %s" % (rc, short(err)))
            if doc.get("parameters") != want:
                errs.append("parameters %r, want %r" % (doc.get("parameters"), want))
            if doc.get("tensors") != len(exp["tensors"]):
                errs.append("tensors %r, want %r" % (doc.get("tensors"), len(exp["tensors"])))
            if doc.get("format") != exp["format"]:
                errs.append("format %r, want %r" % (doc.get("format"), exp["format"]))
            if sum(d["parameters"] for d in doc.get("dtypes", [])) != want:
                errs.append("dtype parameters do not add up")
            if sum(t["nbytes"] for t in exp["tensors"]) != doc.get("bytes"):
                errs.append("bytes %r" % doc.get("bytes"))
            rc2, out2, err2 = self.ckpt_run("info", *keyargs, path)
            text = out2.decode("utf-8", "replace")
            grouped = "{:,}".format(want)
            if rc2 != 0 or ("parameters:  %s " % grouped) not in text:
                errs.append("text exit %r lacks 'parameters:  %s': %s"
                            % (rc2, grouped, short(out2)))
            self.check("info " + fx, errs)

    # -- extract ------------------------------------------------------------

    def parse_dir_lines(self, out):
        """'"name" -> path' lines -> [(name, path)]"""
        dec = json.JSONDecoder()
        pairs = []
        for line in out.decode("utf-8").splitlines():
            name, end = dec.raw_decode(line)
            if line[end:end + 4] != " -> ":
                raise ValueError("bad line %r" % line)
            pairs.append((name, line[end + 4:]))
        return pairs

    def numpy_check(self, files):
        """{path: [dtype.str, shape, sha256]} from numpy.load in the system
        python, or None."""
        if not self.numpy or not files:
            return None
        prog = ("import sys, json, hashlib, numpy\n"
                "out = {}\n"
                "for p in json.load(sys.stdin):\n"
                "    a = numpy.load(p, allow_pickle=False)\n"
                "    out[p] = [a.dtype.str, list(a.shape),"
                " hashlib.sha256(a.tobytes()).hexdigest(), a.flags['C_CONTIGUOUS']]\n"
                "json.dump(out, sys.stdout)\n")
        p = subprocess.run([SYSTEM_PYTHON, "-c", prog], input=json.dumps(files).encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=600)
        if p.returncode != 0:
            return {"$error": p.stderr.decode("utf-8", "replace")}
        return json.loads(p.stdout.decode("utf-8"))

    def test_extract(self):
        if not self.numpy:
            print("skipped: numpy.load checks (%s cannot import numpy)" % SYSTEM_PYTHON)
        n_fx = 0
        loads = []  # (fx, pairs, ets) for the one numpy.load run after the loop
        for path, exp in self.expectations():
            if exp.get("error"):
                continue
            fx = os.path.basename(path)
            keyargs = ["--key", exp["key"]] if exp.get("key") is not None else []
            d = os.path.join(self.tmp, "x%d" % n_fx)
            n_fx += 1
            rc, out, err = self.ckpt_run("extract", *keyargs, path, "-d", d)
            errs = []
            if rc != 0:
                self.fail("extract " + fx, "exit %r: %s" % (rc, short(err)))
                continue
            try:
                pairs = self.parse_dir_lines(out)
            except Exception as e:
                self.fail("extract " + fx, "stdout: %s (%s)" % (short(out), e))
                continue
            ets = exp["tensors"]
            if [p[0] for p in pairs] != [t["name"] for t in ets]:
                errs.append("names %r, want %r" % ([p[0] for p in pairs][:5],
                                                    [t["name"] for t in ets][:5]))
            files = sorted(os.listdir(d)) if os.path.isdir(d) else []
            if len(files) != len(ets):
                errs.append("%d files for %d tensors" % (len(files), len(ets)))
            for (name, p), t in zip(pairs, ets):
                if os.path.dirname(os.path.realpath(p)) != os.path.realpath(d):
                    errs.append("%r written outside DIR: %r" % (name, p))
                    continue
                base = os.path.basename(p)
                if base.startswith(".") or not base.endswith(".npy"):
                    errs.append("unsafe file name %r" % base)
                try:
                    with open(p, "rb") as f:
                        descr, shape, body = parse_npy(f.read())
                except Exception as e:
                    errs.append("%r: %s" % (name, e))
                    continue
                want_descr, extra = NPY[t["dtype"]]
                if descr != want_descr:
                    errs.append("%r descr %r, want %r" % (name, descr, want_descr))
                if shape != t["shape"] + extra:
                    errs.append("%r shape %r, want %r" % (name, shape, t["shape"] + extra))
                if hashlib.sha256(body).hexdigest() != t["sha256"]:
                    errs.append("%r data sha256 differs" % name)
            self.check("extract -d " + fx, errs)
            loads.append((fx, pairs, ets))

            # -o for the first tensor: the same bytes as under -d
            if ets:
                one = os.path.join(self.tmp, "one.npy")
                if os.path.exists(one):
                    os.unlink(one)  # extract never replaces a file without --force
                rc, out, err = self.ckpt_run("extract", *keyargs, path, ets[0]["name"],
                                             "-o", one)
                errs = []
                if rc != 0 or out:
                    errs.append("exit %r: %s %s" % (rc, short(out), short(err)))
                else:
                    with open(one, "rb") as a, open(pairs[0][1], "rb") as b:
                        if a.read() != b.read():
                            errs.append("-o differs from -d")
                self.check("extract -o " + fx, errs)

        # numpy.load of every file -d wrote, in one process of the system
        # python (importing numpy once per fixture cost 10 s of CPU); the
        # directories stay until then
        np_res = self.numpy_check([p for _, pairs, _ in loads for _, p in pairs])
        for fx, pairs, ets in loads:
            if np_res is None:
                break
            if not pairs:
                continue  # no file, nothing to load (as before: no check)
            errs = []
            if "$error" in np_res:
                errs.append("numpy.load failed: %s" % short(np_res["$error"]))
            else:
                for (name, p), t in zip(pairs, ets):
                    if p not in np_res:
                        errs.append("%r: numpy.load gave no answer for %r" % (name, p))
                        continue
                    dstr, shape, sha, contig = np_res[p]
                    want_descr, extra = NPY[t["dtype"]]
                    if dstr != want_descr:
                        errs.append("%r numpy dtype %r, want %r" % (name, dstr, want_descr))
                    if shape != t["shape"] + extra:
                        errs.append("%r numpy shape %r" % (name, shape))
                    if sha != t["sha256"]:
                        errs.append("%r numpy bytes sha256 differs from torch's" % name)
                    if not contig:
                        errs.append("%r not C order" % name)
            self.check("extract numpy.load " + fx, errs)
        for i in range(n_fx):
            shutil.rmtree(os.path.join(self.tmp, "x%d" % i), ignore_errors=True)

    def test_extract_names(self):
        """Hostile tensor names: nothing outside DIR, safe and unique names."""
        names = ["../evil", "/abs", "a/b", "a_b", "", ".hidden", "..", ".",
                 "x\ny\tz\x01", "A", "a", "a~2", "ok.weight", "\u00e9t\u00e9",
                 "dir/../../up", "L" * 300, "L" * 300 + "x"]
        work = os.path.join(self.tmp, "names")
        os.mkdir(work)
        src = os.path.join(work, "names.pt")
        write_zip(src, data_pkl(names), len(names))
        d = os.path.join(work, "out")
        rc, out, err = self.ckpt_run("extract", src, "-d", d)
        errs = []
        if rc != 0:
            self.fail("extract hostile names", "exit %r: %s" % (rc, short(err)))
            return
        pairs = self.parse_dir_lines(out)
        if [p[0] for p in pairs] != names:
            errs.append("names %r" % [p[0] for p in pairs])
        if sorted(os.listdir(work)) != ["names.pt", "out"]:
            errs.append("files outside DIR: %r" % sorted(os.listdir(work)))
        files = os.listdir(d)
        if len(files) != len(names):
            errs.append("%d files for %d tensors: %r" % (len(files), len(names), files))
        lower = [f.lower() for f in files]
        if len(set(lower)) != len(lower):
            errs.append("names collide ignoring case: %r" % files)
        for f in files:
            if f.startswith(".") or "/" in f or "\\" in f or \
                    any(ord(c) < 0x20 or ord(c) == 0x7f for c in f) or len(f.encode()) > 255:
                errs.append("unsafe name %r" % f)
        byname = dict(pairs)
        for want_name, want_file in (("", "_root.npy"), ("a/b", "a_b.npy"),
                                     ("a_b", "a_b~2.npy"), (".hidden", "_hidden.npy"),
                                     ("A", "A.npy"), ("ok.weight", "ok.weight.npy")):
            if os.path.basename(byname.get(want_name, "")) != want_file:
                errs.append("%r -> %r, want %r" % (want_name, byname.get(want_name), want_file))
        for i, n in enumerate(names):
            p = byname.get(n)
            if not p:
                continue
            try:
                with open(p, "rb") as f:
                    descr, shape, body = parse_npy(f.read())
                if descr != "<f4" or shape != [1] or body != struct.pack("<f", i + 0.5):
                    errs.append("%r holds %r %r %r" % (n, descr, shape, body))
            except Exception as e:
                errs.append("%r: %s" % (n, e))
        self.check("extract hostile names stay in DIR", errs)

    # -- usage ----------------------------------------------------------------

    def test_usage(self):
        for cmd in ("scan", "verify", "info", "extract"):
            rc, out, err = self.ckpt_run(cmd, "--help")
            self.check("%s --help" % cmd, [] if rc == 0 and out.startswith(b"Usage: ckpt " + cmd.encode())
                       and not err else ["exit %r: %s" % (rc, short(err))])
            rc, out, err = self.ckpt_run(cmd)
            self.check("%s without FILE is a usage error" % cmd,
                       [] if rc == 2 and not out else ["exit %r" % rc])
        some = sorted(glob.glob(os.path.join(self.fixtures, "*.pt")))[0]
        rc, _, _ = self.ckpt_run("extract", some, "-o", os.path.join(self.tmp, "x.npy"))
        self.check("extract -o without NAME is a usage error", [] if rc == 2 else ["exit %r" % rc])
        for cmd in ("scan", "verify", "info"):
            rc, out, err = self.ckpt_run(cmd, os.path.join(self.tmp, "no-such-file.pt"))
            lines = stderr_lines(err)
            self.check("%s missing file" % cmd,
                       [] if rc == 1 and len(lines) == 1 and lines[0].startswith("ckpt: ")
                       else ["exit %r: %s" % (rc, short(err))])

    def run_all(self):
        try:
            for t in (self.test_usage, self.test_scan_fixtures, self.test_scan_hostile,
                      self.test_verify, self.test_info, self.test_extract,
                      self.test_extract_names):
                try:
                    t()
                except Exception as e:  # a harness error is a failure, not a crash
                    import traceback
                    traceback.print_exc()
                    self.fail(t.__name__, "harness error: %r" % (e,))
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main():
    if len(sys.argv) != 3:
        print("usage: %s CKPT_BINARY FIXTURES_DIR" % sys.argv[0], file=sys.stderr)
        return 2
    r = Runner(os.path.abspath(sys.argv[1]), sys.argv[2])
    if not glob.glob(os.path.join(sys.argv[2], "*.expected.json")):
        r.fail(sys.argv[2], "no *.expected.json fixtures found")
    r.run_all()
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
