#!/usr/bin/env python3
"""Check the ckpt CLI against the fixtures written by tests/gen_fixtures.py.

    python3 tests/test_fixtures.py CKPT_BINARY FIXTURES_DIR

Standard library only (no torch, no numpy).  For every F.expected.json in
FIXTURES_DIR:

  * `CKPT ls --json [--key K] F` must report the expected format, byteorder and
    tensor list (names in order, dtype, shape, stride, storage_offset, nbytes,
    and the same partition into storages: "storage" ids vs "storage_group").
  * for each tensor, `CKPT cat [--key K] F NAME` must print the elements
    row-major little-endian; their sha256 must match.  The root tensor's
    name is "" and is passed as an empty argument.  A file of more than
    CAT_EACH tensors (the 3,000-tensor many_* fixtures) is read in one
    process instead of one per tensor: `CKPT cat [--key K] --filter '*' F`
    writes every tensor in ls order, and each one's bytes (cut by the
    expected nbytes) must have its sha256; `cat F NAME` then runs for
    CAT_EACH of its names spread over the list (first and last included)
    as further checks.  (A process per tensor cost 2 minutes of CPU.)
  * if "error" is set: `ls` must exit 1, print nothing on stdout and one stderr
    line containing the substring (case-insensitive).
  * tensor kinds (fields present only for them): "qscheme", "scale",
    "zero_point", "axis", "scales", "zero_points" (quantized), "layout",
    "component", "size" (a sparse tensor's components) must equal ls's; a
    tensor with "readable": false must be listed with readable false, a
    "reason" containing the expected one and storage null, and its `cat`
    must fail (exit 1) saying it "cannot be read".
  * "values": `CKPT show --json F` is run once and each dotted path is looked
    up in its output (ints exact, floats with ==, bool/None/str exact).

Prints one line per failure, then `N passed, M failed`; exits 1 on failure.
A check is one of: a fixture's `ls`, one tensor's `cat` (by name, or its
bytes in the one `cat --filter '*'` of a big fixture), one fixture's `show`
values.
"""

import glob
import hashlib
import json
import os
import subprocess
import sys

TIMEOUT = 120
CAT_EACH = 64  # tensors of a fixture read by one `cat NAME` each; beyond, batched


def run(argv):
    try:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, b"", b"timeout after %ds" % TIMEOUT
    except OSError as e:
        return None, b"", str(e).encode()
    return p.returncode, p.stdout, p.stderr


def short(b, n=300):
    s = b.decode("utf-8", "replace").strip().replace("\n", " | ")
    return s if len(s) <= n else s[:n] + "..."


def lookup(obj, parts):
    """Resolve a dotted path; dict keys may themselves contain dots, so at a
    dict try the longest run of components that names a key."""
    if not parts:
        return True, obj
    if isinstance(obj, dict):
        for n in range(len(parts), 0, -1):
            k = ".".join(parts[:n])
            if k in obj:
                ok, v = lookup(obj[k], parts[n:])
                if ok:
                    return ok, v
        return False, None
    if isinstance(obj, list):
        p = parts[0]
        if p.isdigit() and int(p) < len(obj):
            return lookup(obj[int(p)], parts[1:])
        return False, None
    return False, None


def same_value(exp, act):
    if exp is None or isinstance(exp, (bool, str)):
        return type(act) is type(exp) and act == exp
    if isinstance(exp, int):
        return type(act) is int and act == exp
    if isinstance(exp, float):
        return type(act) in (int, float) and act == exp
    if isinstance(exp, list):
        return isinstance(act, list) and len(act) == len(exp) and \
            all(same_value(e, a) for e, a in zip(exp, act))
    if isinstance(exp, dict):
        return isinstance(act, dict) and set(act) == set(exp) and \
            all(same_value(exp[k], act[k]) for k in exp)
    return False


KIND_FIELDS = ("qscheme", "scale", "zero_point", "axis", "scales", "zero_points",
               "layout", "component", "size")


