#pragma once
// The parser's state and one method per grammar rule: statements are defined in
// jinja_parse_statements.cpp, expressions in jinja_parse_expressions.cpp.
#include <algorithm>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace dflash::jinja {

using Names = std::vector<std::string>;

// The deepest a template may nest. It bounds two things: the parser's own recursion (a level
// of parentheses costs about 3 of it, so about 85 of those pass, where jinja2 hits Python's
// recursion limit at about 75), and the depth of the tree it builds, where an operator chain
// such as a + b + c or x|f|g nests one level per operator and a block one level per tag.
// Evaluating and destroying the tree recurse once a level, so the limit keeps both within the
// stack; real templates stay under 20 (Qwen3 and DeepSeek V3, the deepest tested, reach 17).
constexpr int kMaxDepth = 256;

template <class Node, class Kind>
std::unique_ptr<Node> make_node(Kind kind, int line) {
  auto n = std::make_unique<Node>();
  n->kind = kind;
  n->line = line;
  return n;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse_all() { return subparse(nullptr); }

 private:
  // ---- token stream ----
  const Token& cur() const { return t_[i_]; }
  const Token& look() const { return t_[std::min(i_ + 1, t_.size() - 1)]; }
  const Token& advance() {
    const Token& t = t_[i_];
    if (i_ + 1 < t_.size()) ++i_;
    return t;
  }
  static bool is_name(const Token& t, std::string_view v) { return t.type == Tok::Name && t.value == v; }
  static bool is_op(const Token& t, std::string_view v) { return t.type == Tok::Op && t.value == v; }
  bool skip_name(std::string_view v) {
    if (!is_name(cur(), v)) return false;
    advance();
    return true;
  }
  bool skip_op(std::string_view v) {
    if (!is_op(cur(), v)) return false;
    advance();
    return true;
  }

  static std::string describe(const Token& t);

  struct NestGuard {
    Parser& p;
    explicit NestGuard(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxDepth) p.too_deep(p.cur().line);
    }
    ~NestGuard() { --p.nesting_; }
  };

  [[noreturn]] void fail(const std::string& msg, int line = 0) {
    syntax_error(line ? line : cur().line, msg);
  }
  [[noreturn]] void too_deep(int line) {
    fail("nesting deeper than the limit of " + std::to_string(kMaxDepth) + " levels", line);
  }

  // Record how deep a finished node's subtree is, refusing one deeper than kMaxDepth.
  template <class Node>
  void set_depth(Node& n, int deepest_child) {
    n.depth = deepest_child + 1;
    if (n.depth > kMaxDepth) too_deep(n.line);
  }
  ExprPtr sealed(ExprPtr e);
  void seal(Stmt& s);

  void expect_op(std::string_view v) {
    if (!skip_op(v))
      fail("expected token '" + std::string(v) + "', got '" + describe(cur()) + "'");
  }
  void expect_name_value(std::string_view v) {
    if (!skip_name(v))
      fail("expected token '" + std::string(v) + "', got '" + describe(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) fail("expected token 'name', got '" + describe(cur()) + "'");
    return advance().value;
  }
  void expect(Tok type, const char* what) {
    if (cur().type != type)
      fail(std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    advance();
  }

  // ---- statements (jinja_parse_statements.cpp) ----
  [[noreturn]] void fail_tag(const std::string* unknown, int line);
  Body subparse(const Names* end_tokens);
  Body parse_statements(const Names& end_tokens, bool drop_needle);
  void parse_statement(Body& out);
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  StmtPtr parse_with();
  StmtPtr parse_block();
  StmtPtr parse_scope(const std::string& tag);
  void parse_print(Body& out);
  void parse_signature(Stmt& s);
  void analyse_macro(Stmt& s);
  Body parse_function_body(const char* end);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  Target to_target(const Expr& e);
  Target parse_assign_target(bool with_tuple, bool name_only, const Names* extra_end, bool with_namespace);

  // ---- expressions (jinja_parse_expressions.cpp) ----
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(ExprKind kind, ExprPtr a, ExprPtr b, int line);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*next)());
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary_filtered();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  bool is_tuple_end(const Names* extra) const;
  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const Names* extra_end, bool explicit_parens);
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  void parse_call_args(CallArgsExpr& out);
  ExprPtr parse_call(ExprPtr node);
  std::string dotted_name();
  ExprPtr parse_filter(ExprPtr node, bool start_inline);
  ExprPtr parse_test(ExprPtr node);

  std::vector<Token> t_;
  size_t i_ = 0;
  std::vector<Names> end_stack_;
  std::vector<std::string> tag_stack_;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace dflash::jinja
