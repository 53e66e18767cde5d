// Runs tools/bench/llama_server_peer.py and sets llama-server's DFlash figures beside dflash's.
#include "bench/llama_server_bench.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench/llamacpp_bench.h"
#include "formats/json_file.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace dflash::bench {

namespace {

std::string gguf_type(const std::string& weights) {
  if (weights == "q4" || weights == "q4_0") return "q4_0";
  if (weights == "q8" || weights == "q8_0") return "q8_0";
  if (weights == "bf16") return "bf16";
  throw Error("bench --vs-llama-server: --weights " + weights + " has no llama.cpp type (use q4, q8 or bf16)");
}

// The Python that has Debian's numpy and torch (draft_gguf.py needs them): $DFLASH_PYTHON, else
// /usr/bin/python3 (a python3 earlier on PATH, e.g. pyenv's, often has neither), else python3.
std::string python() {
  if (const char* e = std::getenv("DFLASH_PYTHON"); e && *e) return e;
  return ::access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

double num(const nlohmann::json& j, const char* k) {
  return j.contains(k) && j[k].is_number() ? j[k].get<double>() : 0.0;
}

}  // namespace

void check_llama_server_peer(const LlamaServerPeerOptions& o) {
  struct stat st {};
  if (o.server.empty() || ::stat(o.server.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || ::access(o.server.c_str(), X_OK) != 0)
    throw Error("bench --vs-llama-server: " + o.server +
                " is not an executable file (give the path of a llama-server binary you built; README: "
                "\"llama.cpp's own DFlash\")");
  if (std::system(("command -v " + shell_quote(python()) + " >/dev/null 2>&1").c_str()) != 0)
    throw Error("bench --vs-llama-server: " + python() + " was not found (the peer is tools/bench/llama_server_peer.py)");
  const std::string root = find_dflash_root();
  const std::string script = root + "/tools/bench/llama_server_peer.py";
  if (!file_exists(script)) throw Error("bench --vs-llama-server: " + script + " is missing");
  gguf_type(o.weights);
}

nlohmann::json run_llama_server_peer(const LlamaServerPeerOptions& o) {
  check_llama_server_peer(o);
  const std::string script = find_dflash_root() + "/tools/bench/llama_server_peer.py";
  std::string out = temp_dir() + "/dflash_llama_server_XXXXXX";
  const int fd = ::mkstemp(out.data());
  if (fd < 0) throw Error("bench --vs-llama-server: cannot create a temporary file in " + out);
  ::close(fd);
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::string cmd = shell_quote(python()) + " " + shell_quote(script) + " --server " + shell_quote(o.server) +
                    " --model " + shell_quote(o.model) + " --draft " + shell_quote(o.draft) + " --type " + gguf_type(o.weights) + " --n-prompts " +
                    std::to_string(o.n_prompts > 0 ? o.n_prompts : 1000) + " --n-predict " +
                    std::to_string(o.gen_tokens) + " --threads " + std::to_string(threads) + " --json-out " +
                    shell_quote(out) + " --n-max";
  for (int B : o.block_sizes)
    if (B >= 2) cmd += " " + std::to_string(B - 1);
  if (!o.prompts_file.empty()) cmd += " --prompts " + shell_quote(o.prompts_file);
  std::fflush(stdout);
  const int rc = std::system(cmd.c_str());
  nlohmann::json doc;
  try {
    if (rc == 0) doc = read_json_file(out);
  } catch (...) {
  }
  std::remove(out.c_str());
  if (rc != 0 || !doc.contains("runs"))
    throw Error("bench --vs-llama-server: the peer failed (exit status " +
                std::to_string(WIFEXITED(rc) ? WEXITSTATUS(rc) : rc) + "): " + cmd);
  return doc;
}

void print_llama_server_comparison(const nlohmann::json& dflash_doc, const nlohmann::json& peer) {
  const nlohmann::json* code = nullptr;
  if (dflash_doc.contains("regimes"))
    for (const auto& r : dflash_doc["regimes"])
      if (r.value("regime", "") == "code") code = &r;
  const auto& runs = peer.at("runs");
  double l_plain = 0;
  for (const auto& r : runs)
    if (r.value("n_max", 0) == 0) l_plain = num(r, "tok_s");
  std::printf("\ncode regime, side by side (each engine's speedup over its own plain decoding, same prompts):\n");
  std::printf("%-12s %16s %22s %22s %10s\n", "block", "dflash tok/s", "dflash speedup, accept",
              "llama-server tok/s", "speedup, accept, same text");
  const double d_plain = code ? num(*code, "plain_tok_s") : 0;
  std::printf("%-12s %16.2f %22s %22.2f %10s\n", "plain", d_plain, "-", l_plain, "-");
  for (const auto& r : runs) {
    const int n = r.value("n_max", 0);
    if (n == 0) continue;
    const std::string B = std::to_string(n + 1);
    double dt = 0, ds = 0, da = 0;
    if (code && code->contains("dflash") && (*code)["dflash"].contains(B)) {
      const auto& c = (*code)["dflash"][B];
      dt = num(c, "tok_s");
      ds = num(c, "speedup");
      da = num(c, "accept_rate");
    }
    const double lt = num(r, "tok_s");
    const bool same = r.value("texts", nlohmann::json()) == runs[0].value("texts", nlohmann::json());
    char dcol[64], lcol[64];
    std::snprintf(dcol, sizeof dcol, "%.2fx, %.1f%%", ds, 100 * da);
    std::snprintf(lcol, sizeof lcol, "%.2fx, %.1f%%, %s", l_plain > 0 ? lt / l_plain : 0.0,
                  100 * num(r, "accept_rate"), same ? "yes" : "NO");
    std::printf("%-12s %16.2f %22s %22.2f %s\n", ("B=" + B).c_str(), dt, dcol, lt, lcol);
  }
}

}  // namespace dflash::bench
