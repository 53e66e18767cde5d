#include "models/qwen35/qwen35_fused.h"

#include <cstring>
#include <string>
#include <vector>

#include "models/qwen35/qwen35_tensors.h"
#include "models/weight_loader.h"
#include "util/error.h"

namespace dflash {

namespace {

// Layer-relative Hugging Face names; the fused pair is not in qwen35_tensors() because no
// GGUF name or writer row belongs to it (the writer emits the split matrices).
constexpr const char* kQkvz = "linear_attn.in_proj_qkvz.weight";
constexpr const char* kBa = "linear_attn.in_proj_ba.weight";

std::string layer_name(const TensorNaming& naming, int layer, const char* rel) {
  TensorInfo t;
  t.scope = Scope::PerLayer;
  t.hf = rel;
  return tensor_name(t, naming, layer);
}

// What an error about a tensor that is absent names: the folder, as WeightLoader does.
std::string origin_of(const TensorSource& src) {
  const auto* L = dynamic_cast<const WeightLoader*>(&src);
  return L ? L->dir() : std::string("checkpoint");
}

// The file a present tensor came from (the shape and dtype errors name it).
std::string file_of(const TensorSource& src, const std::string& name) {
  const auto* L = dynamic_cast<const WeightLoader*>(&src);
  const TensorView* v = L ? L->try_get(name) : nullptr;
  return v ? v->file : origin_of(src);
}

// Rows `rows` of m (in that order) as a new matrix in `type`.
WeightMatrix gather_rows(const WeightMatrix& m, const std::vector<int64_t>& rows, WType type, const std::string& file,
                         const std::string& name) {
  return encode_rows(file, name, int64_t(rows.size()), m.cols, type, [&](int64_t r, uint8_t* out, float* scratch) {
    const int64_t s = rows[size_t(r)];
    if (type == m.type) {
      std::memcpy(out, m.row(s), row_bytes(type, m.cols));
    } else {
      dequantize_row(m, s, scratch);
      quantize_row(scratch, m.cols, type, out);
    }
  });
}

}  // namespace

LinearProjections linear_projections(const TensorSource& src, const TensorNaming& naming, int layer) {
  if (naming.format != TensorFormat::HuggingFace) return LinearProjections::Separate;
  const std::string qkvz = layer_name(naming, layer, kQkvz), ba = layer_name(naming, layer, kBa);
  const bool has_qkvz = src.contains(qkvz), has_ba = src.contains(ba);
  const std::string qkv = tensor_name(qwen35_tensor(Qwen35Role::InQkv), naming, layer);
  if (!has_qkvz && !has_ba) {
    // Neither form: name what each would need, not only the Qwen3.5 one.
    if (!src.contains(qkv))
      throw file_error(origin_of(src), "missing tensor '" + qkv + "' (nor Qwen3-Next's fused '" + qkvz + "')");
    return LinearProjections::Separate;
  }
  if (has_qkvz != has_ba)
    throw file_error(origin_of(src), "missing tensor '" + (has_qkvz ? ba : qkvz) + "' (the layer has '" +
                                         (has_qkvz ? qkvz : ba) + "'; Qwen3-Next's fused projections come as a pair)");
  for (Qwen35Role r : {Qwen35Role::InQkv, Qwen35Role::InZ, Qwen35Role::InB, Qwen35Role::InA}) {
    const std::string sep = tensor_name(qwen35_tensor(r), naming, layer);
    if (src.contains(sep))
      throw file_error(file_of(src, sep), "layer " + std::to_string(layer) + " has both Qwen3-Next's fused '" + qkvz +
                                              "' and the separate '" + sep + "' (one form per layer)");
  }
  return LinearProjections::Fused;
}

void read_fused_projections(const TensorSource& src, const TensorNaming& naming, int layer, const TensorDims& dims,
                            std::optional<WType> type, HybridLayer& w) {
  const int64_t H = dims[Dim::Hidden], nk = dims[Dim::LinKeyHeads], nv = dims[Dim::LinValueHeads];
  const int64_t dv = dims[Dim::LinHeadDim], vd = nv * dv, C = dims[Dim::LinChannels];
  const int64_t dk = (C - vd) / (2 * nk), r = nv / nk;
  const std::string qkvz = layer_name(naming, layer, kQkvz), ba = layer_name(naming, layer, kBa);
  // As stored (no copy); the source checks the shapes against the config and names the tensor.
  const WeightMatrix fused = src.matrix(qkvz, C + vd, H, std::nullopt, 0);
  const WeightMatrix fused_ba = src.matrix(ba, 2 * nv, H, std::nullopt, 0);

  // Key head g's group: q_g at 0, k_g at dk, its r value heads' v rows at 2*dk, their z rows
  // at 2*dk + r*dv. Walking g outermost, then the group's value heads, lists value heads
  // g*r + j in increasing order: the separate tensors' order.
  const int64_t G = 2 * dk + 2 * r * dv;
  std::vector<int64_t> qkv_rows, z_rows, b_rows, a_rows;
  for (int64_t part : {int64_t(0), dk})  // all q heads, then all k heads
    for (int64_t g = 0; g < nk; ++g)
      for (int64_t i = 0; i < dk; ++i) qkv_rows.push_back(g * G + part + i);
  for (int64_t g = 0; g < nk; ++g)
    for (int64_t i = 0; i < r * dv; ++i) {
      qkv_rows.push_back(g * G + 2 * dk + i);
      z_rows.push_back(g * G + 2 * dk + r * dv + i);
    }
  // in_proj_ba: key head g's group is [b of its r value heads | a of them].
  for (int64_t g = 0; g < nk; ++g)
    for (int64_t j = 0; j < r; ++j) {
      b_rows.push_back(g * 2 * r + j);
      a_rows.push_back(g * 2 * r + r + j);
    }
  const std::string f = file_of(src, qkvz), fb = file_of(src, ba);
  w.in_qkv = gather_rows(fused, qkv_rows, type.value_or(fused.type), f, qkvz);
  w.in_z = gather_rows(fused, z_rows, type.value_or(fused.type), f, qkvz);
  w.in_b = gather_rows(fused_ba, b_rows, type.value_or(fused_ba.type), fb, ba);
  w.in_a = gather_rows(fused_ba, a_rows, type.value_or(fused_ba.type), fb, ba);
}

}  // namespace dflash
