#!/usr/bin/python3
"""convert_folder_test.py CKPT - `ckpt convert FILE OUTDIR/` against torch.

Hugging Face's layout: model.safetensors, or shards
model-0000K-of-0000N.safetensors and model.safetensors.index.json.  The
shard split expected is huggingface_hub's split_state_dict_into_shards
(transcribed below: a tensor bigger than the limit alone, at once; the
others fill the open shard, closed when the next would pass the limit);
the index must be byte for byte json.dumps(index, indent=2, sort_keys=True)
plus a newline, as transformers writes it; every tensor of every shard must
equal torch.load's; tied weights: one name kept (the first in sorted
order, as safetensors' _remove_duplicate_names keeps), the others mapped to
it in "__metadata__"; complex64 as C64; read-ahead (--jobs 2) gives the
same bytes as --jobs 1, from stored and deflated ZIPs; a damaged record
leaves no shard behind.  Needs torch at /usr/bin/python3 (exit 77 without).
Prints ok/not ok lines and "N passed, M failed".
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zipfile

try:
    import torch
except ImportError:
    print("skip - torch is not installed")
    sys.exit(77)

CKPT = os.path.abspath(sys.argv[1])
passed = failed = 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
        print("ok - " + what)
    else:
        failed += 1
        print("not ok - " + what)


def run(*args):
    p = subprocess.run([CKPT, "convert"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=300)
    return p.returncode, p.stderr.decode("utf-8", "replace")


DT = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
      "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32, "U8": torch.uint8,
      "BOOL": torch.bool, "C64": torch.complex64}


def read_st(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    meta = header.pop("__metadata__")
    data = bytearray(blob[8 + n:])
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = DT[info["dtype"]]
        if e > b:
            t = torch.frombuffer(data, dtype=dt, count=(e - b) // torch.empty(0, dtype=dt).element_size(),
                                 offset=b).reshape(info["shape"]).clone()
        else:
            t = torch.empty(info["shape"], dtype=dt)
        out[name] = t
    return meta, out


def hub_split(sizes, limit):
    """huggingface_hub's split_state_dict_into_shards_factory, on (name, bytes)."""
    shards, cur, cur_size = [], [], 0
    for name, size in sizes:
        if size > limit:
            shards.append([name])
            continue
        if cur_size + size > limit:
            shards.append(cur)
            cur, cur_size = [], 0
        cur.append(name)
        cur_size += size
    if cur:
        shards.append(cur)
    return shards


def deflate(src, dst):
    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
        for info in zi.infolist():
            zo.writestr(info.filename, zi.read(info), compress_type=zipfile.ZIP_DEFLATED)


