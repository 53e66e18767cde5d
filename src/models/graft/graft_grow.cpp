#include "models/graft/graft_grow.h"

#include <cstring>

#include "kernels/numeric.h"
#include "util/error.h"

namespace dflash {

SmallTensor read_small(const TensorStore& store, const std::string& name) {
  const TensorView* t = store.find(name);
  if (!t) throw file_error(store.origin(), "missing tensor '" + name + "'");
  SmallTensor s;
  s.shape = t->shape;
  s.cols = t->shape.empty() ? 1 : t->shape.back();
  s.rows = s.cols ? t->numel() / s.cols : 0;
  s.v.resize(size_t(t->numel()));
  for (size_t i = 0; i < s.v.size(); ++i) {
    switch (t->dtype) {
      case DType::F32: std::memcpy(&s.v[i], t->data + 4 * i, 4); break;
      case DType::BF16: {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        s.v[i] = bf16_to_f32(h);
        break;
      }
      case DType::F16: {
        uint16_t h;
        std::memcpy(&h, t->data + 2 * i, 2);
        s.v[i] = f16_to_f32(h);
        break;
      }
      default: throw file_error(store.origin(), "tensor '" + name + "' has dtype " + t->dtype_str + " (need F32/F16/BF16)");
    }
  }
  return s;
}

int GrowMaps::small_q_head(int hb) const {
  const int gb = nHb / nKVb, gs = nHs / nKVs;
  const int kv = hb / gb, slot = hb % gb;
  return kv < nKVs && slot < gs ? kv * gs + slot : -1;
}

int GrowMaps::qrow(int i) const {
  const int hb = i / hdb, d = i % hdb, hs = small_q_head(hb);
  return hs >= 0 && d % f() == 0 ? hs * hds + d / f() : kDead;
}

int GrowMaps::krow(int i) const {
  const int kb = i / hdb, d = i % hdb;
  return kb < nKVs && d % f() == 0 ? kb * hds + d / f() : kDead;
}

int GrowMaps::vrow(int i) const {
  const int kb = i / hdb, d = i % hdb;
  return kb < nKVs && d < hds ? kb * hds + d : kDead;
}

int GrowMaps::ocol(int i) const {
  const int hb = i / hdb, d = i % hdb;
  if (d >= hds || hb / (nHb / nKVb) >= nKVs) return kDead;  // v is exactly zero there
  const int hs = small_q_head(hb);
  return hs >= 0 ? hs * hds + d : kZeroCol;  // a dead query head's output is the mean of a live v
}

uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name, keyed by the seed
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

GrownTensor grow_matrix(const std::string& name, std::vector<int64_t> shape, const SmallTensor* src,
                        const std::function<int(int64_t)>& row_map, const std::function<int(int64_t)>& col_map,
                        uint64_t seed, DType dtype) {
  const int64_t cols = shape.back();
  auto colv = std::make_shared<std::vector<int>>(size_t(cols));
  for (int64_t c = 0; c < cols; ++c) (*colv)[size_t(c)] = col_map(c);
  const uint64_t ts = tensor_seed(seed, name);
  GrownTensor g;
  g.meta = {name, dtype, std::move(shape)};
  g.row = [src, row_map, colv, ts, cols](int64_t r, float* out) {
    const int rs = row_map(r);
    uint64_t s = splitmix(ts ^ (uint64_t(r) * 0x2545f4914f6cdd1dull));
    for (int64_t c = 0; c < cols; ++c) {
      const int cs = (*colv)[size_t(c)];
      if (rs == kZeroRow) {
        out[c] = 0.0f;
      } else if (cs == kDead) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift64
        out[c] = float(double(s >> 11) * (1.0 / 9007199254740992.0) * 0.04 - 0.02);
      } else if (rs >= 0 && cs >= 0) {
        if (!src) throw std::logic_error("graft: a live entry without trained values");
        out[c] = src->at(rs, cs);
      } else {
        out[c] = 0.0f;
      }
    }
  };
  return g;
}

GrownTensor grow_vector(const std::string& name, int64_t n, std::function<float(int64_t)> value) {
  GrownTensor g;
  g.meta = {name, DType::F32, {n}};
  g.row = [n, value = std::move(value)](int64_t, float* out) {
    for (int64_t i = 0; i < n; ++i) out[i] = value(i);
  };
  return g;
}

GrownTensor patched(GrownTensor t, std::function<void(int64_t row, float* out)> patch) {
  t.row = [base = std::move(t.row), patch = std::move(patch)](int64_t r, float* out) {
    base(r, out);
    patch(r, out);
  };
  return t;
}

void write_grown(const std::string& path, std::vector<GrownTensor>& tensors) {
  std::vector<TensorToWrite> meta;
  for (const GrownTensor& t : tensors) meta.push_back(t.meta);
  std::vector<float> row;
  write_safetensors(path, meta, [&](size_t i, int64_t r, uint8_t* out) {
    const int64_t cols = tensors[i].meta.shape.back();
    row.resize(size_t(cols));
    tensors[i].row(r, row.data());
    if (tensors[i].meta.dtype == DType::F32) {
      std::memcpy(out, row.data(), size_t(cols) * 4);
    } else if (tensors[i].meta.dtype == DType::BF16) {
      for (int64_t c = 0; c < cols; ++c) {
        const uint16_t h = f32_to_bf16(row[size_t(c)]);
        std::memcpy(out + 2 * c, &h, 2);
      }
    } else {
      throw Error("graft: only F32 and BF16 are written");
    }
  });
}

}  // namespace dflash
