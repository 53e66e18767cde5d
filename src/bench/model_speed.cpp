// The speed of one model: random-weight shapes, the int8 kernel's rate, and prefill, decode and
// the forward of K tokens measured against their bandwidth and compute bounds.
#include "bench/model_speed.h"

#include <algorithm>
#include <cstring>

#include "decoding/generator.h"
#include "kernels/kernels.h"
#include "models/dense/arch_spec.h"
#include "models/model_files.h"
#include "models/qwen35/qwen35_model.h"
#include "util/error.h"
#include "util/peak_rss.h"
#include "util/timer.h"

namespace dflash::bench {

namespace {
// Qwen3.5 text stacks (../shared/qwen35-format.md §1.2): 0.8B as published; for 2B and 4B the
// layer count and width are llama.cpp's size switch and the rest (heads, ffn, linear heads) is
// this project's estimate, marked so in docs/bench.md. Every fourth layer is full attention.
ModelConfig qwen35_shape_config(const std::string& name) {
  ModelConfig c;
  c.architecture = "Qwen3_5ForConditionalGeneration";
  c.vocab = 248320, c.tie_embeddings = true, c.rope_theta = 1e7, c.head_dim = 256, c.rope_dims = 64;
  c.max_position = 262144;
  if (name == "qwen3.5-0.8b") {
    c.hidden = 1024, c.n_layers = 24, c.n_heads = 8, c.n_kv_heads = 2, c.ffn = 3584, c.linear = {16, 16, 128, 128, 4};
  } else if (name == "qwen3.5-2b") {
    c.hidden = 2048, c.n_layers = 24, c.n_heads = 8, c.n_kv_heads = 2, c.ffn = 6144, c.linear = {16, 16, 128, 128, 4};
  } else if (name == "qwen3.5-4b") {
    c.hidden = 2560, c.n_layers = 32, c.n_heads = 16, c.n_kv_heads = 4, c.ffn = 9216, c.linear = {16, 32, 128, 128, 4};
  } else if (name == "qwen3.5-graft-test") {  // dflash graft's hybrid tests: small files
    c.hidden = 512, c.n_layers = 8, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 128, c.rope_dims = 32, c.ffn = 1024;
    c.vocab = 4096, c.linear = {4, 8, 64, 64, 4};
  } else if (name == "qwen3.5-tiny") {  // for smoke tests of the bench itself
    c.hidden = 256, c.n_layers = 4, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.rope_dims = 16, c.ffn = 512;
    c.vocab = 4096, c.linear = {2, 4, 64, 64, 4};
  } else {
    throw Error("unknown shape '" + name + "' (known Qwen3.5 shapes: qwen3.5-0.8b, qwen3.5-2b, qwen3.5-4b, qwen3.5-tiny, qwen3.5-graft-test)");
  }
  for (int l = 0; l < c.n_layers; ++l)
    c.layer_kinds.push_back((l + 1) % 4 == 0 ? LayerKind::Attention : LayerKind::LinearAttention);
  return c;
}
}  // namespace

std::unique_ptr<TargetModel> random_model(const ModelConfig& c, WType weights, uint64_t seed,
                                          std::shared_ptr<Backend> backend) {
  for (LayerKind k : c.layer_kinds)
    if (k == LayerKind::LinearAttention) return Qwen35Model::random(c, weights, seed, std::move(backend));
  return DenseModel::random(c, weights, seed, std::move(backend));
}

size_t recurrent_state_bytes(const ModelConfig& c) {
  size_t n = 0;
  for (LayerKind k : c.layer_kinds) n += k == LayerKind::LinearAttention;
  const auto& L = c.linear;
  return n * (size_t(L.value_heads) * L.key_dim * L.value_dim + size_t(L.conv_kernel - 1) * L.channels()) * sizeof(float);
}

double kv_bytes_per_position(const TargetModel& m) {
  const ModelConfig& c = m.config();
  int attention_layers = 0;
  for (LayerKind k : c.layer_kinds) attention_layers += k == LayerKind::Attention;
  if (c.layer_kinds.empty()) attention_layers = c.n_layers;
  return 2.0 * attention_layers * c.n_kv_heads * double(row_bytes(m.cache_type(), c.head_dim));
}

ModelConfig shape_config(const std::string& name) {
  ModelConfig c;
  c.vocab = 151936;
  c.tie_embeddings = true;
  c.rope_theta = 1e6;
  c.eos_ids = {};
  if (name == "qwen2.5-0.5b") {
    c.arch = find_arch_by_hf_name("Qwen2ForCausalLM");
    c.hidden = 896, c.n_layers = 24, c.n_heads = 14, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 4864;
  } else if (name == "qwen2.5-1.5b") {
    c.arch = find_arch_by_hf_name("Qwen2ForCausalLM");
    c.hidden = 1536, c.n_layers = 28, c.n_heads = 12, c.n_kv_heads = 2, c.head_dim = 128, c.ffn = 8960;
  } else if (name == "qwen3-1.7b") {
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 2048, c.n_layers = 28, c.n_heads = 16, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 6144;
  } else if (name == "qwen3-8b") {
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 4096, c.n_layers = 36, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 128, c.ffn = 12288;
    c.tie_embeddings = false;  // Qwen3-8B has its own LM head
  } else if (name == "qwen3-graft-test" || name == "qwen3-graft-test-untied") {  // dflash graft's tests: small files
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 1024, c.n_layers = 6, c.n_heads = 8, c.n_kv_heads = 2, c.head_dim = 128, c.ffn = 1024, c.vocab = 4096;
    c.tie_embeddings = name == "qwen3-graft-test";  // the untied one as qwen3-8b's head is
  } else if (name == "tiny") {  // for smoke tests of the bench itself
    c.arch = find_arch_by_hf_name("Qwen3ForCausalLM");
    c.hidden = 256, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.head_dim = 64, c.ffn = 512, c.vocab = 4096;
  } else if (name.rfind("qwen3.5-", 0) == 0) {
    return qwen35_shape_config(name);
  } else {
    throw Error("unknown shape '" + name + "' (known: qwen2.5-0.5b, qwen2.5-1.5b, qwen3-1.7b, qwen3-8b, qwen3-graft-test, qwen3-graft-test-untied, tiny, qwen3.5-0.8b, "
                "qwen3.5-2b, qwen3.5-4b, qwen3.5-tiny, qwen3.5-graft-test)");
  }
  c.architecture = c.arch->hf_name;
  c.qkv_bias = c.arch->qkv_bias;
  return c;
}

namespace {
const std::vector<int>& kCurveK = curve_k();
}  // namespace

// Multiply-adds per second of the int8 kernel on weights that stay in cache (64 activation
// rows, all threads, a matrix of 1024 rows per thread so that per-call costs do not count):
// the compute roof of a forward of many tokens in that format.
double measure_int8_rate(WType t, ThreadPool& pool) {
  const int K = 2048, N = 1024 * pool.size(), M = 64;
  std::vector<float> wf(size_t(N) * K), x(size_t(M) * K), y(size_t(M) * N);
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = float(int(i * 2654435761u % 255) - 127) / 127.0f;
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(int(i * 40503u % 255) - 127) / 127.0f;
  const WeightMatrix w = pack_weight_matrix(make_weight_matrix(wf.data(), N, K, t));  // as the models hold it
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const double t0 = now_seconds();
    for (int i = 0; i < 4; ++i) matmul(x.data(), M, w, y.data(), &pool);
    best = std::min(best, (now_seconds() - t0) / 4);
  }
  return double(M) * N * K / best;
}

