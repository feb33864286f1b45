#!/usr/bin/env python3
"""Generate the `ckpt scan` attack corpus (tests/scan/files/) and its
manifest (tests/scan/manifest.tsv).

Every attack file is assembled opcode by opcode from the bytes below; this
script never unpickles anything and never calls torch.load.  Each attack
calls one gadget (GLOBAL/STACK_GLOBAL + argument tuple + REDUCE) with a
harmless-looking argument; the technique's source is in the manifest.

The honest files are checked against pickle.dumps() of the real object
(pickling an honest object runs nothing), so they are what Python writes.

Usage: python3 tests/scan/gen_attacks.py   (rewrites files/ and manifest.tsv)
"""
import argparse
import collections
import datetime
import os
import pickle
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "files")

# sources, short names used in the manifest
ISSUE12 = "ckpt issue 12 group 1 (gadget list from picklescan/modelscan/weights_only advisories)"
PS = "picklescan _unsafe_globals, src/picklescan/scanner.py"
PS_104 = "picklescan GHSA-g38g-8gr9-h9xp/GHSA-vvpj-8cmc-gx39/GHSA-7wx9-6375-f5wh (CVE-2026-56315, fixed 1.0.4)"
PS_PIP = "CVE-2025-1716 (picklescan: pip.main)"
PS_ENSUREPIP = "GHSA-xp4f-hrf8-rxw7 (picklescan: ensurepip._run_pip)"
PS_TIMEIT = "GHSA-v7x6-rv5q-mhwc (picklescan: timeit.timeit)"
PS_IMPORTLIB = "picklescan issue #66 / PR #74 (importlib, marshal)"
MS = "modelscan PR #313 (unsafe globals database)"
CLASSIC = "pickle docs 'Restricting Globals' (os.system via __reduce__)"


def uni(s):
    """SHORT_BINUNICODE or BINUNICODE."""
    b = s.encode("utf-8")
    if len(b) < 256:
        return b"\x8c" + bytes([len(b)]) + b
    return b"X" + struct.pack("<I", len(b)) + b


def call_p2(module, name, args):
    """protocol 2: GLOBAL 'module\\nname\\n', args, TUPLE, REDUCE, STOP."""
    body = b"c" + module.encode() + b"\n" + name.encode() + b"\n"
    body += b"(" + b"".join(b"X" + struct.pack("<I", len(a.encode())) + a.encode() for a in args)
    body += b"tR."
    return b"\x80\x02" + body


def call_p4(module, name, args):
    """protocol 4: STACK_GLOBAL with memoized strings, args, REDUCE."""
    body = uni(module) + b"\x94" + uni(name) + b"\x94\x93\x94"
    body += b"(" + b"".join(uni(a) for a in args) + b"tR\x94."
    frame = b"\x95" + struct.pack("<Q", len(body))
    return b"\x80\x04" + frame + body


def call_p0(module, name, args):
    """protocol 0: GLOBAL, MARK, STRING args, TUPLE, REDUCE."""
    body = b"c" + module.encode() + b"\n" + name.encode() + b"\n("
    body += b"".join(b"S'" + a.encode() + b"'\n" for a in args)
    return body + b"tR."


