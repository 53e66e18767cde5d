#pragma once
// Walks the node tree and renders it, with jinja2's scoping: `for` bodies, macros, `with`,
// blocks and captured `set` bodies get their own scope, `if` does not, and macros close over
// the scope they were defined in.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_budget.h"
#include "chat/jinja_value.h"

namespace dflash::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  Value* find_local(const std::string& name);
  void set(const std::string& name, Value v);
};
using ScopePtr = std::shared_ptr<Scope>;

struct RenderHooks {
  // Formats the current time for strftime_now(fmt).
  std::function<std::string(const std::string& fmt)> strftime_now;
};

// Python's binary operators: + - * / // % ** (with `%` doing printf-style formatting on str).
Value binary_op(const std::string& op, const Value& a, const Value& b);

class Interpreter {
 public:
  Interpreter(Value context, RenderHooks hooks);

  std::string render(const Body& body);

  // Evaluates one node, counting it against the render's depth and work limits.
  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value filter(const std::string& name, Value v, CallArgs& args);
  bool test(const std::string& name, const Value& v, CallArgs& args);
  const RenderHooks& hooks() const { return hooks_; }
  // Objects that may end up in reference cycles; released when the render ends.
  void track(std::shared_ptr<Object> obj) { tracked_.push_back(std::move(obj)); }

  // Runs a macro or call-block body: binds arguments jinja2's way and returns the output.
  Value invoke_macro(const Stmt& def, const ScopePtr& closure, CallArgs& args);
  // Runs a for loop over `items`; `depth` counts recursive loop() calls.
  void run_loop(const Stmt& loop, ValueList items, const ScopePtr& scope, int depth, std::string& out);

 private:
  enum class Flow { Normal, Break, Continue };
  // Counts one level of render-time nesting and one step for the node it guards.
  class Nested {
   public:
    explicit Nested(Interpreter& in);
    ~Nested() { --in_.nesting_; }

   private:
    Interpreter& in_;
  };
  Value eval_node(const Expr& e, const ScopePtr& scope);
  // Appends to a rendering, within kMaxOutputBytes.
  void emit(std::string& out, std::string_view text);
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const ScopePtr& scope, std::string& out);
  void exec_call_block(const Stmt& s, const ScopePtr& scope, std::string& out);
  std::string capture(const Body& body, const ScopePtr& scope);
  Value apply_filter_chain(const Expr* chain, Value v, const ScopePtr& scope);
  void assign(const Target& t, Value v, const ScopePtr& scope);
  Value lookup(const std::string& name, const ScopePtr& scope);
  CallArgs eval_args(const CallArgsExpr& a, const ScopePtr& scope);
  Value eval_compare(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Value& obj, const Expr& slice, const ScopePtr& scope);

  Value context_;
  RenderHooks hooks_;
  std::vector<std::pair<std::string, Value>> globals_;
  std::vector<std::shared_ptr<Object>> tracked_;
  int depth_ = 0;    // nested macro calls
  int nesting_ = 0;  // nested evaluations of any kind
  RenderBudget budget_;
};

}  // namespace dflash::jinja
