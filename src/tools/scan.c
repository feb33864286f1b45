/*
 * scan.c - safety verdicts for the globals a checkpoint's pickles name, and
 * the whole-file scan behind `ckpt scan` (include/ckpt_scan.h).
 *
 * Built only on the public reader API: ckpt_open*() with skip_tensors and an
 * on_global callback runs every pickle of the file (data.pkl, each pickle of
 * a legacy stream, each TAR member, TorchScript's data.pkl and
 * constants.pkl) without executing anything; this file only classifies the
 * names it reports.
 *
 * The tables below are plain data; a rule matches a module and, optionally,
 * one name in it ("*" suffix: every name with that prefix).
 */
#define CKPT_BUILDING 1 /* export the CKPT_API functions */
#include "ckpt_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* The tables                                                                 */
/* ------------------------------------------------------------------------ */

/* A rule: `module` and, when `name` is NULL, every name in it and in every
 * submodule ("os" covers os.system, os.path.join, ...); otherwise that name
 * exactly, or every name starting with it when it ends in '*'. */
typedef struct rule {
    const char *module;
    const char *name;
    const char *why;
} rule;

/* Reasons, one per family. */
#define W_PROC "runs commands or reaches the operating system"
#define W_EVAL "evaluates or compiles code, or reaches any object by name"
#define W_FILE "opens, reads or writes files"
#define W_IMPORT "imports modules or resolves arbitrary names"
#define W_LOAD "deserializes another pickle (or similar), which can run code"
#define W_NET "opens network connections"
#define W_NATIVE "loads native code or calls C functions"
#define W_GADGET "calls methods or reads attributes chosen by the file"
#define W_TORCH "torch helper that loads pickles, downloads or compiles code"
#define W_NUMPY "numpy helper that compiles, runs or loads code"

