#include "chat/jinja_parser.h"

#include <algorithm>
#include <functional>
#include <initializer_list>

namespace dflash::jinja {

namespace {

using Names = std::vector<std::string>;

ExprPtr make(ExprKind kind, int line) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->line = line;
  return e;
}

StmtPtr make_stmt(StmtKind kind, int line) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->line = line;
  return s;
}

// Which of the names a macro body reads (jinja2 decides varargs/kwargs/caller this way).
void find_names(const Expr* e, const Names& wanted, Names& found);
void find_names(const Body& body, const Names& wanted, Names& found);

void find_names(const Expr* e, const Names& wanted, Names& found) {
  if (!e) return;
  if (e->kind == ExprKind::Name &&
      std::find(wanted.begin(), wanted.end(), e->name) != wanted.end() &&
      std::find(found.begin(), found.end(), e->name) == found.end())
    found.push_back(e->name);
  find_names(e->a.get(), wanted, found);
  find_names(e->b.get(), wanted, found);
  find_names(e->c.get(), wanted, found);
  for (const auto& x : e->items) find_names(x.get(), wanted, found);
  for (const auto& x : e->args.pos) find_names(x.get(), wanted, found);
  for (const auto& x : e->args.kw) find_names(x.second.get(), wanted, found);
  find_names(e->args.star.get(), wanted, found);
  find_names(e->args.starstar.get(), wanted, found);
  for (const auto& x : e->cmp) find_names(x.second.get(), wanted, found);
}

void find_names(const Body& body, const Names& wanted, Names& found) {
  for (const auto& s : body) {
    find_names(s->expr.get(), wanted, found);
    find_names(s->cond.get(), wanted, found);
    find_names(s->filter.get(), wanted, found);
    find_names(s->body, wanted, found);
    find_names(s->else_body, wanted, found);
    for (const auto& br : s->branches) {
      find_names(br.first.get(), wanted, found);
      find_names(br.second, wanted, found);
    }
    for (const auto& d : s->defaults) find_names(d.get(), wanted, found);
    for (const auto& v : s->values) find_names(v.get(), wanted, found);
  }
}