def kind_errors(et, gt):
    """The tensor-kind fields of one expected tensor against ls's."""
    errs = []
    n = et["name"]
    for field in KIND_FIELDS:
        if field in et and not same_value(et[field], gt.get(field)):
            errs.append("%r %s %r, want %r" % (n, field, gt.get(field), et[field]))
    if et.get("readable", True) is False:
        if gt.get("readable") is not False:
            errs.append("%r readable %r, want false" % (n, gt.get("readable")))
        if et.get("reason", "") not in (gt.get("reason") or ""):
            errs.append("%r reason %r lacks %r" % (n, gt.get("reason"), et.get("reason")))
        if gt.get("storage") is not None:
            errs.append("%r storage %r, want null" % (n, gt.get("storage")))
    elif "readable" in gt:
        errs.append("%r listed as unreadable: %r" % (n, gt.get("reason")))
    return errs


class Runner:
    def __init__(self, ckpt):
        self.ckpt = ckpt
        self.passed = 0
        self.failed = 0

    def fail(self, fixture, what):
        self.failed += 1
        print("FAIL %s: %s" % (fixture, what))
        sys.stdout.flush()

    def ok(self):
        self.passed += 1

    def check_fixture(self, exp_path):
        path = exp_path[:-len(".expected.json")]
        fx = os.path.basename(path)
        with open(exp_path, encoding="utf-8") as f:
            exp = json.load(f)
        key = exp.get("key")
        keyargs = ["--key", key] if key is not None else []

        rc, out, err = run([self.ckpt, "ls", "--json"] + keyargs + [path])

        if exp.get("error"):
            sub = exp["error"].lower()
            errs = []
            if rc != 1:
                errs.append("exit code %r, want 1" % rc)
            if out:
                errs.append("stdout not empty: %s" % short(out))
            text = err.decode("utf-8", "replace")
            if sub not in text.lower():
                errs.append("stderr lacks %r: %s" % (sub, short(err)))
            lines = [l for l in text.splitlines() if l.strip()]
            if len(lines) != 1:
                errs.append("stderr has %d lines, want 1" % len(lines))
            elif not lines[0].startswith("ckpt: "):
                errs.append("stderr does not start with 'ckpt: ': %s" % short(err))
            if errs:
                self.fail(fx, "ls (refusal): " + "; ".join(errs))
            else:
                self.ok()
            return

        if rc != 0:
            self.fail(fx, "ls exit code %r: %s" % (rc, short(err)))
            for t in exp["tensors"]:
                self.fail(fx, "cat %r skipped (ls failed)" % t["name"])
            if exp.get("values"):
                self.fail(fx, "show skipped (ls failed)")
            return
        try:
            got = json.loads(out.decode("utf-8"))
        except Exception as e:
            self.fail(fx, "ls --json output is not JSON (%s): %s" % (e, short(out)))
            return

        errs = []
        for field in ("format", "byteorder"):
            if got.get(field) != exp[field]:
                errs.append("%s %r, want %r" % (field, got.get(field), exp[field]))
        gts = got.get("tensors")
        if not isinstance(gts, list):
            errs.append("no tensors list")
            gts = []
        ets = exp["tensors"]
        gnames = [t.get("name") for t in gts]
        enames = [t["name"] for t in ets]
        if gnames != enames:
            missing = [n for n in enames if n not in gnames]
            extra = [n for n in gnames if n not in enames]
            msg = "names differ (got %d, want %d)" % (len(gnames), len(enames))
            if missing:
                msg += "; missing %r" % missing[:5]
            if extra:
                msg += "; unexpected %r" % extra[:5]
            if not missing and not extra:
                first = next(i for i, (a, b) in enumerate(zip(gnames, enames)) if a != b)
                msg += "; order differs at %d: %r vs %r" % (first, gnames[first], enames[first])
            errs.append(msg)
        else:
            e2g, g2e = {}, {}
            for et, gt in zip(ets, gts):
                n = et["name"]
                for field in ("dtype", "shape", "stride", "storage_offset", "nbytes"):
                    if gt.get(field) != et[field]:
                        errs.append("%r %s %r, want %r" % (n, field, gt.get(field), et[field]))
                errs += kind_errors(et, gt)
                if et.get("readable", True) is False or et.get("storage_group", 0) is None:
                    continue  # no storage to compare (no data; held in the pickle)
                sid = gt.get("storage")
                grp = et["storage_group"]
                if not isinstance(sid, int) or isinstance(sid, bool):
                    errs.append("%r storage %r is not an int" % (n, sid))
                    continue
                if e2g.setdefault(grp, sid) != sid or g2e.setdefault(sid, grp) != grp:
                    errs.append("%r storage sharing differs (storage %r, expected group %r)"
                                % (n, sid, grp))
        if errs:
            self.fail(fx, "ls: " + "; ".join(errs[:8]) +
                      ("; ... %d more" % (len(errs) - 8) if len(errs) > 8 else ""))
        else:
            self.ok()

        if len(ets) <= CAT_EACH or any(t.get("readable", True) is False for t in ets):
            for t in ets:
                self.check_cat(fx, path, keyargs, t)
        else:
            self.check_cat_all(fx, path, keyargs, ets)
            last = len(ets) - 1
            for i in sorted({k * last // (CAT_EACH - 1) for k in range(CAT_EACH)}):
                self.check_cat(fx, path, keyargs, ets[i])

        if exp.get("values"):
            self.check_values(fx, path, exp["values"])

    def check_cat(self, fx, path, keyargs, t):
        rc, out, err = run([self.ckpt, "cat"] + keyargs + [path, t["name"]])
        if t.get("readable", True) is False:
            if rc != 1 or out or b"cannot be read" not in err:
                self.fail(fx, "cat %r of an unreadable tensor: exit %r, %d bytes out, %s"
                          % (t["name"], rc, len(out), short(err)))
            else:
                self.ok()
            return
        if rc != 0:
            self.fail(fx, "cat %r exit code %r: %s" % (t["name"], rc, short(err)))
            return
        if len(out) != t["nbytes"]:
            self.fail(fx, "cat %r printed %d bytes, want %d" % (t["name"], len(out), t["nbytes"]))
            return
        h = hashlib.sha256(out).hexdigest()
        if h != t["sha256"]:
            self.fail(fx, "cat %r sha256 %s, want %s" % (t["name"], h, t["sha256"]))
            return
        self.ok()

    def check_cat_all(self, fx, path, keyargs, ets):
        """Every tensor's bytes from one `cat --filter '*'`: one check each."""
        rc, out, err = run([self.ckpt, "cat"] + keyargs + ["--filter", "*", path])
        if rc != 0:
            for t in ets:
                self.fail(fx, "cat --filter '*' exit code %r (%r not checked): %s"
                          % (rc, t["name"], short(err)))
            return
        total = sum(t["nbytes"] for t in ets)
        if len(out) != total:
            self.fail(fx, "cat --filter '*' printed %d bytes, want %d" % (len(out), total))
        at = 0
        for t in ets:
            h = hashlib.sha256(out[at:at + t["nbytes"]]).hexdigest()
            at += t["nbytes"]
            if h != t["sha256"]:
                self.fail(fx, "cat --filter '*': %r sha256 %s, want %s" % (t["name"], h, t["sha256"]))
            else:
                self.ok()

    def check_values(self, fx, path, values):
        rc, out, err = run([self.ckpt, "show", "--json", path])
        if rc != 0:
            self.fail(fx, "show exit code %r: %s" % (rc, short(err)))
            return
        try:
            doc = json.loads(out.decode("utf-8"))
        except Exception as e:
            self.fail(fx, "show --json output is not JSON (%s): %s" % (e, short(out)))
            return
        errs = []
        for p, v in values.items():
            found, act = lookup(doc, p.split("."))
            if not found:
                errs.append("%s missing" % p)
            elif not same_value(v, act):
                errs.append("%s = %s, want %s" % (p, json.dumps(act)[:80], json.dumps(v)[:80]))
        if errs:
            self.fail(fx, "show: " + "; ".join(errs[:8]) +
                      ("; ... %d more" % (len(errs) - 8) if len(errs) > 8 else ""))
        else:
            self.ok()


def main():
    if len(sys.argv) != 3:
        print("usage: %s CKPT_BINARY FIXTURES_DIR" % sys.argv[0], file=sys.stderr)
        return 2
    ckpt, fdir = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(os.path.join(fdir, "*.expected.json")))
    r = Runner(ckpt)
    if not files:
        r.fail(fdir, "no *.expected.json fixtures found")
    for f in files:
        try:
            r.check_fixture(f)
        except Exception as e:  # a broken expectation file is a failure, not a crash
            r.fail(os.path.basename(f), "harness error: %r" % (e,))
    print("%d passed, %d failed" % (r.passed, r.failed))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
