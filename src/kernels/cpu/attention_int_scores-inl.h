// Part of attention_hwy.cpp, included inside its per-target namespace (dflash::HWY_NAMESPACE)
// once per SIMD target by hwy/foreach_target.h, so it has no include guard: scores against a
// Q8_0/Q4_0 key cache as integer dot products (VNNI where the target has it, fp32 on the codes
// elsewhere), with the query rows quantized like an activation row.
// ---------------------------------------------------------------------------------------
// Integer scores against Q8_0/Q4_0 keys.

// The f16 block scales of keys [lo, hi) as fp32 at out[b * stride + j - lo], zeros after.
template <class Block>
HWY_INLINE void KeyScalesT(const uint8_t* base, size_t rb, int nb, int lo, int hi, float* out, int stride) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // 16 keys' scales of a block in one gather (the dword at each scale; its low half is the
  // f16) and one conversion, instead of a scalar load and conversion per key and block.
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int(rb)));
  for (int k0 = lo; k0 < hi; k0 += 16) {
    const __mmask16 in = __mmask16((1u << std::min(16, hi - k0)) - 1u);
    const uint8_t* first = base + size_t(k0) * rb;
    for (int b = 0; b < nb; ++b) {
      const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), in, rows, first + b * sizeof(Block), 1);
      _mm512_storeu_ps(out + size_t(b) * size_t(stride) + size_t(k0 - lo), _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
    }
  }
#else
  for (int j = lo; j < hi; ++j) {
    const Block* blk = reinterpret_cast<const Block*>(base + size_t(j) * rb);
    for (int b = 0; b < nb; ++b) out[size_t(b) * size_t(stride) + size_t(j - lo)] = ScaleF32(blk[b].d);
  }
#endif
  for (int b = 0; b < nb; ++b) std::fill_n(out + size_t(b) * size_t(stride) + size_t(hi - lo), 16, 0.0f);
}

#if DFLASH_AVNNI
// Four query bytes as the dword dpbusd broadcasts.
HWY_INLINE __m512i QueryWord(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

HWY_INLINE __m512i Join256(const uint8_t* lo, const uint8_t* hi) {
  return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo))),
                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi)), 1);
}

// u[d], 128-bit lane l = dword d of lane l of z[0], z[1], z[2], z[3].
HWY_INLINE void Transpose4(const __m512i* z, __m512i* u) {
  const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
  u[0] = _mm512_unpacklo_epi64(t0, t2);
  u[1] = _mm512_unpackhi_epi64(t0, t2);
  u[2] = _mm512_unpacklo_epi64(t1, t3);
  u[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Block b of 16 keys as columns: C[s] lane x = codes 4s..4s+3 of key x, as the unsigned bytes
// dpbusd takes (Q8_0: code + 128; Q4_0: the nibble, code + 8).
template <WType T>
HWY_INLINE void KeyColumns(const uint8_t* const* row, int b, __m512i* C) {
  if constexpr (T == WType::Q8_0) {
    const size_t off = size_t(b) * sizeof(BlockQ8_0) + offsetof(BlockQ8_0, qs);
    const __m512i flip = _mm512_set1_epi8(char(0x80));
    __m512i z[8], u[4], v[4];
    for (int m = 0; m < 4; ++m) {  // lanes 0,1: key m (z[m]) or 8 + m (z[4 + m]); lanes 2,3: 4 more
      z[m] = _mm512_xor_si512(Join256(row[m] + off, row[4 + m] + off), flip);
      z[4 + m] = _mm512_xor_si512(Join256(row[8 + m] + off, row[12 + m] + off), flip);
    }
    Transpose4(z, u);
    Transpose4(z + 4, v);
    for (int d = 0; d < 4; ++d) {
      C[d] = _mm512_shuffle_i32x4(u[d], v[d], 0x88);
      C[4 + d] = _mm512_shuffle_i32x4(u[d], v[d], 0xDD);
    }
  } else {  // Q4_0: byte j holds codes j (low nibble) and j + 16 (high nibble)
    const size_t off = size_t(b) * sizeof(BlockQ4_0) + offsetof(BlockQ4_0, qs);
    __m512i z[4], u[4];
    for (int m = 0; m < 4; ++m) {  // lane l: key 4l + m
      __m512i t = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[m] + off)));
      t = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[4 + m] + off)), 1);
      t = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[8 + m] + off)), 2);
      z[m] = _mm512_inserti32x4(t, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row[12 + m] + off)), 3);
    }
    Transpose4(z, u);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    for (int d = 0; d < 4; ++d) {
      C[d] = _mm512_and_si512(u[d], nib);
      C[4 + d] = _mm512_and_si512(_mm512_srli_epi16(u[d], 4), nib);
    }
  }
}