static const rule dangerous_rules[] = {
    /* Processes and the operating system: os.system, os.popen, os.exec*,
     * subprocess.Popen, pty.spawn, ...  torch's weights_only unpickler refuses
     * sys, os, posix and nt even when allowlisted. */
    {"os", NULL, W_PROC},
    {"posix", NULL, W_PROC},
    {"nt", NULL, W_PROC},
    {"sys", NULL, W_PROC},
    {"subprocess", NULL, W_PROC},
    {"_posixsubprocess", NULL, W_PROC},
    {"_winapi", NULL, W_PROC},
    {"pty", NULL, W_PROC},
    {"platform", "popen", W_PROC},
    {"platform", "_syscmd*", W_PROC},
    {"multiprocessing", NULL, W_PROC},
    {"_multiprocessing", NULL, W_PROC},
    {"asyncio", "create_subprocess*", W_PROC},
    {"asyncio.subprocess", NULL, W_PROC},
    {"asyncio.unix_events", NULL, W_PROC},
    {"asyncio.windows_events", NULL, W_PROC},
    {"_thread", "start_new*", W_PROC},
    {"commands", NULL, W_PROC}, /* Python 2 name of subprocess helpers */
    {"popen2", NULL, W_PROC},
    {"thread", "start_new*", W_PROC},

    /* Evaluating code and reaching any object: builtins eval/exec/compile,
     * getattr & co. (attribute access is how gadgets chain), the interactive
     * interpreters and debuggers, code objects turned into functions. */
    {"builtins", "eval", W_EVAL},
    {"builtins", "exec", W_EVAL},
    {"builtins", "execfile", W_EVAL},
    {"builtins", "compile", W_EVAL},
    {"builtins", "getattr", W_EVAL},
    {"builtins", "setattr", W_EVAL},
    {"builtins", "delattr", W_EVAL},
    {"builtins", "globals", W_EVAL},
    {"builtins", "locals", W_EVAL},
    {"builtins", "vars", W_EVAL},
    {"builtins", "breakpoint", W_EVAL},
    {"builtins", "input", W_EVAL},
    {"builtins", "raw_input", W_EVAL},
    {"builtins", "help", W_EVAL},
    {"builtins", "apply", W_EVAL},
    {"builtins", "__build_class__", W_EVAL},
    {"code", NULL, W_EVAL},
    {"codeop", NULL, W_EVAL},
    {"runpy", NULL, W_EVAL},
    {"pdb", NULL, W_EVAL},
    {"bdb", NULL, W_EVAL},
    {"trace", NULL, W_EVAL},
    {"timeit", NULL, W_EVAL},
    {"profile", NULL, W_EVAL},
    {"cProfile", NULL, W_EVAL},
    {"doctest", NULL, W_EVAL},
    {"idlelib", NULL, W_EVAL},
    {"types", "FunctionType", W_EVAL},
    {"types", "LambdaType", W_EVAL},
    {"types", "CodeType", W_EVAL},
    {"types", "MethodType", W_EVAL},
    {"logging.config", NULL, W_EVAL},

    /* Importing modules or resolving any dotted name at load time: the file
     * would reach objects no GLOBAL names. */
    {"builtins", "__import__", W_IMPORT},
    {"builtins", "reload", W_IMPORT},
    {"importlib", NULL, W_IMPORT},
    {"imp", NULL, W_IMPORT},
    {"pkgutil", NULL, W_IMPORT},
    {"pydoc", NULL, W_IMPORT},
    {"zipimport", NULL, W_IMPORT},
    {"unittest.mock", NULL, W_IMPORT},
    {"mock", NULL, W_IMPORT},

    /* Files: open, copy, remove, archive tools. */
    {"builtins", "open", W_FILE},
    {"builtins", "file", W_FILE},
    {"io", "open*", W_FILE},
    {"io", "FileIO", W_FILE},
    {"_io", "open*", W_FILE},
    {"_io", "FileIO", W_FILE},
    {"codecs", "open", W_FILE},
    {"fileinput", NULL, W_FILE},
    {"shutil", NULL, W_FILE},
    {"tempfile", NULL, W_FILE},

    /* Deserializers: each runs another pickle (or YAML, marshal code...)
     * whose globals this scan does not see. */
    {"pickle", NULL, W_LOAD},
    {"_pickle", NULL, W_LOAD},
    {"cPickle", NULL, W_LOAD},
    {"pickletools", NULL, W_LOAD},
    {"marshal", NULL, W_LOAD},
    {"shelve", NULL, W_LOAD},
    {"dill", NULL, W_LOAD},
    {"cloudpickle", NULL, W_LOAD},
    {"joblib", NULL, W_LOAD},
    {"jsonpickle", NULL, W_LOAD},
    {"yaml", NULL, W_LOAD},
    {"pandas", "read_pickle", W_LOAD},
    {"pandas.io.pickle", NULL, W_LOAD},
    {"torch", "load", W_LOAD},
    {"torch.serialization", "load", W_LOAD},
    {"torch.serialization", "_load", W_LOAD},
    {"torch.serialization", "_legacy_load", W_LOAD},
    {"torch.storage", "_load_from_bytes", W_LOAD},

    /* Network: sockets, HTTP clients and servers, browsers. */
    {"socket", NULL, W_NET},
    {"_socket", NULL, W_NET},
    {"socketserver", NULL, W_NET},
    {"SocketServer", NULL, W_NET},
    {"ssl", NULL, W_NET},
    {"http", NULL, W_NET},
    {"httplib", NULL, W_NET},
    {"BaseHTTPServer", NULL, W_NET},
    {"SimpleHTTPServer", NULL, W_NET},
    {"CGIHTTPServer", NULL, W_NET},
    {"urllib", NULL, W_NET},
    {"urllib2", NULL, W_NET},
    {"urllib3", NULL, W_NET},
    {"requests", NULL, W_NET},
    {"httpx", NULL, W_NET},
    {"aiohttp", NULL, W_NET},
    {"ftplib", NULL, W_NET},
    {"smtplib", NULL, W_NET},
    {"poplib", NULL, W_NET},
    {"imaplib", NULL, W_NET},
    {"nntplib", NULL, W_NET},
    {"telnetlib", NULL, W_NET},
    {"xmlrpc", NULL, W_NET},
    {"xmlrpclib", NULL, W_NET},
    {"webbrowser", NULL, W_NET},

    /* Native code: shared libraries and foreign function calls. */
    {"ctypes", NULL, W_NATIVE},
    {"_ctypes", NULL, W_NATIVE},
    {"cffi", NULL, W_NATIVE},

    /* Gadgets: call a method or read an attribute named by the file, or
     * wrap a callable for a later call (functools.partial is judged by what
     * it wraps, see classify_all()). */
    {"operator", "attrgetter", W_GADGET},
    {"operator", "methodcaller", W_GADGET},
    {"_operator", "attrgetter", W_GADGET},
    {"_operator", "methodcaller", W_GADGET},
    {"inspect", "getattr_static", W_GADGET},
    /* picklescan _unsafe_globals (src/picklescan/scanner.py): chains */
    {"operator", "itemgetter", W_GADGET},
    {"_operator", "itemgetter", W_GADGET},

    /* torch helpers that load pickles, fetch code or compile it. */
    {"torch.hub", NULL, W_TORCH},
    {"torch.package", NULL, W_TORCH},
    {"torch.utils.cpp_extension", NULL, W_TORCH},
    {"torch._inductor.codecache", NULL, W_TORCH},
    {"torch.fx.graph_module", "reduce_*", W_TORCH},
    {"torch.fx.graph_module", "_forward_from_src", W_TORCH},
    {"torch.fx.graph_module", "_exec_with_source", W_TORCH},
    {"torch._utils", "_import_dotted_name", W_TORCH},

    /* numpy helpers: Fortran compiler, string runner, pickle loaders. */
    {"numpy.f2py", NULL, W_NUMPY},
    {"numpy.distutils", NULL, W_NUMPY},
    {"numpy.ctypeslib", NULL, W_NUMPY},
    {"numpy.testing._private.utils", "runstring", W_NUMPY},
    {"numpy", "load", W_NUMPY},
    {"numpy.lib.npyio", "load", W_NUMPY},

    /* Installers and build tools: run setup scripts, install packages. */
    {"pip", NULL, W_PROC},
    {"ensurepip", NULL, W_PROC},
    {"venv", NULL, W_PROC},
    {"distutils", NULL, W_PROC},
    {"setuptools", NULL, W_PROC},

    /* ---- issue 12, group 1: gadgets that reach a process, a file, an
     * import, eval/exec, a socket or a nested loader through a helper.
     * Source of each block in its comment: "issue 12" is the tracker list
     * (from the GHSA advisories against picklescan / modelscan / torch
     * weights_only, 2024-2026); "stdlib:" / "torch:" is the reason read in
     * the named library's source. */

    /* issue 12 (picklescan advisories): helpers that run a command */
    {"_osx_support", "_read_output", W_PROC}, /* subprocess via os.system */
    {"_osx_support", "_find_build_tool", W_PROC},
    {"_osx_support", "_find_executable", W_PROC},
    {"_aix_support", "_read_cmd_output", W_PROC}, /* stdlib: subprocess.check_output */
    {"uuid", "_get_command_stdout", W_PROC},      /* stdlib: subprocess.Popen */
    {"uuid", "_popen", W_PROC},                   /* stdlib (3.6-): os.popen */
    {"pydoc", "pipepager", W_PROC},               /* issue 12 family; covered by pydoc too */
    {"_pyrepl", NULL, W_PROC}, /* stdlib 3.13: _pyrepl.pager.pipe_pager runs a shell */
    {"pipes", NULL, W_PROC},   /* stdlib: pipes.Template runs shell commands */
    {"concurrent.futures.process", NULL, W_PROC}, /* stdlib: spawns processes */
    {"ctypes.util", NULL, W_PROC},                /* stdlib: find_library runs gcc/ldconfig */
    {"test.support", NULL, W_PROC},     /* issue 12: script_helper.assert_python_ok & co. */
    {"test.libregrtest", NULL, W_PROC}, /* stdlib: runs test processes */
    {"test.regrtest", NULL, W_PROC},
    {"site", NULL, W_EVAL},    /* stdlib: addsitedir runs .pth lines with exec */
    {"cmd", NULL, W_GADGET},   /* stdlib: Cmd.onecmd dispatches to do_<name> */
    {"tkinter", NULL, W_EVAL}, /* stdlib: Tcl().eval runs Tcl, exec'able */
    {"_tkinter", NULL, W_EVAL},
    {"atexit", "register", W_GADGET}, /* stdlib: queues a call for interpreter exit */
    {"builtins", "exit", W_PROC},     /* stdlib: _sitebuiltins.Quitter raises SystemExit */
    {"builtins", "quit", W_PROC},
    {"_sitebuiltins", NULL, W_PROC},
    {"signal", NULL, W_PROC}, /* stdlib: pthread_kill, setitimer, handlers */
    {"resource", "setrlimit", W_PROC},
    {"faulthandler", NULL, W_FILE}, /* stdlib: dumps tracebacks into a file */

    /* issue 12: logging handlers open files and sockets at construction */
    {"logging", "FileHandler", W_FILE},
    {"logging", "basicConfig", W_FILE}, /* stdlib: filename= opens a FileHandler */
    {"logging.handlers", NULL, W_FILE}, /* RotatingFileHandler, SocketHandler, SMTPHandler, ... */

    /* issue 12: lib2to3 grammar loaders (Grammar.load/loads = pickle.load) */
    {"lib2to3", NULL, W_LOAD},
    {"copyreg", "add_extension", W_IMPORT}, /* issue 12 group 3: EXT* codes to any global */
    {"copy_reg", "add_extension", W_IMPORT},

    /* stdlib: writers and archive tools that create or overwrite files */
    {"zipfile", NULL, W_FILE}, /* ZipFile(path, 'w') truncates, extractall writes */
    {"tarfile", NULL, W_FILE}, /* TarFile.extractall writes anywhere */
    {"zipapp", NULL, W_FILE},
    {"gzip", "open", W_FILE},
    {"gzip", "GzipFile", W_FILE},
    {"bz2", "open", W_FILE},
    {"bz2", "BZ2File", W_FILE},
    {"lzma", "open", W_FILE},
    {"lzma", "LZMAFile", W_FILE},
    {"dbm", NULL, W_FILE},
    {"sqlite3", NULL, W_FILE}, /* connect() creates a database file */
    {"_sqlite3", NULL, W_FILE},
    {"mailbox", NULL, W_FILE},
    {"py_compile", NULL, W_FILE}, /* writes .pyc files */
    {"compileall", NULL, W_FILE},
    {"readline", NULL, W_FILE}, /* write_history_file */
    {"wave", "open", W_FILE},
    {"aifc", "open", W_FILE},
    {"sunau", "open", W_FILE},
    {"tokenize", "open", W_FILE},
    {"linecache", NULL, W_FILE},
    {"pathlib.Path", "write*", W_FILE}, /* dotted name: Path.write_text(p, s) */
    {"pathlib.Path", "open", W_FILE},
    {"pathlib.Path", "unlink", W_FILE},
    {"pathlib.Path", "rmdir", W_FILE},
    {"pathlib.Path", "touch", W_FILE},
    {"pathlib.Path", "mkdir", W_FILE},
    {"pathlib.Path", "rename", W_FILE},
    {"pathlib.Path", "replace", W_FILE},
    {"pathlib.Path", "symlink_to", W_FILE},
    {"pathlib.Path", "hardlink_to", W_FILE},
    {"pathlib.Path", "chmod", W_FILE},
    {"pathlib.Path", "read*", W_FILE},
    {"pathlib.PosixPath", "write*", W_FILE},
    {"pathlib.PosixPath", "open", W_FILE},
    {"pathlib.PosixPath", "unlink", W_FILE},
    {"pathlib.PosixPath", "read*", W_FILE},
    {"pathlib.WindowsPath", "write*", W_FILE},
    {"pathlib.WindowsPath", "open", W_FILE},

    /* stdlib: network clients and servers not in the first list */
    {"smtpd", NULL, W_NET},
    {"asyncore", NULL, W_NET},
    {"asynchat", NULL, W_NET},
    {"xml.sax", "parse", W_NET}, /* fetches a system id URL */
    {"xml.dom.pulldom", "parse", W_NET},
    {"xml.dom.minidom", "parse", W_NET},
    {"xml.etree.ElementTree", "parse", W_FILE},
    {"xml.etree.ElementTree", "ElementTree", W_FILE}, /* .write(path) */
    /* picklescan 1.0.5 _unsafe_globals (src/picklescan/scanner.py, after
     * PRs #50/#53/#54/#65): whole modules it refuses where ckpt named only
     * some helpers; no honest checkpoint pickles anything of them */
    {"asyncio", NULL, W_PROC},      /* event loops: subprocess_shell, sockets */
    {"_osx_support", NULL, W_PROC}, /* _default_sysroot(cc) & co. run cc via os.system */
    {"_aix_support", NULL, W_PROC}, /* _aix_bos_rte runs lslpp */
    {"uuid", "_find_mac*", W_PROC}, /* stdlib: _find_mac_near_keyword(command, ...) runs it */
    {"asyncio", "open_connection", W_NET},
    {"asyncio", "start_server", W_NET},
    {"asyncio", "run", W_EVAL},            /* drives any coroutine */
    {"asyncio.base_events", NULL, W_PROC}, /* subprocess_exec/_shell, create_connection */
    {"asyncio.events", NULL, W_PROC},

    /* fickling GHSA-6ggj-6f2q-f7mx (PR #302): subinterpreters run source
     * given as a string (_interpreters.create + run_string) */
    {"_interpreters", NULL, W_EVAL},
    {"_xxsubinterpreters", NULL, W_EVAL},
    {"_xxinterpchannels", NULL, W_EVAL},
    {"_interpchannels", NULL, W_EVAL},
    {"_interpqueues", NULL, W_EVAL},
    {"concurrent.interpreters", NULL, W_EVAL}, /* stdlib 3.14 */
    {"interpreters", NULL, W_EVAL},            /* the PEP 734 backport */

    /* stdlib: third-party-free eval paths */
    {"_pydevd_bundle", NULL, W_EVAL},
    {"pydevd", NULL, W_EVAL},

    /* issue 12 (weights_only / picklescan advisories): torch helpers */
    {"torch.utils.collect_env", NULL,
     W_PROC},                                 /* run, run_and_read_all, run_and_parse_first_match */
    {"torch.utils.bottleneck", NULL, W_PROC}, /* runs a script under cProfile */
    {"torch.jit.unsupported_tensor_ops", NULL, W_EVAL},         /* execWrapper = exec */
    {"torch.utils.data.datapipes.utils.decoder", NULL, W_LOAD}, /* basichandlers: pickle.loads */
    {"torch.utils.data.datapipes.iter.routeddecoder", NULL, W_LOAD},
    {"torch.utils._config_module", NULL, W_LOAD}, /* ConfigModule.load_config: pickle.loads */
    {"torch._dynamo", NULL, W_EVAL},              /* guards.GuardBuilder.get: eval */
    {"torch._inductor", NULL, W_EVAL},            /* codecache.compile_file and friends */
    {"torch.fx.experimental.symbolic_shapes", NULL, W_EVAL}, /* evaluate_guards_expression */
    {"torch.testing._internal", NULL, W_PROC},               /* common_utils runs subprocesses */
    {"torch.utils.benchmark", NULL, W_EVAL},                 /* Timer executes statements */
    {"torch.utils.model_zoo", NULL, W_NET},
    {"torch.utils.tensorboard", NULL, W_FILE},
    {"torch.utils.file_baton", NULL, W_FILE},
    {"torch.multiprocessing", NULL, W_PROC},
    {"torch.distributed.rpc", NULL, W_NET},
    {"torch.distributed.run", NULL, W_PROC},
    {"torch.distributed.launch", NULL, W_PROC},
    {"torch.distributed.launcher", NULL, W_PROC},
    {"torch.distributed.elastic", NULL, W_PROC},
    {"torch.distributed.rendezvous", NULL, W_NET},
    {"torch.distributed", "TCPStore", W_NET},
    {"torch.distributed", "FileStore", W_FILE},
    {"torch.distributed", "init_process_group", W_NET},
    {"torch.jit", "load", W_LOAD},
    {"torch.jit", "save", W_FILE},
    {"torch.jit", "CompilationUnit", W_EVAL},
    {"torch.jit", "script", W_EVAL},
    {"torch.jit._serialization", NULL, W_LOAD},
    {"torch.jit.frontend", NULL, W_EVAL},
    {"torch._jit_internal", NULL, W_EVAL},
    {"torch", "save", W_FILE},
    {"torch.serialization", "save", W_FILE},
    {"torch.serialization", "_save", W_FILE},
    {"torch.serialization", "_legacy_save", W_FILE},
    {"torch.export", "load", W_LOAD},
    {"torch.export", "save", W_FILE},
    {"torch._export", NULL, W_LOAD},
    {"torch.onnx", NULL, W_FILE},
    {"torch.library", NULL, W_NATIVE},
    {"torch.ops", "load_library", W_NATIVE},
    {"torch._ops", NULL, W_NATIVE}, /* torch.ops.* reach any registered op */
    {"torch.cuda.memory", "_dump_snapshot", W_FILE},
    {"torch.cuda.memory", "_save_memory_usage", W_FILE},
    {"torch.cuda.memory", "_save_segment_usage", W_FILE},
    {"torch.autograd.profiler", NULL, W_FILE},
    {"torch.profiler", NULL, W_FILE},
    {"torch._C", "_jit*", W_EVAL},
    {"torch._C", "import_ir_module*", W_LOAD},

    /* numpy: writers and compilers beyond the first list */
    {"numpy", "save*", W_NUMPY},
    {"numpy", "tofile", W_NUMPY},
    {"numpy", "fromfile", W_NUMPY},
    {"numpy", "loadtxt", W_NUMPY},
    {"numpy", "genfromtxt", W_NUMPY},
    {"numpy.lib.format", "read_array*", W_NUMPY},
    {"numpy.lib.format", "open_memmap", W_NUMPY},
    {"numpy.lib._datasource", NULL, W_NET},
    {"numpy.lib.npyio", NULL, W_NUMPY},
    {"numpy.lib.utils", NULL, W_NUMPY}, /* lookfor imports modules */
    {"numpy.testing", NULL, W_NUMPY},
    {"pandas", "to_pickle", W_LOAD},
    {"pandas.io", NULL, W_LOAD},
    /* tensorflow/keras: only the helpers, so pickled keras objects stay unknown */
    {"tensorflow.io", NULL, W_FILE}, /* tf.io.write_file / read_file */
    {"tensorflow", "py_function", W_EVAL},
    {"tensorflow", "numpy_function", W_EVAL},
    {"tensorflow.python.ops.script_ops", NULL, W_EVAL},
    {"keras.layers", "Lambda", W_EVAL}, /* Lambda layers hold marshalled code */
    {"keras.src.layers", "Lambda", W_EVAL},
    {"keras.layers.core", "Lambda", W_EVAL},
    {"keras.layers.core.lambda_layer", NULL, W_EVAL},
    {"keras.src.layers.core.lambda_layer", NULL, W_EVAL},
    {"keras.models", "load_model", W_LOAD},
    {"keras.saving", NULL, W_LOAD},
    {"IPython", NULL, W_EVAL},
    {"jinja2", NULL, W_EVAL},     /* templates compile to Python */
    {"sympy", "sympify", W_EVAL}, /* eval of strings */
    {"sympy.core.sympify", NULL, W_EVAL},
    {"sympy", "parse_expr", W_EVAL},
    {"sympy.parsing", NULL, W_EVAL},
    {"huggingface_hub", NULL, W_NET},
    {"fsspec", NULL, W_FILE},

    /* stdlib, second pass (reasons read in CPython's sources) */
    {"unittest", "main", W_IMPORT}, /* TestProgram imports the modules it is told */
    {"unittest", "TestProgram", W_IMPORT},
    {"unittest", "TestLoader", W_IMPORT}, /* loadTestsFromName imports a dotted name */
    {"unittest", "defaultTestLoader", W_IMPORT},
    {"unittest.main", NULL, W_IMPORT},
    {"unittest.loader", NULL, W_IMPORT},
    {"operator", "call", W_GADGET}, /* 3.11+: calls any callable */
    {"_operator", "call", W_GADGET},
    {"gc", NULL, W_EVAL},     /* get_objects/get_referrers reach any object */
    {"pstats", NULL, W_LOAD}, /* Stats(filename) is marshal.load of a file */
    {"wsgiref", NULL, W_NET}, /* simple_server.make_server */
    {"cgitb", NULL, W_FILE},  /* Hook(logdir=) writes files */
    {"uu", NULL, W_FILE},     /* decode() writes the file its header names */
    {"binhex", NULL, W_FILE},
    {"winreg", NULL, W_FILE}, /* writes the registry (persistence) */
    {"_winreg", NULL, W_FILE},
    {"msvcrt", NULL, W_PROC},
    {"modulefinder", NULL, W_IMPORT},
    {"syslog", NULL, W_FILE},

    /* torch, second pass (reasons read in torch's sources) */
    {"torch.utils.show_pickle", NULL, W_LOAD}, /* unpickles the file it is given */
    {"torch.utils.jit", NULL, W_EVAL},         /* log_extract runs extracted code */
    {"torch.utils.data.datapipes.iter.fileopener", NULL, W_FILE},
    {"torch.utils.data.datapipes.iter.filelister", NULL, W_FILE},
    {"torch.utils.data.datapipes.utils.common", NULL, W_FILE},
    {"torch._C", "_load*", W_LOAD},     /* _load_for_lite_interpreter & co. */
    {"torch._classes", NULL, W_NATIVE}, /* load_library */
    {"torch.classes", "load_library", W_NATIVE},
    {"torch", "compile", W_EVAL},
    {"torch.compiler", NULL, W_EVAL},
    {"torch._functorch.aot_autograd", NULL, W_EVAL},
};