// Deeper nesting than this is refused instead of risking the stack (jinja2 itself hits
// Python's recursion limit at about 75 nested parentheses; each level here counts about 3).
constexpr int kMaxNesting = 300;

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

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::BlockEnd: return "end of statement block";
      case Tok::VarEnd: return "end of print statement";
      case Tok::BlockBegin: return "begin of statement block";
      case Tok::VarBegin: return "begin of print statement";
      case Tok::Eof: return "end of template";
      case Tok::Data: return "template data / text";
      case Tok::String: return "string";
      case Tok::Int: return "integer";
      case Tok::Float: return "float";
      default: return t.value;
    }
  }

  struct NestGuard {
    Parser& p;
    explicit NestGuard(Parser& parser) : p(parser) {
      if (++p.nesting_ > kMaxNesting) p.fail("template is nested too deeply");
    }
    ~NestGuard() { --p.nesting_; }
  };

  [[noreturn]] void fail(const std::string& msg, int line = 0) {
    syntax_error(line ? line : cur().line, msg);
  }

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

  [[noreturn]] void fail_tag(const std::string* unknown, int line) {
    std::string msg = unknown ? "Encountered unknown tag '" + *unknown + "'." : "Unexpected end of template.";
    if (!end_stack_.empty()) {
      std::string looking;
      for (const auto& n : end_stack_.back()) looking += (looking.empty() ? "'" : " or '") + n + "'";
      msg += " Jinja was looking for the following tags: " + looking + ".";
    }
    if (!tag_stack_.empty())
      msg += " The innermost block that needs to be closed is '" + tag_stack_.back() + "'.";
    fail(msg, line);
  }

  // ---- statements ----
  Body subparse(const Names* end_tokens) {
    Body body;
    if (end_tokens) end_stack_.push_back(*end_tokens);
    while (cur().type != Tok::Eof) {
      const Token& t = cur();
      if (t.type == Tok::Data) {
        auto s = make_stmt(StmtKind::Output, t.line);
        s->text = t.value;
        body.push_back(std::move(s));
        advance();
      } else if (t.type == Tok::VarBegin) {
        int line = t.line;
        advance();
        auto s = make_stmt(StmtKind::Print, line);
        s->expr = parse_tuple(false, true, nullptr, false);
        expect(Tok::VarEnd, "end of print statement");
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        advance();
        if (end_tokens && cur().type == Tok::Name &&
            std::find(end_tokens->begin(), end_tokens->end(), cur().value) != end_tokens->end()) {
          end_stack_.pop_back();
          return body;
        }
        parse_statement(body);
        expect(Tok::BlockEnd, "end of statement block");
      } else {
        fail("unexpected '" + describe(t) + "'");
      }
    }
    if (end_tokens) end_stack_.pop_back();
    return body;
  }

  Body parse_statements(const Names& end_tokens, bool drop_needle) {
    skip_op(":");
    expect(Tok::BlockEnd, "end of statement block");
    Body body = subparse(&end_tokens);
    if (cur().type == Tok::Eof) {
      end_stack_.push_back(end_tokens);
      fail_tag(nullptr, cur().line);
    }
    if (drop_needle) advance();
    return body;
  }

  void parse_statement(Body& out) {
    NestGuard guard(*this);
    const Token& t = cur();
    if (t.type != Tok::Name) fail("tag name expected", t.line);
    std::string tag = t.value;
    int line = t.line;
    static const Names kKnown = {"for", "if", "block", "extends", "print", "macro", "include",
                                 "from", "import", "set", "with", "autoescape", "call",
                                 "filter", "break", "continue", "generation"};
    if (std::find(kKnown.begin(), kKnown.end(), tag) == kKnown.end()) fail_tag(&tag, line);
    tag_stack_.push_back(tag);
    if (tag == "for") out.push_back(parse_for());
    else if (tag == "if") out.push_back(parse_if());
    else if (tag == "set") out.push_back(parse_set());
    else if (tag == "macro") out.push_back(parse_macro());
    else if (tag == "call") out.push_back(parse_call_block());
    else if (tag == "filter") out.push_back(parse_filter_block());
    else if (tag == "with") out.push_back(parse_with());
    else if (tag == "print") parse_print(out);
    else if (tag == "block") out.push_back(parse_block());
    else if (tag == "autoescape" || tag == "generation") out.push_back(parse_scope(tag));
    else if (tag == "break" || tag == "continue") {
      if (!loop_depth_) fail("'" + tag + "' outside loop", line);
      advance();
      out.push_back(make_stmt(tag == "break" ? StmtKind::Break : StmtKind::Continue, line));
    } else {
      fail("'" + tag + "' is not supported: chat templates are rendered without a template loader", line);
    }
    tag_stack_.pop_back();
  }

  StmtPtr parse_for() {
    auto s = make_stmt(StmtKind::For, advance().line);
    Names in = {"in"};
    s->target = parse_assign_target(true, false, &in, false);
    expect_name_value("in");
    Names rec = {"recursive"};
    s->expr = parse_tuple(false, false, &rec, false);
    if (skip_name("if")) s->cond = parse_expression(true);
    s->recursive = skip_name("recursive");
    ++loop_depth_;
    s->body = parse_statements({"endfor", "else"}, false);
    --loop_depth_;
    if (advance().value != "endfor") s->else_body = parse_statements({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = make_stmt(StmtKind::If, advance().line);
    while (true) {
      ExprPtr test = parse_tuple(false, false, nullptr, false);
      Body body = parse_statements({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      const Token& t = advance();
      if (t.value == "elif") continue;
      if (t.value == "else") s->else_body = parse_statements({"endif"}, true);
      break;
    }
    return s;
  }

  StmtPtr parse_set() {
    auto s = make_stmt(StmtKind::Set, advance().line);
    s->target = parse_assign_target(true, false, nullptr, true);
    if (skip_op("=")) {
      s->expr = parse_tuple(false, true, nullptr, false);
      return s;
    }
    s->kind = StmtKind::SetBlock;
    s->filter = parse_filter(nullptr, false);
    s->body = parse_statements({"endset"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = make_stmt(StmtKind::With, advance().line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->targets.empty()) expect_op(",");
      s->targets.push_back(parse_assign_target(true, false, nullptr, false));
      expect_op("=");
      s->values.push_back(parse_expression(true));
    }
    s->body = parse_statements({"endwith"}, true);
    return s;
  }

  StmtPtr parse_block() {
    auto s = make_stmt(StmtKind::Scope, advance().line);
    s->name = expect_name();
    skip_name("scoped");
    skip_name("required");
    if (is_op(cur(), "-"))
      fail("Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use an underscore instead.");
    s->body = parse_statements({"endblock"}, true);
    skip_name(s->name);
    return s;
  }

  StmtPtr parse_scope(const std::string& tag) {
    auto s = make_stmt(StmtKind::Scope, advance().line);
    if (tag == "autoescape") s->expr = parse_expression(true);
    s->body = parse_statements({"end" + tag}, true);
    return s;
  }

  void parse_print(Body& out) {
    int line = advance().line;
    bool first = true;
    while (cur().type != Tok::BlockEnd) {
      if (!first) expect_op(",");
      first = false;
      auto s = make_stmt(StmtKind::Print, line);
      s->expr = parse_expression(true);
      out.push_back(std::move(s));
    }
  }

  void parse_signature(Stmt& s) {
    expect_op("(");
    while (!is_op(cur(), ")")) {
      if (!s.params.empty()) expect_op(",");
      s.params.push_back(expect_name());
      if (skip_op("="))
        s.defaults.push_back(parse_expression(true));
      else if (!s.defaults.empty())
        fail("non-default argument follows default argument");
    }
    expect_op(")");
  }

  void analyse_macro(Stmt& s) {
    Names found;
    find_names(s.body, {"varargs", "kwargs", "caller"}, found);
    auto has = [&](const char* n) { return std::find(found.begin(), found.end(), n) != found.end(); };
    s.catch_varargs = has("varargs");
    s.catch_kwargs = has("kwargs");
    s.uses_caller = has("caller");
  }

  // A macro or call-block body is a function of its own: loops around it do not count.
  Body parse_function_body(const char* end) {
    int saved = loop_depth_;
    loop_depth_ = 0;
    Body body = parse_statements({end}, true);
    loop_depth_ = saved;
    return body;
  }

  StmtPtr parse_macro() {
    auto s = make_stmt(StmtKind::Macro, advance().line);
    s->name = expect_name();
    parse_signature(*s);
    s->body = parse_function_body("endmacro");
    analyse_macro(*s);
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = make_stmt(StmtKind::CallBlock, advance().line);
    if (is_op(cur(), "(")) parse_signature(*s);
    s->expr = parse_expression(true);
    if (s->expr->kind != ExprKind::Call) fail("expected call", s->line);
    s->body = parse_function_body("endcall");
    analyse_macro(*s);
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = make_stmt(StmtKind::FilterBlock, advance().line);
    s->filter = parse_filter(nullptr, true);
    s->body = parse_statements({"endfilter"}, true);
    return s;
  }

  Target to_target(const Expr& e) {
    Target t;
    if (e.kind == ExprKind::Name) {
      t.kind = Target::Kind::Name;
      t.name = e.name;
      return t;
    }
    if (e.kind == ExprKind::Tuple) {
      t.kind = Target::Kind::Tuple;
      for (const auto& x : e.items) t.items.push_back(to_target(*x));
      return t;
    }
    std::string what = e.kind == ExprKind::Const ? "const" : "expression";
    fail("can't assign to '" + what + "'", e.line);
  }

  Target parse_assign_target(bool with_tuple, bool name_only, const Names* extra_end, bool with_namespace) {
    if (with_namespace && is_op(look(), ".")) {
      Target t;
      t.kind = Target::Kind::NsAttr;
      t.name = expect_name();
      advance();
      t.attr = expect_name();
      return t;
    }
    if (name_only) {
      Target t;
      t.name = expect_name();
      return t;
    }
    ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false) : parse_primary();
    return to_target(*e);
  }

  // ---- expressions ----
  ExprPtr parse_expression(bool with_condexpr) {
    NestGuard guard(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    int line = cur().line;
    ExprPtr expr1 = parse_or();
    while (skip_name("if")) {
      ExprPtr expr2 = parse_or();
      ExprPtr expr3 = skip_name("else") ? parse_condexpr() : nullptr;
      auto e = make(ExprKind::CondExpr, line);
      e->a = std::move(expr2);
      e->b = std::move(expr1);
      e->c = std::move(expr3);
      expr1 = std::move(e);
      line = cur().line;
    }
    return expr1;
  }

  ExprPtr binary(ExprKind kind, ExprPtr a, ExprPtr b, int line) {
    auto e = make(kind, line);
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name(cur(), "or")) {
      int line = advance().line;
      left = binary(ExprKind::Or, std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name(cur(), "and")) {
      int line = advance().line;
      left = binary(ExprKind::And, std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    NestGuard guard(*this);
    if (is_name(cur(), "not")) {
      auto e = make(ExprKind::Not, advance().line);
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr expr = parse_math1();
    std::vector<std::pair<std::string, ExprPtr>> ops;
    while (true) {
      const Token& t = cur();
      if (t.type == Tok::Op && (t.value == "==" || t.value == "!=" || t.value == "<" ||
                                t.value == ">" || t.value == "<=" || t.value == ">=")) {
        std::string op = advance().value;
        ops.emplace_back(op, parse_math1());
      } else if (skip_name("in")) {
        ops.emplace_back("in", parse_math1());
      } else if (is_name(t, "not") && is_name(look(), "in")) {
        advance();
        advance();
        ops.emplace_back("notin", parse_math1());
      } else {
        break;
      }
    }
    if (ops.empty()) return expr;
    auto e = make(ExprKind::Compare, line);
    e->a = std::move(expr);
    e->cmp = std::move(ops);
    return e;
  }

  ExprPtr parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*next)()) {
    ExprPtr left = (this->*next)();
    while (true) {
      const Token& t = cur();
      bool match = false;
      for (const char* op : ops) match = match || is_op(t, op);
      if (!match) return left;
      auto e = make(ExprKind::Binary, t.line);
      e->op = advance().value;
      e->a = std::move(left);
      e->b = (this->*next)();
      left = std::move(e);
    }
  }

  ExprPtr parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }

  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op(cur(), "~")) return first;
    auto e = make(ExprKind::Concat, line);
    e->items.push_back(std::move(first));
    while (skip_op("~")) e->items.push_back(parse_math2());
    return e;
  }

  ExprPtr parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
  ExprPtr parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_filtered); }
  ExprPtr parse_unary_filtered() { return parse_unary(true); }

  ExprPtr parse_unary(bool with_filter) {
    NestGuard guard(*this);
    const Token& t = cur();
    ExprPtr node;
    if (is_op(t, "-") || is_op(t, "+")) {
      node = make(t.value == "-" ? ExprKind::Neg : ExprKind::Pos, t.line);
      advance();
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::Name) {
      ExprPtr e;
      if (t.value == "true" || t.value == "True" || t.value == "false" || t.value == "False") {
        e = make(ExprKind::Const, line);
        e->value = Value(t.value == "true" || t.value == "True");
      } else if (t.value == "none" || t.value == "None") {
        e = make(ExprKind::Const, line);
        e->value = Value(nullptr);
      } else {
        e = make(ExprKind::Name, line);
        e->name = t.value;
      }
      advance();
      return e;
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) s += advance().value;
      auto e = make(ExprKind::Const, line);
      e->value = Value(std::move(s));
      return e;
    }
    if (t.type == Tok::Int || t.type == Tok::Float) {
      auto e = make(ExprKind::Const, line);
      e->value = t.type == Tok::Int ? Value(t.int_value) : Value(t.float_value);
      advance();
      return e;
    }
    if (is_op(t, "(")) {
      advance();
      ExprPtr e = parse_tuple(false, true, nullptr, true);
      expect_op(")");
      return e;
    }
    if (is_op(t, "[")) {
      advance();
      auto e = make(ExprKind::List, line);
      while (!is_op(cur(), "]")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op(cur(), "]")) break;
        e->items.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op(t, "{")) {
      advance();
      auto e = make(ExprKind::Dict, line);
      while (!is_op(cur(), "}")) {
        if (!e->items.empty()) expect_op(",");
        if (is_op(cur(), "}")) break;
        e->items.push_back(parse_expression(true));
        expect_op(":");
        e->items.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    fail("unexpected '" + describe(t) + "'", line);
  }

  bool is_tuple_end(const Names* extra) const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || is_op(t, ")")) return true;
    if (extra && t.type == Tok::Name)
      return std::find(extra->begin(), extra->end(), t.value) != extra->end();
    return false;
  }

  ExprPtr parse_tuple(bool simplified, bool with_condexpr, const Names* extra_end, bool explicit_parens) {
    int line = cur().line;
    std::vector<ExprPtr> args;
    bool is_tuple = false;
    while (true) {
      if (!args.empty()) expect_op(",");
      if (is_tuple_end(extra_end)) break;
      args.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
      if (is_op(cur(), ","))
        is_tuple = true;
      else
        break;
      line = cur().line;
    }
    if (!is_tuple) {
      if (!args.empty()) return std::move(args[0]);
      if (!explicit_parens) fail("Expected an expression, got '" + describe(cur()) + "'");
    }
    auto e = make(ExprKind::Tuple, line);
    e->items = std::move(args);
    return e;
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(cur(), ".") || is_op(cur(), "["))
        node = parse_subscript(std::move(node));
      else if (is_op(cur(), "("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op(cur(), "|"))
        node = parse_filter(std::move(node), false);
      else if (is_name(cur(), "is"))
        node = parse_test(std::move(node));
      else if (is_op(cur(), "("))
        node = parse_call(std::move(node));
      else
        return node;
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = advance();
    int line = t.line;
    if (t.value == ".") {
      const Token& attr = advance();
      if (attr.type == Tok::Name) {
        auto e = make(ExprKind::Getattr, line);
        e->a = std::move(node);
        e->name = attr.value;
        return e;
      }
      if (attr.type != Tok::Int) fail("expected name or number", attr.line);
      auto e = make(ExprKind::Getitem, line);
      e->a = std::move(node);
      e->b = make(ExprKind::Const, attr.line);
      e->b->value = Value(attr.int_value);
      return e;
    }
    std::vector<ExprPtr> args;
    while (!is_op(cur(), "]")) {
      if (!args.empty()) expect_op(",");
      args.push_back(parse_subscribed());
    }
    expect_op("]");
    auto e = make(ExprKind::Getitem, line);
    e->a = std::move(node);
    if (args.size() == 1) {
      e->b = std::move(args[0]);
    } else {
      e->b = make(ExprKind::Tuple, line);
      e->b->items = std::move(args);
    }
    return e;
  }

  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!skip_op(":")) {
      ExprPtr node = parse_expression(true);
      if (!is_op(cur(), ":")) return node;
      advance();
      start = std::move(node);
    }
    auto e = make(ExprKind::Slice, line);
    e->items.push_back(std::move(start));
    auto slice_end = [&] { return is_op(cur(), "]") || is_op(cur(), ","); };
    if (is_op(cur(), ":") || slice_end())
      e->items.push_back(nullptr);
    else
      e->items.push_back(parse_expression(true));
    if (skip_op(":") && !slice_end())
      e->items.push_back(parse_expression(true));
    else
      e->items.push_back(nullptr);
    return e;
  }

  void parse_call_args(CallArgsExpr& out) {
    int line = cur().line;
    expect_op("(");
    bool require_comma = false;
    auto ensure = [&](bool ok) {
      if (!ok) fail("invalid syntax for function call expression", line);
    };
    while (!is_op(cur(), ")")) {
      if (require_comma) {
        expect_op(",");
        if (is_op(cur(), ")")) break;
      }
      if (skip_op("*")) {
        ensure(!out.star && !out.starstar);
        out.star = parse_expression(true);
      } else if (skip_op("**")) {
        ensure(!out.starstar);
        out.starstar = parse_expression(true);
      } else if (cur().type == Tok::Name && is_op(look(), "=")) {
        ensure(!out.starstar);
        std::string key = advance().value;
        advance();
        out.kw.emplace_back(key, parse_expression(true));
      } else {
        ensure(!out.star && !out.starstar && out.kw.empty());
        out.pos.push_back(parse_expression(true));
      }
      require_comma = true;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = make(ExprKind::Call, cur().line);
    e->a = std::move(node);
    parse_call_args(e->args);
    return e;
  }

  std::string dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  ExprPtr parse_filter(ExprPtr node, bool start_inline) {
    while (is_op(cur(), "|") || start_inline) {
      if (!start_inline) advance();
      int line = cur().line;
      auto e = make(ExprKind::Filter, line);
      e->name = dotted_name();
      if (is_op(cur(), "(")) parse_call_args(e->args);
      e->a = std::move(node);
      node = std::move(e);
      start_inline = false;
    }
    return node;
  }

  ExprPtr parse_test(ExprPtr node) {
    int line = advance().line;
    bool negated = skip_name("not");
    auto e = make(ExprKind::Test, line);
    e->name = dotted_name();
    const Token& t = cur();
    if (is_op(t, "(")) {
      parse_call_args(e->args);
    } else if ((t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Int ||
                t.type == Tok::Float || is_op(t, "(") || is_op(t, "[") || is_op(t, "{")) &&
               !is_name(t, "else") && !is_name(t, "or") && !is_name(t, "and")) {
      if (is_name(t, "is")) fail("You cannot chain multiple tests with is");
      e->args.pos.push_back(parse_postfix(parse_primary()));
    }
    e->a = std::move(node);
    if (!negated) return e;
    auto n = make(ExprKind::Not, line);
    n->a = std::move(e);
    return n;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  std::vector<Names> end_stack_;
  std::vector<std::string> tag_stack_;
  int loop_depth_ = 0;
  int nesting_ = 0;
};

}  // namespace

Body parse(std::string_view source, const LexOptions& opt) {
  Parser p(lex(source, opt));
  return p.parse_all();
}

}  // namespace dflash::jinja
