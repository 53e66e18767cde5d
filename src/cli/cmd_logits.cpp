// dflash logits: the raw logits of every prompt position, for numerical comparison in tests.
#include <algorithm>
#include <cstdio>
#include <string>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "kernels/kernels.h"
#include "models/dflash/dflash2_draft.h"
#include "models/dflash/dflash_draft.h"
#include "models/model_files.h"
#include "util/error.h"

namespace dflash::cli {

static void write_floats(const std::string& path, const std::vector<float>& v) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw file_error(path, "cannot open for writing");
  const size_t w = std::fwrite(v.data(), sizeof(float), v.size(), f);
  std::fclose(f);
  if (w != v.size()) throw file_error(path, "short write");
}

void add_logits_command(CLI::App& app) {
  struct Opts {
    std::string model, ids, weights = "native", out, mode = "prefill", simd_target;
    int chunk_size = 512, threads = 0, verify_rows = 5, verify_prefix = 37;
    CacheTypes cache;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("logits", "Write float32 logits [n_tokens x vocab] of every prompt position");
  sub->add_option("--model", o->model)->required();
  sub->add_option("--prompt-ids", o->ids)->required();
  sub->add_option("--weights", o->weights, "native (the checkpoint's own dtypes) | bf16 | q8 | q4 | f32 | f16");
  sub->add_option("--chunk-size", o->chunk_size, "Rows per forward in prefill mode (and verify's prefix)")
      ->check(CLI::Range(1, 1 << 20));
  sub->add_option("--cache-type,--kv-type", o->cache.target, "KV cache: f32 | f16 | q8 | q4")->capture_default_str();
  sub->add_option("--mode", o->mode,
                  "prefill: forwards of --chunk-size rows | decode: one row per forward | verify: a prefill of "
                  "--verify-prefix rows, then blocks of --verify-rows rows the way speculative decoding verifies "
                  "them: block k keeps its first 1 + k % rows rows (the positions written out) and rolls the cache "
                  "back over the rest, which hold wrong tokens (id + 1 mod vocab), as rejected drafts do")
      ->check(CLI::IsMember({"prefill", "decode", "verify"}))
      ->capture_default_str();
  sub->add_option("--verify-rows", o->verify_rows, "Rows per verify forward")->check(CLI::Range(1, 256))->capture_default_str();
  sub->add_option("--verify-prefix", o->verify_prefix, "Rows prefilled before the verify blocks")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  add_simd_target_option(sub, o->simd_target);
  sub->add_option("--threads", o->threads);
  sub->add_option("--out", o->out, "Output file (raw little-endian float32)")->required();
  sub->callback([o] {
    hold_simd_target(o->simd_target);
    PairOptions po;
    po.model = o->model;
    po.weights = parse_weights_option(o->weights);
    po.threads = o->threads;
    apply_cache_types(o->cache, po);
    const ModelPair pair = load_pair(po);
    const TargetModel* model = pair.target.get();
    const auto ids = parse_id_list(o->ids);
    if (ids.empty()) throw Error("--prompt-ids is empty");
    const int V = model->config().vocab, n = int(ids.size());
    const std::unique_ptr<SequenceState> state = model->new_state(n);
    SequenceState& cache = *state;
    std::vector<float> logits(size_t(n) * V);
    int forwards = 0;
    // Rows [pos, pos + rows) in forwards of `chunk` rows, all their logits kept.
    auto prefill = [&](int pos, int end, int chunk) {
      for (; pos < end; pos += chunk) {
        ForwardArgs a;
        a.tokens = ids.data() + pos;
        a.n = std::min(chunk, end - pos);
        a.logits_from = 0;
        a.logits = logits.data() + size_t(pos) * V;
        model->forward(cache, a);
        ++forwards;
      }
    };
    if (o->mode == "prefill") {
      prefill(0, n, o->chunk_size);
    } else if (o->mode == "decode") {
      for (int pos = 0; pos < n; ++pos) {  // as Generator::step: one row, its logits only
        ForwardArgs a;
        a.tokens = ids.data() + pos;
        a.n = 1;
        a.logits = logits.data() + size_t(pos) * V;
        model->forward(cache, a);
        ++forwards;
      }
    } else {
      const int B = o->verify_rows, prefix = std::min(o->verify_prefix, n);
      prefill(0, prefix, o->chunk_size);
      std::vector<int32_t> block(static_cast<size_t>(B));
      std::vector<float> vlogits(static_cast<size_t>(B) * V);
      for (int pos = prefix, k = 0; pos < n; ++k) {
        const int rows = std::min(B, n - pos);  // the loop clips a block at the cache's end too
        const int keep = std::min(1 + k % B, rows);
        for (int j = 0; j < rows; ++j) block[size_t(j)] = j < keep ? ids[size_t(pos + j)] : (ids[size_t(pos + j)] + 1) % V;
        ForwardArgs a;
        a.tokens = block.data();
        a.n = rows;
        a.logits_from = 0;
        a.logits = vlogits.data();
        a.rollback_rows = true;
        model->forward(cache, a);
        ++forwards;
        std::copy(vlogits.begin(), vlogits.begin() + ptrdiff_t(keep) * V, logits.begin() + ptrdiff_t(pos) * V);
        cache.rollback(pos + keep);
        pos += keep;
      }
    }
    write_floats(o->out, logits);
    std::printf("%s\n", nlohmann::json{{"n_tokens", n},
                                        {"vocab", V},
                                        {"mode", o->mode},
                                        {"forwards", forwards},
                                        {"cache_type", o->cache.target},
                                        {"simd_target", simd_target_name()}}
                            .dump()
                            .c_str());
  });
}

void add_draft_logits_command(CLI::App& app) {
  struct Opts {
    std::string model, draft, ids, weights = "native", out, hidden_out, uniforms;
    int block_first = -1, block_size = 0, threads = 0;
    float temperature = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* sub = app.add_subcommand("draft-logits", "Write the draft's float32 logits [(B-1) x vocab] for one block");
  sub->add_option("--model", o->model)->required();
  sub->add_option("--draft", o->draft)->required();
  sub->add_option("--prompt-ids", o->ids, "Context: prefilled through the target, taps fed to the draft")->required();
  sub->add_option("--block-first", o->block_first, "The block's first (committed) token")->required();
  sub->add_option("--block-size", o->block_size, "Default: the draft's block_size")->check(CLI::Range(2, 256));
  sub->add_option("--weights", o->weights);
  sub->add_option("--threads", o->threads);
  sub->add_option("--out", o->out)->required();
  sub->add_option("--hidden-out", o->hidden_out, "DFlash2: also write the normed final hidden states [(B-1) x hidden]");
  sub->add_option("--temperature", o->temperature, "DFlash2: sample the selector's walk (with --uniforms)");
  sub->add_option("--uniforms", o->uniforms, "DFlash2: B-1 comma-separated numbers in [0, 1) driving the draws");
  sub->callback([o] {
    PairOptions po;
    po.model = o->model;
    po.draft = o->draft;
    po.weights = parse_weights_option(o->weights);
    po.threads = o->threads;
    const ModelPair pair = load_pair(po);
    const TargetModel* model = pair.target.get();
    const DFlashDraft* draft = pair.draft.get();
    const auto ids = parse_id_list(o->ids);
    if (ids.empty()) throw Error("--prompt-ids is empty");
    const int V = model->config().vocab, n = int(ids.size());
    const int B = o->block_size > 0 ? o->block_size : draft->config().block_size;
    const std::unique_ptr<SequenceState> cache = model->new_state(n), dcache = draft->new_state(n + B);
    std::vector<float> taps(size_t(n) * draft->feature_dim());
    ForwardArgs a;
    a.tokens = ids.data();
    a.n = n;
    a.logits_from = n;  // no logits needed
    a.capture_layers = &draft->config().target_layer_ids;
    a.capture = taps.data();
    model->forward(*cache, a);
    draft->add_context(*dcache, taps.data(), n);
    std::vector<float> logits(size_t(B - 1) * V);
    nlohmann::json info{{"rows", B - 1}, {"vocab", V}, {"kind", draft->kind()}};
    if (auto* d2 = dynamic_cast<const DFlash2Draft*>(draft)) {
      // The selector's walk next to the logits it starts from.
      std::vector<double> u;
      for (size_t a = 0; a < o->uniforms.size();) {
        size_t b = o->uniforms.find(',', a);
        if (b == std::string::npos) b = o->uniforms.size();
        const double v = std::stod(o->uniforms.substr(a, b - a));
        if (!(v >= 0 && v < 1)) throw Error("--uniforms must lie in [0, 1)");
        u.push_back(v);
        a = b + 1;
      }
      if (o->temperature > 0 && int(u.size()) != B - 1)
        throw Error("--temperature needs --uniforms with B-1 = " + std::to_string(B - 1) + " numbers");
      std::vector<float> normed(size_t(B - 1) * model->config().hidden);
      DraftTokens dt;
      d2->draft_block(*dcache, o->block_first, B, o->temperature, u.data(), normed.data(), logits.data(), dt);
      if (!o->hidden_out.empty()) write_floats(o->hidden_out, normed);
      info["tokens"] = dt.tokens;
      info["finite"] = dt.finite;
      if (o->temperature > 0) {
        info["cand"] = dt.cand;
        info["q"] = dt.q;
      }
    } else {
      if (!o->hidden_out.empty() || o->temperature > 0) throw Error("--hidden-out/--temperature need a DFlash2 draft");
      draft->propose(*dcache, o->block_first, B, logits.data());
    }
    write_floats(o->out, logits);
    std::printf("%s\n", info.dump().c_str());
  });
}

}  // namespace dflash::cli