T = tempfile.mkdtemp()
try:
    g = torch.Generator().manual_seed(11)
    embed = torch.randn(50, 16, generator=g)
    sd = {
        "embed.weight": embed,
        "layers.0.w": torch.randn(16, 16, generator=g),
        "layers.0.b": torch.randn(16, generator=g).half(),
        "big": torch.randn(3000, generator=g),  # 12000 bytes: alone past a 5000-byte limit
        "layers.1.w": torch.randn(16, 16, generator=g).double(),
        "steps": torch.arange(7),
        "z": torch.randn(9, generator=g, dtype=torch.complex64),
        "lm_head.weight": embed,  # tied
        "view": embed[3],  # another view of the same storage: not tied
        "late": torch.randn(20000, generator=g),  # 80 KB: its record is checked as it is copied
    }
    src = os.path.join(T, "m.pt")
    torch.save(sd, src)
    dsrc = os.path.join(T, "m_deflated.pt")
    deflate(src, dsrc)
    want = torch.load(src)
    check(torch.equal(torch.load(dsrc)["big"], want["big"]), "torch reads the deflated copy")

    # the plan torch's tools would make: tied names out, then the split
    kept = [k for k in sd if k != "lm_head.weight"]
    sizes = [(k, sd[k].numel() * sd[k].element_size()) for k in kept]
    LIMIT = 5000
    shards = hub_split(sizes, LIMIT)
    n = len(shards)
    names = ["model-%05d-of-%05d.safetensors" % (i + 1, n) for i in range(n)]
    wmap = {k: names[i] for i, s in enumerate(shards) for k in s}
    index = json.dumps({"metadata": {"total_size": sum(s for _, s in sizes)},
                        "weight_map": wmap}, indent=2, sort_keys=True) + "\n"

    outs = {}
    for label, s, jobs in (("stored, --jobs 1", src, "1"), ("stored, --jobs 2", src, "2"),
                           ("deflated, --jobs 1", dsrc, "1"), ("deflated, --jobs 2", dsrc, "2")):
        out = os.path.join(T, "out-%s-%s" % (os.path.basename(s), jobs)) + "/"
        rc, err = run("--max-shard-size", str(LIMIT), "--jobs", jobs, s, out)
        check(rc == 0, "%s: exit 0 (%s)" % (label, err.strip()[:200]))
        check("1 tied tensor" in err and "'lm_head.weight' -> 'embed.weight'" in err,
              "%s: the tied weight is reported on stderr" % label)
        files = sorted(os.listdir(out))
        check(files == sorted(names + ["model.safetensors.index.json"]),
              "%s: files %s, want %d shards (huggingface_hub's split) and the index" % (label, files, n))
        if rc != 0:
            continue
        got_index = open(os.path.join(out, "model.safetensors.index.json")).read()
        check(got_index == index, "%s: the index is transformers' json.dumps(indent=2, sort_keys=True)" % label)
        allt, aliases = {}, {}
        for i, nm in enumerate(names):
            meta, ts = read_st(os.path.join(out, nm))
            check(meta.get("format") == "pt", "%s: %s has format pt" % (label, nm))
            check(sorted(ts) == sorted(shards[i]), "%s: %s holds %s" % (label, nm, sorted(shards[i])))
            allt.update(ts)
            aliases.update({k: v for k, v in meta.items() if k in sd})
        check(all(torch.equal(allt[k], want[k]) for k in kept),
              "%s: every tensor equals torch.load's (complex64 as C64)" % label)
        check(aliases == {"lm_head.weight": "embed.weight"},
              "%s: __metadata__ maps the tied name to the kept one: %s" % (label, aliases))
        outs[label] = {nm: open(os.path.join(out, nm), "rb").read() for nm in files}
    check(len(outs) == 4 and all(o == outs["stored, --jobs 1"] for o in outs.values()),
          "the same bytes with and without read-ahead, stored and deflated")

    # under the limit: one model.safetensors, no index; the same bytes as OUT.safetensors --tied once
    out = os.path.join(T, "one") + "/"
    rc, err = run(src, out)
    check(rc == 0 and os.listdir(out) == ["model.safetensors"], "default 5GB: model.safetensors alone")
    rc, err = run("--tied", "once", src, os.path.join(T, "one.safetensors"))
    check(rc == 0 and open(out + "model.safetensors", "rb").read() == open(os.path.join(T, "one.safetensors"), "rb").read(),
          "OUTDIR/model.safetensors equals 'convert --tied once FILE OUT.safetensors'")
    # an existing directory without a trailing slash is a folder too
    rc, err = run("--force", src, out.rstrip("/"))
    check(rc == 0 and os.listdir(out) == ["model.safetensors"], "an existing directory as OUT, --force")
    rc, err = run(src, out)
    check(rc == 1 and "already exists" in err, "an existing model.safetensors is not replaced without --force")
    # --tied copy: both names, no alias
    out = os.path.join(T, "copy") + "/"
    rc, err = run("--tied", "copy", src, out)
    meta, ts = read_st(out + "model.safetensors")
    check(rc == 0 and "lm_head.weight" in ts and torch.equal(ts["lm_head.weight"], want["embed.weight"])
          and "lm_head.weight" not in meta, "--tied copy: every name gets its copy")
    # one OUT file keeps copying by default
    rc, err = run(src, os.path.join(T, "plain.safetensors"))
    meta, ts = read_st(os.path.join(T, "plain.safetensors"))
    check(rc == 0 and "lm_head.weight" in ts and "tied" not in err, "OUT.safetensors: --tied copy by default")

    # complex128 and complex32 stay refused by name; --skip-unsupported leaves them out
    c128 = os.path.join(T, "c128.pt")
    torch.save({"a": torch.ones(2), "c": torch.ones(2, dtype=torch.complex128)}, c128)
    out = os.path.join(T, "c128") + "/"
    rc, err = run(c128, out)
    check(rc == 1 and "complex128" in err and not os.path.exists(out),
          "complex128 refused by name before OUTDIR is made (%s)" % err.strip()[:120])
    rc, err = run("--skip-unsupported", c128, out)
    meta, ts = read_st(out + "model.safetensors")
    check(rc == 0 and sorted(ts) == ["a"], "--skip-unsupported leaves complex128 out")

    # sizes as transformers reads them
    for spelling, limit in (("1KB", 1000), ("1KiB", 1024), ("1Kb", 125), ("0.001MB", None), ("5XB", None)):
        out = os.path.join(T, "size-" + spelling) + "/"
        rc, err = run("--max-shard-size", spelling, src, out)
        if limit is None:
            check(rc == 2, "--max-shard-size %s: a usage error" % spelling)
            continue
        k = len(hub_split(sizes, limit))
        got = len([f for f in os.listdir(out) if f.startswith("model-")])
        check(rc == 0 and got == k, "--max-shard-size %s = %d bytes: %d shards (got %d)" % (spelling, limit, k, got))
    rc, err = run("--jobs", "0", src, os.path.join(T, "j0") + "/")
    check(rc == 2, "--jobs 0: a usage error")
    rc, err = run("--tied", "maybe", src, os.path.join(T, "t") + "/")
    check(rc == 2, "--tied maybe: a usage error")

    # a damaged record in a later shard: exit 1, no shard left behind
    for label, s, jobs in (("stored", src, "1"), ("deflated, read-ahead", dsrc, "2")):
        bad = os.path.join(T, "bad-%s.pt" % jobs)
        blob = bytearray(open(s, "rb").read())
        with zipfile.ZipFile(s) as z:
            info = [i for i in z.infolist() if i.filename.endswith("/data/7")][0]
        # the record of "late" (storage 7, the last shard): flip a byte of its data
        hdr = blob[info.header_offset:info.header_offset + 30]
        start = info.header_offset + 30 + struct.unpack("<H", hdr[26:28])[0] + struct.unpack("<H", hdr[28:30])[0]
        blob[start + 200] ^= 0x01
        open(bad, "wb").write(bytes(blob))
        out = os.path.join(T, "bad-" + jobs) + "/"
        rc, err = run("--max-shard-size", str(LIMIT), "--jobs", jobs, bad, out)
        left = os.listdir(out) if os.path.exists(out) else []
        check(rc == 1 and ("crc mismatch" in err or "corrupt" in err) and os.path.isdir(out) and left == [],
              "%s: a damaged record in the last shard: exit 1, no shard left (%s; left %s)"
              % (label, err.strip().splitlines()[-1][:200], left))

    # verify of several files on threads prints what one thread prints
    fx = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
    files = [os.path.join(fx, f) for f in ("params_zip.pt", "deflate_zip.pt", "quantized_zip.pt",
                                            "views_legacy.pt", "tied_zip.pt")]
    files += [dsrc, src, os.path.join(T, "missing.pt"), os.path.join(T, "bad-2.pt")]
    for extra in ([], ["--json"]):
        res = []
        for jobs in ("1", "2", "4"):
            p = subprocess.run([CKPT, "verify", "--jobs", jobs] + extra + files,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
            res.append((p.returncode, p.stdout, p.stderr))
        check(res[0][0] == 1 and res[0] == res[1] == res[2],
              "verify %s%d files: --jobs 2 and 4 print what --jobs 1 prints, exit 1"
              % (" ".join(extra) + " " if extra else "", len(files)))
finally:
    shutil.rmtree(T)

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
