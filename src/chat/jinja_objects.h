#pragma once
// Template-visible objects with attributes: namespace(), loop, macros.
#include <memory>
#include <optional>
#include <string>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace dflash::jinja {

struct Scope;

// The only object whose attributes `{% set ns.attr = ... %}` may assign.
class Namespace : public Object {
 public:
  Namespace() : attrs_(std::make_shared<DictData>()) {}
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  std::optional<Value> getattr(const std::string& name) override;
  bool is_namespace() const override { return true; }
  void setattr(const std::string& name, Value v) override { attrs_->set(Value(name), std::move(v)); }
  void release() override { attrs_->items.clear(); }

 private:
  std::shared_ptr<DictData> attrs_;
  mutable bool in_repr_ = false;
};

class LoopContext : public Object, public std::enable_shared_from_this<LoopContext> {
 public:
  LoopContext(std::shared_ptr<const ValueList> items, int depth, const Stmt* loop,
              std::shared_ptr<Scope> scope)
      : items_(std::move(items)), depth_(depth), loop_(loop), scope_(std::move(scope)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  std::optional<Value> getattr(const std::string& name) override;
  bool is_callable() const override { return true; }
  // loop(items) in a `recursive` loop renders the loop body again one level deeper.
  Value call(Interpreter& in, CallArgs& args) override;
  void set_index(int64_t i) { index0_ = i; }
  void release() override { scope_.reset(); }

 private:
  int64_t length() const { return static_cast<int64_t>(items_->size()); }
  std::shared_ptr<const ValueList> items_;
  int64_t index0_ = 0;
  int depth_;
  const Stmt* loop_;
  std::shared_ptr<Scope> scope_;
  std::optional<ValueList> last_changed_;
};

class Macro : public Object {
 public:
  Macro(const Stmt* def, std::shared_ptr<Scope> closure, std::string name)
      : def_(def), closure_(std::move(closure)), name_(std::move(name)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro " + repr_string(name_) + ">"; }
  std::optional<Value> getattr(const std::string& name) override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& in, CallArgs& args) override;
  void release() override { closure_.reset(); }

 private:
  const Stmt* def_;
  std::shared_ptr<Scope> closure_;
  std::string name_;
};

}  // namespace dflash::jinja