alignas(64) static const uint8_t kZeroRow[attn::kVnniMaxRowBytes] = {};

// Scores of the rows of positions [i0, i1) against keys [lo, hi) of the tile at ts (Tk keys
// up to te) into sall[r * Tk + j - ts], 16 keys at a time, the rows' fp32 sums kept in sall
// between blocks. Lanes outside a row's key range end as -inf.
template <WType T>
void IntScoresVnni(const AttentionArgs& a, const uint8_t* Kb, size_t rb, int i0, int i1, int ts, int te, int lo,
                   int hi, const QuantActs& qa, const float* dkT, int dstride, float* sall, int Tk,
                   PrefetchCursor& pf) {
  const int group = a.n_heads / a.n_kv_heads, nb = a.head_dim / kQBlock;
  const __m512 vscale = _mm512_set1_ps(a.scale), ninf = _mm512_set1_ps(-INFINITY);
  const int32_t offset = T == WType::Q8_0 ? 128 : 8;
  pf.Spread(size_t((hi - lo + 15) / 16) * size_t(nb));
  for (int k0 = lo; k0 < hi; k0 += 16) {
    const int nk = std::min(16, hi - k0);
    const uint8_t* row[16];
    for (int x = 0; x < 16; ++x) row[x] = x < nk ? Kb + size_t(k0 + x) * rb : kZeroRow;
    const __mmask16 in_tile = __mmask16((1u << std::min(16, te - k0)) - 1u);
    for (int b = 0; b < nb; ++b) {
      __m512i C[8];
      KeyColumns<T>(row, b, C);
      pf.Step();
      const __m512 dk = _mm512_loadu_ps(dkT + size_t(b) * size_t(dstride) + (k0 - lo));
      for (int i = i0; i < i1; ++i) {
        const int jb = std::max(k0, a.kbeg[i]), je = std::min(std::min(k0 + 16, te), a.kend[i]);
        if (jb >= je) continue;
        const __mmask16 valid = __mmask16(((1u << (je - k0)) - 1u) & ~((1u << (jb - k0)) - 1u));
        for (int h = 0; h < group; ++h) {
          const int r = (i - i0) * group + h;
          const int8_t* q = qa.qrow(r) + b * kQBlock;
          __m512i acc = _mm512_set1_epi32(-offset * qa.srow(r)[b]);
#pragma GCC unroll 8
          for (int c = 0; c < 8; ++c) acc = _mm512_dpbusd_epi32(acc, C[c], QueryWord(q + 4 * c));
          const __m512 t = _mm512_mul_ps(dk, _mm512_set1_ps(qa.drow(r)[b]));
          float* out = sall + size_t(r) * size_t(Tk) + (k0 - ts);
          __m512 sc = b == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(in_tile, out);
          sc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), t, sc);
          if (b == nb - 1) sc = _mm512_mask_mul_ps(ninf, valid, sc, vscale);
          _mm512_mask_storeu_ps(out, in_tile, sc);
        }
      }
    }
  }
}
#endif

