#!/usr/bin/env python3
"""Check `ckpt convert` (checkpoint -> safetensors) against the fixtures.

    python3 tests/test_convert.py CKPT_BINARY FIXTURES_DIR
    python3 tests/test_convert.py --torch CKPT_BINARY FIXTURES_DIR

Standard library only.  For every F.expected.json in FIXTURES_DIR (schema:
see tests/test_fixtures.py) whose "error" is null and whose format is not
torchscript:

  * `CKPT convert [--key K] F OUT` must exit 0 with nothing on stderr; when
    the fixture has tensors safetensors has no dtype for (complex128,
    complex32, float8 fnuz/e8m0; complex64 is written as C64), that must instead exit 1 with one stderr line naming them and
    leave nothing in the output directory, and `--skip-unsupported` must
    succeed with a warning.
  * OUT is parsed here: u64 little-endian header length N, N bytes of JSON
    starting with '{' and padded with spaces so the data starts 8-aligned,
    "__metadata__" a str -> str map with "format": "pt" and
    "ckpt.source_format", data_offsets contiguous from 0 with no hole, in file
    order, ending at the end of the file.  Every tensor's dtype, shape and
    sha256 must equal the expected ones; the fixture's scalar "values" must be
    in the metadata as Python's str() of the value.
  * error paths: refusal of an existing OUT (and --force), TorchScript, a
    missing or truncated FILE, a write that fails half way (RLIMIT_FSIZE),
    usage errors: exit status, one "ckpt: " line, and no OUT or temporary file
    left behind.
  * with --torch, only this: a few conversions are loaded with
    torch.frombuffer and compared with torch.load of the source, by
    /usr/bin/python3 (Debian's python3-torch); without torch these checks
    are printed as skipped and the exit status is 77.

Prints one line per failure, then `N passed, M failed`; exits 1 on failure.
"""

import glob
import hashlib
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile

TIMEOUT = 120
TORCH_PYTHON = "/usr/bin/python3"

ST_DTYPE = {
    "float64": "F64", "float32": "F32", "float16": "F16", "bfloat16": "BF16",
    "int64": "I64", "int32": "I32", "int16": "I16", "int8": "I8", "uint8": "U8",
    "bool": "BOOL", "uint16": "U16", "uint32": "U32", "uint64": "U64",
    "float8_e4m3fn": "F8_E4M3", "float8_e5m2": "F8_E5M2", "complex64": "C64",
}
ST_SIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4,
           "I16": 2, "I8": 1, "U8": 1, "BOOL": 1, "U16": 2, "U32": 4, "U64": 8,
           "F8_E4M3": 1, "F8_E5M2": 1, "C64": 8}
MAX_HEADER = 100000000

# Fixtures also checked against torch.load when torch is there.
TORCH_FIXTURES = ("training_zip.pt", "views_legacy.pt", "tied_zip.pt",
                  "dtypes_legacy.pt", "params_zip.pt")


def run(argv, limit_fsize=None):
    def pre():
        if limit_fsize is not None:
            # SIGXFSZ keeps its default action: convert must cope with it
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_fsize, limit_fsize))
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT, preexec_fn=pre)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout after %ds" % TIMEOUT
    except OSError as e:
        return None, b"", str(e).encode()
    return p.returncode, p.stdout, p.stderr


def short(b, n=300):
    if isinstance(b, bytes):
        b = b.decode("utf-8", "replace")
    s = b.strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


