// The statement half of the grammar: tags, their bodies and assignment targets.
#include <algorithm>

#include "chat/jinja_grammar.h"
#include "chat/jinja_parser.h"

namespace dflash::jinja {

namespace {

StmtPtr make_stmt(StmtKind kind, int line) { return make_node<Stmt>(kind, line); }

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

}  // namespace

std::string Parser::describe(const Token& t) {
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

void Parser::fail_tag(const std::string* unknown, int line) {
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

void Parser::seal(Stmt& s) {
  int d = 0;
  auto see = [&](const ExprPtr& e) { d = e ? std::max(d, e->depth) : d; };
  auto see_body = [&](const Body& body) {
    for (const auto& x : body) d = std::max(d, x->depth);
  };
  see(s.expr);
  see(s.cond);
  see(s.filter);
  see_body(s.body);
  see_body(s.else_body);
  for (const auto& br : s.branches) {
    see(br.first);
    see_body(br.second);
  }
  for (const auto& x : s.defaults) see(x);
  for (const auto& x : s.values) see(x);
  set_depth(s, d);
}

Body Parser::subparse(const Names* end_tokens) {
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
      seal(*s);
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

Body Parser::parse_statements(const Names& end_tokens, bool drop_needle) {
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

void Parser::parse_statement(Body& out) {
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
  size_t first_new = out.size();
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
  for (size_t i = first_new; i < out.size(); ++i) seal(*out[i]);
  tag_stack_.pop_back();
}

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_if() {
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

StmtPtr Parser::parse_set() {
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

StmtPtr Parser::parse_with() {
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

StmtPtr Parser::parse_block() {
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

StmtPtr Parser::parse_scope(const std::string& tag) {
  auto s = make_stmt(StmtKind::Scope, advance().line);
  if (tag == "autoescape") s->expr = parse_expression(true);
  s->body = parse_statements({"end" + tag}, true);
  return s;
}

void Parser::parse_print(Body& out) {
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

void Parser::parse_signature(Stmt& s) {
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

void Parser::analyse_macro(Stmt& s) {
  Names found;
  find_names(s.body, {"varargs", "kwargs", "caller"}, found);
  auto has = [&](const char* n) { return std::find(found.begin(), found.end(), n) != found.end(); };
  s.catch_varargs = has("varargs");
  s.catch_kwargs = has("kwargs");
  s.uses_caller = has("caller");
}

// A macro or call-block body is a function of its own: loops around it do not count.
Body Parser::parse_function_body(const char* end) {
  int saved = loop_depth_;
  loop_depth_ = 0;
  Body body = parse_statements({end}, true);
  loop_depth_ = saved;
  return body;
}

StmtPtr Parser::parse_macro() {
  auto s = make_stmt(StmtKind::Macro, advance().line);
  s->name = expect_name();
  parse_signature(*s);
  s->body = parse_function_body("endmacro");
  analyse_macro(*s);
  return s;
}

StmtPtr Parser::parse_call_block() {
  auto s = make_stmt(StmtKind::CallBlock, advance().line);
  if (is_op(cur(), "(")) parse_signature(*s);
  s->expr = parse_expression(true);
  if (s->expr->kind != ExprKind::Call) fail("expected call", s->line);
  s->body = parse_function_body("endcall");
  analyse_macro(*s);
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = make_stmt(StmtKind::FilterBlock, advance().line);
  s->filter = parse_filter(nullptr, true);
  s->body = parse_statements({"endfilter"}, true);
  return s;
}

Target Parser::to_target(const Expr& e) {
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

Target Parser::parse_assign_target(bool with_tuple, bool name_only, const Names* extra_end, bool with_namespace) {
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
Body parse(std::string_view source, const LexOptions& opt) {
  Parser p(lex(source, opt));
  return p.parse_all();
}

}  // namespace dflash::jinja
