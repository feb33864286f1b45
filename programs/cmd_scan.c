/*
 * cmd_scan.c - `ckpt scan`: every global a checkpoint's pickles reference,
 * with a verdict for each.
 *
 * The library runs every pickle of the file (data.pkl, each pickle of a
 * legacy stream, each TAR member, TorchScript's data.pkl and constants.pkl)
 * without executing anything and reports each GLOBAL / STACK_GLOBAL as the
 * machine resolved it (through the memo, Python 2 names mapped).  This file
 * only classifies the names:
 *
 *   safe       on the list torch.load(weights_only=True) accepts by default
 *              (torch/_weights_only_unpickler.py, _get_allowed_globals)
 *   dangerous  can run code, touch files or the network, or load another
 *              pickle when torch.load(weights_only=False) unpickles the file
 *   unknown    anything else: inert here, but torch.load would import and
 *              call it (user classes, nn modules of full-model saves, numpy)
 *
 * The tables below are plain data; a rule matches a module and, optionally,
 * one name in it ("*" suffix: every name with that prefix).
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include "cli.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_DANGEROUS 3 /* exit status: something can run code */

#define TS_NOTE "TorchScript archive: its pickles are scanned, its code/ " \
                "records (TorchScript source that torch.jit.load compiles) are not"

static const char usage[] =
    "Usage: ckpt scan [--strict] [--json] FILE...\n"
    "List every global (class or function) the file's pickles reference,\n"
    "with a verdict, without running anything from the file.  Every pickle\n"
    "of the container is read: data.pkl, each pickle of a legacy stream,\n"
    "each TAR member, TorchScript's data.pkl and constants.pkl.  A name is\n"
    "resolved as the pickle machine resolves it (GLOBAL, STACK_GLOBAL through\n"
    "the memo, Python 2 module names mapped).\n"
    "\n"
    "Verdicts:\n"
    "  safe       allowed by torch.load(weights_only=True): tensor rebuild\n"
    "             functions, storage and tensor classes, dtypes, torch.Size,\n"
    "             torch.device, OrderedDict, set, bytes via _codecs.encode, ...\n"
    "  unknown    inert here, but not on that list: user classes, nn modules\n"
    "             of full-model saves, argparse.Namespace, numpy objects, ...\n"
    "  dangerous  can run code when unpickled by torch.load(weights_only=False):\n"
    "             os, subprocess, sys, builtins eval/exec/getattr/open/...,\n"
    "             importlib, pickle/marshal loads, socket, ctypes, ...\n"
    "A global that the pickle calls (REDUCE, NEWOBJ, INST, OBJ) is marked\n"
    "'called'.  Oddities of the pickles (a second PROTO, data after STOP, a\n"
    "pickle inside a pickle) are listed as notes.  A file that breaks part way\n"
    "still has every global met up to that point listed, then the error on\n"
    "stderr; a file where no global was met before the error prints only the\n"
    "error (with --json, the object is always printed).\n"
    "\n"
    "Output: a table (VERDICT, GLOBAL, PICKLE, OFFSET = byte offset of the\n"
    "opcode in the file, or in the inflated record for a deflated ZIP\n"
    "record, CALLED, WHY) and a summary line.  Names from the file are\n"
    "escaped: \\\\, \\n, \\xHH for control characters and bytes that are not\n"
    "UTF-8, \\uXXXX for C1 controls, bidi and invisible characters.\n"
    "Several files (ckpt scan *.bin): each under a '==> FILE <==' header;\n"
    "with --json one object per line (each has \"file\"); every file is\n"
    "scanned and the exit status is the worst (3 over 1 over 0).\n"
    "\n"
    "Options:\n"
    "  --strict    treat unknown globals as dangerous (exit 3)\n"
    "  --json      one JSON object instead: {\"file\", \"format\", \"complete\",\n"
    "              \"error\", \"strict\", \"verdict\", \"counts\": {\"safe\",\n"
    "              \"unknown\", \"dangerous\", \"called_dangerous\"}, \"globals\":\n"
    "              [{\"module\", \"name\", \"global\", \"pickle\", \"offset\",\n"
    "              \"called\", \"verdict\", \"why\"}], \"notes\": [...]}\n"
    "  -h, --help  show this help\n"
    "\n"
    "Exit status: 0 nothing dangerous; 3 something dangerous (or, with\n"
    "--strict, unknown); 1 the file could not be read to the end and nothing\n"
    "dangerous was met before the error; 2 usage error.\n";

