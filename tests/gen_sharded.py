#!/usr/bin/env python3
"""Write the multi-file fixtures of tests/fixtures/sharded/ with PyTorch 2.6.

    cp tests/gen_sharded.py /tmp/torch2/tmp/sharded/
    chroot /tmp/torch2 /usr/bin/python3 /tmp/sharded/gen_sharded.py /tmp/sharded/out

Layouts (each a folder F with torch's answers in F.expected.json, the format
tests/test_fixtures.py checks):
  hf_bin/            pytorch_model-0000K-of-00003.bin + pytorch_model.bin.index.json
  hf_st/             model-0000K-of-00002.safetensors + model.safetensors.index.json
                     (safetensors written by hand below: the format is an 8-byte
                     little-endian header length, a JSON header, the bytes)
  single.safetensors one safetensors file with __metadata__
  dcp_model/         torch.distributed.checkpoint.save of a model state dict
  dcp_optim/         a model + optimizer nested dict, with non-tensor values,
                     written with thread_count=2 (two files for the rank)
  dcp_split/         two ranks (gloo, DTensor Shard(0)): tensors in 2 chunks
Expected tensors come from loading every shard with torch (and, for DCP,
from torch's own dcp_to_torch_save); hashes are of the row-major
little-endian bytes.
"""
import hashlib
import json
import os
import struct
import sys
import tempfile

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(13)

DT = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16",
      torch.float64: "float64", torch.int64: "int64", torch.int32: "int32",
      torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool", torch.int16: "int16"}
ST = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
      torch.float64: "F64", torch.int64: "I64", torch.int32: "I32", torch.int8: "I8",
      torch.uint8: "U8", torch.bool: "BOOL", torch.int16: "I16"}


def raw(t):
    t = t.detach().contiguous()
    return t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""


def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        name = prefix + str(k)
        if isinstance(v, dict):
            out.update(flat(v, name + "."))
        else:
            out[name] = v
    return out


def expected(path, fmt, tensors, values=None):
    """tensors: list of (name, tensor, group)."""
    ts = []
    for name, t, grp in tensors:
        ts.append({"name": name, "dtype": DT[t.dtype], "shape": list(t.shape),
                   "stride": list(t.contiguous().stride()), "storage_offset": 0,
                   "requires_grad": False, "nbytes": t.numel() * t.element_size(),
                   "sha256": hashlib.sha256(raw(t)).hexdigest(), "storage_group": grp})
    doc = {"format": fmt, "byteorder": "little", "key": None, "tensors": ts}
    if values:
        doc["values"] = values
    with open(path + ".expected.json", "w") as f:
        json.dump(doc, f, indent=1)


def model_sd():
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    sd = m.state_dict()
    sd["extra.half"] = torch.randn(5).half()
    sd["extra.bf16"] = torch.randn(2, 2).bfloat16()
    sd["extra.ids"] = torch.arange(6, dtype=torch.int64).reshape(2, 3)
    sd["extra.mask"] = torch.tensor([True, False, True])
    return m, sd


def write_safetensors(path, tensors, metadata=None):
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    off = 0
    blobs = []
    for name, t in tensors.items():
        b = raw(t)
        header[name] = {"dtype": ST[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def hf_bin():
    d = os.path.join(OUT, "hf_bin")
    os.makedirs(d, exist_ok=True)
    _, sd = model_sd()
    names = list(sd)
    parts = [names[0:3], names[3:6], names[6:]]
    wm, total = {}, 0
    for k, ns in enumerate(parts):
        fn = "pytorch_model-%05d-of-%05d.bin" % (k + 1, len(parts))
        torch.save({n: sd[n] for n in ns}, os.path.join(d, fn))
        for n in ns:
            wm[n] = fn
            total += sd[n].numel() * sd[n].element_size()
    with open(os.path.join(d, "pytorch_model.bin.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    # torch's answer: load every shard in the map's order of files
    ts, grp = [], 0
    for fn in sorted(set(wm.values())):
        sh = torch.load(os.path.join(d, fn), weights_only=True)
        for n, t in sh.items():
            ts.append((n, t, grp))
            grp += 1
    expected(d, "sharded", ts)


def hf_st():
    d = os.path.join(OUT, "hf_st")
    os.makedirs(d, exist_ok=True)
    _, sd = model_sd()
    names = list(sd)
    parts = [names[:4], names[4:]]
    wm, total = {}, 0
    for k, ns in enumerate(parts):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, len(parts))
        write_safetensors(os.path.join(d, fn), {n: sd[n] for n in ns}, {"format": "pt"})
        for n in ns:
            wm[n] = fn
            total += sd[n].numel() * sd[n].element_size()
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=2)
    ts = [(n, sd[n], i) for i, n in enumerate(names)]
    expected(d, "sharded", ts)
    # one file, opened as safetensors
    p = os.path.join(OUT, "single.safetensors")
    write_safetensors(p, sd, {"format": "pt", "note": "hello"})
    expected(p, "safetensors", [(n, sd[n], i) for i, n in enumerate(names)],
             {"__metadata__.format": "pt", "__metadata__.note": "hello"})


def dcp_answer(d, values=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "full.pt")
        dcp_to_torch_save(d, out)
        full = torch.load(out, weights_only=False)
    fl = flat(full)
    ts = [(n, v, i) for i, (n, v) in enumerate(fl.items()) if isinstance(v, torch.Tensor)]
    # the order ckpt lists: the .metadata's state_dict_metadata order
    expected(d, "dcp", ts, values)
    return fl


def dcp_model():
    d = os.path.join(OUT, "dcp_model")
    _, sd = model_sd()
    dcp.save(sd, checkpoint_id=d)
    dcp_answer(d)


def dcp_optim():
    d = os.path.join(OUT, "dcp_optim")
    m, _ = model_sd()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.randn(2, 4)).sum().backward()
    opt.step()
    state = {"model": m.state_dict(), "optim": opt.state_dict(), "step": 7,
             "note": "dcp fixture"}
    writer = dcp.FileSystemWriter(d, thread_count=2)
    dcp.save(state, storage_writer=writer)
    dcp_answer(d, {"step": 7, "note": "dcp fixture"})


def split_worker(rank, world, d, port):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Shard
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    os.environ["USE_LIBUV"] = "0"
    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    g = torch.Generator().manual_seed(5)
    full = {"w": torch.randn(6, 5, generator=g), "b": torch.randn(7, generator=g),
            "e": torch.arange(12, dtype=torch.int32).reshape(3, 4)}
    sd = {"w": distribute_tensor(full["w"], mesh, [Shard(0)]),
          "b": distribute_tensor(full["b"], mesh, [Shard(0)]),
          "e": distribute_tensor(full["e"], mesh, [Shard(1)]),
          "plain": torch.ones(2)}
    dcp.save(sd, checkpoint_id=d)
    dist.barrier()
    dist.destroy_process_group()


def dcp_split():
    import torch.multiprocessing as mp
    d = os.path.join(OUT, "dcp_split")
    mp.spawn(split_worker, args=(2, d, 29513), nprocs=2, join=True)
    dcp_answer(d)


def main():
    hf_bin()
    hf_st()
    dcp_model()
    dcp_optim()
    try:
        dcp_split()
    except Exception as e:  # multi-rank is best effort
        print("dcp_split not written: %r" % (e,), file=sys.stderr)


if __name__ == "__main__":
    main()
