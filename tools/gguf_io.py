#!/usr/bin/python3
"""A small GGUF v3 reader/writer for tests: parse a file into its fields (recording where each
one sits, so a test can corrupt exactly one of them) and write a file back from fields.

  g = parse(path)         # g.version, g.kv [(key, type, value)], g.tensors, g.data_start
  write(path, kv, tensors)  # tensors: [(name, ne list, ggml type, raw bytes)]
"""
import struct

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
           U64: "<Q", I64: "<q", F64: "<d"}
# ggml type -> (block elements, block bytes)
GGML = {0: (1, 4), 1: (1, 2), 2: (32, 18), 8: (32, 34), 12: (256, 144), 14: (256, 210), 30: (1, 2)}
ALIGN = 32


class Tensor:
    def __init__(self, name, ne, type_, offset, pos):
        self.name, self.ne, self.type, self.offset = name, ne, type_, offset
        self.pos = pos  # dict: field -> byte offset of that field in the file

    def nbytes(self):
        n = 1
        for d in self.ne:
            n *= d
        blk, bb = GGML[self.type]
        return n // blk * bb


class Gguf:
    pass


def _read_str(b, p):
    (n,) = struct.unpack_from("<Q", b, p)
    return b[p + 8:p + 8 + n].decode("utf-8"), p + 8 + n


def _read_val(b, p, t):
    if t in _SCALAR:
        fmt = _SCALAR[t]
        (v,) = struct.unpack_from(fmt, b, p)
        return v, p + struct.calcsize(fmt)
    if t == STRING:
        return _read_str(b, p)
    if t == ARRAY:
        (et, n) = struct.unpack_from("<IQ", b, p)
        p += 12
        out = []
        for _ in range(n):
            v, p = _read_val(b, p, et)
            out.append(v)
        return (et, out), p
    raise ValueError("bad value type %d" % t)


def parse(path):
    b = open(path, "rb").read()
    g = Gguf()
    g.bytes = b
    assert b[:4] == b"GGUF"
    g.version, n_t, n_kv = struct.unpack_from("<IQQ", b, 4)
    g.pos = {"version": 4, "n_tensors": 8, "n_kv": 16}
    p = 24
    g.kv, g.kv_pos = [], {}
    for _ in range(n_kv):
        start = p
        key, p = _read_str(b, p)
        (t,) = struct.unpack_from("<I", b, p)
        type_pos = p
        v, p = _read_val(b, p + 4, t)
        g.kv.append((key, t, v))
        g.kv_pos[key] = {"start": start, "type": type_pos, "value": type_pos + 4, "end": p}
    g.tensors = []
    for _ in range(n_t):
        pos = {"start": p}
        name, p = _read_str(b, p)
        pos["n_dims"] = p
        (nd,) = struct.unpack_from("<I", b, p)
        p += 4
        pos["dims"] = p
        ne = list(struct.unpack_from("<%dQ" % nd, b, p))
        p += 8 * nd
        pos["type"] = p
        (tt, off) = struct.unpack_from("<IQ", b, p)
        pos["offset"] = p + 4
        p += 12
        g.tensors.append(Tensor(name, ne, tt, off, pos))
    g.infos_end = p
    g.data_start = (p + ALIGN - 1) // ALIGN * ALIGN
    return g


def tensor_data(g, t):
    s = g.data_start + t.offset
    return g.bytes[s:s + t.nbytes()]


def _enc_str(s):
    e = s.encode("utf-8")
    return struct.pack("<Q", len(e)) + e


def _enc_val(t, v):
    if t in _SCALAR:
        return struct.pack(_SCALAR[t], v)
    if t == STRING:
        return _enc_str(v)
    et, items = v
    return struct.pack("<IQ", et, len(items)) + b"".join(_enc_val(et, x) for x in items)


def write(path, kv, tensors, version=3):
    out = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(kv))]
    for key, t, v in kv:
        out += [_enc_str(key), struct.pack("<I", t), _enc_val(t, v)]
    off, blobs = 0, []
    for name, ne, tt, raw in tensors:
        out += [_enc_str(name), struct.pack("<I", len(ne)), struct.pack("<%dQ" % len(ne), *ne),
                struct.pack("<IQ", tt, off)]
        pad = (-len(raw)) % ALIGN
        blobs.append(raw + b"\0" * pad)
        off += len(raw) + pad
    head = b"".join(out)
    head += b"\0" * ((-len(head)) % ALIGN)
    with open(path, "wb") as f:
        f.write(head + b"".join(blobs))


def rewrite(src, dst, edit_kv=None, edit_tensors=None):
    """Round-trip src -> dst through the fields, letting callbacks change them."""
    g = parse(src)
    kv = list(g.kv)
    tensors = [(t.name, list(t.ne), t.type, tensor_data(g, t)) for t in g.tensors]
    if edit_kv:
        kv = edit_kv(kv)
    if edit_tensors:
        tensors = edit_tensors(tensors)
    write(dst, kv, tensors, g.version)


def read_kv(path):
    """Only the metadata of a (possibly multi-GB) GGUF file: [(key, type, value)], read through mmap."""
    import mmap
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as b:
        if b[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        _, _, n_kv = struct.unpack_from("<IQQ", b, 4)
        p, kv = 24, []
        for _ in range(n_kv):
            key, p = _read_str(b, p)
            (t,) = struct.unpack_from("<I", b, p)
            v, p = _read_val(b, p + 4, t)
            kv.append((key, t, v))
        return kv