/* ------------------------------------------------------------------------ */
/* The tables                                                                 */
/* ------------------------------------------------------------------------ */

typedef enum verdict { V_SAFE = 0, V_UNKNOWN = 1, V_DANGEROUS = 2 } verdict;

static const char *const verdict_names[] = {"safe", "unknown", "dangerous"};

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
    "float64", "double", "float32", "float", "float16", "half", "bfloat16",
    "int64", "long", "int32", "int", "int16", "short", "int8", "uint8",
    "bool", "complex32", "chalf", "complex64", "cfloat", "complex128",
    "cdouble", "qint8", "quint8", "qint32", "quint4x2", "quint2x4",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2", "uint16", "uint32", "uint64",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7",
    "int1", "int2", "int3", "int4", "int5", "int6", "int7",
    "bits1x8", "bits2x4", "bits4x2", "bits8", "bits16",
};

/* torch.<Kind>Storage / torch.<Kind>Tensor (also under torch.cuda, and the
 * sparse tensor classes under torch.sparse and torch.cuda.sparse). */
static const char *const storage_kinds[] = {
    "Double", "Float", "Half", "BFloat16", "Long", "Int", "Short", "Char",
    "Byte", "Bool", "ComplexDouble", "ComplexFloat", "ComplexHalf", "QInt8",
    "QUInt8", "QInt32", "QUInt4x2", "QUInt2x4",
};

/* Python 2 module names the Python unpickler maps (fix_imports), for the
 * ones that lead to a dangerous module; the machine already maps
 * __builtin__, exceptions and copy_reg. */
static const struct {
    const char *py2, *py3;
} py2_modules[] = {
    {"commands", "subprocess"}, {"cPickle", "pickle"}, {"thread", "_thread"},
    {"urllib2", "urllib.request"}, {"httplib", "http.client"},
    {"SocketServer", "socketserver"}, {"BaseHTTPServer", "http.server"},
    {"SimpleHTTPServer", "http.server"}, {"CGIHTTPServer", "http.server"},
    {"xmlrpclib", "xmlrpc.client"}, {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"DocXMLRPCServer", "xmlrpc.server"},
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
    if (pn > 0 && pat[pn - 1] == '*')
        return nn >= pn - 1 && memcmp(name, pat, pn - 1) == 0;
    return pn == nn && memcmp(name, pat, nn) == 0;
}

static const rule *match(const rule *rules, size_t n, const char *mod,
                         size_t mn, const char *name, size_t nn)
{
    size_t i;
    for (i = 0; i < n; i++) {
        if (rules[i].name == NULL) {
            if (module_in(mod, mn, rules[i].module))
                return &rules[i];
        } else if (module_is(mod, mn, rules[i].module) &&
                   name_is(name, nn, rules[i].name)) {
            return &rules[i];
        }
    }
    return NULL;
}

#define NRULES(t) (sizeof t / sizeof t[0])

static const rule *dangerous_pair(const char *mod, size_t mn, const char *name,
                                  size_t nn)
{
    size_t i;
    const rule *r = match(dangerous_rules, NRULES(dangerous_rules), mod, mn,
                          name, nn);
    if (r)
        return r;
    for (i = 0; i < sizeof py2_modules / sizeof py2_modules[0]; i++)
        if (module_in(mod, mn, py2_modules[i].py2)) {
            const char *to = py2_modules[i].py3;
            return match(dangerous_rules, NRULES(dangerous_rules), to,
                         strlen(to), name, nn);
        }
    /* Python 2's __builtin__.intern is sys.intern (sys is refused) */
    if (module_is(mod, mn, "builtins") && name_is(name, nn, "intern"))
        return match(dangerous_rules, NRULES(dangerous_rules), "sys", 3,
                     name, nn);
    return NULL;
}

