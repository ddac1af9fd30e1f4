// Errors: syntax errors and failed operations name their line and column, raise_exception
// passes its message through unchanged, and limits stop runaway templates. No template or
// input may crash the renderer or hang it.
#include <random>

#include "chat_test_support.h"

namespace rf::test {
namespace {

TEST(ChatErrors, SyntaxErrorsNameLineAndColumn) {
  EXPECT_EQ(render_error("Hello\n{% if x %}\nnever closed"),
            "chat template line 2, column 1: '{% if %}' is never closed (expected '{% endif %}')");
  EXPECT_EQ(render_error("{{ 1 + }}"), "chat template line 1, column 8: unexpected '}}'");
  EXPECT_EQ(render_error("é{{ 1 + }}"), "chat template line 1, column 9: unexpected '}}'");  // columns count characters
  EXPECT_EQ(render_error("a\n  {% foo %}"), "chat template line 2, column 3: unexpected tag 'foo'");
  EXPECT_EQ(render_error("{% endfor %}"), "chat template line 1, column 1: unexpected tag 'endfor'");
  EXPECT_EQ(render_error("{% include 'other.jinja' %}"),
            "chat template line 1, column 1: 'include' tags are not supported in chat templates");
  EXPECT_EQ(render_error("{{ x|nosuch }}"), "chat template line 1, column 6: no filter named 'nosuch'");
  EXPECT_EQ(render_error("{{ x is nosuch }}"), "chat template line 1, column 9: no test named 'nosuch'");
  EXPECT_EQ(render_error("{{ 'abc }}"), "chat template line 1, column 4: unterminated string");
  EXPECT_EQ(render_error("x {# never closed"), "chat template line 1, column 3: unterminated comment");
  EXPECT_EQ(render_error("{{ x "), "chat template line 1, column 1: unclosed expression: expected '}}'");
  EXPECT_EQ(render_error("{{ (1 ]] }}"), "chat template line 1, column 7: unexpected ']'");
  EXPECT_EQ(render_error("{% break %}"), "chat template line 1, column 1: 'break' outside of a loop");
  EXPECT_EQ(render_error("{{ f(a=1, 2) }}"), "chat template line 1, column 11: positional argument follows keyword argument");
  EXPECT_EQ(render_error("{{ 1 ? 2 }}"), "chat template line 1, column 6: unexpected character '?'");
  EXPECT_EQ(render_error("{% for x in y %}{% endif %}"), "chat template line 1, column 17: unexpected tag 'endif' (expected '{% endfor %}')");
}

TEST(ChatErrors, FailedOperationsNameLineAndColumn) {
  EXPECT_EQ(render_error("line\n{{ 'a' + 1 }}"), "chat template line 2, column 8: unsupported operand type(s) for +: 'str' and 'int'");
  EXPECT_EQ(render_error("{{ nothing() }}"), "chat template line 1, column 11: 'nothing' is undefined");
  EXPECT_EQ(render_error("{{ 'x'() }}"), "chat template line 1, column 7: 'str' object is not callable");
  EXPECT_EQ(render_error("{% set x = 1 %}{% set x.a = 2 %}"),
            "chat template line 1, column 16: cannot assign attribute on non-namespace object ('int')");
  EXPECT_EQ(render_error("{{ nothing|tojson }}"), "chat template line 1, column 12: Object of type Undefined is not JSON serializable");
  EXPECT_EQ(render_error("{{ 1 / 0 }}"), "chat template line 1, column 6: division by zero");
  EXPECT_EQ(render_error("{{ 'a'.startswith() }}"), "chat template line 1, column 18: startswith() missing required argument 'prefix'");
  EXPECT_EQ(render_error("{{ 'abc'|trim('a', 'b') }}"), "chat template line 1, column 10: trim() takes 1 positional argument(s) but 2 were given");
  EXPECT_EQ(render_error("{{ 'a'|tojson(width=2) }}"), "chat template line 1, column 8: tojson() got an unexpected keyword argument 'width'");
  EXPECT_EQ(render_error("{% for a, b in [[1, 2, 3]] %}{% endfor %}"), "chat template line 1, column 1: cannot unpack 3 values into 2 names");
  EXPECT_EQ(render_error("{{ 1 < 'a' }}"), "chat template line 1, column 4: cannot compare 'int' with 'str'");
  EXPECT_EQ(render_error("{{ none|length }}"), "chat template line 1, column 9: object of type 'NoneType' has no len()");
}

TEST(ChatErrors, RaiseExceptionPassesItsMessageThrough) {
  EXPECT_EQ(render_error("{{ raise_exception('Roles must ' ~ 'alternate') }}"), "Roles must alternate");
  EXPECT_EQ(render_error("{% macro check(m) %}{% if m != 'ok' %}{{ raise_exception('bad: ' + m) }}{% endif %}{% endmacro %}"
                         "{% for m in ['ok', 'no'] %}{{ check(m) }}{% endfor %}"),
            "bad: no");
}

// Each limit, reached quickly; the messages say which.
TEST(ChatErrors, LimitsStopRunawayTemplates) {
  const auto fails_with = [](const std::string& source, const std::string& fragment) {
    const std::string message = render_error(source);
    EXPECT_NE(message.find(fragment), std::string::npos) << source << "\n -> " << message;
  };
  fails_with("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "loop iterations and macro calls");
  fails_with("{% macro f(n) %}{% if n < 60 %}{{ f(n + 1) }}{{ f(n + 1) }}{% endif %}{% endmacro %}{{ f(0) }}",
             "loop iterations and macro calls");
  fails_with("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro calls nested more than 64 deep");
  fails_with("{{ range(1000000)|length }}", "range() of more than 100000 items");
  fails_with("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "text longer than");
  fails_with("{% set ns = namespace(s='x') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "text longer than");
  fails_with("{{ 'x' * 1000000000000 }}", "text longer than");
  fails_with("{{ ([1] * 1000000000)|length }}", "list longer than");
  fails_with("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}", "nested more than");
  fails_with("{{ 1" + [] { std::string terms; for (int i = 0; i < 1000; ++i) terms += " + 1"; return terms; }() + " }}", "nested more than");
  fails_with([] { std::string s; for (int i = 0; i < 1000; ++i) s += "{% if true %}"; return s; }(), "nested more than");
  fails_with("{% set ns = namespace() %}{% set ns.self = ns %}{{ ns }}", "nested more than");
}

TEST(ChatErrors, DeeplyNestedInputIsRefused) {
  std::string json = std::string(10000, '[') + std::string(10000, ']');
  const auto context = nlohmann::ordered_json{{"deep", nlohmann::ordered_json::parse(json)}};
  try {
    render_template("{{ deep }}", context);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("nested more than"), std::string::npos) << error.what();
  }
}

// Mangled real templates (characters deleted, duplicated or replaced at random) either render
// or throw rf::Error: never a crash, a hang or another exception type.
TEST(ChatErrors, MangledTemplatesFailCleanly) {
  const std::string sources[] = {read_repository_file("tests/fixtures/chat/qwen3.jinja"),
                                 read_repository_file("tests/fixtures/chat/llama3_1.jinja"),
                                 read_repository_file("tests/fixtures/chat/mistral_nemo.jinja")};
  const auto context = nlohmann::ordered_json::parse(R"({"messages": [{"role": "system", "content": "s"},
      {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}], "add_generation_prompt": true})");
  const std::string alphabet = "{}%#()[]|.,:'\"-+~ \nabcxyz019";
  std::mt19937 random(1234);
  int rendered = 0, failed = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string source = sources[i % 3];
    for (int edit = 0; edit < 1 + i % 4; ++edit) {
      const std::size_t at = random() % source.size();
      switch (random() % 3) {
        case 0: source.erase(at, 1 + random() % 8); break;
        case 1: source.insert(at, source.substr(random() % source.size(), 1 + random() % 16)); break;
        default: source[at] = alphabet[random() % alphabet.size()];
      }
    }
    try {
      render_template(source, context);
      ++rendered;
    } catch (const Error&) {
      ++failed;
    }
  }
  EXPECT_GT(rendered, 100);
  EXPECT_GT(failed, 100);
}

}  // namespace
}  // namespace rf::test
