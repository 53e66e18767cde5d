#pragma once
// dflash bench --schema: what structured output costs. The same greedy requests free and under
// a JSON schema's token mask, plain and (with --draft) speculative, in one run; the mask's
// time per generated token against the free decode step's, cold (a fresh mask cache) and warm
// (the cache the first round filled, as the server keeps it between requests).
#include <string>

#include <nlohmann/json.hpp>

namespace dflash::bench {

struct StructuredBenchOptions {
  std::string schema;                 // a JSON Schema file, or "json_object"
  std::string model, draft;           // a model folder (and draft), or:
  std::string shape, tokenizer;       // a random-weight shape with this tokenizer.json
  std::string weights = "q4";         // for --shape
  int gen_tokens = 128, threads = 0;
  bool json = false;
};

nlohmann::json run_structured_bench(const StructuredBenchOptions& o);

}  // namespace dflash::bench