/* Attributes that, reached through a dotted name (protocol 4 qualnames are
 * resolved with getattr), hand out functions' globals, builtins, classes'
 * subclasses and the like: any dunder in a dotted name is dangerous. */

/* torch.load(weights_only=True)'s default allowlist, plus the older and
 * inert spellings of the same things (torch.tensor._rebuild_from_type_v2
 * before 1.9, builtins containers the machine builds itself). */
#define W_SAFE "on torch's weights_only allowlist"

static const rule safe_rules[] = {
    /* tensor rebuild functions (torch._utils._tensor_rebuild_functions) */
    {"torch._utils", "_rebuild_tensor", W_SAFE},
    {"torch._utils", "_rebuild_tensor_v2", W_SAFE},
    {"torch._utils", "_rebuild_tensor_v3", W_SAFE},
    {"torch._utils", "_rebuild_parameter", W_SAFE},
    {"torch._utils", "_rebuild_parameter_with_state", W_SAFE},
    {"torch._utils", "_rebuild_qtensor", W_SAFE},
    {"torch._utils", "_rebuild_sparse_tensor", W_SAFE},
    {"torch._utils", "_rebuild_sparse_csr_tensor", W_SAFE},
    {"torch._utils", "_rebuild_meta_tensor_no_storage", W_SAFE},
    {"torch._utils", "_rebuild_wrapper_subclass", W_SAFE},
    {"torch._utils", "_rebuild_device_tensor_from_numpy", W_SAFE},
    {"torch._utils", "_rebuild_device_tensor_from_cpu_tensor", W_SAFE},
    {"torch._tensor", "_rebuild_from_type_v2", W_SAFE},
    {"torch.tensor", "_rebuild_from_type_v2", W_SAFE},
    {"torch.serialization", "_get_layout", W_SAFE},
    /* classes */
    {"torch", "Size", W_SAFE},
    {"torch", "Tensor", W_SAFE},
    {"torch._tensor", "Tensor", W_SAFE},
    {"torch", "device", W_SAFE},
    {"torch.nn.parameter", "Parameter", W_SAFE},
    {"torch", "UntypedStorage", W_SAFE},
    {"torch", "TypedStorage", W_SAFE},
    {"torch.storage", "UntypedStorage", W_SAFE},
    {"torch.storage", "TypedStorage", W_SAFE},
    {"torch.storage", "_UntypedStorage", W_SAFE},
    {"torch.storage", "_TypedStorage", W_SAFE},
    /* quantization schemes */
    {"torch", "per_tensor_affine", W_SAFE},
    {"torch", "per_tensor_symmetric", W_SAFE},
    {"torch", "per_channel_affine", W_SAFE},
    {"torch", "per_channel_symmetric", W_SAFE},
    {"torch", "per_channel_affine_float_qparams", W_SAFE},
    /* containers and bytes */
    {"collections", "OrderedDict", W_SAFE},
    {"collections", "Counter", W_SAFE},
    {"_codecs", "encode", W_SAFE},
    {"builtins", "set", W_SAFE},
    {"builtins", "frozenset", W_SAFE},
    {"builtins", "dict", W_SAFE},
    {"builtins", "list", W_SAFE},
    {"builtins", "tuple", W_SAFE},
    {"builtins", "bytes", W_SAFE},
    {"builtins", "bytearray", W_SAFE},
    {"builtins", "complex", W_SAFE},
};

/* torch.<dtype>: every dtype object torch pickles by name. */
static const char *const torch_dtypes[] = {
    "float64",
    "double",
    "float32",
    "float",
    "float16",
    "half",
    "bfloat16",
    "int64",
    "long",
    "int32",
    "int",
    "int16",
    "short",
    "int8",
    "uint8",
    "bool",
    "complex32",
    "chalf",
    "complex64",
    "cfloat",
    "complex128",
    "cdouble",
    "qint8",
    "quint8",
    "qint32",
    "quint4x2",
    "quint2x4",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
    "float4_e2m1fn_x2",
    "uint16",
    "uint32",
    "uint64",
    "uint1",
    "uint2",
    "uint3",
    "uint4",
    "uint5",
    "uint6",
    "uint7",
    "int1",
    "int2",
    "int3",
    "int4",
    "int5",
    "int6",
    "int7",
    "bits1x8",
    "bits2x4",
    "bits4x2",
    "bits8",
    "bits16",
};

/* torch.<Kind>Storage / torch.<Kind>Tensor (also under torch.cuda, and the
 * sparse tensor classes under torch.sparse and torch.cuda.sparse). */
