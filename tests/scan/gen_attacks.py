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
import gzip
import io
import os
import pickle
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib

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
FK_302 = "fickling GHSA-6ggj-6f2q-f7mx / PR #302 (subinterpreters run source strings)"
MS_89 = "modelscan issue #89 (globals reached through 'safe' modules)"
PS_105 = "picklescan 1.0.5 _unsafe_globals (PRs #50/#53/#54/#65: whole asyncio, _osx_support, _aix_support, uuid modules)"
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
    ("asyncio_base_events_subprocess_shell", "asyncio.base_events", "BaseEventLoop.subprocess_shell", ["true"], call_p4, PS_105),
    ("asyncio_tasks_gather", "asyncio.tasks", "gather", [], call_p2, PS_105),
    ("osx_support_default_sysroot", "_osx_support", "_default_sysroot", ["true;"], call_p2, PS_105),
    ("uuid_find_mac_near_keyword", "uuid", "_find_mac_near_keyword", ["true", "", "", ""], call_p4, PS_105),
    ("interpreters_run_string", "_xxsubinterpreters", "run_string", ["0", "pass"], call_p2, FK_302),
    ("interpreters_create", "_interpreters", "create", [], call_p4, FK_302),
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


# ---- group 4: archives that are not torch.save files --------------------
# Python's zipfile/tarfile/gzip write the containers (fixed dates, so the
# bytes do not change between runs); the pickles inside are the bytes above.
ISSUE12_G4 = "ckpt issue 12 group 4 (containers: a generic ZIP/TAR/7z holding pickles)"
EVIL = call_p2("os", "system", ["true"])
OD = (b"\x80\x02ccollections\nOrderedDict\nq\x00)Rq\x01(X\x06\x00\x00\x00weightq\x02K\x01"
      b"X\x04\x00\x00\x00biasq\x03K\x02u.")


def zip_of(members):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data, method in members:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            z.writestr(info, data)
    return buf.getvalue()


