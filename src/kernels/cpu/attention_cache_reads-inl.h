// Part of attention_hwy.cpp, included inside its per-target namespace (dflash::HWY_NAMESPACE)
// once per SIMD target by hwy/foreach_target.h, so it has no include guard: how the kernel
// reads a KV cache of each format (f32, f16, Q8_0, Q4_0) and asks for its next cache lines.
// A block scale as fp32: one F16C instruction on x86 targets (Highway's AVX2 and AVX-512
// targets require F16C); the portable conversion branches on subnormals and cost about as
// much as decoding the block's quants.
HWY_INLINE float ScaleF32(uint16_t h) {
#if DFLASH_AX86
  return _cvtsh_ss(h);
#else
  return f16_to_f32(h);
#endif
}

// Codes c.. (a vector's worth) of a Q8_0/Q4_0 row as fp32. Q4_0: element j of a block in the
// low nibble of byte j, element j + 16 in the high nibble.
template <WType T>
HWY_INLINE hn::Vec<DF> CodeVec(DF df, const uint8_t* row, int c) {
  const int blk = c / kQBlock, off = c % kQBlock;
  const hn::Rebind<int32_t, DF> di;
  if constexpr (T == WType::Q8_0) {
    const hn::Rebind<int8_t, DF> d8;
    return hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const BlockQ8_0*>(row)[blk].qs + off)));
  } else {
    const hn::Rebind<uint8_t, DF> d8;
    const hn::Rebind<uint32_t, DF> du;
    const int half = kQBlock / 2;
    const uint8_t* qs = reinterpret_cast<const BlockQ4_0*>(row)[blk].qs;
    const auto bytes = hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(d8, qs + off % half)));
    const auto code = off < half ? hn::And(bytes, hn::Set(di, 0xf)) : hn::ShiftRight<4>(bytes);
    return hn::ConvertTo(df, hn::Sub(code, hn::Set(di, 8)));
  }
}

// Rows [lo, hi) of a tile as fp32 at out[(j - ts) * hd]: vector c.. of row j is vec(df, j, c).
template <class VecFn>
HWY_INLINE void DecodeTile(int hd, int ts, int lo, int hi, float* out, const VecFn& vec) {
  const DF df;
  const int L = int(hn::Lanes(df));
  for (int j = lo; j < hi; ++j)
    for (int c = 0; c < hd; c += L) hn::StoreU(vec(df, j, c), df, out + size_t(j - ts) * hd + c);
}

// A vector of fp32 keys or values from an f32 or an f16 cache, converted in registers as each
// group of rows reads it: decoding the tile to fp32 in scratch once, beside the block's queries
// and accumulators, was slower at every block size tried (1 to 32 positions).
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const float* p) { return hn::LoadU(df, p); }
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::float16_t* p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}

// A Q8_0/Q4_0 value cache's rows from the tile's start, as AccumulateSlab reads them.
template <WType T>
struct QuantRows {
  const uint8_t* base;
  size_t rb;
};

// Values c.. of tile row r as fp32, from an f32, f16, Q8_0 or Q4_0 cache.
HWY_INLINE hn::Vec<DF> ValueVec(DF df, const float* V, size_t r, int hd, int c) {
  return hn::LoadU(df, V + r * size_t(hd) + size_t(c));
}
HWY_INLINE hn::Vec<DF> ValueVec(DF df, const hwy::float16_t* V, size_t r, int hd, int c) {
  return LoadF32(df, V + r * size_t(hd) + size_t(c));
}
template <WType T>
HWY_INLINE hn::Vec<DF> ValueVec(DF df, const QuantRows<T>* V, size_t r, int hd, int c) {
  const uint8_t* row = V->base + r * V->rb;
  using Block = std::conditional_t<T == WType::Q8_0, BlockQ8_0, BlockQ4_0>;
  return hn::Mul(CodeVec<T>(df, row, c), hn::Set(df, ScaleF32(reinterpret_cast<const Block*>(row)[c / kQBlock].d)));
}

HWY_INLINE float ScalarF32(float x) { return x; }
HWY_INLINE float ScalarF32(hwy::float16_t x) {
  uint16_t bits;
  std::memcpy(&bits, &x, 2);
  return f16_to_f32(bits);
}

// Cache lines of the next tile's keys and values still to be asked for, a few at a time from
// inside the score loop, so that the stream from memory runs under the arithmetic instead of
// stalling it in one burst of prefetches at the start of each tile.
struct PrefetchCursor {
  const uint8_t* k = nullptr;
  const uint8_t* v = nullptr;
  size_t at = 0, end = 0, per_step = 0;
  HWY_INLINE void Step() {
    for (size_t n = 0; n < per_step && at < end; ++n, at += 64) {
      hwy::Prefetch(k + at);
      hwy::Prefetch(v + at);
    }
  }
  // Shares the remaining lines out over `steps` calls of Step.
  HWY_INLINE void Spread(size_t steps) {
    steps = std::max<size_t>(steps, 1);
    if (at < end) per_step = ((end - at + 63) / 64 + steps - 1) / steps;
  }
  HWY_INLINE void Finish() {
    for (; at < end; at += 64) {
      hwy::Prefetch(k + at);
      hwy::Prefetch(v + at);
    }
  }
};
