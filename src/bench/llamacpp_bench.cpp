// dflash bench --vs-llamacpp: for each random-weight shape and quantization, the model is
// written once as a temporary GGUF file; dflash loads that file and measures prefill, decode
// and the forward of K tokens, then llama.cpp (node-llama-cpp's prebuilt CPU library, run by
// tools/bench/llamacpp_peer.mjs) measures the same on the same file with the same thread
// count. The two run one after the other, never at the same time; the file is deleted after.
#include "bench/llamacpp_bench.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "bench/bandwidth.h"
#include "bench/model_speed.h"
#include "formats/gguf.h"
#include "kernels/kernels.h"
#include "models/dense/dense_gguf_write.h"
#include "models/qwen35/qwen35_gguf_write.h"
#include "models/tensor_table.h"
#include "models/model_files.h"
#include "util/error.h"
#include "util/mapped_file.h"
#include "util/peak_rss.h"

namespace dflash::bench {

std::string shell_quote(const std::string& s) {
  std::string o = "'";
  for (char c : s) o += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return o + "'";
}

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

namespace {

constexpr const char* kNpmInstall =
    "npm install --ignore-scripts --omit=optional node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1";

std::string real_exe_dir() {
  char buf[PATH_MAX];
  if (!::realpath("/proc/self/exe", buf)) return ".";
  std::string p(buf);
  return p.substr(0, p.rfind('/'));
}

// Deterministic uniform noise per tensor name (the same name gives the same values, so the
// tied embedding and the output head written from it agree), like DenseModel::random.
struct RandomWeights {
  static uint64_t seed_of(const std::string& name) {
    uint64_t h = 1469598103934665603ull;
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return h | 1;
  }
  static WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, WType t) {
    uint64_t state = seed_of(name);
    return random_weight_matrix(state, rows, cols, t);
  }
  static std::vector<float> vector(const std::string& name, int64_t n) {
    const bool bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    return std::vector<float>(size_t(n), bias ? 0.0f : 1.0f);  // norms 1, biases 0
  }
};

// The same noise for a Qwen3.5 hybrid, named as in a GGUF file (what write_qwen35_gguf reads):
// norms 1 (stored as 1 + w), ssm_a -0.3 (a decay of about 0.8 per token, so the recurrent state
// stays finite), dt biases 0, the conv kernel small noise.
struct RandomQwen35Source final : TensorSource {
  bool contains(const std::string&) const override { return true; }
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, std::optional<WType> type,
                      int64_t) const override {
    return RandomWeights::matrix(name, rows, cols, type.value_or(WType::BF16));
  }
  std::vector<float> vector(const std::string& name, int64_t n) const override {
    const auto ends = [&](const char* tail) {
      const size_t k = std::strlen(tail);
      return name.size() >= k && name.compare(name.size() - k, k, tail) == 0;
    };
    return std::vector<float>(size_t(n), ends("ssm_a") ? -0.3f : ends(".bias") ? 0.0f : 1.0f);
  }
};

struct TempFile {
  std::string path;
  ~TempFile() {
    if (!path.empty()) std::remove(path.c_str());
  }
};

void check_peer_installed(const std::string& root) {
  if (std::system("command -v node >/dev/null 2>&1") != 0)
    throw Error("bench --vs-llamacpp: `node` was not found on PATH (install Node.js, then in " + root + ": " +
                kNpmInstall + ")");
  const std::string nm = root + "/node_modules";
  if (!file_exists(nm + "/node-llama-cpp/package.json") || !file_exists(nm + "/@node-llama-cpp/linux-x64/package.json"))
    throw Error("bench --vs-llamacpp: node-llama-cpp is not installed in " + nm +
                " (the bench installs nothing itself); run in " + root + ":\n  " + kNpmInstall);
}

