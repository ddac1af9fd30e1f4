// Statements and whitespace control, with transformers' settings (trim_blocks and
// lstrip_blocks on). Every case's output is the one Python jinja2 gives for the same template.
#include "chat_test_support.h"

namespace rf::test {
namespace {

const TemplateCase kWhitespace[] = {
    // A block tag alone on its line vanishes with its indentation and newline.
    {"<ul>\n  {% for x in [1, 2] %}\n    <li>{{ x }}</li>\n  {% endfor %}\n</ul>", "<ul>\n    <li>1</li>\n    <li>2</li>\n</ul>"},
    // `-` strips all whitespace on its side, newlines included.
    {"a  {%- if true %} b {% endif -%}  c", "a b c"},
    {"x\n\n  {{- 'y' -}}  \n\nz", "xyz"},
    // `+` keeps what lstrip_blocks and trim_blocks would remove.
    {"  {%+ if true %}kept{% endif +%}\nnext", "  kept\nnext"},
    // Comments print nothing and take the same whitespace control.
    {"{# comment #}\nline {#- trimmed -#}   end\n  {# indented comment #}\nx", "lineend\nx"},
    // lstrip_blocks leaves expressions alone, and text before a tag on the same line.
    {"{{ 'a' }}  {% if true %}inline{% endif %}\n{{- ' b' }}", "a  inline b"},
    // One trailing newline of the template is dropped; CRLF counts as a newline.
    {"text\n", "text"},
    {"{% if true %}\r\n  a\r\n{% endif %}\r\n", "  a\n"},
};

const TemplateCase kControlFlow[] = {
    {"{% if 0 %}a{% elif '' %}b{% elif [1] %}c{% else %}d{% endif %}", "c"},
    {"{% if none %}a{% else %}b{% endif %}{% if true %}{% if false %}x{% endif %}y{% endif %}", "by"},
    // Loop variables.
    {"{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}"
     "{{ loop.first }}{{ loop.last }}{{ loop.length }} {% endfor %}",
     "1032TrueFalse3 2121FalseFalse3 3210FalseTrue3 "},
    {"{% for x in [1, 2, 3] %}{{ loop.previtem }}-{{ loop.nextitem }},{% endfor %}", "-2,1-3,2-,"},
    // else runs when nothing was iterated; a loop filter changes what loop counts.
    {"{% for x in [] %}x{% else %}empty{% endfor %}|{% for x in [1, 2, 3, 4] if x is even %}{{ x }}/{{ loop.length }} {% endfor %}",
     "empty|2/2 4/2 "},
    // Dicts iterate over keys; items() gives pairs to unpack.
    {"{% set d = {'b': 1, 'a': 2} %}{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}"
     "{% for k, v in d|items %}{{ k }}{% endfor %}|{% for k, v in d|dictsort %}{{ k }}{% endfor %}",
     "ba|b=1;a=2;ba|ab"},
    {"{% for x in [1, 2, 3, 4, 5] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
     "13"},
    {"{% for row in [[1, 2], [3]] %}{% for x in row %}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", "121;12;"},
    // Each loop iteration has its own scope; if blocks do not.
    {"{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}", "21"},
    {"{% if true %}{% set y = 'set' %}{% endif %}{{ y }}", "set"},
    {"{% for i in [1, 2] %}{% if loop.first %}{% set seen = 'first' %}{% endif %}{{ seen }},{% endfor %}", "first,,"},
    // A namespace carries values out of loops.
    {"{% set ns = namespace(total=0, names='') %}{% for x in [1, 2, 3] %}{% set ns.total = ns.total + x %}{% endfor %}{{ ns.total }}",
     "6"},
    {"{% set ns = namespace() %}{% set ns.found = false %}{% for m in ['a', 'b'] %}{% if m == 'b' %}{% set ns.found = true %}"
     "{% endif %}{% endfor %}{{ ns.found }}|{{ namespace({'a': 1}, b=2).b }}",
     "True|2"},
    // Block set captures rendered text.
    {"{% set greeting %}Hello {{ 'world' }}{% endset %}[{{ greeting }}]", "[Hello world]"},
    // Macros: arguments by position or name, defaults, recursion, call blocks.
    {"{% macro tag(name, value='-') %}<{{ name }}={{ value }}>{% endmacro %}{{ tag('a') }}{{ tag('b', 2) }}{{ tag(value=3, name='c') }}",
     "<a=-><b=2><c=3>"},
    {"{% macro count(n) %}{{ n }}{% if n > 0 %}{{ count(n - 1) }}{% endif %}{% endmacro %}{{ count(3) }}", "3210"},
    {"{% macro box(title) %}[{{ title }}: {{ caller() }}]{% endmacro %}{% call box('note') %}inside{% endcall %}", "[note: inside]"},
    {"{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}",
     "<1><2>"},
    {"{% filter upper %}shout {{ 'this' }}{% endfilter %}|{% filter replace('a', 'o') | title %}banana{% endfilter %}",
     "SHOUT THIS|Bonono"},
    // range() as Python's.
    {"{% for i in range(3) %}{{ i }}{% endfor %}|{% for i in range(5, 1, -2) %}{{ i }}{% endfor %}|{{ range(2, 4)|list }}",
     "012|53|[2, 3]"},
};

TEST(ChatStatements, WhitespaceControlAsInTransformers) {
  for (const TemplateCase& c : kWhitespace) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

TEST(ChatStatements, ControlFlowAsInJinja2) {
  for (const TemplateCase& c : kControlFlow) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

// transformers' {% generation %} marks the assistant's text for masks; it renders as its body.
TEST(ChatStatements, GenerationBlocksRenderTheirBody) {
  EXPECT_EQ(render_template("a {%- generation -%} b {%- endgeneration -%} c"), "abc");
  EXPECT_EQ(render_template("{% for m in ['x', 'y'] %}{% generation %}{{ m }}{% endgeneration %}{% endfor %}"), "xy");
}

}  // namespace
}  // namespace rf::test
