#!/usr/bin/env python3
"""Differential test of the tensor kinds against the torch on this machine.

    /usr/bin/python3 tests/difftest_kinds.py CKPT_BINARY

Builds fresh quantized, sparse, meta (and with torch 2.x nested) objects and
numpy arrays with a random seed (tests/gen_kinds.py's objects()), saves them
in a temporary folder as ZIP and legacy files (numpy_p5 with pickle protocol
5), writes Python 2 pickles of numpy arrays byte by byte, records what
torch.load (pickle.loads, encoding='latin1', for those) of each gives, then
checks the ckpt CLI against it with tests/test_fixtures.py's checks (ls --json
fields, int_repr()/component bytes by sha256, unreadable tensors).  Exits 77
(skipped) when torch is missing.
"""
import os
import random
import shutil
import sys
import tempfile

try:
    import torch  # noqa: F401
except ImportError:
    print("skipped: no torch on this python")
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import gen_kinds  # noqa: E402
import test_fixtures  # noqa: E402


def main():
    if len(sys.argv) != 2:
        print("usage: %s CKPT_BINARY" % sys.argv[0], file=sys.stderr)
        return 2
    seed = int(os.environ.get("CKPT_DIFF_SEED", random.randrange(1 << 30)))
    print("seed %d (CKPT_DIFF_SEED repeats it)" % seed)
    tmp = tempfile.mkdtemp(prefix="ckpt_kinds_")
    try:
        objs = gen_kinds.objects(seed)
        for base, obj in objs.items():
            for zip_ in (True, False) if base not in gen_kinds.ZIP_ONLY else (True,):
                gen_kinds.save(tmp, base, obj, zip_=zip_)
        gen_kinds.save_pickled(tmp, seed)
        gen_kinds.save_qmodule(tmp, seed)
        gen_kinds.save_py2(tmp, seed)
        r = test_fixtures.Runner(sys.argv[1])
        for f in sorted(os.listdir(tmp)):
            if f.endswith(".expected.json"):
                r.check_fixture(os.path.join(tmp, f))
        print("%d passed, %d failed" % (r.passed, r.failed))
        return 1 if r.failed or not r.passed else 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