// Runs the peer in bench mode; its stderr goes to ours, its stdout (one JSON object) is parsed.
nlohmann::json run_peer(const std::string& root, const std::string& gguf, int threads, int pp, int tg, int ctx) {
  std::string ks;
  for (int K : curve_k()) ks += (ks.empty() ? "" : ",") + std::to_string(K);
  return run_llamacpp_peer(root, {"bench", "--model", gguf, "--threads", std::to_string(threads), "--pp", std::to_string(pp),
                                  "--tg", std::to_string(tg), "--ctx", std::to_string(ctx), "--batches", ks, "--reps",
                                  std::to_string(kCurveReps)});
}

double ratio(double a, double b) { return b > 0 ? a / b : NAN; }

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

// One round: dflash on the file, then llama.cpp on it (dflash's copy is freed first).
struct Round {
  BenchRow d;
  double bandwidth = 0;  // read bandwidth measured just before the round, bytes/s
  nlohmann::json peer;
  std::string quant;
};

Round measure_round(const std::string& root, const std::string& label, const std::string& gguf, int pp, int tg,
                    ThreadPool& pool, double bw, std::map<WType, double>& rate) {
  LoadOptions lo;
  lo.populate = true;  // page faults are not what we measure
  lo.backend = make_cpu_backend(pool.size());
  Round rd;
  {
    std::fprintf(stderr, "[%s] dflash: loading %s\n", label.c_str(), gguf.c_str());
    reset_peak_rss();
    auto m = TargetModel::load(gguf, lo);
    m->set_cache_type(WType::F16);  // llama.cpp's default KV cache type: both engines read the same bytes
    const WType wt = m->weight_type();
    rd.quant = wtype_name(wt);
    if (uses_int8_path(wt) && !rate.count(wt)) {
      rate[wt] = measure_int8_rate(wt, pool);
      std::fprintf(stderr, "int8 kernel rate %s (%s, cache-resident, 64 rows): %.1f G multiply-adds/s\n",
                   rd.quant.c_str(), qmatmul_target_name(), rate[wt] / 1e9);
    }
    std::fprintf(stderr, "[%s %s] dflash: pp%d, tg%d, forward of K\n", label.c_str(), rd.quant.c_str(), pp, tg);
    rd.d = bench_one(label, *m, pp, tg, pool, bw, rate.count(wt) ? rate[wt] : 0.0);
  }  // dflash's copy is freed before llama.cpp loads its own
  std::fprintf(stderr, "[%s %s] llama.cpp: pp%d, tg%d, forward of K\n", label.c_str(), rd.quant.c_str(), pp, tg);
  rd.peer = run_peer(root, gguf, pool.size(), pp, tg, std::min(pp, 128));
  return rd;
}

// A number of j, NaN when absent (the peer may leave a figure out).
double get(const nlohmann::json& j, const std::string& k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : NAN;
}

double peer_forward_ms(const nlohmann::json& peer, const std::string& k) {
  return peer.contains("forward_ms") ? get(peer["forward_ms"], k) : NAN;
}

// The larger (for tok/s) or smaller (for ms) of two figures, a missing one (NaN) losing.
double best_of(double a, double b, bool larger) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return larger ? std::max(a, b) : std::min(a, b);
}

