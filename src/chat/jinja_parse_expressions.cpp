// The expression half of the grammar, with jinja2's operator precedence.
#include "chat/jinja_grammar.h"

namespace dflash::jinja {

namespace {

ExprPtr make(ExprKind kind, int line) { return make_node<Expr>(kind, line); }

}  // namespace

ExprPtr Parser::sealed(ExprPtr e) {
  int d = 0;
  auto see = [&](const ExprPtr& x) { d = x ? std::max(d, x->depth) : d; };
  see(e->a);
  see(e->b);
  see(e->c);
  for (const auto& x : e->items) see(x);
  for (const auto& x : e->args.pos) see(x);
  for (const auto& kv : e->args.kw) see(kv.second);
  see(e->args.star);
  see(e->args.starstar);
  for (const auto& kv : e->cmp) see(kv.second);
  set_depth(*e, d);
  return e;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  NestGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  int line = cur().line;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr expr2 = parse_or();
    ExprPtr expr3;
    if (skip_name("else")) {
      NestGuard guard(*this);  // `a if b else c if d else ...` recurses once an else
      expr3 = parse_condexpr();
    }
    auto e = make(ExprKind::CondExpr, line);
    e->a = std::move(expr2);
    e->b = std::move(expr1);
    e->c = std::move(expr3);
    expr1 = sealed(std::move(e));
    line = cur().line;
  }
  return expr1;
}

ExprPtr Parser::binary(ExprKind kind, ExprPtr a, ExprPtr b, int line) {
  auto e = make(kind, line);
  e->a = std::move(a);
  e->b = std::move(b);
  return sealed(std::move(e));
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name(cur(), "or")) {
    int line = advance().line;
    left = binary(ExprKind::Or, std::move(left), parse_and(), line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name(cur(), "and")) {
    int line = advance().line;
    left = binary(ExprKind::And, std::move(left), parse_not(), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  NestGuard guard(*this);
  if (is_name(cur(), "not")) {
    auto e = make(ExprKind::Not, advance().line);
    e->a = parse_not();
    return sealed(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
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
  return sealed(std::move(e));
}

ExprPtr Parser::parse_binary_level(std::initializer_list<const char*> ops, ExprPtr (Parser::*next)()) {
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
    left = sealed(std::move(e));
  }
}

ExprPtr Parser::parse_math1() { return parse_binary_level({"+", "-"}, &Parser::parse_concat); }

ExprPtr Parser::parse_concat() {
  int line = cur().line;
  ExprPtr first = parse_math2();
  if (!is_op(cur(), "~")) return first;
  auto e = make(ExprKind::Concat, line);
  e->items.push_back(std::move(first));
  while (skip_op("~")) e->items.push_back(parse_math2());
  return sealed(std::move(e));
}

ExprPtr Parser::parse_math2() { return parse_binary_level({"*", "/", "//", "%"}, &Parser::parse_pow); }
ExprPtr Parser::parse_pow() { return parse_binary_level({"**"}, &Parser::parse_unary_filtered); }
ExprPtr Parser::parse_unary_filtered() { return parse_unary(true); }

ExprPtr Parser::parse_unary(bool with_filter) {
  NestGuard guard(*this);
  const Token& t = cur();
  ExprPtr node;
  if (is_op(t, "-") || is_op(t, "+")) {
    node = make(t.value == "-" ? ExprKind::Neg : ExprKind::Pos, t.line);
    advance();
    node->a = parse_unary(false);
    node = sealed(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
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
    return sealed(std::move(e));
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
    return sealed(std::move(e));
  }
  fail("unexpected '" + describe(t) + "'", line);
}

bool Parser::is_tuple_end(const Names* extra) const {
  const Token& t = cur();
  if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || is_op(t, ")")) return true;
  if (extra && t.type == Tok::Name)
    return std::find(extra->begin(), extra->end(), t.value) != extra->end();
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr, const Names* extra_end, bool explicit_parens) {
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
  return sealed(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(cur(), ".") || is_op(cur(), "["))
      node = parse_subscript(std::move(node));
    else if (is_op(cur(), "("))
      node = parse_call(std::move(node));
    else
      return node;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const Token& t = advance();
  int line = t.line;
  if (t.value == ".") {
    const Token& attr = advance();
    if (attr.type == Tok::Name) {
      auto e = make(ExprKind::Getattr, line);
      e->a = std::move(node);
      e->name = attr.value;
      return sealed(std::move(e));
    }
    if (attr.type != Tok::Int) fail("expected name or number", attr.line);
    auto e = make(ExprKind::Getitem, line);
    e->a = std::move(node);
    e->b = make(ExprKind::Const, attr.line);
    e->b->value = Value(attr.int_value);
    return sealed(std::move(e));
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
    e->b = sealed(std::move(e->b));
  }
  return sealed(std::move(e));
}

ExprPtr Parser::parse_subscribed() {
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
  return sealed(std::move(e));
}

void Parser::parse_call_args(CallArgsExpr& out) {
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

ExprPtr Parser::parse_call(ExprPtr node) {
  auto e = make(ExprKind::Call, cur().line);
  e->a = std::move(node);
  parse_call_args(e->args);
  return sealed(std::move(e));
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op(cur(), "|") || start_inline) {
    if (!start_inline) advance();
    int line = cur().line;
    auto e = make(ExprKind::Filter, line);
    e->name = dotted_name();
    if (is_op(cur(), "(")) parse_call_args(e->args);
    e->a = std::move(node);
    node = sealed(std::move(e));
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
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
  if (!negated) return sealed(std::move(e));
  auto n = make(ExprKind::Not, line);
  n->a = sealed(std::move(e));
  return sealed(std::move(n));
}
}  // namespace dflash::jinja
