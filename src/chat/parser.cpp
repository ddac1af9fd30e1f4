#include "chat/parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <initializer_list>

#include "chat/filters.h"
#include "chat/lexer.h"
#include "chat/limits.h"
#include "chat/predicates.h"
#include "chat/source.h"

namespace rf::jinja {
namespace {

using namespace ast;
using Kind = Token::Kind;

// Tags of full jinja2 that chat templates have no use for (they would load other files).
constexpr std::array<std::string_view, 9> kUnsupportedTags = {"include", "extends",    "block", "import", "from",
                                                              "with",    "autoescape", "raw",   "trans"};

template <typename Node>
ExprPtr make(std::size_t offset, Node node) {
  return std::make_unique<Expr>(Expr{offset, std::move(node)});
}

class Parser {
 public:
  explicit Parser(std::string_view source) : source_(source), tokens_(tokenize(source)) {}

  Body parse_template() { return parse_body({}, 0, ""); }

 private:
  // Counts nesting (and the length of operator chains, which evaluate recursively too).
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& parser) : parser_(parser), saved_(parser.depth_) { parser.deeper(); }
    ~DepthGuard() { parser_.depth_ = saved_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    Parser& parser_;
    int saved_;
  };

  void deeper() {
    if (++depth_ > limits::kMaxNesting) fail_here(fmt::format("nested more than {} levels deep", limits::kMaxNesting));
  }

  // --- tokens ---

  const Token& peek(std::size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
  const Token& advance() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool at_operator(std::string_view op, std::size_t ahead = 0) const {
    return peek(ahead).kind == Kind::Operator && peek(ahead).text == op;
  }
  bool at_name(std::string_view name, std::size_t ahead = 0) const {
    return peek(ahead).kind == Kind::Name && peek(ahead).text == name;
  }
  bool accept_operator(std::string_view op) { return at_operator(op) && (advance(), true); }
  bool accept_name(std::string_view name) { return at_name(name) && (advance(), true); }

  [[noreturn]] void fail_here(const std::string& message) const { fail_at(source_, peek().offset, message); }

  std::string describe(const Token& token) const {
    switch (token.kind) {
      case Kind::End:
        return "end of template";
      case Kind::BlockEnd:
        return "'%}'";
      case Kind::VariableEnd:
        return "'}}'";
      case Kind::Text:
        return "text";
      case Kind::String:
        return "string";
      default:
        return fmt::format("'{}'", token.text);
    }
  }
  [[noreturn]] void unexpected() const { fail_here("unexpected " + describe(peek())); }

  void expect_operator(std::string_view op) {
    if (!accept_operator(op)) fail_here(fmt::format("expected '{}', got {}", op, describe(peek())));
  }
  std::string expect_name() {
    if (peek().kind != Kind::Name) fail_here("expected a name, got " + describe(peek()));
    return advance().text;
  }
  void expect_block_end() {
    if (peek().kind != Kind::BlockEnd) fail_here("expected '%}', got " + describe(peek()));
    advance();
  }
  // Consumes the {% and the tag name of the tag that ended a body, returning the name.
  std::string take_end_tag() {
    advance();
    return advance().text;
  }

  // --- statements ---

  // Statements up to a tag named in end_tags (left unread), or to the end of the template.
  Body parse_body(std::initializer_list<std::string_view> end_tags, std::size_t opener_offset,
                  std::string_view opener) {
    Body body;
    while (true) {
      const Token& token = peek();
      switch (token.kind) {
        case Kind::Text:
          body.push_back({token.offset, Text{token.text}});
          advance();
          break;
        case Kind::VariableBegin: {
          advance();
          ExprPtr expr = parse_tuple();
          if (peek().kind != Kind::VariableEnd) fail_here("expected '}}', got " + describe(peek()));
          advance();
          body.push_back({token.offset, Output{std::move(expr)}});
          break;
        }
        case Kind::BlockBegin:
          if (peek(1).kind == Kind::Name &&
              std::find(end_tags.begin(), end_tags.end(), peek(1).text) != end_tags.end()) {
            return body;
          }
          if (end_tags.size() != 0) open_blocks_.push_back(*std::prev(end_tags.end()));
          parse_statement(body);
          if (end_tags.size() != 0) open_blocks_.pop_back();
          break;
        case Kind::End:
          if (end_tags.size() == 0) return body;
          fail_at(
              source_, opener_offset,
              fmt::format("'{{% {} %}}' is never closed (expected '{{% {} %}}')", opener, *std::prev(end_tags.end())));
        default:
          unexpected();
      }
    }
  }

  void parse_statement(Body& out) {
    DepthGuard guard(*this);
    const std::size_t offset = advance().offset;
    if (peek().kind != Kind::Name) fail_here("expected a tag name, got " + describe(peek()));
    const std::string tag = advance().text;
    if (tag == "if") {
      out.push_back({offset, parse_if(offset)});
    } else if (tag == "for") {
      out.push_back({offset, parse_for(offset)});
    } else if (tag == "set") {
      out.push_back({offset, parse_set(offset)});
    } else if (tag == "macro") {
      out.push_back({offset, parse_macro(offset)});
    } else if (tag == "call") {
      out.push_back({offset, parse_call_block(offset)});
    } else if (tag == "filter") {
      out.push_back({offset, parse_filter_block(offset)});
    } else if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail_at(source_, offset, fmt::format("'{}' outside of a loop", tag));
      expect_block_end();
      if (tag == "break") {
        out.push_back({offset, Break{}});
      } else {
        out.push_back({offset, Continue{}});
      }
    } else if (tag == "generation") {
      // transformers' marker around assistant text (for masks); it renders its body as is.
      expect_block_end();
      Body inner = parse_body({"endgeneration"}, offset, tag);
      expect_end(tag, "endgeneration");
      std::move(inner.begin(), inner.end(), std::back_inserter(out));
    } else if (std::find(kUnsupportedTags.begin(), kUnsupportedTags.end(), tag) != kUnsupportedTags.end()) {
      fail_at(source_, offset, fmt::format("'{}' tags are not supported in chat templates", tag));
    } else if (open_blocks_.empty()) {
      fail_at(source_, offset, fmt::format("unexpected tag '{}'", tag));
    } else {
      fail_at(source_, offset, fmt::format("unexpected tag '{}' (expected '{{% {} %}}')", tag, open_blocks_.back()));
    }
  }