namespace {
// Per kCurveK, after `ctx` tokens of context: the seconds of one forward of K tokens as
// speculative decoding verifies them (rollback_rows), a warm-up then the median of
// kCurveReps forwards (the statistic tools/bench/llamacpp_peer.mjs takes). For a hybrid also,
// measured alternately in the same loop: the same forward without rollback_rows (the
// difference is what logging the block costs), and what rolling back to the middle of the
// block costs: the rollback call, then the next verify, which runs the K/2 kept rows first
// (models/qwen35/hybrid_state.h), minus the same verify with nothing pending; the median of
// the differences of back-to-back pairs (three times as many reps for hybrids).
struct Curve {
  std::vector<double> forward, plain, rollback, snapshot;
};

// What the alternative to rolling back by replay would cost: a snapshot of every linear layer's states after
// each of K verified rows (vLLM's and SGLang's per-position slots), timed as K copies of
// `state_bytes` into distinct buffers (the copy alone, without the bookkeeping around it).
double snapshot_copy_seconds(size_t state_bytes, int K) {
  if (state_bytes == 0) return 0;
  static std::vector<char> src, dst;
  src.assign(state_bytes, 1);
  dst.resize(state_bytes * size_t(K));
  std::memset(dst.data(), 0, dst.size());  // fault the pages in before timing
  std::vector<double> t;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = now_seconds();
    for (int k = 0; k < K; ++k) std::memcpy(dst.data() + size_t(k) * state_bytes, src.data(), state_bytes);
    t.push_back(now_seconds() - t0);
  }
  return *std::min_element(t.begin(), t.end());
}

