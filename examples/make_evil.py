#!/usr/bin/env python3
"""Write examples/evil.pkl: the pickle the README's `ckpt scan` tour flags.

The file is assembled opcode by opcode and is never unpickled here: loading it
with pickle.load or torch.load(weights_only=False) would run `echo pwned`
through posix.system.  `ckpt scan` only reads it.

    python3 examples/make_evil.py [OUT]      # default: examples/evil.pkl
"""
import os
import struct
import sys

PROTO2 = b"\x80\x02"
GLOBAL = b"c"          # GLOBAL 'module\nname\n'
MARK = b"("
BINUNICODE = b"X"      # 4-byte little-endian length, UTF-8 bytes
TUPLE = b"t"
REDUCE = b"R"
STOP = b"."


def text(s):
    b = s.encode("utf-8")
    return BINUNICODE + struct.pack("<I", len(b)) + b


payload = (PROTO2 + GLOBAL + b"posix\nsystem\n" + MARK + text("echo pwned") + TUPLE
           + REDUCE + STOP)

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "evil.pkl")
with open(out, "wb") as f:
    f.write(payload)