def py_str(v):
    """Python's str() of a JSON scalar as the expected files hold it."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, float):
        return repr(v)
    return str(v)


def parse_safetensors(path):
    """(metadata, [(name, info)] in data order, data bytes) or raise ValueError."""
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        raise ValueError("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if n > MAX_HEADER or 8 + n > len(blob):
        raise ValueError("header length %d does not fit a %d-byte file" % (n, len(blob)))
    if (8 + n) % 8 != 0:
        raise ValueError("data starts at %d, not 8-aligned" % (8 + n))
    text = blob[8:8 + n]
    if not text.startswith(b"{"):
        raise ValueError("header does not start with '{'")
    stripped = text.rstrip(b" ")
    if not stripped.endswith(b"}"):
        raise ValueError("header padded with something other than spaces")
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=pairs_no_dups)
    except (UnicodeDecodeError, ValueError) as e:
        raise ValueError("header is not UTF-8 JSON: %s" % e)
    if not isinstance(header, dict):
        raise ValueError("header is not an object")
    meta = header.pop("__metadata__", None)
    if not isinstance(meta, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise ValueError("__metadata__ missing or not a str -> str map")
    data = blob[8 + n:]
    entries = []
    for name, info in header.items():
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise ValueError("tensor %r: bad entry %r" % (name, info))
        dt, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if dt not in ST_SIZE:
            raise ValueError("tensor %r: unknown dtype %r" % (name, dt))
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ValueError("tensor %r: bad shape %r" % (name, shape))
        if not (isinstance(offs, list) and len(offs) == 2 and all(isinstance(o, int) for o in offs)):
            raise ValueError("tensor %r: bad data_offsets %r" % (name, offs))
        numel = 1
        for d in shape:
            numel *= d
        if offs[1] - offs[0] != numel * ST_SIZE[dt]:
            raise ValueError("tensor %r: %d bytes for shape %r %s"
                             % (name, offs[1] - offs[0], shape, dt))
        entries.append((name, info))
    order = sorted(entries, key=lambda e: (e[1]["data_offsets"][0], e[1]["data_offsets"][1]))
    pos = 0
    for name, info in order:
        b, e = info["data_offsets"]
        if b != pos:
            raise ValueError("tensor %r starts at %d, expected %d (hole or overlap)" % (name, b, pos))
        pos = e
    if pos != len(data):
        raise ValueError("data section is %d bytes, tensors cover %d" % (len(data), pos))
    return meta, order, data


def pairs_no_dups(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


class Runner:
    def __init__(self, ckpt, fdir):
        self.ckpt = ckpt
        self.fdir = fdir
        self.passed = 0
        self.failed = 0
        self.skipped = 0
        self.tmp = tempfile.mkdtemp(prefix="ckpt-convert-test.")

    def fail(self, what, why):
        self.failed += 1
        print("FAIL %s: %s" % (what, why))
        sys.stdout.flush()

    def check(self, what, errs):
        if errs:
            self.fail(what, "; ".join(errs[:6]) + ("; ... %d more" % (len(errs) - 6)
                                                   if len(errs) > 6 else ""))
        else:
            self.passed += 1

    def skip(self, what, why):
        self.skipped += 1
        print("SKIP %s: %s" % (what, why))

    def fresh_dir(self, name):
        d = os.path.join(self.tmp, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    @staticmethod
    def one_error_line(err, errs, status, rc, want_rc=1):
        if rc != want_rc:
            errs.append("exit status %r, want %d (%s)" % (rc, want_rc, short(err)))
        lines = [l for l in err.decode("utf-8", "replace").splitlines() if l.strip()]
        if want_rc == 1:
            if len(lines) != 1:
                errs.append("stderr has %d lines, want 1: %s" % (len(lines), short(err)))
            elif not lines[0].startswith("ckpt: "):
                errs.append("stderr does not start with 'ckpt: ': %s" % short(err))
        return lines

    # ---- fixtures -----------------------------------------------------------

    def check_fixture(self, exp_path):
        path = exp_path[:-len(".expected.json")]
        fx = os.path.basename(path)
        with open(exp_path, encoding="utf-8") as f:
            exp = json.load(f)
        if exp.get("error"):
            return
        key = exp.get("key")
        keyargs = ["--key", key] if key is not None else []
        d = self.fresh_dir(fx)
        out = os.path.join(d, "out.safetensors")
        bad = [t for t in exp["tensors"] if t["dtype"] not in ST_DTYPE]
        args = []
        if bad:
            # refused without --skip-unsupported, naming the tensors
            rc, _, err = run([self.ckpt, "convert"] + keyargs + [path, out])
            errs = []
            lines = self.one_error_line(err, errs, "refusal", rc)
            text = " ".join(lines)
            want = "cannot convert %d tensor" % len(bad)
            if want not in text:
                errs.append("stderr lacks %r: %s" % (want, short(err)))
            for t in bad[:8]:
                if "%s (%s)" % (t["name"], t["dtype"]) not in text:
                    errs.append("stderr does not name %r (%s)" % (t["name"], t["dtype"]))
            if os.listdir(d):
                errs.append("left files behind: %r" % os.listdir(d))
            self.check("%s: refusal of %d unsupported tensors" % (fx, len(bad)), errs)
            args = ["--skip-unsupported"]

        rc, _, err = run([self.ckpt, "convert"] + args + keyargs + [path, out])
        errs = []
        if rc != 0:
            self.fail("%s: convert" % fx, "exit status %r: %s" % (rc, short(err)))
            return
        if bad:
            if b"warning" not in err or len(err.splitlines()) != 1:
                errs.append("want one warning line on stderr, got: %s" % short(err))
        elif err:
            errs.append("stderr not empty: %s" % short(err))
        leftovers = [n for n in os.listdir(d) if n != "out.safetensors"]
        if leftovers:
            errs.append("temporary files left: %r" % leftovers)
        try:
            meta, order, data = parse_safetensors(out)
        except ValueError as e:
            errs.append("invalid safetensors: %s" % e)
            self.check("%s: convert" % fx, errs)
            return
        errs += self.compare(exp, meta, order, data, key)
        self.check("%s: convert (%d tensors)" % (fx, len(order)), errs)

    def compare(self, exp, meta, order, data, key):
        errs = []
        if meta.get("format") != "pt":
            errs.append("__metadata__ format %r, want 'pt'" % meta.get("format"))
        if meta.get("ckpt.source_format") != exp["format"]:
            errs.append("ckpt.source_format %r, want %r"
                        % (meta.get("ckpt.source_format"), exp["format"]))
        want = [t for t in exp["tensors"] if t["dtype"] in ST_DTYPE]
        got_names = [n for n, _ in order]
        if got_names != [t["name"] for t in want]:
            errs.append("tensors (in data order) %r, want %r"
                        % (got_names[:5], [t["name"] for t in want][:5]))
            return errs
        for (name, info), t in zip(order, want):
            if info["dtype"] != ST_DTYPE[t["dtype"]]:
                errs.append("%r dtype %s, want %s" % (name, info["dtype"], ST_DTYPE[t["dtype"]]))
            if info["shape"] != t["shape"]:
                errs.append("%r shape %r, want %r" % (name, info["shape"], t["shape"]))
            b, e = info["data_offsets"]
            if e - b != t["nbytes"]:
                errs.append("%r has %d bytes, want %d" % (name, e - b, t["nbytes"]))
                continue
            h = hashlib.sha256(data[b:e]).hexdigest()
            if h != t["sha256"]:
                errs.append("%r sha256 %s, want %s" % (name, h[:16], t["sha256"][:16]))
        if key is None:
            for p, v in (exp.get("values") or {}).items():
                if v is None or isinstance(v, (list, dict)):
                    continue
                if p not in meta:
                    errs.append("metadata lacks %r" % p)
                elif meta[p] != py_str(v):
                    errs.append("metadata %r = %r, want %r" % (p, meta[p], py_str(v)))
        return errs

    # ---- error paths ----------------------------------------------------------

    def fixture(self, name):
        p = os.path.join(self.fdir, name)
        return p if os.path.exists(p) else None

    def check_errors(self):
        src = self.fixture("training_zip.pt") or self.fixture("params_zip.pt")
        if not src:
            self.fail("error paths", "no training_zip.pt or params_zip.pt fixture")
            return

        # an existing OUT is left alone without --force, replaced with it
        d = self.fresh_dir("exists")
        out = os.path.join(d, "out.safetensors")
        with open(out, "wb") as f:
            f.write(b"precious")
        rc, _, err = run([self.ckpt, "convert", src, out])
        errs = []
        lines = self.one_error_line(err, errs, "exists", rc)
        if lines and "exists" not in lines[0]:
            errs.append("message does not say it exists: %s" % short(err))
        with open(out, "rb") as f:
            if f.read() != b"precious":
                errs.append("existing OUT was changed")
        if sorted(os.listdir(d)) != ["out.safetensors"]:
            errs.append("files left: %r" % os.listdir(d))
        self.check("existing OUT refused without --force", errs)
        rc, _, err = run([self.ckpt, "convert", "--force", src, out])
        errs = []
        if rc != 0:
            errs.append("exit status %r: %s" % (rc, short(err)))
        else:
            try:
                parse_safetensors(out)
            except ValueError as e:
                errs.append("invalid output: %s" % e)
        if sorted(os.listdir(d)) != ["out.safetensors"]:
            errs.append("files left: %r" % os.listdir(d))
        self.check("--force replaces OUT", errs)

        # failures leave nothing behind
        cases = [("missing FILE", os.path.join(self.tmp, "no-such-file.pt"), None, "")]
        trunc = os.path.join(self.tmp, "truncated.pt")
        with open(src, "rb") as f:
            blob = f.read()
        with open(trunc, "wb") as f:
            f.write(blob[:len(blob) * 2 // 3])
        cases.append(("truncated FILE", trunc, None, ""))
        # a write that fails half way: the temporary file is already there
        big = self.biggest_fixture()
        if big:
            cases.append(("write failing half way (RLIMIT_FSIZE)", big[0],
                          max(4096, big[1] // 3), ""))
        for what, f, limit, sub in cases:
            d = self.fresh_dir("fail")
            out = os.path.join(d, "out.safetensors")
            rc, _, err = run([self.ckpt, "convert", f, out], limit_fsize=limit)
            errs = []
            lines = self.one_error_line(err, errs, what, rc)
            if sub and lines and sub not in lines[0].lower():
                errs.append("stderr lacks %r: %s" % (sub, short(err)))
            if os.listdir(d):
                errs.append("left files behind: %r" % os.listdir(d))
            self.check("failure leaves nothing: %s" % what, errs)

        # OUT in a directory that does not exist
        rc, _, err = run([self.ckpt, "convert", src, os.path.join(self.tmp, "nodir", "x")])
        errs = []
        self.one_error_line(err, errs, "no dir", rc)
        self.check("OUT in a missing directory", errs)

        # usage errors
        for argv in (["convert"], ["convert", src], ["convert", src, ""],
                     ["convert", "--bogus", src, "x"], ["convert", src, "a", "b"]):
            rc, out, err = run([self.ckpt] + argv)
            errs = []
            if rc != 2:
                errs.append("exit status %r, want 2 (%s)" % (rc, short(err)))
            if not err.startswith(b"ckpt: "):
                errs.append("stderr does not start with 'ckpt: ': %s" % short(err))
            self.check("usage error: %s" % " ".join(repr(a) for a in argv[1:]), errs)
        rc, out, err = run([self.ckpt, "convert", "--help"])
        self.check("convert --help", [] if rc == 0 and b"safetensors" in out
                   else ["exit status %r, stdout %s" % (rc, short(out))])

    def biggest_fixture(self):
        best = None
        for exp_path in glob.glob(os.path.join(self.fdir, "*.expected.json")):
            with open(exp_path, encoding="utf-8") as f:
                exp = json.load(f)
            if exp.get("error") or exp.get("format") == "torchscript" or exp.get("key"):
                continue
            if any(t["dtype"] not in ST_DTYPE for t in exp["tensors"]):
                continue
            size = sum(t["nbytes"] for t in exp["tensors"])
            if size >= 8192 and (best is None or size > best[1]):
                best = (exp_path[:-len(".expected.json")], size)
        return best

    # ---- torch ------------------------------------------------------------------

    def check_torch(self):
        """The TORCH_FIXTURES converted, then compared with torch.load in one
        process of TORCH_PYTHON (importing torch costs 2 s of CPU)."""
        names = [n for n in TORCH_FIXTURES if self.fixture(n)]
        if not os.path.exists(TORCH_PYTHON):
            for n in names:
                self.skip("torch comparison %s" % n, "no %s" % TORCH_PYTHON)
            return
        pairs = []
        for n in names:
            src = self.fixture(n)
            d = self.fresh_dir("torch-" + n)
            out = os.path.join(d, "out.safetensors")
            rc, _, err = run([self.ckpt, "convert", "--skip-unsupported", src, out])
            if rc != 0:
                self.fail("torch comparison %s" % n, "convert exit %r: %s" % (rc, short(err)))
                continue
            pairs.append((n, src, out))
        if not pairs:
            return
        rc, sout, serr = run([TORCH_PYTHON, "-c", TORCH_SCRIPT] +
                             [x for _, src, out in pairs for x in (src, out)])
        if rc == 77:
            for n, _, _ in pairs:
                self.skip("torch comparison %s" % n, "torch is not importable by %s" % TORCH_PYTHON)
            return
        answers = {}
        for line in sout.decode("utf-8", "replace").splitlines():
            src, _, rest = line.partition("\t")
            answers[src] = rest
        for n, src, _ in pairs:
            a = answers.get(src)
            if a is None:
                self.fail("torch comparison %s" % n, "no answer (exit %r): %s" % (rc, short(serr)))
            elif not a.startswith("ok\t"):
                self.fail("torch comparison %s" % n, short(a))
            else:
                self.passed += 1
                print("ok torch comparison %s: %s" % (n, a[3:]))


# argv: SRC OUT pairs; prints "SRC<TAB>ok<TAB>what" or "SRC<TAB>why" per pair;
# exit 77 without torch
TORCH_SCRIPT = r'''
import json, struct, sys
try:
    import torch
except ImportError:
    sys.exit(77)
DT = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
      "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
      "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool,
      "C64": torch.complex64}


def resolve(o, parts):
    """The object at a dotted name; keys may contain dots."""
    if not parts:
        return o
    if isinstance(o, dict):
        for k in range(len(parts), 0, -1):
            key = ".".join(parts[:k])
            for kk in ([key, int(key)] if key.lstrip("-").isdigit() else [key]):
                if kk in o:
                    r = resolve(o[kk], parts[k:])
                    if r is not None:
                        return r
        return None
    if isinstance(o, (list, tuple)) and parts[0].isdigit() and int(parts[0]) < len(o):
        return resolve(o[int(parts[0])], parts[1:])
    return None


class Differ(Exception):
    pass


def compare(src, out):
    blob = open(out, "rb").read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__")
    data = bytearray(blob[8 + n:])
    obj = torch.load(src, map_location="cpu")
    checked = 0
    for name, info in header.items():
        if info["dtype"] not in DT:
            continue
        want = resolve(obj, name.split(".")) if name else obj
        if not isinstance(want, torch.Tensor):
            raise Differ("no tensor %r in torch.load's result" % name)
        b, e = info["data_offsets"]
        dt = DT[info["dtype"]]
        if e > b:
            got = torch.frombuffer(data, dtype=dt, count=(e - b) // want.element_size(),
                                   offset=b).reshape(info["shape"])
        else:
            got = torch.empty(info["shape"], dtype=dt)
        if got.dtype != want.dtype or list(got.shape) != list(want.shape):
            raise Differ("%r: %s %s, torch.load has %s %s" % (
                name, got.dtype, list(got.shape), want.dtype, list(want.shape)))
        if not torch.equal(got, want.detach()) and not (
                got.is_floating_point() and torch.equal(got.isnan(), want.isnan())
                and torch.equal(got.nan_to_num(), want.detach().nan_to_num())):
            raise Differ("%r: values differ from torch.load" % name)
        checked += 1
    return "%d tensors equal to torch.load" % checked


for i in range(1, len(sys.argv) - 1, 2):
    src, out = sys.argv[i], sys.argv[i + 1]
    try:
        print("%s\tok\t%s" % (src, compare(src, out)))
    except Exception as e:  # Differ, or torch failing on the file
        print("%s\t%s" % (src, str(e).replace("\n", " ")))
'''


def main():
    args = sys.argv[1:]
    torch_only = args[:1] == ["--torch"]
    if torch_only:
        args = args[1:]
    if len(args) != 2:
        print("usage: %s [--torch] CKPT_BINARY FIXTURES_DIR" % sys.argv[0], file=sys.stderr)
        return 2
    ckpt, fdir = args
    r = Runner(ckpt, fdir)
    try:
        files = sorted(glob.glob(os.path.join(fdir, "*.expected.json")))
        if not files:
            r.fail(fdir, "no *.expected.json fixtures found")
        for f in [] if torch_only else files:
            try:
                r.check_fixture(f)
            except Exception as e:  # a broken expectation is a failure, not a crash
                r.fail(os.path.basename(f), "harness error: %r" % (e,))
        try:
            if torch_only:
                r.check_torch()
            else:
                r.check_errors()
        except Exception as e:
            r.fail("harness", "error: %r" % (e,))
    finally:
        shutil.rmtree(r.tmp, ignore_errors=True)
    if r.skipped:
        print("%d skipped" % r.skipped)
    print("%d passed, %d failed" % (r.passed, r.failed))
    if r.failed:
        return 1
    return 77 if r.skipped and not r.passed else 0


if __name__ == "__main__":
    sys.exit(main())
