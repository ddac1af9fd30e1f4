// Expressions as jinja2 evaluates them: literals, operators and precedence, member access,
// slicing, and values printed the way Python prints them. Every case's output is the one
// Python jinja2 (with transformers' settings) gives for the same template.
#include "chat_test_support.h"

namespace rf::test {
namespace {

const TemplateCase kExpressions[] = {
    // Literals and how values print (Python's str and repr).
    {R"J({{ 'a' "b" }}|{{ 42 }}|{{ 1.5 }}|{{ 2.0 }}|{{ true }}|{{ False }}|{{ none }}|{{ None }})J",
     R"J(ab|42|1.5|2.0|True|False|None|None)J"},
    {R"J({{ [1, 'x'] }}|{{ (1,) }}|{{ () }}|{{ {'a': [1, none, true]} }}|{{ [('a', 1)] }})J",
     R"J([1, 'x']|(1,)|()|{'a': [1, None, True]}|[('a', 1)])J"},
    {R"J({{ 1e20 }}|{{ 0.00001 }}|{{ 0.0001 }}|{{ 1/3 }}|{{ 1e16 }}|{{ 123456789012345.0 }}|{{ -0.5 }})J",
     R"J(1e+20|1e-05|0.0001|0.3333333333333333|1e+16|123456789012345.0|-0.5)J"},
    {R"J({{ ["it's", 'say "x"', 'both \' "', 'tab\tnew\nline'] }})J",
     R"J(["it's", 'say "x"', 'both \' "', 'tab\tnew\nline'])J"},
    {R"J({{ '\x41\u00e9\101\q\\n' }}|{{ 'tab\t'|length }})J", R"J(AéA\q\n|4)J"},
    // Arithmetic, Python style.
    {R"J({{ 1 + 2 * 3 - 4 }}|{{ 7 / 2 }}|{{ -3 // 2 }}|{{ -7 % 3 }}|{{ 7 % -3 }}|{{ 10 // 2.5 }}|{{ 2 * -3 }})J",
     R"J(3|3.5|-2|2|-2|4.0|-6)J"},
    {R"J({{ 2 ** 3 ** 2 }}|{{ -2 ** 2 }}|{{ 2 ** -1 }}|{{ 1 + true }}|{{ 0.5 + 1 }})J", R"J(64|4|0.5|2|1.5)J"},
    {R"J({{ 'ab' * 3 }}|{{ 2 * 'x' }}|{{ 'x' * 0 }}|{{ [1] * 2 + [3] }}|{{ 'a' + 'b' }})J", R"J(ababab|xx||[1, 1, 3]|ab)J"},
    // ~ joins anything as text, and binds tighter than + and -.
    {R"J({{ 1 ~ 2 }}|{{ (1 + 2) ~ 'x' }}|{{ 'a' ~ none ~ true }}|{{ 'n=' ~ 1.0 }}|{{ 'x' ~ undefined_name ~ 'y' }})J",
     R"J(12|3x|aNoneTrue|n=1.0|xy)J"},
    // Comparisons (chained as in Python), membership, logic returning operands.
    {R"J({{ 1 < 2 < 3 }}|{{ 3 > 2 > 5 }}|{{ not 1 == 2 }}|{{ 1 == 1.0 }}|{{ 'a' < 'b' }}|{{ [1, 2] < [1, 3] }}|{{ 1 == true }})J",
     R"J(True|False|True|True|True|True|True)J"},
    {R"J({{ 'b' in 'abc' }}|{{ 2 not in [1, 3] }}|{{ 'k' in {'k': 1} }}|{{ {'a': [1]} == {'a': [1]} }}|{{ x in undefined_name }})J",
     R"J(True|True|True|True|False)J"},
    {R"J({{ 0 or 'd' }}|{{ 'a' and 'b' }}|{{ [] or none }}|{{ '' and 1 }}|{{ not [] }}|{{ not not 'x' }})J",
     R"J(d|b|None||True|True)J"},
    // Inline if, with and without else; filters bind tighter than the sign.
    {R"J({{ 'x' if false }}|{{ 'y' if 0 else 'z' }}|{{ 'a' if 1 else 'b' if 2 else 'c' }}|{{ -3|abs }}|{{ -(3|abs) }})J",
     R"J(|z|a|3|-3)J"},
    // Subscripts and slices count characters, not bytes.
    {R"J({% set s = 'héllo wörld' %}{{ s[1] }}|{{ s[-1] }}|{{ s[1:4] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ s|length }})J",
     R"J(é|d|éll|dlröw olléh|hlowrd|11)J"},
    {R"J({% set l = [1, 2, 3, 4] %}{{ l[1:] }}|{{ l[:-1] }}|{{ l[10:] }}|{{ l[-2:] }}|{{ l[::-2] }}|{{ l[5] }}|{{ l[-1] }}|{{ l.0 }})J",
     R"J([2, 3, 4]|[1, 2, 3]|[]|[3, 4]|[4, 2]||4|1)J"},
    // `.name` finds dict methods first, `['name']` the key first.
    {R"J({% set d = {'items': 'key', 'b': 2} %}{{ d.items()|list }}|{{ d['items'] }}|{{ d.b }}|{{ d['b'] }}|{{ d.zz }})J",
     R"J([('items', 'key'), ('b', 2)]|key|2|2|)J"},
    // Undefined names print nothing, are false, and iterate as empty.
    {R"J({{ undefined_name }}|{{ undefined_name is defined }}|{{ not undefined_name }}|{{ undefined_name|length }}|{{ none.x }})J",
     R"J(|False|True|0|)J"},
    // Tuples, lists and dicts built in the template.
    {R"J({% set a, b = 1, 'two' %}{{ b }}{{ a }}|{{ {'k': 'v', 'n': [1, 2]}.n[1] }}|{{ (1, 2) + (3,) }})J",
     R"J(two1|2|(1, 2, 3))J"},
};

TEST(ChatExpressions, BehaveAsInJinja2) {
  for (const TemplateCase& c : kExpressions) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

// Where jinja2 would raise UndefinedError, an undefined value's attributes are undefined too:
// a template probing `message.content.content is defined` should not fail on a string content.
TEST(ChatExpressions, AttributesOfUndefinedAreUndefined) {
  EXPECT_EQ(render_template("{{ nothing.attribute.deeper }}|{{ nothing.attribute is defined }}"), "|False");
}

TEST(ChatExpressions, ContextValuesKeepTheirTypesAndOrder) {
  const auto context = nlohmann::ordered_json::parse(R"({"n": 3, "f": 0.25, "ok": true, "nothing": null, "d": {"z": 1, "a": 2}})");
  EXPECT_EQ(render_template("{{ n + 1 }}|{{ f * 2 }}|{{ ok }}|{{ nothing }}|{{ nothing is none }}|{{ d }}", context),
            "4|0.5|True|None|True|{'z': 1, 'a': 2}");
}

// Python's integers have no bound; here they are 64-bit, and larger JSON integers become floats.
TEST(ChatExpressions, IntegersBeyond64BitsBecomeFloats) {
  EXPECT_EQ(render_template("{{ big }}", nlohmann::ordered_json::parse(R"({"big": 18446744073709551615})")),
            "1.8446744073709552e+19");
  EXPECT_NE(render_error("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
}

}  // namespace
}  // namespace rf::test
