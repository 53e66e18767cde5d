#!/usr/bin/python3
"""Q4_K and Q6_K (ggml's k-quants, super-blocks of 256 weights) in numpy, for tests: encode
fp32 rows into the GGUF byte layout and decode them back with ggml's dequantization formulas.

  raw = quantize(w, "q4_k")          # w: float32 [rows, cols], cols % 256 == 0 -> bytes
  w2  = dequantize(raw, cols, "q4_k")  # float32 [rows, cols], what a GGUF reader must see

Byte layouts (little endian), one super-block after another along a row:
  Q4_K, 144 bytes: f16 d, f16 dmin, scales[12], qs[128].
    weight e of sub-block j = e // 32: d * sc[j] * q - dmin * m[j], q a 4-bit value;
    qs[32 * (j // 2) + e % 32] holds q in its low nibble for even j, high nibble for odd j.
    sc/m are 6 bits: j < 4: low 6 bits of scales[j] / scales[j + 4]; j >= 4: low nibble /
    high nibble of scales[j + 4], top 2 bits from the top 2 bits of scales[j - 4] / scales[j].
  Q6_K, 210 bytes: ql[128], qh[64], int8 scales[16], f16 d.
    weight e: d * scales[e // 16] * (q - 32), q 6 bits; in half h = e // 128, group
    g = (e % 128) // 32, lane l = e % 32: low 4 bits in ql[64h + l + 32 * (g % 2)] (low
    nibble for g < 2, high for g >= 2), high 2 bits at bit 2g of qh[32h + l].

The quantizers are simple (min/max fits, round to nearest), not llama.cpp's search; the
tests only need valid files whose exact decoded values are known.
"""
import numpy as np

QK = 256
BLOCK_BYTES = {"q4_k": 144, "q6_k": 210}
GGML_TYPE = {"q4_k": 12, "q6_k": 14}


def _f16(v):
    return np.asarray(v, dtype=np.float32).astype(np.float16)


def _blocks(w):
    w = np.ascontiguousarray(w, dtype=np.float32)
    if w.ndim != 2 or w.shape[1] % QK:
        raise ValueError(f"k-quants need rows of a multiple of {QK} values, got shape {w.shape}")
    return w.reshape(-1, QK)  # one super-block per row of this view


def _div(a, b):
    return np.where(b != 0, a / np.where(b != 0, b, 1), 0)


def quantize_q4_k(w):
    x = _blocks(w).reshape(-1, 8, 32)
    lo = np.minimum(x.min(-1), 0)  # the stored min is subtracted, so it is never positive
    hi = x.max(-1)
    scale, mins = (hi - lo) / 15, -lo
    d = _f16(scale.max(-1) / 63)
    dmin = _f16(mins.max(-1) / 63)
    df, dminf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_div(scale, df)), 0, 63).astype(np.uint8)
    m = np.clip(np.rint(_div(mins, dminf)), 0, 63).astype(np.uint8)
    # q against the stored (rounded) scale and min, so decoding lands on the fitted grid
    step = (df * sc)[..., None]
    q = np.clip(np.rint(_div(x + (dminf * m)[..., None], step)), 0, 15).astype(np.uint8)
    nb = x.shape[0]
    scales = np.zeros((nb, 12), np.uint8)
    scales[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    scales[:, 4:8] = (m[:, 0:4] & 63) | ((m[:, 4:8] >> 4) << 6)
    scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)
    out = np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2), scales, qs], axis=1)
    return out.tobytes()


def quantize_q6_k(w):
    x = _blocks(w).reshape(-1, 16, 16)
    scale = np.abs(x).max(-1) / 31  # q in -32..31: 31 steps each side keeps +max unclipped
    d = _f16(scale.max(-1) / 127)
    df = d.astype(np.float32)[:, None]
    sc = np.clip(np.rint(_div(scale, df)), -128, 127).astype(np.int8)
    step = (df * sc.astype(np.float32))[..., None]
    q = np.clip(np.rint(_div(x, step)), -32, 31).astype(np.int16)
    u = (q + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # [block][half][group][lane]
    nb = u.shape[0]
    ql = np.zeros((nb, 2, 2, 32), np.uint8)  # [half][g % 2][lane]
    ql[:, :, 0, :] = (u[:, :, 0, :] & 15) | ((u[:, :, 2, :] & 15) << 4)
    ql[:, :, 1, :] = (u[:, :, 1, :] & 15) | ((u[:, :, 3, :] & 15) << 4)
    qh = np.zeros((nb, 2, 32), np.uint8)
    for g in range(4):
        qh |= (u[:, :, g, :] >> 4) << (2 * g)
    out = np.concatenate([ql.reshape(nb, 128), qh.reshape(nb, 64), sc.view(np.uint8),
                          d.view(np.uint8).reshape(nb, 2)], axis=1)
    return out.tobytes()


def dequantize_q4_k(raw, cols):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 144)
    d = b[:, 0:2].copy().view(np.float16).astype(np.float32).reshape(-1)
    dmin = b[:, 2:4].copy().view(np.float16).astype(np.float32).reshape(-1)
    s = b[:, 4:16].astype(np.int32)
    sc = np.concatenate([s[:, 0:4] & 63, (s[:, 8:12] & 15) | ((s[:, 0:4] >> 6) << 4)], axis=1)
    m = np.concatenate([s[:, 4:8] & 63, (s[:, 8:12] >> 4) | ((s[:, 4:8] >> 6) << 4)], axis=1)
    qs = b[:, 16:144].reshape(-1, 4, 32)
    q = np.stack([qs & 15, qs >> 4], axis=2).reshape(-1, 8, 32).astype(np.float32)
    # float32 in ggml's order: (d * sc) * q - (dmin * m)
    d1 = (d[:, None] * sc.astype(np.float32))[..., None]
    m1 = (dmin[:, None] * m.astype(np.float32))[..., None]
    return (d1 * q - m1).astype(np.float32).reshape(-1, cols)