# (file stem, module, name, args, encoder, source)
ATTACKS = [
    ("os_system_p0", "posix", "system", ["true"], call_p0, CLASSIC),
    ("os_system_p2", "os", "system", ["true"], call_p2, CLASSIC),
    ("subprocess_p4", "subprocess", "check_output", ["true"], call_p4, CLASSIC),
    ("builtins_eval", "builtins", "eval", ["1"], call_p2, PS),
    ("builtins_exec_p0", "__builtin__", "exec", ["pass"], call_p0, PS),
    ("osx_support_read_output", "_osx_support", "_read_output", ["true"], call_p2, PS_104),
    ("aix_support_read_cmd_output", "_aix_support", "_read_cmd_output", ["true"], call_p4, PS_104),
    ("uuid_get_command_stdout", "uuid", "_get_command_stdout", ["true"], call_p2, PS_104),
    ("pyrepl_pipe_pager", "_pyrepl.pager", "pipe_pager", ["x", "true"], call_p4, PS_104),
    ("imaplib_imap4_stream", "imaplib", "IMAP4_stream", ["true"], call_p2, PS_104),
    ("logging_filehandler", "logging", "FileHandler", ["/tmp/ckpt-x"], call_p2, ISSUE12),
    ("logging_handlers_rotating", "logging.handlers", "RotatingFileHandler", ["/tmp/ckpt-x"], call_p4, ISSUE12),
    ("logging_handlers_socket", "logging.handlers", "SocketHandler", ["localhost"], call_p2, ISSUE12),
    ("script_helper_assert_python_ok", "test.support.script_helper", "assert_python_ok", ["-c", "pass"], call_p4, ISSUE12),
    ("script_helper_run_python_until_end", "test.support.script_helper", "run_python_until_end", ["-c", "pass"], call_p2, ISSUE12),
    ("lib2to3_grammar_loads", "lib2to3.pgen2.grammar", "Grammar.loads", ["x"], call_p4, PS),
    ("lib2to3_driver_load_grammar", "lib2to3.pgen2.driver", "load_grammar", ["x"], call_p2, ISSUE12),
    ("torch_collect_env_run", "torch.utils.collect_env", "run", ["true"], call_p2, PS),
    ("torch_collect_env_run_and_read_all", "torch.utils.collect_env", "run_and_read_all", ["x", "true"], call_p4, ISSUE12),
    ("torch_bottleneck_run_cprofile", "torch.utils.bottleneck.__main__", "run_cprofile", ["pass", "{}"], call_p2, PS),
    ("torch_execwrapper", "torch.jit.unsupported_tensor_ops", "execWrapper", ["pass"], call_p2, PS),
    ("torch_datapipes_basichandlers", "torch.utils.data.datapipes.utils.decoder", "basichandlers", ["x.pickle", "x"], call_p4, PS),
    ("torch_config_module_load_config", "torch.utils._config_module", "ConfigModule.load_config", ["x"], call_p4, PS),
    ("torch_dynamo_guardbuilder_get", "torch._dynamo.guards", "GuardBuilder.get", ["x"], call_p4, PS),
    ("torch_inductor_compile_file", "torch._inductor.codecache", "compile_file", ["x", "y"], call_p2, PS),
    ("torch_symbolic_shapes_guards", "torch.fx.experimental.symbolic_shapes", "ShapeEnv.evaluate_guards_expression", ["x"], call_p4, PS),
    ("torch_serialization_load", "torch.serialization", "load", ["x.pt"], call_p2, PS),
    ("torch_jit_load", "torch.jit", "load", ["x.pt"], call_p2, "stdlib/torch source: torch.jit.load runs TorchScript code"),
    ("numpy_f2py_myeval", "numpy.f2py.crackfortran", "myeval", ["1"], call_p2, PS),
    ("numpy_runstring", "numpy.testing._private.utils", "runstring", ["pass", "{}"], call_p2, PS),
    ("pip_main", "pip", "main", ["install"], call_p2, PS_PIP),
    ("ensurepip_run_pip", "ensurepip", "_run_pip", ["install"], call_p4, PS_ENSUREPIP),
    ("timeit_timeit", "timeit", "timeit", ["pass"], call_p2, PS_TIMEIT),
    ("importlib_import_module", "importlib", "import_module", ["os"], call_p4, PS_IMPORTLIB),
    ("marshal_loads", "marshal", "loads", ["x"], call_p2, PS_IMPORTLIB),
    ("pkgutil_resolve_name", "pkgutil", "resolve_name", ["os:system"], call_p4, PS_104),
    ("pydoc_locate", "pydoc", "locate", ["os.system"], call_p2, PS),
    ("pydoc_pipepager", "pydoc", "pipepager", ["x", "true"], call_p2, PS),
    ("code_runcode", "code", "InteractiveInterpreter.runcode", ["x"], call_p4, PS),
    ("cprofile_run", "cProfile", "run", ["pass"], call_p2, PS),
    ("profile_run", "profile", "Profile.run", ["pass"], call_p4, PS),
    ("trace_run", "trace", "Trace.run", ["pass"], call_p4, PS),
    ("doctest_debug_script", "doctest", "debug_script", ["pass"], call_p2, PS),
    ("bdb_run", "bdb", "Bdb.run", ["pass"], call_p4, PS),
    ("pdb_run", "pdb", "run", ["pass"], call_p2, PS),
    ("idlelib_runcode", "idlelib.pyshell", "ModifiedInterpreter.runcode", ["x"], call_p4, PS),
    ("idlelib_calltip_get_entity", "idlelib.calltip", "get_entity", ["x"], call_p2, PS),
    ("distutils_write_file", "distutils.file_util", "write_file", ["/tmp/ckpt-x", "x"], call_p2, PS),
    ("venv_create", "venv", "create", ["/tmp/ckpt-x"], call_p2, PS),
    ("webbrowser_open", "webbrowser", "open", ["http://localhost/"], call_p2, PS),
    ("ssl_get_server_certificate", "ssl", "get_server_certificate", ["localhost"], call_p2, PS),
    ("requests_get", "requests.api", "get", ["http://localhost/"], call_p2, PS),
    ("aiohttp_request", "aiohttp.client", "request", ["GET", "http://localhost/"], call_p2, PS),
    ("asyncio_subprocess", "asyncio.unix_events", "_UnixSubprocessTransport._start", ["x"], call_p4, PS),
    ("shutil_rmtree", "shutil", "rmtree", ["/tmp/ckpt-x"], call_p2, PS),
    ("pty_spawn", "pty", "spawn", ["true"], call_p2, PS),
    ("runpy_run_path", "runpy", "run_path", ["x.py"], call_p2, PS),
    ("ctypes_cdll", "ctypes", "CDLL", ["libc.so.6"], call_p2, PS),
    ("pickle_loads", "pickle", "loads", ["x"], call_p2, PS),
    ("operator_attrgetter", "operator", "attrgetter", ["system"], call_p2, PS),
    ("operator_itemgetter", "operator", "itemgetter", ["x"], call_p2, PS),
    ("zipfile_zipfile_write", "zipfile", "ZipFile", ["/tmp/ckpt-x", "w"], call_p2, "stdlib: ZipFile(path, 'w') truncates a file"),
    ("pathlib_write_text", "pathlib", "Path.write_text", ["/tmp/ckpt-x", "x"], call_p4, "stdlib: Path.write_text writes a file"),
    ("site_addsitedir", "site", "addsitedir", ["/tmp"], call_p2, "stdlib: site.addsitedir execs .pth import lines"),
    ("copyreg_add_extension", "copyreg", "add_extension", ["os", "system", "7"], call_p2, "ckpt issue 12 group 3 (EXT opcodes via copyreg)"),
    ("unittest_main_import", "unittest", "main", ["os"], call_p2, "stdlib: unittest.main imports the module it is told"),
    ("pstats_marshal_load", "pstats", "Stats", ["/tmp/ckpt-x"], call_p4, "stdlib: pstats.Stats(filename) = marshal.load"),
    ("gc_get_objects", "gc", "get_objects", [], call_p2, "stdlib: gc.get_objects reaches any object"),
    ("torch_show_pickle", "torch.utils.show_pickle", "main", ["x"], call_p2, "torch: show_pickle unpickles the file"),
    ("torch_lite_load", "torch._C", "_load_for_lite_interpreter", ["x.ptl"], call_p4, "torch: loads a TorchScript lite module"),
    ("dotted_os_via_torch", "torch", "serialization.os.system", ["true"], call_p4, "protocol 4 dotted qualname resolved with getattr"),
]