static const char *const storage_kinds[] = {
    "Double",      "Float", "Half",   "BFloat16", "Long",          "Int",
    "Short",       "Char",  "Byte",   "Bool",     "ComplexDouble", "ComplexFloat",
    "ComplexHalf", "QInt8", "QUInt8", "QInt32",   "QUInt4x2",      "QUInt2x4",
};

/* ------------------------------------------------------------------------ */
/* Matching                                                                   */
/* ------------------------------------------------------------------------ */

/* mod[0..mn) is `m` or a submodule of it. */
static int module_in(const char *mod, size_t mn, const char *m)
{
    size_t n = strlen(m);
    return mn >= n && memcmp(mod, m, n) == 0 && (mn == n || mod[n] == '.');
}

static int module_is(const char *mod, size_t mn, const char *m)
{
    return strlen(m) == mn && memcmp(mod, m, mn) == 0;
}

static int name_is(const char *name, size_t nn, const char *pat)
{
    size_t pn = strlen(pat);
    if (pn > 0 && pat[pn - 1] == '*') return nn >= pn - 1 && memcmp(name, pat, pn - 1) == 0;
    return pn == nn && memcmp(name, pat, nn) == 0;
}

static const rule *match(const rule *rules, size_t n, const char *mod, size_t mn, const char *name,
                         size_t nn)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (rules[i].name == NULL) {
            if (module_in(mod, mn, rules[i].module)) return &rules[i];
        } else if (module_is(mod, mn, rules[i].module) && name_is(name, nn, rules[i].name)) {
            return &rules[i];
        }
    }
    return NULL;
}

#define NRULES(t) (sizeof t / sizeof t[0])

/* Names arrive as the pickle machine resolved them, Python 2 names renamed
 * as Python's unpickler renames them for that pickle's protocol (the one
 * table, src/pickle/compat_pickle.inc): a rule names Python 3 modules, and
 * the few Python 2 ones (commands, cPickle, ...) a caller of
 * ckpt_global_verdict() may ask about. */
static const rule *dangerous_pair(const char *mod, size_t mn, const char *name, size_t nn)
{
    return match(dangerous_rules, NRULES(dangerous_rules), mod, mn, name, nn);
}

static int is_safe_torch_class(const char *mod, const char *name)
{
    size_t i, nn = strlen(name);
    int storage = nn > 7 && strcmp(name + nn - 7, "Storage") == 0;
    int tensor = nn > 6 && strcmp(name + nn - 6, "Tensor") == 0;
    size_t stem = nn - (storage ? 7 : tensor ? 6 : 0);
    if (!storage && !tensor) return 0;
    if (storage && strcmp(mod, "torch") != 0 && strcmp(mod, "torch.cuda") != 0) return 0;
    if (tensor && strcmp(mod, "torch") != 0 && strcmp(mod, "torch.cuda") != 0 &&
        strcmp(mod, "torch.sparse") != 0 && strcmp(mod, "torch.cuda.sparse") != 0)
        return 0;
    for (i = 0; i < sizeof storage_kinds / sizeof storage_kinds[0]; i++)
        if (strlen(storage_kinds[i]) == stem && memcmp(storage_kinds[i], name, stem) == 0) return 1;
    return 0;
}

/* The verdict for (module, name), with a reason for dangerous ones.
 *
 * A name with dots is resolved by the Python unpickler with getattr, one
 * component at a time (protocol 4 and later), so ("torch",
 * "serialization.os.system") is os.system: every way of reading the dotted
 * path as <module>.<name> is checked, including paths that start at an
 * attribute (an attribute can be a module), and any dunder attribute in the
 * name (__globals__, __builtins__, __subclasses__, ...) is dangerous. */
static ckpt_verdict verdict_of(const char *module, const char *name, const char **why)
{
    size_t mlen = strlen(module), nlen = strlen(name);
    size_t total = mlen + 1 + nlen, i, k, nparts = 0, mparts = 0;
    size_t starts[130], ends[130];
    char *path;
    const rule *r;

    *why = "";
    if (memchr(name, '.', nlen) == NULL) {
        /* __builtins__, __dict__, __globals__, ... of any module: the keys
         * to everything; copyreg's __newobj__ helpers are what protocols
         * 0 and 1 use for NEWOBJ */
        if (nlen > 4 && memcmp(name, "__", 2) == 0 && memcmp(name + nlen - 2, "__", 2) == 0 &&
            !(strcmp(module, "copyreg") == 0 &&
              (strcmp(name, "__newobj__") == 0 || strcmp(name, "__newobj_ex__") == 0))) {
            r = dangerous_pair(module, mlen, name, nlen);
            *why = r ? r->why : "a dunder attribute of a module";
            return CKPT_VERDICT_DANGEROUS;
        }
        r = dangerous_pair(module, mlen, name, nlen);
        if (r) {
            *why = r->why;
            return CKPT_VERDICT_DANGEROUS;
        }
        if (match(safe_rules, NRULES(safe_rules), module, mlen, name, nlen) ||
            is_safe_torch_class(module, name)) {
            *why = W_SAFE;
            return CKPT_VERDICT_SAFE;
        }
        if (strcmp(module, "torch") == 0)
            for (i = 0; i < sizeof torch_dtypes / sizeof torch_dtypes[0]; i++)
                if (strcmp(name, torch_dtypes[i]) == 0) {
                    *why = W_SAFE;
                    return CKPT_VERDICT_SAFE;
                }
        return CKPT_VERDICT_UNKNOWN;
    }

    /* a dotted name: split module.name into its components */
    path = malloc(total + 1);
    if (!path) {
        *why = "name too long to check";
        return CKPT_VERDICT_DANGEROUS;
    }
    memcpy(path, module, mlen);
    path[mlen] = '.';
    memcpy(path + mlen + 1, name, nlen + 1);
    for (i = 0; i <= total && nparts < 128;) {
        size_t j = i;
        while (j < total && path[j] != '.') j++;
        starts[nparts] = i;
        ends[nparts] = j;
        if (j <= mlen) mparts = nparts + 1;
        nparts++;
        i = j + 1;
    }
    if (nparts >= 128) {
        free(path);
        *why = "a name of more than 128 parts";
        return CKPT_VERDICT_DANGEROUS;
    }
    for (k = mparts; k < nparts; k++) {
        size_t len = ends[k] - starts[k];
        if (len >= 2 && path[starts[k]] == '_' && path[starts[k] + 1] == '_') {
            free(path);
            *why = "reaches a dunder attribute through a dotted name";
            return CKPT_VERDICT_DANGEROUS;
        }
    }
    /* candidates: modules starting at the first component or at any
     * attribute, each followed by one name component */
    for (i = 0; i + 1 < nparts; i++) {
        if (i > 0 && i < mparts) continue; /* "a.os" is a submodule of a, not os */
        for (k = i + 1 < mparts ? mparts : i + 1; k < nparts; k++) {
            const char *mod = path + starts[i];
            size_t mn = ends[k - 1] - starts[i];
            r = dangerous_pair(mod, mn, path + starts[k], ends[k] - starts[k]);
            if (r) {
                free(path);
                *why = r->why;
                return CKPT_VERDICT_DANGEROUS;
            }
        }
    }
    free(path);
    return CKPT_VERDICT_UNKNOWN;
}

/* functools.partial & co. are inert wrappers; they are dangerous when what
 * they wrap is, and that is decided per pickle (see classify_all). */
static int is_wrapper(const char *module, const char *name)
{
    return (strcmp(module, "functools") == 0 || strcmp(module, "_functools") == 0) &&
           (strcmp(name, "partial") == 0 || strcmp(name, "partialmethod") == 0 ||
            strcmp(name, "reduce") == 0);
}

/* numpy.memmap(filename, dtype=uint8, mode='r+', offset=0, shape=None,
 * order='C') (numpy/core/memmap.py, numpy/_core/memmap.py in numpy 2):
 * mode 'w+' ("write") opens the file 'w+b', creating or truncating it, and
 * 'r+' ("readwrite", the default) opens it 'r+b' and writes a byte at the
 * end to grow it to the array's size, then maps it writable.  'r'
 * ("readonly") and 'c' ("copyonwrite") open it 'rb' and map it read-only or
 * copy-on-write: nothing is written; any other string raises before the
 * open.  An honest pickle of a memmap never calls it: ndarray.__reduce__
 * names the class as the first argument of numpy.core.multiarray.
 * _reconstruct, which does not run memmap.__new__.  So a memmap the pickle
 * calls is dangerous unless its mode is a constant read-only one. */
#define W_MEMMAP                                                                                   \
    "numpy.memmap with mode w+/r+ (r+ is the default) creates, truncates or grows the file"
#define W_MEMMAP_MODE                                                                              \
    "numpy.memmap called with arguments this scan cannot see (several calls, a "                   \
    "wrapper such as functools.partial): mode w+/r+ writes the file"
#define W_MEMMAP_RO "numpy.memmap with mode 'r'/'c': maps the file read-only, writes nothing"

static int is_memmap(const char *module, const char *name)
{
    static const char *const names[] = {"numpy.memmap", "numpy.core.memmap.memmap",
                                        "numpy._core.memmap.memmap"};
    size_t ml = strlen(module), i;
    for (i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(names[i], module, ml) == 0 && names[i][ml] == '.' &&
            strcmp(names[i] + ml + 1, name) == 0)
            return 1;
    return 0;
}

/* What a call of numpy.memmap does, from its arguments (NULL: not seen). */
enum { MEMMAP_NONE, MEMMAP_WRITES, MEMMAP_UNSEEN, MEMMAP_READONLY };

static int memmap_call(const ckpt_value *args)
{
    const char *mode;
    size_t n;
    if (!args) return MEMMAP_UNSEEN;
    if (ckpt_value_len(args) < 3) return MEMMAP_WRITES; /* mode 'r+' */
    if (ckpt_value_kind(ckpt_value_item(args, 2)) != CKPT_V_STR) return MEMMAP_UNSEEN;
    mode = ckpt_value_text(ckpt_value_item(args, 2), &n);
    if (mode &&
        (strcmp(mode, "r") == 0 || strcmp(mode, "c") == 0 || strcmp(mode, "readonly") == 0 ||
         strcmp(mode, "copyonwrite") == 0) &&
        strlen(mode) == n)
        return MEMMAP_READONLY;
    return MEMMAP_WRITES; /* w+, r+, their long names, or a mode numpy refuses */
}