def tar_of(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 0
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def gz(data):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as g:
        g.write(data)
    return buf.getvalue()


def seven_zip_store(name, data, windows_attrib=None):
    """A 7z archive of one file, stored (method Copy), field by field as
    7zFormat.txt describes it; every number here is below 0x80, so each is
    one byte.  p7zip's `7z a -m0=Copy -mtm=off -mtc=off -mta=off` writes
    the same bytes (checked when it is installed)."""
    assert len(data) < 0x80
    fname = name.encode("utf-16-le") + b"\0\0"
    header = bytes([
        0x01,                    # Header
        0x04,                    # MainStreamsInfo
        0x06, 0x00, 0x01,        # PackInfo: pack pos 0, 1 stream
        0x09, len(data), 0x00,   # its size; End
        0x07, 0x0B, 0x01, 0x00,  # UnPackInfo: Folder, 1 folder, not external
        0x01, 0x01, 0x00,        # 1 coder: simple, 1-byte id 00 (Copy)
        0x0C, len(data), 0x00,   # CodersUnPackSize; End
        0x08, 0x0A, 0x01,        # SubStreamsInfo: CRC, all defined
    ]) + struct.pack("<I", zlib.crc32(data)) + bytes([
        0x00, 0x00,              # End (substreams), End (streams)
        0x05, 0x01,              # FilesInfo: 1 file
        0x11, len(fname) + 1, 0x00,  # Name, size, not external
    ]) + fname
    if windows_attrib is not None:  # Attributes: all defined, not external
        header += bytes([0x15, 6, 0x01, 0x00]) + struct.pack("<I", windows_attrib)
    header += bytes([0x00, 0x00])  # End (files), End (header)
    start = struct.pack("<QQI", len(data), len(header), zlib.crc32(header))
    return b"7z\xbc\xaf\x27\x1c\x00\x04" + struct.pack("<I", zlib.crc32(start)) + start + data + header


def torch_zip_of(pkl):
    """A torch.save-shaped ZIP (root folder, data.pkl, version)."""
    return zip_of([("archive/data.pkl", pkl, zipfile.ZIP_STORED),
                   ("archive/version", b"3\n", zipfile.ZIP_STORED)])


ISSUE12_G2 = "ckpt issue 12 group 2 (pickles a load never reads)"
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")


def legacy_with_trailing_pickle():
    """torch.save(_use_new_zipfile_serialization=False) of a small state dict
    (saving an honest object runs nothing), then a pickle after the last
    storage: torch.load stops before it, a second load call would not."""
    try:
        import torch
    except ImportError:
        with open(os.path.join(OUT, "legacy_trailing_pickle.pt"), "rb") as f:  # keep the committed one
            return f.read()
    buf = io.BytesIO()
    torch.save(collections.OrderedDict(w=torch.zeros(2)), buf, _use_new_zipfile_serialization=False)
    return buf.getvalue() + EVIL


def tar_with_second_pickle():
    """tests/fixtures/views_tar.pt (torch.save before 0.1.10) with a second
    pickle after the STOP of its 'pickle' member."""
    src = tarfile.open(os.path.join(FIXTURES, "views_tar.pt"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=src.format) as out:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None
            if m.name == "pickle":
                data += EVIL
                m.size = len(data)
            out.addfile(m, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


ISSUE12_BYTES = "ckpt issue 12 group 2 (pickles inside bytes values that a loader would unpickle)"
ISSUE33_UNLOADED = "ckpt issue 33 (a pickle kept as bytes is a threat only when the file hands it to a loader)"


def binbytes(b):
    """SHORT_BINBYTES or BINBYTES (protocol 3+)."""
    return (b"C" + bytes([len(b)]) + b) if len(b) < 256 else (b"B" + struct.pack("<I", len(b)) + b)


def dict_blob(blob):
    """{'blob': blob} (protocol 3), as pickle.dumps writes it."""
    return b"\x80\x03}q\x00X\x04\x00\x00\x00blobq\x01" + binbytes(blob) + b"q\x02s."


def modelscan_89():
    """The two proofs of concept of modelscan issue #89, as written there
    (protocol 5 header, GLOBAL/UNICODE opcodes)."""
    p1 = (b"\x80\x05cbuiltins\ndict.get\ncnumpy\n__builtins__\nVexec\n\x86R"
          b"V__import__('os').system('true')\n\x85R.")
    p2 = (b"\x80\x05cnumpy\nprod\nNcnumpy\ncore._internal.sys.modules\n\x86b0"
          b"cnumpy\nprod.os.system\nVtrue\n\x85R.")
    return [
        ("modelscan_numpy_builtins.pkl", p1, 3, "numpy.__builtins__", MS_89 + ": numpy.__builtins__ + dict.get"),
        ("modelscan_numpy_sys_modules.pkl", p2, 3, "numpy.core._internal.sys.modules",
         MS_89 + ": BUILD on numpy.prod from numpy.core._internal.sys.modules"),
    ]


def in_bytes():
    """(file name, bytes, expected exit, global, source) for pickles in bytes."""
    p0 = call_p0("posix", "system", ["true"])
    return [
        # issue 33: a pickle kept as bytes that nothing unpickles is listed
        # (unloaded), but loading the file does not run it: exit 0
        ("bytes_blob_pickle.pkl", dict_blob(EVIL), 0, "os.system",
         ISSUE33_UNLOADED + ": bytes beginning with PROTO, no loader named (a later pickle.loads)"),
        ("bytes_pickle_loads.pkl", b"\x80\x03cpickle\nloads\n" + binbytes(EVIL) + b"\x85R.", 3,
         "os.system", ISSUE12_BYTES + ": pickle.loads(bytes)"),
        ("bytes_pickle_loads_p0_codecs.pkl",
         b"\x80\x02c_pickle\nloads\nc_codecs\nencode\nX" + struct.pack("<I", len(p0)) + p0 +
         b"X\x06\x00\x00\x00latin1\x86R\x85R.", 3, "posix.system",
         ISSUE12_BYTES + ": _pickle.loads of a protocol-0 pickle made by _codecs.encode"),
        ("bytes_torch_load_bytesio.pkl",
         b"\x80\x03ctorch\nload\nc_io\nBytesIO\n" + binbytes(torch_zip_of(EVIL)) + b"\x85R\x85R.", 3,
         "os.system", ISSUE12_BYTES + ": torch.load(io.BytesIO(a torch ZIP))"),
        ("bytes_storage_load_from_bytes.pt",
         torch_zip_of(b"\x80\x02ctorch.storage\n_load_from_bytes\n" + binbytes(torch_zip_of(EVIL)) + b"\x85R."),
         3, "os.system", ISSUE12_BYTES + ": torch.storage._load_from_bytes in data.pkl"),
        ("bytes_blob_twice.pkl", dict_blob(dict_blob(EVIL)), 0, "os.system",
         ISSUE33_UNLOADED + ": a pickle in bytes in a pickle in bytes, neither loaded"),
        ("bytes_loads_inside_blob.pkl", dict_blob(b"\x80\x03cpickle\nloads\n" + binbytes(EVIL) + b"\x85R."),
         0, "os.system", ISSUE33_UNLOADED + ": pickle.loads inside bytes that nothing loads"),
        ("bytes_blob_to_unknown_class.pkl",
         b"\x80\x03cmymodel\nConfig\n" + binbytes(EVIL) + b"\x85R.", 0, "os.system",
         ISSUE33_UNLOADED + ": bytes beginning with PROTO given to a class that is no loader"),
        ("bytes_blob_then_loads.pkl",
         b"\x80\x03(" + binbytes(EVIL) + b"q\x00cpickle\nloads\nh\x00\x85Rt.", 3, "os.system",
         ISSUE33_UNLOADED + ": the same bytes kept, then handed to pickle.loads through the memo"),
        ("honest_bytes_blob_pickle.pkl", dict_blob(OD), 0, "-",
         "honest: {'blob': pickle.dumps(OrderedDict, protocol=2)} (pickle.dumps, protocol=3)"),
    ]


PY2 = ("Python 2 names: CPython's unpickler renames a global through Lib/_compat_pickle.py "
       "(NAME_MAPPING, then IMPORT_MAPPING) while its protocol is below 3 (pickle.py find_class)")


def stack_global_p0(module, name, args):
    """No PROTO (protocol 0 for the unpickler), yet STACK_GLOBAL: opcodes
    are not tied to the protocol, the renaming is.  BINUNICODE strings
    (what pickle writes for long ones) make the first byte 'X'."""
    def binuni(s):
        return b"X" + struct.pack("<I", len(s.encode())) + s.encode()
    return binuni(module) + binuni(name) + b"\x93(" + b"".join(binuni(a) for a in args) + b"tR."


def py2_names():
    """(file name, bytes, expected exit, global as CPython resolves it, source).
    Expected names are written out by hand from _compat_pickle.py."""
    return [
        ("py2_test_support_p2.pkl", call_p2("test.test_support", "run_in_subinterp", ["pass"]), 3,
         "test.support.run_in_subinterp", PY2 + ": IMPORT_MAPPING test.test_support"),
        ("py2_stringio_open_p0_stack_global.pkl", stack_global_p0("StringIO", "open", ["/tmp/ckpt-x", "w"]),
         3, "io.open", PY2 + ": no PROTO is protocol 0, STACK_GLOBAL renamed too"),
        ("py2_anydbm_open_p2.pkl", call_p2("anydbm", "open", ["/tmp/ckpt-x", "n"]), 3, "dbm.open",
         PY2 + ": IMPORT_MAPPING anydbm"),
        ("py2_dumbdbm_open_p2.pkl", call_p2("dumbdbm", "open", ["/tmp/ckpt-x", "n"]), 3, "dbm.dumb.open",
         PY2 + ": IMPORT_MAPPING dumbdbm"),
        ("py2_tkinter_tcl_p0.pkl", call_p0("Tkinter", "Tcl", []), 3, "tkinter.Tcl",
         PY2 + ": IMPORT_MAPPING Tkinter (Tcl().eval runs Tcl)"),
        ("py2_cookielib_p2.pkl", call_p2("cookielib", "MozillaCookieJar", ["/tmp/ckpt-x"]), 3,
         "http.cookiejar.MozillaCookieJar", PY2 + ": IMPORT_MAPPING cookielib"),
        ("py2_elementtree_parse_p2.pkl", call_p2("_elementtree", "parse", ["/tmp/ckpt-x"]), 3,
         "xml.etree.ElementTree.parse", PY2 + ": IMPORT_MAPPING _elementtree"),
        ("py2_whichdb_p2.pkl", call_p2("whichdb", "whichdb", ["/tmp/ckpt-x"]), 3, "dbm.whichdb",
         PY2 + ": NAME_MAPPING (whichdb, whichdb)"),
        ("py2_intern_p2.pkl", call_p2("__builtin__", "intern", ["x"]), 3, "sys.intern",
         PY2 + ": NAME_MAPPING (__builtin__, intern)"),
        ("py2_proto4_then_2.pkl", b"\x80\x04" + call_p2("Tkinter", "Tcl", []), 3, "tkinter.Tcl",
         PY2 + ": Unpickler.proto is the last PROTO's (4, then 2)"),
        # no renaming: these name nothing Python 3 can import
        ("py2_unmapped_proto3.pkl", b"\x80\x03" + call_p2("anydbm", "open", ["/tmp/ckpt-x", "n"])[2:], 0,
         "anydbm.open", PY2 + ": protocol 3, nothing renamed (ImportError)"),
        ("py2_unmapped_proto2_then_3.pkl", b"\x80\x02\x80\x03" + call_p2("Tkinter", "Tcl", [])[2:], 0,
         "Tkinter.Tcl", PY2 + ": the last PROTO is 3, nothing renamed"),
        ("py2_unmapped_exceptions_eval.pkl", call_p2("exceptions", "eval", ["1"]), 0, "exceptions.eval",
         PY2 + ": only NAME_MAPPING's listed exceptions.* names move; exceptions is no module of IMPORT_MAPPING"),
    ]


FIRST = ("torch.load of a file that is not a ZIP or TAR unpickles it from its first byte "
         "(serialization.py _legacy_load: pickle_module.load(f)), so a pickle may begin with any "
         "opcode that needs nothing on the stack (pickletools: stack_before == [])")


def first_opcodes():
    """A call of os.system after a first opcode the reader did not take for a
    pickle's start (it refused these files as 'not a checkpoint', so scan
    said nothing): the value it pushes is POPped, then the classic call."""
    starts = [
        ("binint", b"J\x01\x00\x00\x00"), ("binint1", b"K\x01"), ("binint2", b"M\x01\x00"),
        ("long1", b"\x8a\x01\x01"), ("long4", b"\x8b\x01\x00\x00\x00\x01"),
        ("binbytes", b"B\x01\x00\x00\x00x"), ("short_binbytes", b"C\x01x"),
        ("binbytes8", b"\x8e" + struct.pack("<Q", 1) + b"x"),
        ("bytearray8", b"\x96" + struct.pack("<Q", 1) + b"x"),
        ("newtrue", b"\x88"), ("newfalse", b"\x89"),
        ("short_binunicode", b"\x8c\x01x"), ("binunicode8", b"\x8d" + struct.pack("<Q", 1) + b"x"),
        ("binfloat", b"G" + struct.pack(">d", 1.5)), ("empty_set", b"\x8f"),
    ]
    out = []
    for stem, op in starts:
        out.append((f"first_{stem}.pkl", op + b"0" + call_p2("os", "system", ["echo pwned"]), 3,
                    "os.system", FIRST))
    body = b"K\x01" + b"0" + call_p2("os", "system", ["echo pwned"])
    out.append(("first_frame.pkl", b"\x95" + struct.pack("<Q", len(body)) + body, 3, "os.system",
                FIRST + ": FRAME first"))
    return out


MEMMAP = ("numpy source (numpy/core/memmap.py): memmap(filename, dtype, mode='r+', ...) opens "
          "'w+' as open(f, 'w+b') (creates/truncates), 'r+' (the default) as 'r+b' and grows the file; "
          "'r'/'c' open 'rb'")


def memmap_files():
    """numpy.memmap calls by mode, and an honest pickled memmap (which names
    the class for _reconstruct and never calls it)."""
    path = "/tmp/ckpt-x"
    partial = (b"\x80\x02cfunctools\npartial\ncnumpy\nmemmap\n\x85R"
               b"(X" + struct.pack("<I", len(path)) + path.encode() + b"tR.")
    out = [
        ("numpy_memmap_w_plus.pkl", call_p2("numpy", "memmap", [path, "uint8", "w+"]), 3, "numpy.memmap",
         MEMMAP + ": mode 'w+' creates or truncates the file"),
        ("numpy_memmap_default_mode.pkl", call_p2("numpy", "memmap", [path]), 3, "numpy.memmap",
         MEMMAP + ": no mode is 'r+', which grows and writes the file"),
        ("numpy_memmap_core_write_p4.pkl", call_p4("numpy.core.memmap", "memmap", [path, "uint8", "write"]), 3,
         "numpy.core.memmap.memmap", MEMMAP + ": mode 'write' is 'w+'"),
        ("numpy_memmap_partial.pkl", partial, 3, "numpy.memmap",
         MEMMAP + ": functools.partial(numpy.memmap)(path): called with arguments a scan does not see"),
        ("numpy_memmap_readonly.pkl", call_p2("numpy", "memmap", [path, "uint8", "r"]), 0, "numpy.memmap",
         MEMMAP + ": mode 'r' maps the file read-only and writes nothing"),
    ]
    fn = "honest_numpy_memmap.pkl"
    try:
        import numpy
    except ImportError:
        with open(os.path.join(OUT, fn), "rb") as f:  # keep the committed one
            return out + [(fn, f.read(), 0, "-", "honest: pickle.dumps(numpy.memmap(f, mode='r'), protocol=2)")]
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "m.bin")
        with open(p, "wb") as f:
            f.write(b"\x01\x02")
        mm = numpy.memmap(p, dtype=numpy.uint8, mode="r", shape=(2,))
        data = pickle.dumps(mm, protocol=2)  # pickling an honest object runs nothing
        del mm
    if b"memmap" not in data:
        print("honest_numpy_memmap: the pickle does not name numpy.memmap", file=sys.stderr)
        return out + [(fn, None, 0, "-", "")]
    return out + [(fn, data, 0, "-", "honest: pickle.dumps(numpy.memmap(f, mode='r'), protocol=2)")]


def npy_object(payload):
    """A numpy .npy header for a 1-d object array, as numpy.save writes it
    (format 1.0: magic, version, header length, dict padded to 64), then
    `payload` where numpy.save puts the array's pickle."""
    d = "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }"
    pad = 64 - (10 + len(d) + 1) % 64
    hdr = (d + " " * pad + "\n").encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr + payload


def npy_files():
    """numpy object arrays: numpy.load(allow_pickle=True) unpickles them."""
    src = "picklescan tests/data2/dns_exfiltration.npy (numpy object arrays hold a pickle)"
    out = [
        ("npy_object_evil.npy", npy_object(EVIL), 3, "os.system", src),
        ("npz_object_evil.npz", zip_of([("a.npy", npy_object(OD), zipfile.ZIP_STORED),
                                        ("b.npy", npy_object(EVIL), zipfile.ZIP_DEFLATED)]),
         3, "os.system", src + "; an .npz is a ZIP of them"),
    ]
    try:
        import numpy
    except ImportError:
        return out
    buf = io.BytesIO()
    numpy.save(buf, numpy.array([1, "a"], dtype=object), allow_pickle=True)  # runs nothing
    real = buf.getvalue()
    mine = npy_object(b"")
    if real[:len(mine)] != mine:
        print(f"npy header differs from numpy.save:\n  {mine!r}\n  {real[:len(mine)]!r}", file=sys.stderr)
        return out + [("honest_npy_object.npy", None, 0, "-", "")]
    out.append(("honest_npy_object.npy", real, 0, "-", "honest: numpy.save(object array [1, 'a'])"))
    return out


def bad_crc(zb):
    """Every CRC-32 of a stored ZIP flipped, in the local headers and the
    central directory (CVE-2025-10156: picklescan gave up on the CRC error,
    torch.load, whose miniz skips the check, loads the record)."""
    b = bytearray(zb)
    for sig, at in ((b"PK\x03\x04", 14), (b"PK\x01\x02", 16)):
        i = b.find(sig)
        while i >= 0:
            b[i + at:i + at + 4] = bytes(x ^ 0xFF for x in b[i + at:i + at + 4])
            i = b.find(sig, i + 4)
    return bytes(b)


def flag_encrypted(zb):
    """General purpose flag bit 0 ('encrypted') set on every record of a
    stored ZIP whose bytes stay plain (picklescan tests/data/malicious1_0x1.zip)."""
    b = bytearray(zb)
    for sig, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        i = b.find(sig)
        while i >= 0:
            b[i + at] |= 1
            i = b.find(sig, i + 4)
    return bytes(b)


PS_0X1 = "picklescan tests/data/malicious1_0x1.zip (ZIP flag bit 0x1 set on plain records)"
CVE_10156 = "CVE-2025-10156 / picklescan tests/data2/malicious1_crc.zip (a ZIP record with a bad CRC-32)"


def archives():
    """(file name, bytes, expected exit, global or member, source)."""
    seven = seven_zip_store("evil.pkl", EVIL)
    if shutil.which("7z"):  # Debian's p7zip-full: the hand-made bytes are what it writes
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "evil.pkl")
            with open(p, "wb") as f:
                f.write(EVIL)
            os.utime(p, (315532800, 315532800))
            subprocess.run(["7z", "a", "-bso0", "-bsp0", "-m0=Copy", "-mtm=off", "-mtc=off",
                            "-mta=off", "-mtr=off", os.path.join(d, "x.7z"), p], check=True,
                           cwd=d)
            with open(os.path.join(d, "x.7z"), "rb") as f:
                made = f.read()
            if made != seven:
                print("7z store archive: hand-made bytes differ from p7zip's", file=sys.stderr)
                seven = None
    return [
        ("generic_zip_pickles.zip",
         zip_of([("README.txt", b"weights\n", zipfile.ZIP_DEFLATED),
                 ("config.pkl", OD, zipfile.ZIP_STORED),
                 ("model.pkl", EVIL, zipfile.ZIP_DEFLATED)]),
         3, "os.system", ISSUE12_G4 + ": a .zip of .pkl files"),
        ("generic_zip_model_bin.zip",
         zip_of([("model.bin", torch_zip_of(EVIL), zipfile.ZIP_DEFLATED)]),
         3, "os.system", ISSUE12_G4 + ": model.bin (a torch ZIP) zipped by hand"),
        ("tar_of_pickles.tar", tar_of([("a.pkl", OD), ("b.pkl", EVIL)]),
         3, "os.system", ISSUE12_G4 + ": a .tar of .pkl files"),
        ("tar_of_pickles.tar.gz", gz(tar_of([("a.pkl", OD), ("sub/b.pkl", EVIL)])),
         3, "os.system", ISSUE12_G4 + ": a compressed tar (libarchive)"),
        ("zip_of_tar_gz.zip", zip_of([("weights.tar.gz", gz(tar_of([("a.pkl", OD), ("b.pkl", EVIL)])),
                                       zipfile.ZIP_STORED)]),
         3, "os.system", ISSUE12_G4 + ": an archive inside an archive (read from memory)"),
        ("pickle_gz.pkl.gz", gz(EVIL),
         3, "os.system", ISSUE12_G4 + ": one gzip-compressed pickle (libarchive raw)"),
        ("evil_store.7z", seven,
         3, "os.system", ISSUE12_G4 + ": a 7z archive (libarchive)"),
        ("evil_store_no_file_type.7z", seven_zip_store("evil.pkl", EVIL, windows_attrib=0x01A48020),
         3, "os.system", ISSUE12_G4 + ": 7z entry whose Unix mode has no file type (0644), as "
         "picklescan tests/data/malicious1.7z (libarchive gives it no file type)"),
        ("zip_unreadable_member.zip",
         zip_of([("ok.pkl", OD, zipfile.ZIP_STORED), ("broken.pkl", b"\x80\x02\xff", zipfile.ZIP_STORED)]),
         1, "broken.pkl", ISSUE12_G4 + ": a member ckpt cannot open is named, exit 1"),
        ("honest_tar_of_pickles.tar.gz", gz(tar_of([("a.pkl", OD)])),
         0, "-", "honest: a compressed tar of a pickled OrderedDict"),
        ("zip_bad_crc.zip", bad_crc(zip_of([("data.pkl", EVIL, zipfile.ZIP_STORED)])),
         3, "os.system", CVE_10156 + ": generic ZIP"),
        ("torch_zip_bad_crc.pt", bad_crc(torch_zip_of(EVIL)),
         3, "os.system", CVE_10156 + ": torch.save layout"),
        ("torch_zip_flagged_encrypted.pt", flag_encrypted(torch_zip_of(EVIL)),
         3, "os.system", PS_0X1 + ": torch.save layout, read as stored"),
        ("zip_flagged_encrypted.zip", flag_encrypted(zip_of([("model/config.pkl", EVIL, zipfile.ZIP_STORED)])),
         1, "model/config.pkl", PS_0X1 + ": generic ZIP, libarchive refuses it: exit 1 naming it"),
        # group 2: after STOP inside containers, TorchScript's .debug_pkl
        ("zip_record_second_pickle.pt", torch_zip_of(OD + EVIL),
         3, "os.system", ISSUE12_G2 + ": a second pickle after data.pkl's STOP"),
        ("legacy_trailing_pickle.pt", legacy_with_trailing_pickle(),
         3, "os.system", ISSUE12_G2 + ": a pickle after a legacy stream's last storage"),
        ("tar_member_second_pickle.pt", tar_with_second_pickle(),
         3, "os.system", ISSUE12_G2 + ": a second pickle in a torch TAR's pickle member"),
        ("zip_record_protocol0.pt",
         zip_of([("archive/data.pkl", OD, zipfile.ZIP_STORED), ("archive/version", b"3\n", zipfile.ZIP_STORED),
                 ("archive/extra", call_p0("posix", "system", ["true"]), zipfile.ZIP_DEFLATED)]),
         3, "posix.system", ISSUE12_G2 + ": a record of no .pkl name holding a protocol-0 pickle "
         "(torch.load(pickle_file=...) reads any record)"),
        ("torchscript_debug_pkl.pt",
         zip_of([("m/data.pkl", OD, zipfile.ZIP_STORED), ("m/constants.pkl", b"\x80\x02).", zipfile.ZIP_STORED),
                 ("m/code/__torch__.py.debug_pkl", EVIL, zipfile.ZIP_DEFLATED),
                 ("m/version", b"3\n", zipfile.ZIP_STORED)]),
         3, "os.system", ISSUE12_G2 + ": TorchScript .debug_pkl record holding a pickle"),
    ]


def main():
    os.makedirs(OUT, exist_ok=True)
    keep = set()
    try:
        import torch  # noqa: F401
    except ImportError:
        keep.add("legacy_trailing_pickle.pt")  # made by torch.save: kept as committed
    try:
        import numpy  # noqa: F401
    except ImportError:
        keep.add("honest_numpy_memmap.pkl")  # made by numpy: kept as committed
    for f in os.listdir(OUT):
        if f not in keep:
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
    real = pickle.dumps({"blob": OD}, protocol=3)
    if real != dict_blob(OD):
        print(f"dict_blob: hand-built bytes differ from pickle.dumps:\n  {dict_blob(OD)!r}\n  {real!r}",
              file=sys.stderr)
        bad += 1
    for fn, data, want, glob, src in (archives() + in_bytes() + npy_files() + modelscan_89() +
                                       py2_names() + memmap_files() + first_opcodes()):
        if data is None:
            bad += 1
            continue
        with open(os.path.join(OUT, fn), "wb") as f:
            f.write(data)
        rows.append(f"{fn}\t{want}\t{glob}\t{src}")
    with open(os.path.join(HERE, "manifest.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
