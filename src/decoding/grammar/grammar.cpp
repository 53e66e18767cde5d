#include "decoding/grammar/grammar.h"

#include <functional>
#include <map>
#include <unordered_map>

#include "util/error.h"

namespace dflash {

// The builder's expression tree. Handles are indices into nodes_; children always exist before
// their parents except through declared rules, which is where cycles come from.
struct GrammarBuilder::Node {
  enum Kind { kEmpty, kLiteral, kClass, kSeq, kAlt, kRepeat, kRule } kind = kEmpty;
  std::string bytes;               // kLiteral
  ByteSet set;                     // kClass
  std::vector<uint32_t> children;  // kSeq, kAlt; kRepeat: the item
  int min = 0, max = 0;            // kRepeat
  std::string name;                // kRule
  uint32_t body = UINT32_MAX;      // kRule: set by define()
};

GrammarBuilder::GrammarBuilder() = default;
GrammarBuilder::~GrammarBuilder() = default;

GrammarBuilder::Expr GrammarBuilder::add(Node n) {
  nodes_.push_back(std::move(n));
  return Expr{uint32_t(nodes_.size() - 1)};
}

const GrammarBuilder::Node& GrammarBuilder::node(Expr e) const {
  if (e.id >= nodes_.size()) throw Error("grammar: a handle that this builder did not make");
  return nodes_[e.id];
}

GrammarBuilder::Expr GrammarBuilder::empty() { return add(Node{}); }

GrammarBuilder::Expr GrammarBuilder::literal(std::string_view bytes) {
  Node n;
  n.kind = Node::kLiteral;
  n.bytes = std::string(bytes);
  return add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::byte_class(const ByteSet& set) {
  Node n;
  n.kind = Node::kClass;
  n.set = set;
  return add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::byte_range(uint8_t lo, uint8_t hi) {
  return byte_class(ByteSet().add_range(lo, hi));
}

GrammarBuilder::Expr GrammarBuilder::seq(const std::vector<Expr>& parts) {
  if (parts.size() == 1) return parts[0];
  Node n;
  n.kind = Node::kSeq;
  for (Expr p : parts) {
    node(p);  // validates the handle
    n.children.push_back(p.id);
  }
  return add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::alt(const std::vector<Expr>& options) {
  if (options.size() == 1) return options[0];
  Node n;
  n.kind = Node::kAlt;
  for (Expr o : options) {
    node(o);
    n.children.push_back(o.id);
  }
  return add(std::move(n));
}

GrammarBuilder::Expr GrammarBuilder::repeat(Expr x, int min, int max) {
  node(x);
  if (min < 0 || (max != -1 && max < min)) {
    throw Error("grammar: repeat(min=" + std::to_string(min) + ", max=" + std::to_string(max) +
                ") is not a valid range");
  }
  if (min == 1 && max == 1) return x;
  // x* with an x that can match nothing would loop without consuming a byte (the matcher
  // expands its rules top-down): refuse it here, where the cause is still visible.
  if (max == -1 && nullable(x.id, 0)) {
    throw Error("grammar: an unbounded repetition of something that can match the empty string (such as "
                "(a?)* or (a*)+) is not supported; make the repeated part non-empty");
  }
  Node n;
  n.kind = Node::kRepeat;
  n.children = {x.id};
  n.min = min;
  n.max = max;
  return add(std::move(n));
}

// Whether expression `id` can match the empty string. A declared rule is looked into as far
// as it is defined; a cycle back into one (depth guard) counts as not empty, which is what
// the build-time left-recursion check then reports.
bool GrammarBuilder::nullable(uint32_t id, int depth) const {
  const Node& n = nodes_[id];
  if (depth > 64) return false;
  switch (n.kind) {
    case Node::kEmpty: return true;
    case Node::kLiteral: return n.bytes.empty();
    case Node::kClass: return false;
    case Node::kSeq:
      for (uint32_t c : n.children) if (!nullable(c, depth + 1)) return false;
      return true;
    case Node::kAlt:
      for (uint32_t c : n.children) if (nullable(c, depth + 1)) return true;
      return false;
    case Node::kRepeat: return n.min == 0 || nullable(n.children[0], depth + 1);
    case Node::kRule: return n.body != UINT32_MAX && nullable(n.body, depth + 1);
  }
  return false;
}

GrammarBuilder::Expr GrammarBuilder::declare(const std::string& name) {
  Node n;
  n.kind = Node::kRule;
  n.name = name;
  return add(std::move(n));
}

void GrammarBuilder::define(Expr rule, Expr body) {
  node(body);
  if (node(rule).kind != Node::kRule) throw Error("grammar: define() needs a handle from declare()");
  Node& r = nodes_[rule.id];
  if (r.body != UINT32_MAX) throw Error("grammar: rule '" + r.name + "' is defined twice");
  r.body = body.id;
}

// Lowers the expression tree into the flat symbol array. Alternations, the optional tails of
// repetitions and declared rules become rules; everything else is inlined into the sequence
// that uses it, so the common case (a literal inside a sequence) costs no stack frame.
class GrammarBuilder::Lowering {
 public:
  explicit Lowering(const GrammarBuilder& b) : b_(b), g_(std::make_shared<Grammar>()) {}

  std::shared_ptr<const Grammar> run(Expr root) {
    g_->root_ = rule_for(root.id, "root");
    check_left_recursion();
    return g_;
  }

 private:
  using Alts = std::vector<std::vector<uint32_t>>;
  static constexpr size_t kMaxSymbols = size_t(1) << 24;

  uint32_t class_id(const ByteSet& s) {
    auto [it, fresh] = class_ids_.try_emplace(s.bits, uint32_t(g_->classes_.size()));
    if (fresh) g_->classes_.push_back(s);
    return it->second;
  }

  uint32_t new_rule(std::string name) {
    g_->rules_.push_back(Grammar::Rule{std::move(name), {}});
    return uint32_t(g_->rules_.size() - 1);
  }

  // Writes a finished rule's alternatives into the symbol array (each closed by END).
  void emit(uint32_t rule, const Alts& alts) {
    std::vector<uint32_t> starts;
    for (const auto& a : alts) {
      starts.push_back(uint32_t(g_->symbols_.size()));
      g_->symbols_.insert(g_->symbols_.end(), a.begin(), a.end());
      g_->symbols_.push_back(Grammar::kEnd);
      if (g_->symbols_.size() > kMaxSymbols) {
        throw Error("grammar: too large (over " + std::to_string(kMaxSymbols) +
                    " symbols); lower the schema's repetition bounds");
      }
    }
    g_->rules_[rule].alts = std::move(starts);
  }

  // The rule standing for expression `id` (made once, then shared by every use).
  uint32_t rule_for(uint32_t id, const char* hint) {
    auto it = rule_of_expr_.find(id);
    if (it != rule_of_expr_.end()) return it->second;
    const Node& n = b_.nodes_[id];
    if (n.kind == Node::kRule && n.body == UINT32_MAX) {
      throw Error("grammar: rule '" + n.name + "' was declared but never defined");
    }
    const uint32_t r = new_rule(n.kind == Node::kRule ? n.name : hint + std::to_string(g_->rules_.size()));
    rule_of_expr_[id] = r;  // before lowering the body: a recursive rule finds itself here
    emit(r, alts_of(n.kind == Node::kRule ? n.body : id));
    return r;
  }

  Alts alts_of(uint32_t id) {
    const Node& n = b_.nodes_[id];
    if (n.kind == Node::kAlt) {
      Alts out;
      for (uint32_t c : n.children) {
        Alts sub = alts_of(c);
        out.insert(out.end(), sub.begin(), sub.end());
      }
      return out;
    }
    std::vector<uint32_t> one;
    append(id, one);
    return Alts{std::move(one)};
  }

  // The symbols of a repeated item. When it will be copied many times and is long, one rule
  // referenced from each copy instead, so a repetition costs O(count), not O(count * size).
  std::vector<uint32_t> item_symbols(uint32_t x, bool copied) {
    std::vector<uint32_t> item;
    append(x, item);
    if (copied && item.size() > 4) item = {Grammar::kRule | rule_for(x, "item")};
    return item;
  }

  // A rule for `count` optional copies of x: opt_k ::= "" | x opt_(k-1). Each step is a tail
  // call, so the matcher's stack does not grow with k, and a state says how many are left.
  uint32_t optional_chain(uint32_t x, int count) {
    auto key = std::make_pair(x, count);
    auto it = chains_.find(key);
    if (it != chains_.end()) return it->second;
    const uint32_t r = new_rule("opt" + std::to_string(count) + "_" + std::to_string(g_->rules_.size()));
    chains_[key] = r;
    std::vector<uint32_t> more = item_symbols(x, count > 1);
    if (count > 1) more.push_back(Grammar::kRule | optional_chain(x, count - 1));
    emit(r, Alts{{}, more});
    return r;
  }

  // star ::= "" | x star
  uint32_t star(uint32_t x) {
    auto key = std::make_pair(x, -1);
    auto it = chains_.find(key);
    if (it != chains_.end()) return it->second;
    const uint32_t r = new_rule("star" + std::to_string(g_->rules_.size()));
    chains_[key] = r;
    std::vector<uint32_t> more = item_symbols(x, false);
    more.push_back(Grammar::kRule | r);
    emit(r, Alts{{}, more});
    return r;
  }

  // Appends the symbols of expression `id` to a sequence.
  void append(uint32_t id, std::vector<uint32_t>& out) {
    const Node& n = b_.nodes_[id];
    switch (n.kind) {
      case Node::kEmpty: return;
      case Node::kLiteral:
        for (char c : n.bytes) out.push_back(Grammar::kTerminal | class_id(ByteSet().add(uint8_t(c))));
        return;
      case Node::kClass: out.push_back(Grammar::kTerminal | class_id(n.set)); return;
      case Node::kSeq:
        for (uint32_t c : n.children) append(c, out);
        return;
      case Node::kAlt:
      case Node::kRule: out.push_back(Grammar::kRule | rule_for(id, "alt")); return;
      case Node::kRepeat: {
        const uint32_t x = n.children[0];
        const std::vector<uint32_t> item = item_symbols(x, n.min > 1);
        for (int i = 0; i < n.min; ++i) out.insert(out.end(), item.begin(), item.end());
        if (n.max == -1) {
          out.push_back(Grammar::kRule | star(x));
        } else if (n.max > n.min) {
          out.push_back(Grammar::kRule | optional_chain(x, n.max - n.min));
        }
        return;
      }
    }
  }

  // A rule that can reach itself without consuming a byte would be expanded forever by the
  // matcher: find one and name it.
  void check_left_recursion() {
    const Grammar& g = *g_;
    const size_t n = g.rules_.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (uint32_t p : g.rules_[r].alts) {
          bool all = true;
          for (; g.symbols_[p] != Grammar::kEnd && all; ++p) {
            const uint32_t s = g.symbols_[p];
            all = Grammar::kind(s) == Grammar::kRule && nullable[Grammar::arg(s)];
          }
          if (all) { nullable[r] = 1; changed = true; break; }
        }
      }
    }
    std::vector<std::vector<uint32_t>> left(n);  // rules reachable at the left edge
    for (size_t r = 0; r < n; ++r) {
      for (uint32_t p : g.rules_[r].alts) {
        for (; g.symbols_[p] != Grammar::kEnd; ++p) {
          const uint32_t s = g.symbols_[p];
          if (Grammar::kind(s) != Grammar::kRule) break;
          left[r].push_back(Grammar::arg(s));
          if (!nullable[Grammar::arg(s)]) break;
        }
      }
    }
    std::vector<char> color(n, 0);  // 0 new, 1 on the DFS path, 2 done
    std::function<void(uint32_t)> visit = [&](uint32_t r) {
      color[r] = 1;
      for (uint32_t s : left[r]) {
        if (color[s] == 1) {
          throw Error("grammar: rule '" + g.rules_[s].name +
                      "' is left-recursive (it can reach itself before consuming any byte)");
        }
        if (color[s] == 0) visit(s);
      }
      color[r] = 2;
    };
    for (size_t r = 0; r < n; ++r) if (color[r] == 0) visit(uint32_t(r));
  }

  const GrammarBuilder& b_;
  std::shared_ptr<Grammar> g_;
  std::map<std::array<uint64_t, 4>, uint32_t> class_ids_;
  std::unordered_map<uint32_t, uint32_t> rule_of_expr_;
  std::map<std::pair<uint32_t, int>, uint32_t> chains_;
};

std::shared_ptr<const Grammar> GrammarBuilder::build(Expr root) const {
  node(root);
  return Lowering(*this).run(root);
}

static std::string class_text(const ByteSet& s) {
  auto show = [](unsigned b) {
    static const char* hex = "0123456789abcdef";
    if (b >= 0x21 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '\'') return std::string(1, char(b));
    return std::string("\\x") + hex[b >> 4] + hex[b & 15];
  };
  int count = 0;
  for (unsigned b = 0; b < 256; ++b) count += s.has(uint8_t(b));
  if (count == 1) {
    for (unsigned b = 0; b < 256; ++b) if (s.has(uint8_t(b))) return "'" + show(b) + "'";
  }
  std::string out = "[";
  for (unsigned b = 0; b < 256;) {
    if (!s.has(uint8_t(b))) { ++b; continue; }
    unsigned e = b;
    while (e + 1 < 256 && s.has(uint8_t(e + 1))) ++e;
    out += show(b);
    if (e > b) out += "-" + show(e);
    b = e + 1;
  }
  return out + "]";
}

std::string Grammar::to_string() const {
  std::string out;
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += rules_[r].name + (r == root_ ? " (root)" : "") + " ::=";
    for (size_t a = 0; a < rules_[r].alts.size(); ++a) {
      if (a) out += " |";
      uint32_t p = rules_[r].alts[a];
      if (symbols_[p] == kEnd) out += " \"\"";
      for (; symbols_[p] != kEnd; ++p) {
        const uint32_t s = symbols_[p];
        out += " " + (kind(s) == kRule ? rules_[arg(s)].name : class_text(classes_[arg(s)]));
      }
    }
    out += "\n";
  }
  return out;
}

}  // namespace dflash
