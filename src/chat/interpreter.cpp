#include "chat/interpreter.h"

#include "chat/arguments.h"
#include "chat/errors.h"
#include "chat/filters.h"
#include "chat/globals.h"
#include "chat/limits.h"
#include "chat/operators.h"
#include "chat/predicates.h"
#include "chat/source.h"
#include "chat/value_access.h"
#include "chat/value_format.h"

namespace rf::jinja {
namespace {

struct Scope {
  std::shared_ptr<Scope> parent;
  Object variables;

  const Value* lookup(std::string_view name) const {
    for (const Scope* scope = this; scope; scope = scope->parent.get()) {
      if (const Value* value = scope->variables.find(name)) return value;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

enum class Flow { Normal, Break, Continue };

Value loop_variable(std::size_t index, const std::vector<Value>& items) {
  const auto n = static_cast<std::int64_t>(items.size()), i = static_cast<std::int64_t>(index);
  Object loop;
  loop.entries = {{"index", Value::integer(i + 1)},    {"index0", Value::integer(i)},
                  {"revindex", Value::integer(n - i)}, {"revindex0", Value::integer(n - i - 1)},
                  {"first", Value::boolean(i == 0)},   {"last", Value::boolean(i + 1 == n)},
                  {"length", Value::integer(n)}};
  if (index > 0) loop.set("previtem", items[index - 1]);
  if (index + 1 < items.size()) loop.set("nextitem", items[index + 1]);
  return Value::dict(std::move(loop));
}

// What a failed call names: `foo` in foo(), `bar` in x.bar().
std::string callee_name(const ast::Expr& callee) {
  if (const auto* name = std::get_if<ast::Name>(&callee.node)) return name->name;
  if (const auto* attribute = std::get_if<ast::GetAttr>(&callee.node)) return attribute->name;
  return "callee";
}

class Interpreter {
 public:
  explicit Interpreter(std::string_view source) : source_(source) {}

  // Macros hold the scope they were defined in, which holds them; namespaces may hold
  // themselves. Emptying both at the end frees what shared ownership alone would keep.
  ~Interpreter() {
    for (const auto& ns : namespaces_) ns->attributes.entries.clear();
    for (const auto& scope : closure_scopes_) scope->variables.entries.clear();
  }

  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  std::string run(const ast::Body& body, const Object& context) {
    auto globals = std::make_shared<Scope>(Scope{nullptr, global_functions(namespaces_)});
    auto root = std::make_shared<Scope>(Scope{std::move(globals), context});
    std::string out;
    exec_body(body, root, out);
    return out;
  }

 private:
  // --- statements ---

  Flow exec_body(const ast::Body& body, const ScopePtr& scope, std::string& out) {
    for (const ast::Stmt& stmt : body) {
      const Flow flow = exec(stmt, scope, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec(const ast::Stmt& stmt, const ScopePtr& scope, std::string& out) {
    try {
      return std::visit([&](const auto& node) { return execute(node, scope, out); }, stmt.node);
    } catch (const TemplateError& error) {
      fail_at(source_, stmt.offset, error.what());
    }
  }

  std::string capture(const ast::Body& body, const ScopePtr& scope) {
    std::string out;
    exec_body(body, scope, out);
    return out;
  }

  static void emit(std::string& out, std::string_view text) {
    limits::check_bytes(out.size() + text.size());
    out += text;
  }

  void step() {
    if (++steps_ > limits::kMaxSteps) fail("more than {} loop iterations and macro calls", limits::kMaxSteps);
  }

  Flow execute(const ast::Text& node, const ScopePtr&, std::string& out) {
    emit(out, node.text);
    return Flow::Normal;
  }

  Flow execute(const ast::Output& node, const ScopePtr& scope, std::string& out) {
    emit(out, to_str(eval(*node.expr, scope)));
    return Flow::Normal;
  }

  Flow execute(const ast::If& node, const ScopePtr& scope, std::string& out) {
    for (const auto& [condition, body] : node.branches) {
      if (eval(*condition, scope).truthy()) return exec_body(body, scope, out);
    }
    return exec_body(node.otherwise, scope, out);
  }

  static void bind(const std::vector<std::string>& names, const Value& value, Scope& scope) {
    if (names.size() == 1) {
      scope.variables.set(names.front(), value);
      return;
    }
    const std::vector<Value> parts = iterate(value);
    if (parts.size() != names.size()) fail("cannot unpack {} values into {} names", parts.size(), names.size());
    for (std::size_t i = 0; i < names.size(); ++i) scope.variables.set(names[i], parts[i]);
  }

  // Each iteration has a scope of its own: what one sets, the next does not see (jinja2).
  ScopePtr iteration_scope(const ast::For& node, const Value& item, const ScopePtr& scope) {
    step();
    auto iteration = std::make_shared<Scope>(Scope{scope, {}});
    bind(node.targets, item, *iteration);
    return iteration;
  }

  Flow execute(const ast::For& node, const ScopePtr& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*node.iterable, scope));
    if (node.condition) {
      std::vector<Value> kept;
      for (Value& item : items) {
        if (eval(*node.condition, iteration_scope(node, item, scope)).truthy()) kept.push_back(std::move(item));
      }
      items = std::move(kept);
    }
    for (std::size_t i = 0; i < items.size(); ++i) {
      const ScopePtr iteration = iteration_scope(node, items[i], scope);
      iteration->variables.set("loop", loop_variable(i, items));
      if (exec_body(node.body, iteration, out) == Flow::Break) break;
    }
    return items.empty() ? exec_body(node.otherwise, scope, out) : Flow::Normal;
  }

  Flow execute(const ast::Set& node, const ScopePtr& scope, std::string&) {
    Value value = node.value ? eval(*node.value, scope) : Value::string(capture(node.body, scope));
    const ast::Target& target = node.target;
    if (!target.namespace_object) {
      bind(target.names, value, *scope);
      return Flow::Normal;
    }
    const Value object = eval(*target.namespace_object, scope);
    if (!object.is(Value::Type::Namespace))
      fail("cannot assign attribute on non-namespace object ('{}')", object.type_name());
    object.as_namespace().attributes.set(target.attribute, std::move(value));
    return Flow::Normal;
  }

  Flow execute(const ast::Macro& node, const ScopePtr& scope, std::string&) {
    closure_scopes_.push_back(scope);
    scope->variables.set(node.name, Value::function(node.name, [this, &node, scope](ArgumentReader& args) {
                           return call_macro(node.parameters, node.body, scope, args);
                         }));
    return Flow::Normal;
  }

  Flow execute(const ast::CallBlock& node, const ScopePtr& scope, std::string& out) {
    const auto& call = std::get<ast::Call>(node.call->node);
    Arguments args = evaluate_arguments(call.args, scope);
    args.keyword.emplace_back("caller", Value::function("caller", [this, &node, scope](ArgumentReader& caller_args) {
                                return call_macro(node.caller_parameters, node.body, scope, caller_args);
                              }));
    emit(out, to_str(invoke(eval(*call.callee, scope), std::move(args), callee_name(*call.callee))));
    return Flow::Normal;
  }

  Flow execute(const ast::FilterBlock& node, const ScopePtr& scope, std::string& out) {
    Value value = Value::string(capture(node.body, scope));
    for (const ast::FilterCall& filter : node.filters) value = apply(filter, value, scope);
    emit(out, to_str(value));
    return Flow::Normal;
  }

  Flow execute(const ast::Break&, const ScopePtr&, std::string&) { return Flow::Break; }
  Flow execute(const ast::Continue&, const ScopePtr&, std::string&) { return Flow::Continue; }

  Value call_macro(const std::vector<ast::Parameter>& parameters, const ast::Body& body, const ScopePtr& defining_scope,
                   ArgumentReader& args) {
    if (call_depth_ >= limits::kMaxCallDepth) fail("macro calls nested more than {} deep", limits::kMaxCallDepth);
    step();
    const auto scope = std::make_shared<Scope>(Scope{defining_scope, {}});
    std::vector<const ast::Parameter*> defaulted;
    for (const ast::Parameter& parameter : parameters) {
      Value value = args.next(parameter.name);
      if (value.is_undefined() && parameter.default_value) defaulted.push_back(&parameter);
      scope->variables.set(parameter.name, std::move(value));
    }
    if (Value caller = args.keyword("caller"); !caller.is_undefined())
      scope->variables.set("caller", std::move(caller));
    args.finish();
    ++call_depth_;
    struct Unwind {
      int& depth;
      ~Unwind() { --depth; }
    } unwind{call_depth_};
    for (const ast::Parameter* parameter : defaulted) {
      scope->variables.set(parameter->name, eval(*parameter->default_value, scope));
    }
    return Value::string(capture(body, scope));
  }

  // --- expressions ---

  Value eval(const ast::Expr& expr, const ScopePtr& scope) {
    try {
      return std::visit([&](const auto& node) { return evaluate(node, scope); }, expr.node);
    } catch (const TemplateError& error) {
      fail_at(source_, expr.offset, error.what());
    }
  }

  Value evaluate(const ast::Literal& node, const ScopePtr&) { return node.value; }

  Value evaluate(const ast::Name& node, const ScopePtr& scope) {
    const Value* value = scope->lookup(node.name);
    return value ? *value : Value();
  }

  Value evaluate(const ast::ListExpr& node, const ScopePtr& scope) {
    std::vector<Value> items;
    for (const ast::ExprPtr& item : node.items) items.push_back(eval(*item, scope));
    return Value::list(std::move(items), node.is_tuple);
  }

  Value evaluate(const ast::DictExpr& node, const ScopePtr& scope) {
    Object object;
    for (const auto& [key_expr, value_expr] : node.entries) {
      const Value key = eval(*key_expr, scope);
      if (!key.is(Value::Type::String)) fail("dict keys must be strings, not '{}'", key.type_name());
      object.set(key.as_string(), eval(*value_expr, scope));
    }
    return Value::dict(std::move(object));
  }

  Value evaluate(const ast::GetAttr& node, const ScopePtr& scope) {
    return get_attribute(eval(*node.object, scope), node.name);
  }
  Value evaluate(const ast::GetItem& node, const ScopePtr& scope) {
    return get_item(eval(*node.object, scope), eval(*node.key, scope));
  }

  Value evaluate(const ast::Slice& node, const ScopePtr& scope) {
    const auto bound = [&](const ast::ExprPtr& expr) { return expr ? eval(*expr, scope) : Value(); };
    return get_slice(eval(*node.object, scope), bound(node.start), bound(node.stop), bound(node.step));
  }

  Arguments evaluate_arguments(const std::vector<ast::Argument>& args, const ScopePtr& scope) {
    Arguments out;
    for (const ast::Argument& arg : args) {
      Value value = eval(*arg.value, scope);
      if (arg.name.empty()) {
        out.positional.push_back(std::move(value));
      } else {
        out.keyword.emplace_back(arg.name, std::move(value));
      }
    }
    return out;
  }

  static Value invoke(const Value& callee, Arguments args, const std::string& name) {
    if (callee.is_undefined()) fail("'{}' is undefined", name);
    if (!callee.is(Value::Type::Function)) fail("'{}' object is not callable", callee.type_name());
    ArgumentReader reader(callee.as_function().name, std::move(args));
    Value result = callee.as_function().call(reader);
    reader.finish();
    return result;
  }

  Value evaluate(const ast::Call& node, const ScopePtr& scope) {
    const Value callee = eval(*node.callee, scope);
    return invoke(callee, evaluate_arguments(node.args, scope), callee_name(*node.callee));
  }

  Value apply(const ast::FilterCall& filter, const Value& input, const ScopePtr& scope) {
    ArgumentReader reader(filter.name, evaluate_arguments(filter.args, scope));
    return apply_filter(filter.name, input, reader);
  }

  Value evaluate(const ast::Filter& node, const ScopePtr& scope) {
    return apply(node.filter, eval(*node.operand, scope), scope);
  }

  Value evaluate(const ast::Test& node, const ScopePtr& scope) {
    const Value operand = eval(*node.operand, scope);
    ArgumentReader reader(node.name, evaluate_arguments(node.args, scope));
    return Value::boolean(apply_test(node.name, operand, reader) != node.negated);
  }

  Value evaluate(const ast::Unary& node, const ScopePtr& scope) {
    return unary_operation(node.op, eval(*node.operand, scope));
  }

  Value evaluate(const ast::Binary& node, const ScopePtr& scope) {
    Value left = eval(*node.left, scope);
    switch (node.op) {
      case ast::BinaryOp::And:
        return left.truthy() ? eval(*node.right, scope) : left;
      case ast::BinaryOp::Or:
        return left.truthy() ? left : eval(*node.right, scope);
      default:
        return binary_operation(node.op, left, eval(*node.right, scope));
    }
  }

  Value evaluate(const ast::Compare& node, const ScopePtr& scope) {
    Value left = eval(*node.first, scope);
    for (const auto& [op, right_expr] : node.rest) {
      Value right = eval(*right_expr, scope);
      if (!comparison(op, left, right)) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  Value evaluate(const ast::Conditional& node, const ScopePtr& scope) {
    if (eval(*node.condition, scope).truthy()) return eval(*node.if_true, scope);
    return node.if_false ? eval(*node.if_false, scope) : Value();
  }

  std::string_view source_;
  std::vector<std::shared_ptr<Namespace>> namespaces_;
  std::vector<ScopePtr> closure_scopes_;
  std::uint64_t steps_ = 0;
  int call_depth_ = 0;
};

}  // namespace

std::string render(std::string_view source, const ast::Body& body, const Object& context) {
  return Interpreter(source).run(body, context);
}

}  // namespace rf::jinja