const char *ckpt_verdict_name(ckpt_verdict v)
{
    switch (v) {
    case CKPT_VERDICT_SAFE: return "safe";
    case CKPT_VERDICT_UNKNOWN: return "unknown";
    case CKPT_VERDICT_DANGEROUS: return "dangerous";
    }
    return "?";
}

ckpt_verdict ckpt_global_verdict(const char *module, const char *name, const char **why)
{
    const char *w = "";
    ckpt_verdict v = verdict_of(module ? module : "", name ? name : "", &w);
    if (why) *why = w;
    return v;
}

/* ------------------------------------------------------------------------ */
/* Whole-file scans                                                           */
/* ------------------------------------------------------------------------ */

#define TS_NOTE                                                                                    \
    "TorchScript archive: its pickles are scanned, its code/ "                                     \
    "records (TorchScript source that torch.jit.load compiles) are not"

struct ckpt_scan_report {
    ckpt_scan_item *items;
    size_t n, cap;
    char **strings; /* every string the items and notes point to */
    size_t nstrings, strings_cap;
    char **notes;
    size_t nnotes;
    size_t tally[3], called_dangerous; /* of the items a load of the file reaches */
    size_t unloaded[3];                /* of those in bytes nothing unpickles */
    unsigned char *memmap;             /* per item: MEMMAP_*, for classify_all() */
    unsigned flags;
    int format; /* -1: the file did not open */
    int failed;
    ckpt_error error;
    int oom;
};

/* A copy of s owned by the report (identical strings shared for labels). */
static char *keep(ckpt_scan_report *r, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p;
    if (r->nstrings == r->strings_cap) {
        size_t cap = r->strings_cap ? r->strings_cap * 2 : 64;
        char **ns = realloc(r->strings, cap * sizeof *ns);
        if (!ns) return NULL;
        r->strings = ns;
        r->strings_cap = cap;
    }
    p = malloc(n);
    if (!p) return NULL;
    memcpy(p, s, n);
    r->strings[r->nstrings++] = p;
    return p;
}

/* Pickle labels repeat for every global: the one copy, found again. */
static const char *keep_label(ckpt_scan_report *r, const char *label)
{
    size_t i;
    for (i = r->n; i > 0 && i + 64 > r->n; i--)
        if (strcmp(r->items[i - 1].pickle, label) == 0) return r->items[i - 1].pickle;
    return keep(r, label);
}

static void on_global(void *ctx, const ckpt_global_ref *g)
{
    ckpt_scan_report *r = ctx;
    ckpt_scan_item *it;
    if (r->oom) return;
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        ckpt_scan_item *p = realloc(r->items, cap * sizeof *p);
        unsigned char *mm;
        if (!p) {
            r->oom = 1;
            return;
        }
        r->items = p;
        mm = realloc(r->memmap, cap);
        if (!mm) {
            r->oom = 1;
            return;
        }
        r->memmap = mm;
        r->cap = cap;
    }
    it = &r->items[r->n];
    memset(it, 0, sizeof *it);
    it->module = keep(r, g->module ? g->module : "");
    it->name = keep(r, g->name ? g->name : "");
    it->pickle = keep_label(r, g->pickle ? g->pickle : "");
    it->offset = g->offset;
    it->called = g->called != 0;
    it->unloaded = g->loader && !g->loader[0];
    it->why = "";
    if (!it->module || !it->name || !it->pickle) {
        r->oom = 1;
        return;
    }
    /* the one global judged by its arguments, which are valid only now */
    r->memmap[r->n] = (unsigned char)(!is_memmap(it->module, it->name) ? MEMMAP_NONE
                                      : g->called                      ? memmap_call(g->args)
                                                                       : MEMMAP_NONE);
    r->n++;
}

/* The machine reports acts it refuses as globals of the pseudo-module
 * "<pickle>" (no Python module can have that name): each is an attack. */
static int act_verdict(ckpt_scan_item *it)
{
    if (strcmp(it->module, "<pickle>") != 0) return 0;
    it->verdict = CKPT_VERDICT_DANGEROUS;
    if (strncmp(it->name, "EXT", 3) == 0)
        it->why = "calls whatever copyreg.add_extension registered under that code, "
                  "a callable the pickle does not name";
    else
        it->why = "overwrites attributes or entries of a class or module "
                  "(module globals, copyreg's registries)";
    return 1;
}

static void classify_all(ckpt_scan_report *r)
{
    size_t i, j;
    int strict = (r->flags & CKPT_SCAN_STRICT) != 0;
    for (i = 0; i < r->n; i++)
        if (!act_verdict(&r->items[i]))
            r->items[i].verdict =
                verdict_of(r->items[i].module, r->items[i].name, &r->items[i].why);
    /* numpy.memmap: by what its call does; named but not called it is
     * what an honest pickle of a memmap holds, unless the pickle wraps a
     * callable (functools.partial(numpy.memmap, ...)) */
    for (i = 0; i < r->n; i++) {
        ckpt_scan_item *it = &r->items[i];
        int mm = r->memmap[i];
        if (it->verdict == CKPT_VERDICT_DANGEROUS || !is_memmap(it->module, it->name)) continue;
        if (mm == MEMMAP_NONE)
            for (j = 0; j < r->n && mm == MEMMAP_NONE; j++)
                if (strcmp(r->items[j].pickle, it->pickle) == 0 &&
                    is_wrapper(r->items[j].module, r->items[j].name))
                    mm = MEMMAP_UNSEEN;
        if (mm == MEMMAP_WRITES || mm == MEMMAP_UNSEEN) {
            it->verdict = CKPT_VERDICT_DANGEROUS;
            it->why = mm == MEMMAP_WRITES ? W_MEMMAP : W_MEMMAP_MODE;
        } else if (mm == MEMMAP_READONLY) {
            it->why = W_MEMMAP_RO;
        }
    }
    /* a wrapper is as dangerous as the pickle it sits in */
    for (i = 0; i < r->n; i++) {
        if (r->items[i].verdict != CKPT_VERDICT_UNKNOWN ||
            !is_wrapper(r->items[i].module, r->items[i].name))
            continue;
        for (j = 0; j < r->n; j++)
            if (strcmp(r->items[j].pickle, r->items[i].pickle) == 0 &&
                r->items[j].verdict == CKPT_VERDICT_DANGEROUS &&
                !is_wrapper(r->items[j].module, r->items[j].name)) {
                r->items[i].verdict = CKPT_VERDICT_DANGEROUS;
                r->items[i].why = "wraps a callable, in a pickle that names a "
                                  "dangerous one";
                break;
            }
    }
    for (i = 0; i < r->n; i++) {
        if (strict && r->items[i].verdict == CKPT_VERDICT_UNKNOWN && r->items[i].why[0] == '\0')
            r->items[i].why = "not on torch's weights_only allowlist (--strict)";
        if (r->items[i].unloaded) { /* listed, not what a load of the file runs */
            r->unloaded[r->items[i].verdict]++;
            continue;
        }
        r->tally[r->items[i].verdict]++;
        if (r->items[i].verdict == CKPT_VERDICT_DANGEROUS && r->items[i].called)
            r->called_dangerous++;
    }
}

static int add_note(ckpt_scan_report *r, const char *note)
{
    char **nn = realloc(r->notes, (r->nnotes + 1) * sizeof *nn);
    if (!nn) return -1;
    r->notes = nn;
    if (!(nn[r->nnotes] = keep(r, note))) return -1;
    r->nnotes++;
    return 0;
}

enum { SCAN_FROM_PATH, SCAN_FROM_MEMORY, SCAN_FROM_READER };

/* Archives inside archives: how deep a scan follows them. */
#define SCAN_MAX_DEPTH 8

/* Where the bytes come from, for the container reader and for libarchive. */
typedef struct scan_src {
    int from;
    const char *path;
    const void *data;
    size_t size;
    const ckpt_reader *reader;
} scan_src;

static void fail_nomem(ckpt_error *err)
{
    if (!err) return;
    memset(err, 0, sizeof *err);
    err->code = CKPT_E_NOMEM;
    err->offset = -1;
    strcpy(err->message, "out of memory for a scan report");
}

static void set_error(ckpt_scan_report *r, ckpt_code code, const char *msg)
{
    size_t n = strlen(msg);
    r->failed = 1;
    memset(&r->error, 0, sizeof r->error);
    r->error.code = code;
    r->error.offset = -1;
    if (n >= sizeof r->error.message) n = sizeof r->error.message - 1;
    memcpy(r->error.message, msg, n);
    r->error.message[n] = '\0';
}

/* The first bytes of the input (up to n), 0 when they cannot be read. */
static size_t head_bytes(const scan_src *s, unsigned char *buf, size_t n)
{
    if (s->from == SCAN_FROM_MEMORY) {
        if (n > s->size) n = s->size;
        memcpy(buf, s->data, n);
        return n;
    }
    if (s->from == SCAN_FROM_READER) {
        if (!s->reader || !s->reader->read) return 0;
        if (n > s->reader->size) n = (size_t)s->reader->size;
        return n && s->reader->read(s->reader->opaque, 0, buf, n) == 0 ? n : 0;
    }
    {
        FILE *fp = fopen(s->path, "rb");
        size_t got;
        if (!fp) return 0;
        got = fread(buf, 1, n, fp);
        fclose(fp);
        return got;
    }
}

/* Compressed streams and archive formats the container reader does not
 * open (gzip, bzip2, xz, zstd, lz4, 7z, rar): only libarchive reads them. */
static int foreign_archive(const unsigned char *h, size_t n)
{
    static const struct {
        const char *magic;
        size_t len;
    } m[] = {
        {"\x1f\x8b", 2}, /* gzip */
        {"BZh", 3},      /* bzip2 */
        {"\xfd"
         "7zXZ\0",
         6},                       /* xz */
        {"\x28\xb5\x2f\xfd", 4},   /* zstd */
        {"\x04\x22\x4d\x18", 4},   /* lz4 */
        {"7z\xbc\xaf\x27\x1c", 6}, /* 7z */
        {"Rar!\x1a\x07", 6},       /* rar */
    };
    size_t i;
    for (i = 0; i < sizeof m / sizeof m[0]; i++)
        if (n >= m[i].len && memcmp(h, m[i].magic, m[i].len) == 0) return 1;
    return 0;
}