static int is_safe_torch_class(const char *mod, const char *name)
{
    size_t i, nn = strlen(name);
    int storage = nn > 7 && strcmp(name + nn - 7, "Storage") == 0;
    int tensor = nn > 6 && strcmp(name + nn - 6, "Tensor") == 0;
    size_t stem = nn - (storage ? 7 : tensor ? 6 : 0);
    if (!storage && !tensor)
        return 0;
    if (storage && strcmp(mod, "torch") != 0 && strcmp(mod, "torch.cuda") != 0)
        return 0;
    if (tensor && strcmp(mod, "torch") != 0 && strcmp(mod, "torch.cuda") != 0 &&
        strcmp(mod, "torch.sparse") != 0 && strcmp(mod, "torch.cuda.sparse") != 0)
        return 0;
    for (i = 0; i < sizeof storage_kinds / sizeof storage_kinds[0]; i++)
        if (strlen(storage_kinds[i]) == stem &&
            memcmp(storage_kinds[i], name, stem) == 0)
            return 1;
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
static verdict verdict_of(const char *module, const char *name, const char **why)
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
        if (nlen > 4 && memcmp(name, "__", 2) == 0 &&
            memcmp(name + nlen - 2, "__", 2) == 0 &&
            !(strcmp(module, "copyreg") == 0 &&
              (strcmp(name, "__newobj__") == 0 || strcmp(name, "__newobj_ex__") == 0))) {
            r = dangerous_pair(module, mlen, name, nlen);
            *why = r ? r->why : "a dunder attribute of a module";
            return V_DANGEROUS;
        }
        r = dangerous_pair(module, mlen, name, nlen);
        if (r) {
            *why = r->why;
            return V_DANGEROUS;
        }
        if (match(safe_rules, NRULES(safe_rules), module, mlen, name, nlen) ||
            is_safe_torch_class(module, name)) {
            *why = W_SAFE;
            return V_SAFE;
        }
        if (strcmp(module, "torch") == 0)
            for (i = 0; i < sizeof torch_dtypes / sizeof torch_dtypes[0]; i++)
                if (strcmp(name, torch_dtypes[i]) == 0) {
                    *why = W_SAFE;
                    return V_SAFE;
                }
        return V_UNKNOWN;
    }

    /* a dotted name: split module.name into its components */
    path = malloc(total + 1);
    if (!path) {
        *why = "name too long to check";
        return V_DANGEROUS;
    }
    memcpy(path, module, mlen);
    path[mlen] = '.';
    memcpy(path + mlen + 1, name, nlen + 1);
    for (i = 0; i <= total && nparts < 128;) {
        size_t j = i;
        while (j < total && path[j] != '.')
            j++;
        starts[nparts] = i;
        ends[nparts] = j;
        if (j <= mlen)
            mparts = nparts + 1;
        nparts++;
        i = j + 1;
    }
    if (nparts >= 128) {
        free(path);
        *why = "a name of more than 128 parts";
        return V_DANGEROUS;
    }
    for (k = mparts; k < nparts; k++) {
        size_t len = ends[k] - starts[k];
        if (len >= 2 && path[starts[k]] == '_' && path[starts[k] + 1] == '_') {
            free(path);
            *why = "reaches a dunder attribute through a dotted name";
            return V_DANGEROUS;
        }
    }
    /* candidates: modules starting at the first component or at any
     * attribute, each followed by one name component */
    for (i = 0; i + 1 < nparts; i++) {
        if (i > 0 && i < mparts)
            continue; /* "a.os" is a submodule of a, not os */
        for (k = i + 1 < mparts ? mparts : i + 1; k < nparts; k++) {
            const char *mod = path + starts[i];
            size_t mn = ends[k - 1] - starts[i];
            r = dangerous_pair(mod, mn, path + starts[k], ends[k] - starts[k]);
            if (r) {
                free(path);
                *why = r->why;
                return V_DANGEROUS;
            }
        }
    }
    free(path);
    return V_UNKNOWN;
}

/* functools.partial & co. are inert wrappers; they are dangerous when what
 * they wrap is, and that is decided per pickle (see classify_all). */
static int is_wrapper(const char *module, const char *name)
{
    return (strcmp(module, "functools") == 0 || strcmp(module, "_functools") == 0) &&
           (strcmp(name, "partial") == 0 || strcmp(name, "partialmethod") == 0 ||
            strcmp(name, "reduce") == 0);
}