double median(std::vector<double> t) {
  if (t.empty()) return 0;
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

Curve forward_curve(const TargetModel& m, int ctx) {
  const int V = m.config().vocab, kmax = kCurveK.back();
  const bool hybrid = m.family() == "qwen35";
  std::vector<int32_t> ids(size_t(ctx + 2 * kmax));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t((i * 7919 + 13) % size_t(V));
  auto cache = m.new_state(ctx + 2 * kmax);
  std::vector<float> logits(size_t(kmax) * V);
  ForwardArgs pre;
  pre.tokens = ids.data();
  pre.n = ctx;
  pre.logits = logits.data();
  m.forward(*cache, pre);
  cache->keep_checkpoint();  // a recurrent state returns to ctx from the in-place forwards below
  Curve out;
  for (int K : kCurveK) {
    std::vector<double> t, tp, tr;
    // A rollback's cost is a difference of two forwards, so it takes more pairs than the
    // curve to settle; the other series ride along.
    const int reps = hybrid && K > 1 ? 3 * kCurveReps : kCurveReps;
    for (int rep = 0; rep <= reps; ++rep) {
      ForwardArgs a;
      a.tokens = ids.data() + ctx;
      a.n = K;
      a.logits_from = 0;  // a verify needs every row's logits
      a.logits = logits.data();
      a.rollback_rows = true;  // as a verify
      double t0 = now_seconds();
      m.forward(*cache, a);
      const double verify = now_seconds() - t0;
      if (rep > 0) t.push_back(verify);
      if (hybrid && K > 1) {
        t0 = now_seconds();
        cache->rollback(ctx + K / 2);
        const double call = now_seconds() - t0;
        a.tokens = ids.data() + ctx + K / 2;
        t0 = now_seconds();
        m.forward(*cache, a);  // runs the K/2 kept rows first
        const double after = now_seconds() - t0;
        if (rep > 0) tr.push_back(call + after - verify);
        cache->rollback(ctx);
        a.tokens = ids.data() + ctx;
        a.rollback_rows = false;
        t0 = now_seconds();
        m.forward(*cache, a);
        if (rep > 0) tp.push_back(now_seconds() - t0);
      }
      cache->rollback(ctx);
    }
    out.forward.push_back(median(t));
    out.plain.push_back(median(tp));
    out.rollback.push_back(median(tr));
    out.snapshot.push_back(hybrid ? snapshot_copy_seconds(recurrent_state_bytes(m.config()), K) : 0.0);
  }
  return out;
}

}  // namespace

BenchRow bench_one(const std::string& label, const TargetModel& m, int prompt_tokens, int gen_tokens, ThreadPool& pool,
              double bw, double int8_rate) {
  std::vector<int32_t> prompt(static_cast<size_t>(prompt_tokens));
  for (int i = 0; i < prompt_tokens; ++i) prompt[size_t(i)] = (i * 7919 + 13) % m.config().vocab;
  Generator gen(m, prompt_tokens + gen_tokens + 8);
  GenerateParams gp;
  gp.max_tokens = gen_tokens;
  gp.ignore_eos = true;
  gen.start(prompt, gp);
  std::vector<int32_t> out;
  while (gen.step(out)) {
  }
  BenchRow r;
  r.model = label;
  r.weights = wtype_name(m.weight_type());
  r.prefill_tok_s = gen.timings().prefill_tok_s();
  r.decode_tok_s = gen.timings().decode_tok_s();
  r.weight_gb = double(m.weight_bytes()) / 1e9;
  const double kv_per_pos = kv_bytes_per_position(m);
  r.kv_gb = kv_per_pos * (prompt_tokens + gen_tokens / 2.0) / 1e9;
  r.roof = r.roof_against(bw);
  r.bandwidth = bw;
  const int curve_ctx = std::min(prompt_tokens, 128);
  const Curve curve = forward_curve(m, curve_ctx);
  r.forward_s = curve.forward;
  if (m.family() == "qwen35") {
    r.state_mib = double(m.new_state(1)->bytes()) / (1 << 20);
    for (size_t i = 0; i < curve.forward.size(); ++i) {
      r.log_s.push_back(curve.forward[i] - curve.plain[i]);
      r.rollback_s.push_back(curve.rollback[i]);
      r.snapshot_s.push_back(curve.snapshot[i]);
    }
  }
  // Multiply-adds per token ~ weights streamed per token (the matrices; attention over a short
  // context is small next to them).
  const WType wt = m.weight_type();
  const double bytes_per_weight = double(row_bytes(wt, 256)) / 256.0;
  const double macs = double(m.weight_bytes()) / bytes_per_weight;
  for (int K : kCurveK)
    r.bound_s.push_back(std::max((double(m.weight_bytes()) + kv_per_pos * (curve_ctx + K)) / bw,
                                 int8_rate > 0 ? macs * K / int8_rate : 0.0));
  const int64_t rss = peak_rss_bytes();
  r.peak_rss_mb = rss < 0 ? -1 : double(rss) / (1 << 20);
  return r;
}

ModelPair load_bench_pair(const std::string& model, const std::string& draft, const std::string& weights, int threads,
                          WType cache_type) {
  PairOptions po;
  po.cache_type = cache_type;
  po.model = resolve_model_dir(model);
  po.draft = draft;
  po.weights = parse_weights_option(weights);
  po.populate = true;
  po.threads = threads;
  return load_pair(po);
}

}  // namespace dflash::bench