static int zip_or_tar(const unsigned char *h, size_t n)
{
    return (n >= 4 && memcmp(h, "PK\x03\x04", 4) == 0) ||
           (n >= 262 && memcmp(h + 257, "ustar", 5) == 0);
}

static ckpt_scan_report *scan_depth(const scan_src *src, const ckpt_options *opt, unsigned flags,
                                    int depth, ckpt_error *err);

/* Append the items and notes of a member's report, labelled MEMBER>pickle. */
static int merge(ckpt_scan_report *r, const ckpt_scan_report *sub, const char *member)
{
    size_t i, ml = strlen(member);
    for (i = 0; i < sub->n && !r->oom; i++) {
        const ckpt_scan_item *it = &sub->items[i];
        size_t pl = strlen(it->pickle);
        char *label = malloc(ml + 1 + pl + 1);
        ckpt_global_ref g;
        if (!label) return -1;
        memcpy(label, member, ml + 1);
        if (strcmp(it->pickle, "pickle") != 0) { /* a plain pickle member: its name */
            label[ml] = '>';
            memcpy(label + ml + 1, it->pickle, pl + 1);
        }
        g.module = it->module;
        g.name = it->name;
        g.pickle = label;
        g.offset = it->offset;
        g.called = it->called;
        g.loader = it->unloaded ? "" : NULL;
        g.args = NULL;
        on_global(r, &g);
        if (r->n && !r->oom) r->memmap[r->n - 1] = sub->memmap[i]; /* judged there */
        free(label);
    }
    for (i = 0; i < sub->nnotes && !r->oom; i++) {
        size_t nl = strlen(sub->notes[i]);
        char *note = malloc(ml + 2 + nl + 1);
        if (!note) return -1;
        memcpy(note, member, ml);
        memcpy(note + ml, ": ", 2);
        memcpy(note + ml + 2, sub->notes[i], nl + 1);
        if (add_note(r, note) != 0) r->oom = 1;
        free(note);
    }
    return r->oom ? -1 : 0;
}

#ifdef CKPT_HAVE_LIBARCHIVE
/* libarchive is not linked: <archive.h> gives its types and constants, and
 * scan_archive() loads the library with dlopen() for each archive it reads
 * (a reference count after the first), its functions resolved into an
 * la_api on the stack, and closes it when that archive is done.  A listing
 * never maps libarchive or what it needs (libxml2, ICU, libstdc++...). */
#include <archive.h>
#include <archive_entry.h>
#include <dlfcn.h>

#ifndef CKPT_LIBARCHIVE_SONAME
#define CKPT_LIBARCHIVE_SONAME "libarchive.so.13"
#endif

/* The functions scan_archive() calls: return type, name, parameters. */
#define LA_FUNCTIONS(X)                                                                            \
    X(struct archive *, archive_read_new, (void))                                                  \
    X(int, archive_read_support_filter_all, (struct archive *))                                    \
    X(int, archive_read_support_format_all, (struct archive *))                                    \
    X(int, archive_read_support_format_raw, (struct archive *))                                    \
    X(int, archive_read_set_options, (struct archive *, const char *))                             \
    X(int, archive_read_open_filename, (struct archive *, const char *, size_t))                   \
    X(int, archive_read_open_memory, (struct archive *, const void *, size_t))                     \
    X(int, archive_read_set_seek_callback, (struct archive *, archive_seek_callback *))            \
    X(int, archive_read_set_skip_callback, (struct archive *, archive_skip_callback *))            \
    X(int, archive_read_set_read_callback, (struct archive *, archive_read_callback *))            \
    X(int, archive_read_set_callback_data, (struct archive *, void *))                             \
    X(int, archive_read_open1, (struct archive *))                                                 \
    X(int, archive_read_next_header, (struct archive *, struct archive_entry **))                  \
    X(la_ssize_t, archive_read_data, (struct archive *, void *, size_t))                           \
    X(int, archive_read_free, (struct archive *))                                                  \
    X(int, archive_errno, (struct archive *))                                                      \
    X(const char *, archive_error_string, (struct archive *))                                      \
    X(const char *, archive_format_name, (struct archive *))                                       \
    X(void, archive_set_error, (struct archive *, int, const char *, ...))                         \
    X(const char *, archive_entry_pathname, (struct archive_entry *))                              \
    X(__LA_MODE_T, archive_entry_filetype, (struct archive_entry *))                               \
    X(int, archive_entry_is_encrypted, (struct archive_entry *))

/* libarchive as dlopen() gave it: the handle and one pointer per function. */
typedef struct la_api {
    void *handle;
#define LA_FIELD(ret, name, params) ret(*name) params;
    LA_FUNCTIONS(LA_FIELD)
#undef LA_FIELD
} la_api;

/* Load libarchive into *la; nonzero, with why in msg, when dlopen() or a
 * dlsym() fails (nothing stays loaded then). */