/* ------------------------------------------------------------------------ */
/* Collecting                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct found {
    char *module, *name;
    const char *pickle; /* interned in scan.labels */
    int64_t offset;
    int called;
    verdict v;
    const char *why;
} found;

typedef struct scan {
    found *items;
    size_t n, cap;
    char **labels;
    size_t nlabels;
    int oom;
} scan;

static char *dup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static const char *intern_label(scan *s, const char *label)
{
    size_t i;
    char **nl;
    for (i = 0; i < s->nlabels; i++)
        if (strcmp(s->labels[i], label) == 0)
            return s->labels[i];
    nl = realloc(s->labels, (s->nlabels + 1) * sizeof *nl);
    if (!nl)
        return NULL;
    s->labels = nl;
    if (!(nl[s->nlabels] = dup(label)))
        return NULL;
    return nl[s->nlabels++];
}

static void on_global(void *ctx, const ckpt_global_ref *g)
{
    scan *s = ctx;
    found *it;
    if (s->oom)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        found *p = realloc(s->items, cap * sizeof *p);
        if (!p) {
            s->oom = 1;
            return;
        }
        s->items = p;
        s->cap = cap;
    }
    it = &s->items[s->n];
    memset(it, 0, sizeof *it);
    it->module = dup(g->module ? g->module : "");
    it->name = dup(g->name ? g->name : "");
    it->pickle = intern_label(s, g->pickle ? g->pickle : "");
    it->offset = g->offset;
    it->called = g->called != 0;
    if (!it->module || !it->name || !it->pickle) {
        free(it->module);
        free(it->name);
        s->oom = 1;
        return;
    }
    s->n++;
}

static void scan_free(scan *s)
{
    size_t i;
    for (i = 0; i < s->n; i++) {
        free(s->items[i].module);
        free(s->items[i].name);
    }
    for (i = 0; i < s->nlabels; i++)
        free(s->labels[i]);
    free(s->items);
    free(s->labels);
}

typedef struct counts {
    size_t v[3];
    size_t called_dangerous;
} counts;

static void classify_all(scan *s, int strict, counts *c)
{
    size_t i, j;
    memset(c, 0, sizeof *c);
    for (i = 0; i < s->n; i++)
        s->items[i].v = verdict_of(s->items[i].module, s->items[i].name,
                                   &s->items[i].why);
    /* a wrapper is as dangerous as the pickle it sits in */
    for (i = 0; i < s->n; i++) {
        if (s->items[i].v != V_UNKNOWN ||
            !is_wrapper(s->items[i].module, s->items[i].name))
            continue;
        for (j = 0; j < s->n; j++)
            if (s->items[j].pickle == s->items[i].pickle &&
                s->items[j].v == V_DANGEROUS &&
                !is_wrapper(s->items[j].module, s->items[j].name)) {
                s->items[i].v = V_DANGEROUS;
                s->items[i].why = "wraps a callable, in a pickle that names a "
                                  "dangerous one";
                break;
            }
    }
    for (i = 0; i < s->n; i++) {
        if (strict && s->items[i].v == V_UNKNOWN && s->items[i].why[0] == '\0')
            s->items[i].why = "not on torch's weights_only allowlist (--strict)";
        c->v[s->items[i].v]++;
        if (s->items[i].v == V_DANGEROUS && s->items[i].called)
            c->called_dangerous++;
    }
}

/* ------------------------------------------------------------------------ */
/* Output                                                                     */
/* ------------------------------------------------------------------------ */

/* Text shown in the table, escaped (cli_escape), so a row stays one line
 * and shows what the file names, whatever it names. */
static size_t shown_width(const char *s)
{
    return cli_term_width(s);
}

static void put_shown(const char *s)
{
    cli_term_put(stdout, s);
}

static void pad(size_t n)
{
    while (n-- > 0)
        putchar(' ');
}

static size_t global_width(const found *it)
{
    return shown_width(it->module) + 1 + shown_width(it->name);
}

