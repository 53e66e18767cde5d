"""Minimal safetensors reader/writer (single file and sharded HF folders), no extra packages.

Layout: u64 little-endian header length N, N bytes of JSON (padded with spaces to a multiple
of 8 so the data section is 8-byte aligned), then the raw little-endian tensor bytes, each
tensor at header[name]["data_offsets"] = [begin, end) relative to the data section.
"""
import json
import os
import struct

import numpy as np
import torch

# safetensors dtype name -> (torch dtype, bytes per element)
DTYPES = {
    "F32": (torch.float32, 4),
    "F16": (torch.float16, 2),
    "BF16": (torch.bfloat16, 2),
    "F64": (torch.float64, 8),
    "I64": (torch.int64, 8),
    "I32": (torch.int32, 4),
    "I8": (torch.int8, 1),
    "U8": (torch.uint8, 1),
}
TORCH_TO_ST = {v[0]: k for k, v in DTYPES.items()}
SHORT_NAMES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "fp32": "F32", "fp16": "F16"}


def st_dtype(name):
    """Accept 'f32'/'bf16'/'F16'/torch.float16 ... and return the safetensors name."""
    if isinstance(name, torch.dtype):
        return TORCH_TO_ST[name]
    return SHORT_NAMES.get(name.lower(), name.upper()) if isinstance(name, str) else name


def tensor_bytes(t):
    """Raw little-endian bytes of a tensor (bf16 via an int16 view: numpy has no bfloat16)."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().astype(t.numpy().dtype.newbyteorder("<"), copy=False).tobytes()


def encode_header(header):
    """JSON header bytes padded with spaces to a multiple of 8."""
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * ((-len(raw)) % 8)
    return raw


def write_safetensors(path, tensors, dtype=None, metadata=None):
    """Write {name: tensor} to path. dtype (e.g. 'bf16') casts every floating tensor."""
    target = DTYPES[st_dtype(dtype)][0] if dtype is not None else None
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        if target is not None and t.is_floating_point():
            t = t.to(target)
        data = tensor_bytes(t)
        header[name] = {"dtype": TORCH_TO_ST[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = dict(metadata or {"format": "pt"})
    hdr = encode_header(header)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for b in blobs:
            f.write(b)


def read_header(path):
    """Return (header dict, byte offset of the data section)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n).decode("utf-8"))
    return header, 8 + n


def read_safetensors(path):
    """Read every tensor of one file as {name: tensor} in its stored dtype."""
    header, start = read_header(path)
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        tdtype, size = DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        raw = blob[start + b:start + e]
        count = int(np.prod(info["shape"])) if info["shape"] else 1
        assert len(raw) == count * size, f"{path}: {name} size mismatch"
        if tdtype == torch.bfloat16:
            arr = np.frombuffer(raw, dtype="<i2").copy()
            t = torch.from_numpy(arr).view(torch.bfloat16)
        else:
            np_dtype = torch.empty(0, dtype=tdtype).numpy().dtype.newbyteorder("<")
            t = torch.from_numpy(np.frombuffer(raw, dtype=np_dtype).copy())
        out[name] = t.reshape(info["shape"])
    return out


def shard_name(i, n):
    return f"model-{i + 1:05d}-of-{n:05d}.safetensors"


def write_model_tensors(out_dir, tensors, dtype=None, shards=1):
    """HF folder layout: model.safetensors, or N shards + model.safetensors.index.json.
    Tensors are split into contiguous groups of roughly equal byte size (HF does the same)."""
    os.makedirs(out_dir, exist_ok=True)
    names = list(tensors)
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, dtype)
        return ["model.safetensors"]
    shards = min(shards, len(names))
    elem = DTYPES[st_dtype(dtype)][1] if dtype is not None else None
    sizes = [tensors[k].numel() * (elem or tensors[k].element_size()) for k in names]
    total, groups, acc = sum(sizes), [[] for _ in range(shards)], 0
    for k, s in zip(names, sizes):
        g = min(shards - 1, acc * shards // max(total, 1))
        groups[g].append(k)
        acc += s
    # Make sure no shard is empty (a tiny model may have one dominant tensor).
    for g in range(shards):
        if not groups[g]:
            donor = max(range(shards), key=lambda j: len(groups[j]))
            groups[g].append(groups[donor].pop())
    groups = [sorted(g, key=names.index) for g in groups]
    files, weight_map = [], {}
    for i, g in enumerate(groups):
        fn = shard_name(i, shards)
        write_safetensors(os.path.join(out_dir, fn), {k: tensors[k] for k in g}, dtype)
        files.append(fn)
        for k in g:
            weight_map[k] = fn
    total_size = sum(sizes)
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size}, "weight_map": weight_map}, f, indent=2)
    return files


def read_model_tensors(model_dir):
    """Read all tensors of an HF folder (single file or sharded via the index)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for fn in files:
        out.update(read_safetensors(os.path.join(model_dir, fn)))
    return out