// `rounds` rounds of both engines in turn; each figure is the best of its engine's rounds, so
// a slow phase of this machine that hits one engine's turn does not decide the ratio.
nlohmann::json measure(const std::string& root, const std::string& label, const std::string& gguf, int pp, int tg,
                       int rounds, ThreadPool& pool, double& bw, std::map<WType, double>& rate) {
  std::vector<Round> rs;
  for (int i = 0; i < rounds; ++i) {
    if (rounds > 1) std::fprintf(stderr, "[%s] round %d of %d\n", label.c_str(), i + 1, rounds);
    double now = 0;
    const double best = remeasure_read_bandwidth(pool, bw, &now);
    rs.push_back(measure_round(root, label, gguf, pp, tg, pool, best, rate));
    rs.back().bandwidth = now;
  }
  const auto& ks = curve_k();
  BenchRow r = rs[0].d;  // then the best of every round
  double l_pp = NAN, l_tg = NAN;
  std::vector<double> l_fw(ks.size(), NAN);
  nlohmann::json per_round = nlohmann::json::array();
  for (const Round& x : rs) {
    r.prefill_tok_s = std::max(r.prefill_tok_s, x.d.prefill_tok_s);
    r.decode_tok_s = std::max(r.decode_tok_s, x.d.decode_tok_s);
    r.peak_rss_mb = std::max(r.peak_rss_mb, x.d.peak_rss_mb);
    for (size_t i = 0; i < ks.size(); ++i) {
      r.forward_s[i] = std::min(r.forward_s[i], x.d.forward_s[i]);
      r.bound_s[i] = std::min(r.bound_s[i], x.d.bound_s[i]);  // each round's against the best bandwidth so far
      l_fw[i] = best_of(l_fw[i], peer_forward_ms(x.peer, std::to_string(ks[i])), false);
    }
    l_pp = best_of(l_pp, get(x.peer, "pp512_tok_s"), true);
    l_tg = best_of(l_tg, get(x.peer, "tg128_tok_s"), true);
    // The roof of the round against its own bandwidth measurement as well as the best one: on
    // a shared machine the two can be a third apart, and the pairing says which phase a
    // round's decode ran in.
    per_round.push_back({{"bandwidth_gb_s", x.bandwidth / 1e9},
                         {"dflash",
                          {{"pp512_tok_s", x.d.prefill_tok_s},
                           {"tg128_tok_s", x.d.decode_tok_s},
                           {"roof_fraction", x.d.roof_against(x.bandwidth)}}},
                         {"llamacpp",
                          {{"pp512_tok_s", num_or_null(get(x.peer, "pp512_tok_s"))},
                           {"tg128_tok_s", num_or_null(get(x.peer, "tg128_tok_s"))}}}});
  }
  r.roof = r.roof_against(bw);
  nlohmann::json d = {{"pp512_tok_s", r.prefill_tok_s}, {"tg128_tok_s", r.decode_tok_s}, {"roof_fraction", r.roof},
                      {"peak_rss_mb", r.peak_rss_mb}},
                 l = {{"pp512_tok_s", num_or_null(l_pp)}, {"tg128_tok_s", num_or_null(l_tg)}};
  nlohmann::json dfw = nlohmann::json::object(), lfw = nlohmann::json::object(), bd = nlohmann::json::object(),
                 rfw = nlohmann::json::object();
  for (size_t i = 0; i < ks.size(); ++i) {
    const std::string k = std::to_string(ks[i]);
    dfw[k] = r.forward_s[i] * 1e3;
    bd[k] = r.bound_s[i] * 1e3;
    lfw[k] = num_or_null(l_fw[i]);
    rfw[k] = num_or_null(ratio(r.forward_s[i] * 1e3, l_fw[i]));
  }
  d["forward_ms"] = dfw;
  l["forward_ms"] = lfw;
  if (rs.back().peer.contains("threads_used")) l["threads_used"] = rs.back().peer["threads_used"];
  return {{"model", label},
          {"quant", rs[0].quant},
          {"kv_cache", "f16"},
          {"threads", pool.size()},
          {"prompt_tokens", pp},
          {"gen_tokens", tg},
          {"rounds", rounds},
          {"per_round", per_round},
          {"weight_gb_per_token", r.weight_gb},
          {"kv_gb_per_token", r.kv_gb},
          {"bandwidth_gb_s", bw / 1e9},
          {"bound_ms", bd},
          {"dflash", d},
          {"llamacpp", l},
          {"ratio",
           {{"pp512_tok_s", num_or_null(ratio(r.prefill_tok_s, l_pp))},
            {"tg128_tok_s", num_or_null(ratio(r.decode_tok_s, l_tg))},
            {"forward_ms", rfw}}}};
}