static void print_table(const scan *s)
{
    size_t i, wv = 7, wg = 6, wp = 6, wo = 6;
    char num[32];
    for (i = 0; i < s->n; i++) {
        const found *it = &s->items[i];
        size_t w;
        if ((w = strlen(verdict_names[it->v])) > wv)
            wv = w;
        if ((w = global_width(it)) > wg)
            wg = w;
        if ((w = shown_width(it->pickle)) > wp)
            wp = w;
        if ((w = (size_t)snprintf(num, sizeof num, "%lld", (long long)it->offset)) > wo)
            wo = w;
    }
    printf("%-*s  %-*s  %-*s  %*s  %-6s  %s\n", (int)wv, "VERDICT", (int)wg,
           "GLOBAL", (int)wp, "PICKLE", (int)wo, "OFFSET", "CALLED", "WHY");
    for (i = 0; i < s->n; i++) {
        const found *it = &s->items[i];
        printf("%-*s  ", (int)wv, verdict_names[it->v]);
        put_shown(it->module);
        putchar('.');
        put_shown(it->name);
        pad(wg - global_width(it) + 2);
        put_shown(it->pickle);
        pad(wp - shown_width(it->pickle) + 2);
        printf("%*lld  ", (int)wo, (long long)it->offset);
        if (it->v != V_SAFE && it->why[0])
            printf("%-6s  %s", it->called ? "yes" : "no", it->why);
        else
            fputs(it->called ? "yes" : "no", stdout);
        putchar('\n');
        if ((i & 4095) == 0 && cli_stdout_failed())
            return;
    }
}

static void print_summary(const char *path, const scan *s, const counts *c,
                          int strict, int complete)
{
    fputs("summary: ", stdout);
    put_shown(path);
    printf(": %zu global%s%s: %zu safe, %zu unknown, %zu dangerous", s->n,
           s->n == 1 ? "" : "s", complete ? "" : " met before the error",
           c->v[V_SAFE], c->v[V_UNKNOWN], c->v[V_DANGEROUS]);
    if (c->v[V_DANGEROUS])
        printf(" (%zu called) -- DANGEROUS: torch.load(weights_only=False) of "
               "this file can run code",
               c->called_dangerous);
    else if (strict && c->v[V_UNKNOWN])
        fputs(" -- unknown globals refused (--strict)", stdout);
    else if (c->v[V_UNKNOWN])
        fputs(" -- nothing dangerous; unknown globals are not on torch's "
              "weights_only list",
              stdout);
    else
        fputs(" -- nothing dangerous", stdout);
    if (!complete)
        fputs("; the rest of the file could not be read", stdout);
    putchar('\n');
}

static void json_str(const char *s)
{
    cli_json_string(stdout, s, strlen(s));
}

static void print_json(const char *path, const ckpt_file *f, const scan *s,
                       const counts *c, int strict, const ckpt_error *err,
                       const char *overall)
{
    size_t i, nn;
    fputs("{\"file\": ", stdout);
    json_str(path);
    fputs(", \"format\": ", stdout);
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        json_str(ckpt_format_name(info.format));
    } else {
        fputs("null", stdout);
    }
    printf(", \"complete\": %s, \"error\": ", f ? "true" : "false");
    if (err) {
        fputs("{\"message\": ", stdout);
        json_str(err->message[0] ? err->message : ckpt_code_name(err->code));
        printf(", \"code\": \"%s\", \"offset\": ", ckpt_code_name(err->code));
        if (err->offset >= 0)
            printf("%lld}", (long long)err->offset);
        else
            fputs("null}", stdout);
    } else {
        fputs("null", stdout);
    }
    printf(", \"strict\": %s, \"verdict\": \"%s\", \"counts\": {\"safe\": %zu, "
           "\"unknown\": %zu, \"dangerous\": %zu, \"called_dangerous\": %zu}, "
           "\"globals\": [",
           strict ? "true" : "false", overall, c->v[V_SAFE], c->v[V_UNKNOWN],
           c->v[V_DANGEROUS], c->called_dangerous);
    for (i = 0; i < s->n; i++) {
        const found *it = &s->items[i];
        fputs(i ? ", {\"module\": " : "{\"module\": ", stdout);
        json_str(it->module);
        fputs(", \"name\": ", stdout);
        json_str(it->name);
        fputs(", \"global\": ", stdout);
        {
            size_t a = strlen(it->module), b = strlen(it->name);
            char *full = malloc(a + b + 2);
            if (full) {
                memcpy(full, it->module, a);
                full[a] = '.';
                memcpy(full + a + 1, it->name, b + 1);
                json_str(full);
                free(full);
            } else {
                fputs("null", stdout);
            }
        }
        fputs(", \"pickle\": ", stdout);
        json_str(it->pickle);
        printf(", \"offset\": %lld, \"called\": %s, \"verdict\": \"%s\", \"why\": ",
               (long long)it->offset, it->called ? "true" : "false",
               verdict_names[it->v]);
        json_str(it->why);
        putchar('}');
        if ((i & 4095) == 0 && cli_stdout_failed())
            return;
    }
    fputs("], \"notes\": [", stdout);
    nn = f ? ckpt_note_count(f) : 0;
    for (i = 0; i < nn; i++) {
        const char *note = ckpt_note_at(f, i);
        if (i)
            fputs(", ", stdout);
        json_str(note ? note : "");
    }
    if (f) {
        ckpt_info info;
        ckpt_get_info(f, &info);
        if (info.format == CKPT_FORMAT_TORCHSCRIPT) {
            fputs(nn ? ", " : "", stdout);
            json_str(TS_NOTE);
        }
    }
    fputs("]}\n", stdout);
}