  void expect_end(std::string_view opener, std::string_view end_tag) {
    if (take_end_tag() != end_tag) fail_here(fmt::format("expected '{{% {} %}}' to close '{}'", end_tag, opener));
    expect_block_end();
  }

  If parse_if(std::size_t offset) {
    If node;
    while (true) {
      ExprPtr condition = parse_tuple();
      expect_block_end();
      node.branches.emplace_back(std::move(condition), parse_body({"elif", "else", "endif"}, offset, "if"));
      const std::string tag = take_end_tag();
      if (tag == "elif") continue;
      expect_block_end();
      if (tag == "else") {
        node.otherwise = parse_body({"endif"}, offset, "if");
        expect_end("if", "endif");
      }
      return node;
    }
  }

  For parse_for(std::size_t offset) {
    For node;
    do {
      node.targets.push_back(expect_name());
    } while (accept_operator(","));
    if (!accept_name("in")) fail_here("expected 'in', got " + describe(peek()));
    node.iterable = parse_tuple(false);
    if (accept_name("if")) node.condition = parse_expression();
    if (at_name("recursive")) fail_here("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    node.body = parse_body({"else", "endfor"}, offset, "for");
    --loop_depth_;
    if (take_end_tag() == "else") {
      expect_block_end();
      node.otherwise = parse_body({"endfor"}, offset, "for");
      expect_end("for", "endfor");
    } else {
      expect_block_end();
    }
    return node;
  }

  Set parse_set(std::size_t offset) {
    Set node;
    const std::size_t target_offset = peek().offset;
    const std::string first = expect_name();
    if (accept_operator(".")) {
      node.target.namespace_object = make(target_offset, Name{first});
      node.target.attribute = expect_name();
    } else {
      node.target.names.push_back(first);
      while (accept_operator(",")) node.target.names.push_back(expect_name());
    }
    if (accept_operator("=")) {
      node.value = parse_tuple();
      expect_block_end();
      return node;
    }
    expect_block_end();
    node.body = parse_detached_body("endset", offset, "set");
    return node;
  }

  std::vector<Parameter> parse_parameters() {
    std::vector<Parameter> parameters;
    expect_operator("(");
    while (!accept_operator(")")) {
      Parameter parameter{expect_name(), nullptr};
      if (accept_operator("=")) parameter.default_value = parse_expression();
      parameters.push_back(std::move(parameter));
      if (!at_operator(")")) expect_operator(",");
    }
    return parameters;
  }

  // Bodies rendered into a value (macros, call, set and filter blocks): a loop around them is
  // not theirs to break.
  Body parse_detached_body(std::string_view end_tag, std::size_t offset, std::string_view opener) {
    const int saved_loop_depth = std::exchange(loop_depth_, 0);
    Body body = parse_body({end_tag}, offset, opener);
    loop_depth_ = saved_loop_depth;
    expect_end(opener, end_tag);
    return body;
  }

  Macro parse_macro(std::size_t offset) {
    Macro node;
    node.name = expect_name();
    node.parameters = parse_parameters();
    expect_block_end();
    node.body = parse_detached_body("endmacro", offset, "macro");
    return node;
  }

  CallBlock parse_call_block(std::size_t offset) {
    CallBlock node;
    if (at_operator("(")) node.caller_parameters = parse_parameters();
    const std::size_t call_offset = peek().offset;
    node.call = parse_expression();
    if (!std::holds_alternative<Call>(node.call->node)) fail_at(source_, call_offset, "expected a macro call");
    expect_block_end();
    node.body = parse_detached_body("endcall", offset, "call");
    return node;
  }

  FilterBlock parse_filter_block(std::size_t offset) {
    FilterBlock node;
    do {
      node.filters.push_back(parse_filter_call());
    } while (accept_operator("|"));
    expect_block_end();
    node.body = parse_detached_body("endfilter", offset, "filter");
    return node;
  }

  // --- expressions, lowest precedence first ---

  bool at_tuple_end() const {
    const Kind kind = peek().kind;
    return kind == Kind::BlockEnd || kind == Kind::VariableEnd || kind == Kind::End || at_operator(")") ||
           at_operator("=");
  }

  // a, b, c (a tuple) or a single expression
  ExprPtr parse_tuple(bool with_conditional = true) {
    const std::size_t offset = peek().offset;
    ExprPtr first = parse_expression(with_conditional);
    if (!at_operator(",")) return first;
    std::vector<ExprPtr> items;
    items.push_back(std::move(first));
    while (accept_operator(",") && !at_tuple_end()) items.push_back(parse_expression(with_conditional));
    return make(offset, ListExpr{std::move(items), true});
  }

  ExprPtr parse_expression(bool with_conditional = true) { return with_conditional ? parse_conditional() : parse_or(); }

  ExprPtr parse_conditional() {
    DepthGuard guard(*this);
    ExprPtr expr = parse_or();
    while (at_name("if")) {
      const std::size_t offset = advance().offset;
      ExprPtr condition = parse_or();
      ExprPtr otherwise = accept_name("else") ? parse_conditional() : nullptr;
      expr = make(offset, Conditional{std::move(condition), std::move(expr), std::move(otherwise)});
      deeper();
    }
    return expr;
  }

  template <typename Operand>
  ExprPtr parse_binary_chain(Operand operand, std::initializer_list<std::pair<std::string_view, BinaryOp>> operators,
                             bool keyword_operators = false) {
    ExprPtr left = (this->*operand)();
    while (true) {
      const auto match = std::find_if(operators.begin(), operators.end(), [&](const auto& entry) {
        return keyword_operators ? at_name(entry.first) : at_operator(entry.first);
      });
      if (match == operators.end()) return left;
      const std::size_t offset = advance().offset;
      ExprPtr right = (this->*operand)();
      left = make(offset, Binary{match->second, std::move(left), std::move(right)});
      deeper();
    }
  }

  ExprPtr parse_or() { return parse_binary_chain(&Parser::parse_and, {{"or", BinaryOp::Or}}, true); }
  ExprPtr parse_and() { return parse_binary_chain(&Parser::parse_not, {{"and", BinaryOp::And}}, true); }

  ExprPtr parse_not() {
    if (!at_name("not")) return parse_compare();
    DepthGuard guard(*this);
    const std::size_t offset = advance().offset;
    return make(offset, Unary{UnaryOp::Not, parse_not()});
  }

  ExprPtr parse_compare() {
    static constexpr std::array<std::pair<std::string_view, CompareOp>, 6> kComparisons = {
        {{"==", CompareOp::Equal},
         {"!=", CompareOp::NotEqual},
         {"<", CompareOp::Less},
         {"<=", CompareOp::LessEqual},
         {">", CompareOp::Greater},
         {">=", CompareOp::GreaterEqual}}};
    const std::size_t offset = peek().offset;
    ExprPtr first = parse_math1();
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
    while (true) {
      CompareOp op;
      const auto comparison =
          std::find_if(kComparisons.begin(), kComparisons.end(), [&](const auto& c) { return at_operator(c.first); });
      if (comparison != kComparisons.end()) {
        op = comparison->second;
        advance();
      } else if (accept_name("in")) {
        op = CompareOp::In;
      } else if (at_name("not") && at_name("in", 1)) {
        advance();
        advance();
        op = CompareOp::NotIn;
      } else {
        break;
      }
      rest.emplace_back(op, parse_math1());
    }
    if (rest.empty()) return first;
    return make(offset, Compare{std::move(first), std::move(rest)});
  }

  // jinja2 binds ~ tighter than + and -.
  ExprPtr parse_math1() {
    return parse_binary_chain(&Parser::parse_concat, {{"+", BinaryOp::Add}, {"-", BinaryOp::Subtract}});
  }
  ExprPtr parse_concat() { return parse_binary_chain(&Parser::parse_math2, {{"~", BinaryOp::Concat}}); }
  ExprPtr parse_math2() {
    return parse_binary_chain(
        &Parser::parse_pow,
        {{"*", BinaryOp::Multiply}, {"/", BinaryOp::Divide}, {"//", BinaryOp::FloorDivide}, {"%", BinaryOp::Modulo}});
  }
  ExprPtr parse_pow() { return parse_binary_chain(&Parser::parse_filtered_unary, {{"**", BinaryOp::Power}}); }
  ExprPtr parse_filtered_unary() { return parse_unary(true); }

  // -x|abs is (-x)|abs, as in jinja2: the sign takes the operand before its filters.
  ExprPtr parse_unary(bool with_filters) {
    DepthGuard guard(*this);
    const std::size_t offset = peek().offset;
    ExprPtr node;
    if (accept_operator("-")) {
      node = make(offset, Unary{UnaryOp::Negate, parse_unary(false)});
    } else if (accept_operator("+")) {
      node = make(offset, Unary{UnaryOp::Plus, parse_unary(false)});
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (!with_filters) return node;
    return parse_filters_and_tests(std::move(node));
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    const std::size_t offset = token.offset;
    switch (token.kind) {
      case Kind::Name:
        advance();
        if (token.text == "true" || token.text == "True") return make(offset, Literal{Value::boolean(true)});
        if (token.text == "false" || token.text == "False") return make(offset, Literal{Value::boolean(false)});
        if (token.text == "none" || token.text == "None") return make(offset, Literal{Value::none()});
        return make(offset, Name{token.text});
      case Kind::String: {
        std::string value;
        while (peek().kind == Kind::String) value += advance().text;  // 'a' 'b' is 'ab'
        return make(offset, Literal{Value::string(std::move(value))});
      }
      case Kind::Integer: {
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        if (error != std::errc()) fail_here("integer literal too large");
        advance();
        return make(offset, Literal{Value::integer(value)});
      }
      case Kind::Float: {
        double value = 0;
        std::from_chars(token.text.data(), token.text.data() + token.text.size(), value);
        advance();
        return make(offset, Literal{Value::number(value)});
      }
      default:
        break;
    }
    if (accept_operator("(")) {
      if (accept_operator(")")) return make(offset, ListExpr{{}, true});
      ExprPtr expr = parse_tuple();
      expect_operator(")");
      return expr;
    }
    if (accept_operator("[")) {
      std::vector<ExprPtr> items;
      while (!accept_operator("]")) {
        items.push_back(parse_expression());
        if (!at_operator("]")) expect_operator(",");
      }
      return make(offset, ListExpr{std::move(items), false});
    }
    if (accept_operator("{")) {
      std::vector<std::pair<ExprPtr, ExprPtr>> entries;
      while (!accept_operator("}")) {
        ExprPtr key = parse_expression();
        expect_operator(":");
        entries.emplace_back(std::move(key), parse_expression());
        if (!at_operator("}")) expect_operator(",");
      }
      return make(offset, DictExpr{std::move(entries)});
    }
    unexpected();
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_operator(".") || at_operator("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
      deeper();
    }
  }

  ExprPtr parse_filters_and_tests(ExprPtr node) {
    while (true) {
      if (accept_operator("|")) {
        FilterCall filter = parse_filter_call();
        const std::size_t offset = filter.offset;  // errors point at the filter's name
        node = make(offset, Filter{std::move(node), std::move(filter)});
      } else if (at_name("is")) {
        node = parse_test(std::move(node));
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
      deeper();
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const std::size_t offset = advance().offset;
    if (tokens_[pos_ - 1].text == ".") {
      if (peek().kind == Kind::Name) return make(offset, GetAttr{std::move(object), advance().text});
      if (peek().kind == Kind::Integer) return make(offset, GetItem{std::move(object), parse_primary()});
      fail_here("expected an attribute name after '.', got " + describe(peek()));
    }
    std::array<ExprPtr, 3> bounds;
    bool is_slice = false;
    if (!at_operator(":")) bounds[0] = parse_expression();
    for (std::size_t i = 1; i < 3 && accept_operator(":"); ++i) {
      is_slice = true;
      if (!at_operator(":") && !at_operator("]")) bounds[i] = parse_expression();
    }
    expect_operator("]");
    if (is_slice) {
      return make(offset, Slice{std::move(object), std::move(bounds[0]), std::move(bounds[1]), std::move(bounds[2])});
    }
    if (!bounds[0]) fail_at(source_, offset, "empty subscript");
    return make(offset, GetItem{std::move(object), std::move(bounds[0])});
  }

  ExprPtr parse_call(ExprPtr callee) {
    const std::size_t offset = peek().offset;
    return make(offset, Call{std::move(callee), parse_call_arguments()});
  }

  std::vector<Argument> parse_call_arguments() {
    std::vector<Argument> args;
    expect_operator("(");
    bool seen_keyword = false;
    while (!accept_operator(")")) {
      if (at_operator("*") || at_operator("**")) fail_here("argument unpacking (*args, **kwargs) is not supported");
      if (peek().kind == Kind::Name && at_operator("=", 1)) {
        std::string name = advance().text;
        advance();
        args.push_back({std::move(name), parse_expression()});
        seen_keyword = true;
      } else {
        if (seen_keyword) fail_here("positional argument follows keyword argument");
        args.push_back({"", parse_expression()});
      }
      if (!at_operator(")")) expect_operator(",");
    }
    return args;
  }

  FilterCall parse_filter_call() {
    const std::size_t offset = peek().offset;
    std::string name = expect_name();
    if (!has_filter(name)) fail_at(source_, offset, fmt::format("no filter named '{}'", name));
    std::vector<Argument> args;
    if (at_operator("(")) args = parse_call_arguments();
    return {std::move(name), std::move(args), offset};
  }

  ExprPtr parse_test(ExprPtr operand) {
    const std::size_t offset = advance().offset;
    const bool negated = accept_name("not");
    const std::size_t name_offset = peek().offset;
    std::string name = expect_name();
    if (!has_test(name)) fail_at(source_, name_offset, fmt::format("no test named '{}'", name));
    std::vector<Argument> args;
    const Kind next = peek().kind;
    if (at_operator("(")) {
      args = parse_call_arguments();
    } else if ((next == Kind::Name || next == Kind::String || next == Kind::Integer || next == Kind::Float ||
                at_operator("[") || at_operator("{")) &&
               !at_name("else") && !at_name("or") && !at_name("and")) {
      // One argument without parentheses: `x is divisibleby 3`, `x is sameas none`.
      if (at_name("is")) fail_here("tests cannot be chained with 'is'");
      args.push_back({"", parse_postfix(parse_primary())});
    }
    return make(offset, Test{std::move(operand), std::move(name), std::move(args), negated});
  }

  std::string_view source_;
  std::vector<Token> tokens_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  std::vector<std::string_view> open_blocks_;  // the end tag each enclosing block waits for
};

}  // namespace

Body parse(std::string_view source) { return Parser(source).parse_template(); }

}  // namespace rf::jinja
