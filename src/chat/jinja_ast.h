#pragma once
// The parsed template: expression and statement nodes mirroring jinja2's node types.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace dflash::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  Const,     // value
  Name,      // name
  List,      // items
  Tuple,     // items
  Dict,      // items: key0, value0, key1, value1, ...
  Getattr,   // a.name
  Getitem,   // a[b]
  Slice,     // items: start, stop, step (each may be null)
  Call,      // a(args)
  Filter,    // a|name(args); a is null for the filters of `{% filter %}` and `{% set x | f %}`
  Test,      // a is name(args)
  Not,       // not a
  Neg,       // -a
  Pos,       // +a
  And,       // a and b
  Or,        // a or b
  Binary,    // a op b with op one of + - * / // % **
  Concat,    // items joined with ~
  Compare,   // a followed by (op, operand) pairs in cmp
  CondExpr,  // b if a else c (c may be null)
};

struct CallArgsExpr {
  std::vector<ExprPtr> pos;
  std::vector<std::pair<std::string, ExprPtr>> kw;
  ExprPtr star;      // *args
  ExprPtr starstar;  // **kwargs
};

struct Expr {
  ExprKind kind;
  int line = 0;
  int depth = 1;  // levels of the subtree this node heads, bounded by the parser
  Value value;
  std::string name;
  std::string op;
  ExprPtr a, b, c;
  std::vector<ExprPtr> items;
  CallArgsExpr args;
  std::vector<std::pair<std::string, ExprPtr>> cmp;
};

// Where `set`, `for` and `with` store: a name, a tuple of targets, or `ns.attr`.
struct Target {
  enum class Kind : uint8_t { Name, Tuple, NsAttr } kind = Kind::Name;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

enum class StmtKind : uint8_t {
  Output,       // text
  Print,        // {{ expr }} or {% print expr %}
  If,           // branches (test, body), else_body
  For,          // target in expr [if cond] body [else else_body]
  Set,          // target = expr
  SetBlock,     // target = rendered body, through filter if present
  Macro,        // name(params) body
  CallBlock,    // {% call(params) expr %} body
  FilterBlock,  // body through filter
  With,         // targets = values, body
  Break,
  Continue,
  Scope,        // body rendered in place: {% block %}, {% generation %}
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  int depth = 1;  // levels of the subtree this node heads, bounded by the parser
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  Target target;
  Body body;
  Body else_body;
  std::vector<std::pair<ExprPtr, Body>> branches;
  // Macros and call blocks.
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // for the last defaults.size() params
  bool catch_varargs = false;
  bool catch_kwargs = false;
  bool uses_caller = false;
  bool recursive = false;
  // With.
  std::vector<Target> targets;
  std::vector<ExprPtr> values;
};

}  // namespace dflash::jinja