typedef struct scan_opts {
    int strict, json;
} scan_opts;

static int scan_one(const char *path, void *ctx)
{
    const scan_opts *o = ctx;
    const char *overall;
    ckpt_options opt;
    ckpt_error err;
    ckpt_file *f;
    scan s;
    counts c;
    size_t i;
    int dangerous, strict = o->strict;

    memset(&s, 0, sizeof s);
    cli_options(&opt);
    opt.skip_tensors = 1; /* every pickle, whatever its tensors look like */
    opt.on_global = on_global;
    opt.on_global_ctx = &s;
    memset(&err, 0, sizeof err);
    err.offset = -1;
    f = cli_open_input(path, &opt, &err);
    if (s.oom) {
        ckpt_close(f);
        scan_free(&s);
        return cli_error("%s: out of memory", path);
    }

    classify_all(&s, strict, &c);
    dangerous = c.v[V_DANGEROUS] > 0 || (strict && c.v[V_UNKNOWN] > 0);
    overall = c.v[V_DANGEROUS] ? "dangerous" : c.v[V_UNKNOWN] ? "unknown" : "safe";

    if (o->json) {
        print_json(path, f, &s, &c, strict, f ? NULL : &err, overall);
    } else {
        if (f || s.n > 0)
            print_table(&s);
        if (f) {
            ckpt_info info;
            size_t nn = ckpt_note_count(f);
            for (i = 0; i < nn; i++) {
                const char *note = ckpt_note_at(f, i);
                fputs("note: ", stdout);
                put_shown(note ? note : "");
                putchar('\n');
            }
            ckpt_get_info(f, &info);
            if (info.format == CKPT_FORMAT_TORCHSCRIPT)
                printf("note: %s\n", TS_NOTE);
        }
        if (f || s.n > 0) /* nothing met, nothing to say but the error */
            print_summary(path, &s, &c, strict, f != NULL);
    }
    if (!f) {
        fflush(stdout);
        cli_report(path, &err);
    }
    ckpt_close(f);
    scan_free(&s);
    if (dangerous)
        return SCAN_DANGEROUS;
    return f ? CLI_OK : CLI_FAIL;
}

int cmd_scan(int argc, char **argv)
{
    int nops = 0, r;
    char **ops;
    scan_opts o;
    const cli_option options[] = {
        {"--strict", 0, 0, NULL, &o.strict},
        {"--json", 0, 0, NULL, &o.json},
    };

    memset(&o, 0, sizeof o);
    ops = malloc((size_t)(argc > 0 ? argc : 1) * sizeof *ops);
    if (!ops)
        return cli_error("out of memory");
    r = cli_parse(argc, argv, options, sizeof options / sizeof options[0], usage,
                  ops, argc, &nops);
    if (r == CLI_CONTINUE && nops < 1)
        r = cli_usage_error("scan: missing FILE");
    if (r == CLI_CONTINUE)
        r = cli_batch(ops, nops, o.json, scan_one, &o);
    free(ops);
    return r;
}