def honest():
    """(stem, bytes, source) for honest pickles, assembled by hand and
    checked against pickle.dumps of the real object."""
    out = []
    # OrderedDict state dict skeleton (protocol 2): OrderedDict() REDUCE,
    # then SETITEMS of two plain values
    od = (b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(X\x06\x00\x00\x00weightq\x02K\x01"
          b"X\x04\x00\x00\x00biasq\x03K\x02u.")
    out.append(("honest_ordereddict_p2", od,
                collections.OrderedDict([("weight", 1), ("bias", 2)]), 2))
    # argparse.Namespace config (protocol 2): NEWOBJ + BUILD of a dict
    ns = (b"\x80\x02cargparse\nNamespace\nq\x00)\x81q\x01}q\x02(X\x02\x00\x00\x00lrq\x03G?\x84z\xe1G\xae\x14{"
          b"X\x06\x00\x00\x00epochsq\x04K\nub.")
    out.append(("honest_namespace_p2", ns, argparse.Namespace(lr=0.01, epochs=10), 2))
    # collections.defaultdict(list) with one key (protocol 4)
    body = (b"\x8c\x0bcollections\x94\x8c\x0bdefaultdict\x94\x93\x94\x8c\x08builtins\x94\x8c\x04list\x94\x93\x94"
            b"\x85\x94R\x94\x8c\x01a\x94]\x94K\x01as.")
    dd = b"\x80\x04\x95" + struct.pack("<Q", len(body)) + body
    out.append(("honest_defaultdict_p4", dd, collections.defaultdict(list, {"a": [1]}), 4))
    # datetime.datetime (protocol 2): REDUCE of the 10-byte state
    dt = (b"\x80\x02cdatetime\ndatetime\nq\x00c_codecs\nencode\nq\x01X\x0b\x00\x00\x00\x07\xc3\xa9\x0c\x01\x02\x03\x04"
          b"\x00\x00\x05q\x02X\x06\x00\x00\x00latin1q\x03\x86q\x04Rq\x05\x85q\x06Rq\x07.")
    out.append(("honest_datetime_p2", dt, datetime.datetime(2025, 12, 1, 2, 3, 4, 5), 2))
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))
    rows = ["# file\texpected_exit\tdangerous_global\tsource"]
    for stem, mod, name, args, enc, src in ATTACKS:
        fn = stem + ".pkl"
        with open(os.path.join(OUT, fn), "wb") as f:
            f.write(enc(mod, name, args))
        # the reader maps Python 2 names the way the unpickler does
        shown = {"__builtin__": "builtins", "copy_reg": "copyreg"}.get(mod, mod)
        rows.append(f"{fn}\t3\t{shown}.{name}\t{src}")
    bad = 0
    for stem, data, obj, proto in honest():
        real = pickle.dumps(obj, protocol=proto)
        if real != data:
            print(f"{stem}: hand-built bytes differ from pickle.dumps:\n  {data!r}\n  {real!r}",
                  file=sys.stderr)
            bad += 1
        fn = stem + ".pkl"
        with open(os.path.join(OUT, fn), "wb") as f:
            f.write(data)
        rows.append(f"{fn}\t0\t-\thonest: pickle.dumps({type(obj).__module__}.{type(obj).__name__}, protocol={proto})")
    with open(os.path.join(HERE, "manifest.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