void print_table(const nlohmann::json& rows) {
  std::printf("dflash vs llama.cpp on the same GGUF file, KV cache f16 in both (ratio = dflash / llama.cpp: > 1 is dflash "
              "faster for tok/s, < 1 is dflash faster for ms)\n\n");
  std::printf("%-14s %-5s %3s | %10s %10s %6s | %10s %10s %6s | %6s %9s\n", "model", "quant", "thr", "pp t/s dfl",
              "llama.cpp", "ratio", "tg t/s dfl", "llama.cpp", "ratio", "roof", "RSS MiB");
  for (const auto& r : rows)
    std::printf("%-14s %-5s %3d | %10.1f %10.1f %6.2f | %10.2f %10.2f %6.2f | %5.0f%% %9.0f\n",
                r["model"].get<std::string>().c_str(), r["quant"].get<std::string>().c_str(), r["threads"].get<int>(),
                get(r["dflash"], "pp512_tok_s"), get(r["llamacpp"], "pp512_tok_s"), get(r["ratio"], "pp512_tok_s"),
                get(r["dflash"], "tg128_tok_s"), get(r["llamacpp"], "tg128_tok_s"), get(r["ratio"], "tg128_tok_s"),
                100 * get(r["dflash"], "roof_fraction"), get(r["dflash"], "peak_rss_mb"));
  for (const auto& r : rows) {
    if (r.value("rounds", 1) <= 1) continue;
    std::printf("%s %s: best of %d rounds per engine; tg t/s by round, dflash", r["model"].get<std::string>().c_str(),
                r["quant"].get<std::string>().c_str(), r["rounds"].get<int>());
    for (const auto& x : r["per_round"]) std::printf(" %.2f", get(x["dflash"], "tg128_tok_s"));
    if (r["per_round"].size() > 0 && r["per_round"][0].contains("bandwidth_gb_s")) {  // older JSON files lack it
      std::printf(" (roof against the bandwidth measured just before each round:");
      for (const auto& x : r["per_round"])
        std::printf(" %.0f%% of %.1f GB/s", 100 * get(x["dflash"], "roof_fraction"), get(x, "bandwidth_gb_s"));
      std::printf(")");
    }
    std::printf(", llama.cpp");
    for (const auto& x : r["per_round"]) std::printf(" %.2f", get(x["llamacpp"], "tg128_tok_s"));
    std::printf("\n");
  }
  std::printf("\nforward of K tokens after 128 of context, ms: dflash | llama.cpp | ratio | physical bound\n");
  for (const auto& r : rows) {
    std::printf("%s %s (%d threads, %.1f GB/s measured)\n", r["model"].get<std::string>().c_str(),
                r["quant"].get<std::string>().c_str(), r["threads"].get<int>(), get(r, "bandwidth_gb_s"));
    std::printf("  %4s %10s %8s %10s %8s %7s %10s %8s\n", "K", "dflash ms", "(xK=1)", "llama ms", "(xK=1)", "ratio",
                "bound ms", "(xK=1)");
    const auto &d = r["dflash"]["forward_ms"], &l = r["llamacpp"]["forward_ms"], &b = r["bound_ms"];
    for (int K : curve_k()) {
      const std::string k = std::to_string(K);
      std::printf("  %4d %10.2f %7.2fx %10.2f %7.2fx %7.2f %10.2f %7.2fx\n", K, get(d, k), get(d, k) / get(d, "1"),
                  get(l, k), get(l, k) / get(l, "1"), get(r["ratio"]["forward_ms"], k), get(b, k),
                  get(b, k) / get(b, "1"));
    }
  }
}

}  // namespace

std::string find_dflash_root() {
  const std::string script = "/tools/bench/llamacpp_peer.mjs";
  if (const char* e = std::getenv("DFLASH_ROOT"); e && *e) {
    if (!file_exists(std::string(e) + script))
      throw Error("DFLASH_ROOT=" + std::string(e) + " has no " + script.substr(1));
    return e;
  }
  const std::string exe = real_exe_dir();
  for (const std::string& base : {exe + "/..", exe + "/../..", exe + "/../share/dflash", std::string(".")})
    if (file_exists(base + script)) {
      char buf[PATH_MAX];
      return ::realpath(base.c_str(), buf) ? std::string(buf) : base;
    }
  throw Error("cannot find " + script.substr(1) + " beside the executable (" + exe +
              "/..); set DFLASH_ROOT to the dflash source folder");
}