static int la_load(la_api *la, char *msg, size_t cap)
{
    const char *why;
    void *sym;
    memset(la, 0, sizeof *la);
    (void)dlerror();
    la->handle = dlopen(CKPT_LIBARCHIVE_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!la->handle) {
        why = dlerror();
        snprintf(msg, cap, "%.200s", why ? why : "dlopen failed");
        return -1;
    }
    /* the pointer of each function, copied as bytes (ISO C has no
     * conversion from void * to a function pointer); the unevaluated
     * comparison checks each declared type against <archive.h> */
#define LA_RESOLVE(ret, name, params)                                                              \
    (void)sizeof(la->name == &name);                                                               \
    sym = dlsym(la->handle, #name);                                                                \
    if (!sym) {                                                                                    \
        why = dlerror();                                                                           \
        snprintf(msg, cap, "%.200s", why ? why : "no " #name);                                     \
        dlclose(la->handle);                                                                       \
        memset(la, 0, sizeof *la);                                                                 \
        return -1;                                                                                 \
    }                                                                                              \
    memcpy(&la->name, &sym, sizeof la->name);
    LA_FUNCTIONS(LA_RESOLVE)
#undef LA_RESOLVE
    return 0;
}

static void la_unload(la_api *la)
{
    if (la->handle) dlclose(la->handle);
    memset(la, 0, sizeof *la);
}

/* la_load() copies a function pointer from the bytes of a void *. */
_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "function and data pointers differ");

/* A list of member names, for the one-line error. */
typedef struct name_list {
    char text[200];
    size_t len, count;
} name_list;

/* "NAME (why)", the reason cut short. */
static void name_add(name_list *l, const char *member, const char *why)
{
    char name[200];
    size_t n;
    snprintf(name, sizeof name, "%.100s (%.80s)", member, why);
    n = strlen(name);
    l->count++;
    if (l->len + n + 3 >= sizeof l->text) {
        if (l->len + 4 < sizeof l->text &&
            (l->len < 3 || strcmp(l->text + l->len - 3, "...") != 0)) {
            memcpy(l->text + l->len, l->len ? ", ..." : "...", l->len ? 6 : 4);
            l->len += l->len ? 5 : 3;
        }
        return;
    }
    if (l->len) {
        memcpy(l->text + l->len, ", ", 2);
        l->len += 2;
    }
    memcpy(l->text + l->len, name, n + 1);
    l->len += n;
}

/* Could ckpt open this member: a pickle's first opcode, a ZIP or TAR, or a
 * compressed/foreign archive? */
static int openable(const unsigned char *h, size_t n)
{
    if (n == 0) return 0;
    if (h[0] == 0x80 || strchr("(]})NIJKLFSVUXTcdlt", h[0]) != NULL) return 1;
    return zip_or_tar(h, n) || foreign_archive(h, n) || (n >= 6 && memcmp(h, "\x93NUMPY", 6) == 0);
}

/* libarchive over a ckpt_reader: sequential reads with seek and skip. */
typedef struct arc_reader {
    const la_api *la;
    const ckpt_reader *rd;
    uint64_t pos;
    unsigned char buf[65536];
} arc_reader;

static la_ssize_t arc_read(struct archive *a, void *ud, const void **out)
{
    arc_reader *ar = ud;
    uint64_t left = ar->rd->size > ar->pos ? ar->rd->size - ar->pos : 0;
    size_t n = left < sizeof ar->buf ? (size_t)left : sizeof ar->buf;
    *out = ar->buf;
    if (n == 0) return 0;
    if (ar->rd->read(ar->rd->opaque, ar->pos, ar->buf, n) != 0) {
        ar->la->archive_set_error(a, 5 /* EIO */, "read error at byte %llu",
                                  (unsigned long long)ar->pos);
        return -1;
    }
    ar->pos += n;
    return (la_ssize_t)n;
}

static la_int64_t arc_seek(struct archive *a, void *ud, la_int64_t off, int whence)
{
    arc_reader *ar = ud;
    int64_t base = whence == 0 ? 0 : whence == 1 ? (int64_t)ar->pos : (int64_t)ar->rd->size;
    (void)a;
    if (off < -base || base + off > (int64_t)ar->rd->size) return ARCHIVE_FATAL;
    ar->pos = (uint64_t)(base + off);
    return (la_int64_t)ar->pos;
}

static la_int64_t arc_skip(struct archive *a, void *ud, la_int64_t n)
{
    arc_reader *ar = ud;
    uint64_t left = ar->rd->size - ar->pos;
    (void)a;
    if (n < 0) return 0;
    if ((uint64_t)n > left) n = (la_int64_t)left;
    ar->pos += (uint64_t)n;
    return n;
}

/* A member's bytes, up to `limit` (0 and *big when it is larger). */
static unsigned char *read_member(const la_api *la, struct archive *a, uint64_t limit, size_t *len,
                                  int *big)
{
    size_t cap = 65536, n = 0;
    unsigned char *buf = malloc(cap);
    *big = 0;
    if (!buf) return NULL;
    for (;;) {
        la_ssize_t got;
        if (n == cap) {
            unsigned char *nb;
            if (cap >= limit) {
                *big = 1;
                free(buf);
                return NULL;
            }
            cap = cap * 2 > limit ? (size_t)limit + 1 : cap * 2;
            nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
        }
        got = la->archive_read_data(a, buf + n, cap - n);
        if (got < 0) {
            free(buf);
            return NULL;
        }
        if (got == 0) break;
        n += (size_t)got;
        if (n > limit) {
            *big = 1;
            free(buf);
            return NULL;
        }
    }
    *len = n;
    return buf;
}

/* Scan every member of an archive libarchive reads: each one ckpt can
 * open (a pickle, a torch ZIP/TAR, another archive) is scanned as a file of
 * its own, its globals labelled MEMBER>pickle.  A member that cannot be
 * read or does not open makes the report incomplete, its name in the
 * error: an archive is never clean only because its members were not read. */
static int scan_archive_with(const la_api *la, ckpt_scan_report *r, const scan_src *src,
                             const ckpt_options *o, unsigned flags, int depth)
{
    struct archive *a = la->archive_read_new();
    struct archive_entry *e;
    arc_reader *ar = NULL;
    name_list bad;
    uint64_t limit = o->max_memory ? o->max_memory : (uint64_t)1 << 32;
    size_t members = 0, scanned = 0;
    int rc, ok = 1;
    char line[600];

    memset(&bad, 0, sizeof bad);
    if (!a) return -1;
    la->archive_read_support_filter_all(a);
    la->archive_read_support_format_all(a);
    la->archive_read_support_format_raw(a); /* a single compressed pickle (x.pkl.gz) */
    /* torch.load reads a ZIP record whatever its CRC-32 (miniz built without
     * the check): a bad CRC must not hide a member from the scan
     * (CVE-2025-10156 against picklescan); libarchive before 3.4 lacks the
     * option, which then only costs that member an error */
    (void)la->archive_read_set_options(a, "zip:ignorecrc32");
    if (src->from == SCAN_FROM_PATH) {
        rc = la->archive_read_open_filename(a, src->path, 65536);
    } else if (src->from == SCAN_FROM_MEMORY) {
        rc = la->archive_read_open_memory(a, src->data, src->size);
    } else {
        ar = calloc(1, sizeof *ar);
        if (!ar) {
            la->archive_read_free(a);
            return -1;
        }
        ar->la = la;
        ar->rd = src->reader;
        la->archive_read_set_seek_callback(a, arc_seek);
        la->archive_read_set_skip_callback(a, arc_skip);
        la->archive_read_set_read_callback(a, arc_read);
        la->archive_read_set_callback_data(a, ar);
        rc = la->archive_read_open1(a);
    }
    if (rc != ARCHIVE_OK) {
        snprintf(line, sizeof line, "cannot open the archive: %s",
                 la->archive_error_string(a) ? la->archive_error_string(a) : "unknown format");
        set_error(r, CKPT_E_FORMAT, line);
        la->archive_read_free(a);
        free(ar);
        return 0;
    }
    while ((rc = la->archive_read_next_header(a, &e)) == ARCHIVE_OK || rc == ARCHIVE_WARN) {
        const char *name = la->archive_entry_pathname(e);
        unsigned char *buf;
        size_t len = 0;
        int big = 0;
        if (!name) name = "?";
        /* files; a 7z entry without Unix attributes has no type at all */
        if (la->archive_entry_filetype(e) != AE_IFREG && la->archive_entry_filetype(e) != 0)
            continue;
        if (++members > o->max_entries) {
            snprintf(line, sizeof line, "the archive has more than %u members (max_entries)",
                     o->max_entries);
            set_error(r, CKPT_E_LIMIT, line);
            ok = 0;
            break;
        }
        buf = read_member(la, a, limit, &len, &big);
        if (!buf) {
            snprintf(line, sizeof line, "%.200s: cannot read this member: %s", name,
                     big                           ? "larger than the memory limit (max_memory)"
                     : la->archive_error_string(a) ? la->archive_error_string(a)
                                                   : "out of memory");
            if (add_note(r, line) != 0) r->oom = 1;
            name_add(&bad, name,
                     big                                 ? "too large"
                     : la->archive_entry_is_encrypted(e) ? "encrypted, or flagged so"
                                                         : "unreadable");
            if (!big && la->archive_errno(a) == 0 && !la->archive_error_string(a)) r->oom = 1;
            continue;
        }
        if (!openable(buf, len)) {
            snprintf(line, sizeof line,
                     "%.200s: neither a pickle nor an archive: not scanned (first byte 0x%02x)",
                     name, len ? buf[0] : 0);
            if (len && add_note(r, line) != 0) r->oom = 1;
            free(buf);
            continue;
        }
        if (depth >= SCAN_MAX_DEPTH) {
            snprintf(line, sizeof line, "%.200s: archives nested deeper than %d: not scanned", name,
                     SCAN_MAX_DEPTH);
            if (add_note(r, line) != 0) r->oom = 1;
            name_add(&bad, name, "nested too deep");
            free(buf);
            continue;
        }
        {
            scan_src m = {SCAN_FROM_MEMORY, NULL, buf, len, NULL};
            ckpt_error e2;
            ckpt_scan_report *sub = scan_depth(&m, o, flags, depth + 1, &e2);
            if (!sub) {
                free(buf);
                r->oom = 1;
                break;
            }
            if (merge(r, sub, name) != 0) r->oom = 1;
            if (sub->failed) {
                snprintf(line, sizeof line, "%.200s: %s%s (byte %lld)", name,
                         sub->n ? "could not be read to the end: " : "does not open: ",
                         sub->error.message, (long long)sub->error.offset);
                if (add_note(r, line) != 0) r->oom = 1;
                name_add(&bad, name, sub->error.message);
            }
            scanned++;
            ckpt_scan_free(sub);
        }
        free(buf);
        if (r->oom) break;
    }
    if (ok && rc != ARCHIVE_EOF && !r->oom) {
        snprintf(line, sizeof line, "the archive breaks after %zu members: %s", members,
                 la->archive_error_string(a) ? la->archive_error_string(a) : "read error");
        set_error(r, CKPT_E_FORMAT, line);
    } else if (ok && bad.count && !r->oom) {
        snprintf(line, sizeof line, "%zu archive member%s ckpt cannot open: %s", bad.count,
                 bad.count == 1 ? "" : "s", bad.text);
        set_error(r, CKPT_E_FORMAT, line);
    }
    if (!r->oom) {
        snprintf(line, sizeof line,
                 "%s archive read through libarchive: %zu member%s, %zu scanned as files",
                 la->archive_format_name(a) ? la->archive_format_name(a) : "an", members,
                 members == 1 ? "" : "s", scanned);
        if (add_note(r, line) != 0) r->oom = 1;
    }
    la->archive_read_free(a);
    free(ar);
    return r->oom ? -1 : 0;
}

/* Why an archive is not scanned when libarchive does not load. */
#define LA_MISSING                                                                                 \
    "an archive that is not a torch.save file (a generic ZIP or TAR, a compressed TAR, 7z): "      \
    "libarchive (%s) cannot be loaded: %.*s; not scanned"

/* scan_archive_with() on libarchive loaded for this archive alone: every
 * archive it opened is freed before the library is closed.  Without the
 * library the archive is refused as a build without libarchive refuses it. */
static int scan_archive(ckpt_scan_report *r, const scan_src *src, const ckpt_options *o,
                        unsigned flags, int depth)
{
    la_api la;
    char why[240], line[sizeof r->error.message];
    int rc, room;
    if (la_load(&la, why, sizeof why) != 0) {
        /* dlerror()'s text cut short, so that the line keeps its end */
        room = (int)sizeof line - 1 - snprintf(NULL, 0, LA_MISSING, CKPT_LIBARCHIVE_SONAME, 0, "");
        snprintf(line, sizeof line, LA_MISSING, CKPT_LIBARCHIVE_SONAME, room > 0 ? room : 0, why);
        set_error(r, CKPT_E_UNSUPPORTED, line);
        return 0;
    }
    rc = scan_archive_with(&la, r, src, o, flags, depth);
    la_unload(&la);
    return rc;
}
#else
static int scan_archive(ckpt_scan_report *r, const scan_src *src, const ckpt_options *o,
                        unsigned flags, int depth)
{
    (void)src, (void)o, (void)flags, (void)depth;
    set_error(r, CKPT_E_UNSUPPORTED,
              "an archive that is not a torch.save file (a generic ZIP or TAR, a compressed "
              "TAR, 7z): this ckpt was built without libarchive and cannot open its members");
    return 0;
}
#endif

/* Bytes [off, end) of the input in memory (NULL when they cannot be read
 * or pass `limit`). */
static unsigned char *read_rest(const scan_src *s, uint64_t off, uint64_t limit, size_t *len)
{
    unsigned char *buf;
    uint64_t size;
    if (s->from == SCAN_FROM_MEMORY) {
        size = s->size;
    } else if (s->from == SCAN_FROM_READER) {
        size = s->reader->size;
    } else {
        FILE *fp = fopen(s->path, "rb");
        long end;
        if (!fp) return NULL;
        if (fseek(fp, 0, SEEK_END) != 0 || (end = ftell(fp)) < 0) {
            fclose(fp);
            return NULL;
        }
        size = (uint64_t)end;
        buf = NULL;
        if (off <= size && size - off <= limit && fseek(fp, (long)off, SEEK_SET) == 0 &&
            (buf = malloc(size - off ? (size_t)(size - off) : 1)) != NULL &&
            fread(buf, 1, (size_t)(size - off), fp) != (size_t)(size - off)) {
            free(buf);
            buf = NULL;
        }
        fclose(fp);
        if (buf) *len = (size_t)(size - off);
        return buf;
    }
    if (off > size || size - off > limit) return NULL;
    buf = malloc(size - off ? (size_t)(size - off) : 1);
    if (!buf) return NULL;
    if (s->from == SCAN_FROM_MEMORY)
        memcpy(buf, (const unsigned char *)s->data + off, (size_t)(size - off));
    else if (size > off &&
             s->reader->read(s->reader->opaque, off, buf, (size_t)(size - off)) != 0) {
        free(buf);
        return NULL;
    }
    *len = (size_t)(size - off);
    return buf;
}

/* A numpy .npy file (numpy.save; the members of an .npz): an array of
 * dtype object is stored as a pickle after the header, which numpy.load
 * (allow_pickle=True) unpickles; any other array holds no pickle. */
static void scan_npy(ckpt_scan_report *r, const scan_src *src, const unsigned char *h, size_t hn,
                     const ckpt_options *o, unsigned flags, int depth)
{
    size_t hl, start, len = 0;
    unsigned char *buf;
    char line[400];
    if (hn < 12 || (h[6] != 1 && h[6] != 2 && h[6] != 3)) {
        set_error(r, CKPT_E_FORMAT, "numpy .npy file with an unknown version");
        return;
    }
    hl = h[6] == 1 ? (size_t)h[8] | (size_t)h[9] << 8
                   : (size_t)h[8] | (size_t)h[9] << 8 | (size_t)h[10] << 16 | (size_t)h[11] << 24;
    start = (h[6] == 1 ? 10 : 12) + hl;
    buf = read_rest(src, 0, start + (o->max_memory ? o->max_memory : (uint64_t)1 << 32), &len);
    if (!buf || len < start) {
        free(buf);
        set_error(r, CKPT_E_FORMAT,
                  "numpy .npy file: cannot read its header and data (truncated, or larger "
                  "than the memory limit)");
        return;
    }
    {
        /* the header is a Python dict literal: {'descr': '|O', ...}; an
         * object field of a structured dtype is ('name', '|O') */
        char *hdr = malloc(hl + 1);
        int object;
        if (!hdr) {
            free(buf);
            r->oom = 1;
            return;
        }
        memcpy(hdr, buf + start - hl, hl);
        hdr[hl] = '\0';
        object =
            strstr(hdr, "|O'") != NULL || strstr(hdr, "'O'") != NULL || strstr(hdr, "|O\"") != NULL;
        free(hdr);
        if (!object) {
            if (add_note(r, "numpy .npy array without objects: it holds no pickle") != 0)
                r->oom = 1;
            free(buf);
            return;
        }
    }
    {
        scan_src m = {SCAN_FROM_MEMORY, NULL, buf + start, len - start, NULL};
        ckpt_error e2;
        ckpt_scan_report *sub = scan_depth(&m, o, flags, depth + 1, &e2);
        if (!sub) {
            r->oom = 1;
        } else {
            if (merge(r, sub, "npy:pickle") != 0) r->oom = 1;
            if (sub->failed) {
                snprintf(line, sizeof line, "numpy .npy object array: its pickle %s%.250s",
                         sub->n ? "could not be read to the end: " : "does not open: ",
                         sub->error.message);
                set_error(r, sub->error.code, line);
            }
            snprintf(line, sizeof line,
                     "numpy .npy object array: its pickle starts at byte %zu (offsets are "
                     "within it)",
                     start);
            if (add_note(r, line) != 0) r->oom = 1;
            ckpt_scan_free(sub);
        }
    }
    free(buf);
}

/* Forget what a failed container open reported, for a scan as an archive. */
static void reset_report(ckpt_scan_report *r)
{
    r->n = 0;
    r->nnotes = 0;
    r->failed = 0;
    r->format = -1;
    memset(&r->error, 0, sizeof r->error);
    r->error.offset = -1;
}

static int passthrough_read(void *opaque, uint64_t offset, void *buf, size_t n)
{
    const ckpt_reader *rd = opaque;
    return rd->read(rd->opaque, offset, buf, n);
}

static ckpt_scan_report *scan_depth(const scan_src *src, const ckpt_options *opt, unsigned flags,
                                    int depth, ckpt_error *err)
{
    ckpt_scan_report *r = calloc(1, sizeof *r);
    ckpt_options o;
    ckpt_file *f = NULL;
    size_t i;
    unsigned char head[512];
    size_t hn;

    if (!r) {
        fail_nomem(err);
        return NULL;
    }
    if (opt)
        o = *opt;
    else
        ckpt_options_init(&o);
    o.key = NULL;
    o.skip_tensors = 1; /* every pickle, whatever its tensors look like */
    o.on_global = on_global;
    o.on_global_ctx = r;
    o.scan_all_pickles = 1; /* also the pickles a load never reads */
    r->flags = flags;
    r->format = -1;
    memset(&r->error, 0, sizeof r->error);
    r->error.offset = -1;
    hn = head_bytes(src, head, sizeof head);
    if (foreign_archive(head, hn)) {
        if (scan_archive(r, src, &o, flags, depth) != 0) r->oom = 1;
    } else if (hn >= 6 && memcmp(head, "\x93NUMPY", 6) == 0) {
        scan_npy(r, src, head, hn, &o, flags, depth);
    } else {
        if (src->from == SCAN_FROM_PATH) {
            f = ckpt_open_path(src->path, &o, &r->error); /* also folders, indexes */
        } else if (src->from == SCAN_FROM_MEMORY) {
            f = ckpt_open_memory(src->data, src->size, &o, &r->error);
        } else if (!src->reader || !src->reader->read) {
            f = ckpt_open_reader(NULL, &o, &r->error);
        } else {
            /* the caller's reader stays open for a second look as an archive */
            ckpt_reader pass = *src->reader;
            pass.read = passthrough_read;
            pass.close = NULL;
            pass.opaque = (void *)src->reader;
            f = ckpt_open_reader(&pass, &o, &r->error);
        }
        if (f) {
            ckpt_info info;
            size_t nn = ckpt_note_count(f);
            ckpt_get_info(f, &info);
            r->format = (int)info.format;
            for (i = 0; i < nn && !r->oom; i++) {
                const char *note = ckpt_note_at(f, i);
                if (add_note(r, note ? note : "") != 0) r->oom = 1;
            }
            if (info.format == CKPT_FORMAT_TORCHSCRIPT && !r->oom && add_note(r, TS_NOTE) != 0)
                r->oom = 1;
            ckpt_close(f);
        } else {
            r->failed = 1;
            /* a ZIP or TAR that is not torch's (the reader says "not a
             * torch.save" file/archive) and named nothing: its members */
            if (!r->oom && r->n == 0 && zip_or_tar(head, hn) && r->error.code == CKPT_E_FORMAT &&
                strstr(r->error.message, "not a torch.save") != NULL) {
                reset_report(r);
                if (scan_archive(r, src, &o, flags, depth) != 0) r->oom = 1;
            }
        }
    }
    if (r->oom) {
        ckpt_scan_free(r);
        fail_nomem(err);
        return NULL;
    }
    classify_all(r);
    return r;
}

static ckpt_scan_report *scan_any(int from, const char *path, const void *data, size_t size,
                                  const ckpt_reader *reader, const ckpt_options *opt,
                                  unsigned flags, ckpt_error *err)
{
    scan_src src = {from, path, data, size, reader};
    ckpt_scan_report *r = scan_depth(&src, opt, flags, 0, err);
    if (from == SCAN_FROM_READER && reader && reader->close) reader->close(reader->opaque);
    return r;
}

ckpt_scan_report *ckpt_scan_path(const char *path, const ckpt_options *opt, unsigned flags,
                                 ckpt_error *err)
{
    return scan_any(SCAN_FROM_PATH, path, NULL, 0, NULL, opt, flags, err);
}

ckpt_scan_report *ckpt_scan_memory(const void *data, size_t size, const ckpt_options *opt,
                                   unsigned flags, ckpt_error *err)
{
    return scan_any(SCAN_FROM_MEMORY, NULL, data, size, NULL, opt, flags, err);
}

ckpt_scan_report *ckpt_scan_reader(const ckpt_reader *reader, const ckpt_options *opt,
                                   unsigned flags, ckpt_error *err)
{
    return scan_any(SCAN_FROM_READER, NULL, NULL, 0, reader, opt, flags, err);
}

void ckpt_scan_free(ckpt_scan_report *r)
{
    size_t i;
    if (!r) return;
    for (i = 0; i < r->nstrings; i++) free(r->strings[i]);
    free(r->strings);
    free(r->items);
    free(r->memmap);
    free(r->notes);
    free(r);
}

size_t ckpt_scan_count(const ckpt_scan_report *r)
{
    return r ? r->n : 0;
}

const ckpt_scan_item *ckpt_scan_at(const ckpt_scan_report *r, size_t i)
{
    return r && i < r->n ? &r->items[i] : NULL;
}

size_t ckpt_scan_tally(const ckpt_scan_report *r, ckpt_verdict v)
{
    return r && (unsigned)v < 3 ? r->tally[v] : 0;
}

size_t ckpt_scan_unloaded(const ckpt_scan_report *r, ckpt_verdict v)
{
    return r && (unsigned)v < 3 ? r->unloaded[v] : 0;
}

size_t ckpt_scan_called_dangerous(const ckpt_scan_report *r)
{
    return r ? r->called_dangerous : 0;
}

/* A file not read to its end is never SAFE: what was not read may name
 * anything. */
ckpt_verdict ckpt_scan_verdict(const ckpt_scan_report *r)
{
    if (!r) return CKPT_VERDICT_UNKNOWN;
    return r->tally[CKPT_VERDICT_DANGEROUS]              ? CKPT_VERDICT_DANGEROUS
           : r->tally[CKPT_VERDICT_UNKNOWN] || r->failed ? CKPT_VERDICT_UNKNOWN
                                                         : CKPT_VERDICT_SAFE;
}

int ckpt_scan_flagged(const ckpt_scan_report *r)
{
    if (!r) return 0;
    return r->tally[CKPT_VERDICT_DANGEROUS] > 0 ||
           ((r->flags & CKPT_SCAN_STRICT) && r->tally[CKPT_VERDICT_UNKNOWN] > 0);
}

unsigned ckpt_scan_flags(const ckpt_scan_report *r)
{
    return r ? r->flags : 0;
}

const ckpt_error *ckpt_scan_error(const ckpt_scan_report *r)
{
    return r && r->failed ? &r->error : NULL;
}

int ckpt_scan_format(const ckpt_scan_report *r)
{
    return r ? r->format : -1;
}

size_t ckpt_scan_note_count(const ckpt_scan_report *r)
{
    return r ? r->nnotes : 0;
}

const char *ckpt_scan_note_at(const ckpt_scan_report *r, size_t i)
{
    return r && i < r->nnotes ? r->notes[i] : NULL;
}