def dequantize_q6_k(raw, cols):
    b = np.frombuffer(raw, np.uint8).reshape(-1, 210)
    ql = b[:, 0:128].reshape(-1, 2, 2, 32)
    qh = b[:, 128:192].reshape(-1, 2, 32)
    sc = b[:, 192:208].copy().view(np.int8).astype(np.float32)
    d = b[:, 208:210].copy().view(np.float16).astype(np.float32).reshape(-1)
    groups = []
    for g in range(4):
        lo = (ql[:, :, g % 2, :] >> (4 * (g // 2))) & 15
        hi = (qh >> (2 * g)) & 3
        groups.append((lo | (hi << 4)).astype(np.int32) - 32)
    q = np.stack(groups, axis=2).reshape(-1, 16, 16).astype(np.float32)  # [block][16 groups of 16]
    return ((d[:, None] * sc)[..., None] * q).astype(np.float32).reshape(-1, cols)


def quantize(w, kind):
    return {"q4_k": quantize_q4_k, "q6_k": quantize_q6_k}[kind](w)


def dequantize(raw, cols, kind):
    return {"q4_k": dequantize_q4_k, "q6_k": dequantize_q6_k}[kind](raw, cols)


def selfcheck():
    """Hand-built blocks decode to the values the layout rules above give, and random rows
    round-trip within the formats' step sizes."""
    # Q4_K: sub-block 5 takes sc = 0b10_1001 (low nibble of scales[9], top bits of scales[1]),
    # m = 0b01_0011 (high nibble of scales[9], top bits of scales[5]); element 5*32+7 is the
    # high nibble of qs[32*2 + 7].
    blk = bytearray(144)
    blk[0:2] = np.float16(0.5).tobytes()
    blk[2:4] = np.float16(0.25).tobytes()
    blk[4 + 9] = 0b1001 | (0b0011 << 4)
    blk[4 + 1] = 0b10 << 6
    blk[4 + 5] = 0b01 << 6
    blk[16 + 64 + 7] = 11 << 4
    v = dequantize_q4_k(bytes(blk), 256)[0]
    assert v[5 * 32 + 7] == 0.5 * 41 * 11 - 0.25 * 19, v[5 * 32 + 7]
    assert v[5 * 32 + 8] == -0.25 * 19
    # Q6_K: element 128 + 64 + 3 (half 1, group 2, lane 3): low bits in the high nibble of
    # ql[64 + 3], high bits at bit 4 of qh[32 + 3]; its scale is scales[12].
    blk = bytearray(210)
    blk[64 + 3] = 5 << 4
    blk[128 + 32 + 3] = 2 << 4
    blk[192 + 12] = (-3) & 255
    blk[208:210] = np.float16(0.125).tobytes()
    v = dequantize_q6_k(bytes(blk), 256)[0]
    assert v[195] == 0.125 * -3 * ((5 | (2 << 4)) - 32), v[195]
    assert v[196] == 0.125 * -3 * -32 and v[0] == 0  # all-zero bits: q - 32 = -32; scales[0] = 0
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 512)).astype(np.float32)
    for kind, tol in (("q4_k", 0.2), ("q6_k", 0.05)):
        raw = quantize(w, kind)
        assert len(raw) == 3 * 2 * BLOCK_BYTES[kind]
        err = np.linalg.norm(dequantize(raw, 512, kind) - w) / np.linalg.norm(w)
        assert err < tol, (kind, err)
    return True


if __name__ == "__main__":
    print("ok" if selfcheck() else "fail")