nlohmann::json run_llamacpp_peer(const std::string& root, const std::vector<std::string>& args) {
  check_peer_installed(root);
  std::string cmd = "node " + shell_quote(root + "/tools/bench/llamacpp_peer.mjs");
  for (const std::string& a : args) cmd += " " + shell_quote(a);
  std::fflush(stdout);
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw Error("bench: cannot start node for the llama.cpp peer");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  if (st != 0 || out.empty())
    throw Error("bench: the llama.cpp peer failed (exit " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
                "): " + cmd);
  const size_t nl = out.rfind("\n{"), from = nl == std::string::npos ? 0 : nl + 1;
  try {
    return nlohmann::json::parse(out.substr(from));
  } catch (const std::exception&) {
    throw Error("bench: the llama.cpp peer printed no JSON: " + out);
  }
}

nlohmann::json run_llamacpp_bench(const LlamaBenchOptions& o) {
  const std::string root = find_dflash_root();
  check_peer_installed(root);
  ThreadPool pool(o.threads > 0 ? o.threads : default_thread_count());
  double bw = measure_read_bandwidth(pool);
  std::fprintf(stderr, "threads %d, SIMD %s, measured read bandwidth %.1f GB/s\n", pool.size(), simd_target_name(),
               bw / 1e9);
  std::map<WType, double> rate;
  nlohmann::json rows = nlohmann::json::array();
  if (!o.model.empty()) {
    if (!has_gguf_suffix(o.model)) throw Error("bench --vs-llamacpp --model takes a .gguf file: " + o.model);
    std::string label = o.model.substr(o.model.rfind('/') == std::string::npos ? 0 : o.model.rfind('/') + 1);
    rows.push_back(measure(root, label, o.model, o.prompt_tokens, o.gen_tokens, o.rounds, pool, bw, rate));
  } else {
    // The random shapes carry the demo tokenizer, padded with [PAD] tokens up to their vocabulary.
    const std::string tok_dir = resolve_model_dir("");
    for (const auto& s : o.shapes)
      for (const auto& wname : o.weights) {
        ModelConfig cfg = shape_config(s);
        const WType wt = parse_wtype(wname);
        TempFile tmp{temp_dir() + "/dflash-vs-llamacpp-" + std::to_string(::getpid()) + "-" + s + "-" + wtype_name(wt) +
                     ".gguf"};
        std::fprintf(stderr, "[%s %s] writing random-weight GGUF %s\n", s.c_str(), wtype_name(wt), tmp.path.c_str());
        if (!cfg.layer_kinds.empty() && cfg.linear.key_heads > 0) {  // a Qwen3.5 hybrid shape
          Qwen35Storage stored;
          stored.norms_plus_one = stored.stores_neg_a = true;  // as a GGUF file holds them
          write_qwen35_gguf(cfg, nlohmann::json::object(), RandomQwen35Source{}, gguf_tensor_naming(), stored,
                            "output.weight", tok_dir, s + "-random", tmp.path, wt);
        } else {
          GgufTensorSource src;
          src.matrix = &RandomWeights::matrix;
          src.vector = &RandomWeights::vector;
          write_gguf(cfg, src, tok_dir, s + "-random", tmp.path, wt);
        }
        rows.push_back(measure(root, s, tmp.path, o.prompt_tokens, o.gen_tokens, o.rounds, pool, bw, rate));
      }
  }
  if (o.json) std::puts(rows.dump(2).c_str());
  else print_table(rows);
  std::fflush(stdout);
  return rows;
}

}  // namespace dflash::bench