// The same scores from the keys' codes decoded to fp32 (Kc, the tile's rows from ts), NR rows
// of one position over keys [jb, je): per block, the exact integer sums of four keys at a time
// (ScoreQuad on integer-valued floats), then the fma chain of the definition.
template <int NR>
HWY_INLINE void IntScoresRows(const float* const* qf, const float* const* dq, const float* Kc, int hd, int ts, int lo,
                              int jb, int je, const float* dkT, int dstride, float scale, float* s, int ls,
                              PrefetchCursor& pf) {
  const int nb = hd / kQBlock;
#if HWY_TARGET != HWY_SCALAR
  const hn::Full128<float> d4;
  const auto one = hn::Set(d4, 1.0f), vscale = hn::Set(d4, scale);
  HWY_ALIGN float isum[NR * 4];
  for (int j = jb; j < je; j += 4) {
    const int nk = std::min(4, je - j);
    const float* kr[4];
    for (int x = 0; x < 4; ++x) kr[x] = Kc + size_t(j + std::min(x, nk - 1) - ts) * hd;
    pf.Step();
    hn::Vec<hn::Full128<float>> acc[NR];
    for (int u = 0; u < NR; ++u) acc[u] = hn::Zero(d4);
    for (int b = 0; b < nb; ++b) {
      const float* qb[NR];
      const float* kb[4];
      for (int u = 0; u < NR; ++u) qb[u] = qf[u] + b * kQBlock;
      for (int x = 0; x < 4; ++x) kb[x] = kr[x] + b * kQBlock;
      ScoreQuad<NR, true>(qb, kb, 4, kQBlock, one, isum, 4);
      const auto dk = hn::LoadU(d4, dkT + size_t(b) * size_t(dstride) + (j - lo));
      for (int u = 0; u < NR; ++u)
        acc[u] = hn::MulAdd(hn::Load(d4, isum + 4 * u), hn::Mul(dk, hn::Set(d4, dq[u][b])), acc[u]);
    }
    for (int u = 0; u < NR; ++u) {
      HWY_ALIGN float v[4];
      hn::Store(hn::Mul(acc[u], vscale), d4, v);
      for (int x = 0; x < nk; ++x) s[u * ls + j - ts + x] = v[x];
    }
  }
#else
  for (int j = jb; j < je; ++j) {
    pf.Step();
    for (int u = 0; u < NR; ++u) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) {
        float isum = 0.0f;
        for (int c = b * kQBlock; c < (b + 1) * kQBlock; ++c) isum += qf[u][c] * Kc[size_t(j - ts) * hd + c];
        acc = __builtin_fmaf(isum, dkT[size_t(b) * size_t(dstride) + (j - lo)] * dq[u][b], acc);
      }
      s[u * ls + j - ts] = acc * scale;
    }
  }
#endif
}

// Scores of the block's rows (sall, rows r = (i - i0) * group + h) against the tile's keys.
template <WType T>
void IntScores(const AttentionArgs& a, const uint8_t* Kb, size_t rb, int i0, int i1, int ts, int lo, int hi, int Tk,
               Scratch& w, PrefetchCursor& pf) {
  using Block = std::conditional_t<T == WType::Q8_0, BlockQ8_0, BlockQ4_0>;
  const int hd = a.head_dim, group = a.n_heads / a.n_kv_heads, nb = hd / kQBlock, te = ts + Tk;
  const int dstride = Tk + 16;
  KeyScalesT<Block>(Kb, rb, nb, lo, hi, w.dkT.data(), dstride);
  const DF df;
  const auto ninf = hn::Set(df, -INFINITY);
  for (int i = i0; i < i1; ++i) {
    if (std::max(ts, a.kbeg[i]) >= std::min(te, a.kend[i])) continue;
    for (int h = 0; h < group; ++h)
      for (int x = 0; x < Tk; x += int(hn::Lanes(df)))
        hn::StoreU(ninf, df, w.sall.data() + size_t((i - i0) * group + h) * size_t(Tk) + x);
  }
#if DFLASH_AVNNI
  if (rb <= attn::kVnniMaxRowBytes) {
    IntScoresVnni<T>(a, Kb, rb, i0, i1, ts, te, lo, hi, w.qa, w.dkT.data(), dstride, w.sall.data(), Tk, pf);
    return;
  }
#endif
  DecodeTile(hd, ts, lo, hi, w.kf.data(), [&](DF df, int j, int c) { return CodeVec<T>(df, Kb + size_t(j) * rb, c); });
  for (int i = i0; i < i1; ++i) {
    const int jb = std::max(ts, a.kbeg[i]), je = std::min(te, a.kend[i]);
    if (jb >= je) continue;
    for (int h0 = 0; h0 < group; h0 += 4) {
      const int nr = std::min(4, group - h0), r0 = (i - i0) * group + h0;
      const float* qf[4];
      const float* dq[4];
      for (int u = 0; u < nr; ++u) {
        qf[u] = w.qf.data() + size_t(r0 + u) * size_t(hd);
        dq[u] = w.qa.drow(r0 + u);
      }
      float* s = w.sall.data() + size_t(r0) * size_t(Tk);
      const float* K = w.kf.data();
      switch (nr) {
        case 1: IntScoresRows<1>(qf, dq, K, hd, ts, lo, jb, je, w.dkT.data(), dstride, a.scale, s, Tk, pf); break;
        case 2: IntScoresRows<2>(qf, dq, K, hd, ts, lo, jb, je, w.dkT.data(), dstride, a.scale, s, Tk, pf); break;
        case 3: IntScoresRows<3>(qf, dq, K, hd, ts, lo, jb, je, w.dkT.data(), dstride, a.scale, s, Tk, pf); break;
        default: IntScoresRows<4>(qf, dq, K, hd, ts, lo, jb, je, w.dkT.data(), dstride, a.scale, s, Tk, pf); break;
      }
    }
  }
}
