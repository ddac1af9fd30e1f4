// Filters, tests (`is ...`) and the Python methods templates call. Every case's output is the one
// Python jinja2 with transformers' tojson gives for the same template.
#include "chat_test_support.h"

namespace rf::test {
namespace {

const TemplateCase kFilters[] = {
    // Text.
    {R"J([{{ '  a b \n'|trim }}]|[{{ 'xxaxx'|trim('x') }}]|{{ 'hello world'|upper }}|{{ 'MiXed'|lower }})J", R"J([a b]|[a]|HELLO WORLD|mixed)J"},
    {R"J({{ 'hello big-world (x)'|title }}|{{ 'hELLO wORLD'|capitalize }}|{{ 'a-b-c'|replace('-', '+') }}|{{ 'aaa'|replace('a', 'b', 2) }})J",
     R"J(Hello Big-World (X)|Hello world|a+b+c|bba)J"},
    {R"J({{ 'ÉCOLE'|lower }}|{{ 'naïve'|upper }}|{{ 'grüße'|length }}|{{ 42|string ~ 'x' }}|{{ [1, 'a']|string }})J",
     R"J(école|NAÏVE|5|42x|[1, 'a'])J"},
    {R"J({{ 'line1\nline2\n\nline4'|indent(2) }}|{{ 'a\nb'|indent(first=true) }}|{{ 'a\n\nb'|indent(1, blank=true) }})J",
     "line1\n  line2\n\n  line4|    a\n    b|a\n \n b"},
    // Sequences.
    {R"J({{ [3, 1, 2]|length }}|{{ {'a': 1}|count }}|{{ [3, 1, 2]|first }}|{{ [3, 1, 2]|last }}|{{ 'abc'|first }}|{{ []|first }})J",
     R"J(3|1|3|2|a|)J"},
    {R"J({{ [1, 2, 3]|join(', ') }}|{{ 'abc'|join('-') }}|{{ [{'n': 'x'}, {'n': 'y'}]|join('/', attribute='n') }}|{{ 'ab'|list }}|{{ [1, 2]|reverse|list }})J",
     R"J(1, 2, 3|a-b-c|x/y|['a', 'b']|[2, 1])J"},
    {R"J({{ ['b', 'C', 'a']|sort }}|{{ ['b', 'C', 'a']|sort(case_sensitive=true) }}|{{ [3, 1, 2]|sort(reverse=true) }}|{{ [{'k': 2}, {'k': 1}]|sort(attribute='k')|map(attribute='k')|list }})J",
     R"J(['a', 'b', 'C']|['C', 'a', 'b']|[3, 2, 1]|[1, 2])J"},
    {R"J({{ {'b': 1, 'a': 2}|dictsort }}|{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}|{{ {'x': 1}|items|list }})J",
     R"J([('a', 2), ('b', 1)]|[('a', 2), ('b', 1)]|[('x', 1)])J"},
    // Picking and mapping.
    {R"J({% set ms = [{'role': 'user', 'n': 1}, {'role': 'tool'}, {'role': 'user', 'n': 3}] %}{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='n')|list }}|{{ ms|rejectattr('role', 'eq', 'user')|list|length }}|{{ ms|selectattr('n')|list|length }}|{{ ms|map(attribute='n', default=0)|list }})J",
     R"J([1, 3]|1|2|[1, 0, 3])J"},
    {R"J({{ [1, 2, 3, 4]|select('odd')|list }}|{{ [1, 2, 3, 4]|reject('divisibleby', 2)|list }}|{{ [0, 1, '', 'a']|select|list }}|{{ ['a', 'B']|map('upper')|list }}|{{ ['ab']|map('replace', 'a', 'x')|join }})J",
     R"J([1, 3]|[1, 3]|[1, 'a']|['A', 'B']|xb)J"},
    // Numbers.
    {R"J({{ '42'|int + 1 }}|{{ '4.7'|int }}|{{ 'x'|int }}|{{ 'x'|int(-1) }}|{{ 3.9|int }}|{{ -3.9|int }}|{{ true|int }}|{{ '1.5'|float }}|{{ 'x'|float }}|{{ 2|float }})J",
     R"J(43|4|0|-1|3|-3|1|1.5|0.0|2.0)J"},
    {R"J({{ 2.5|round }}|{{ 3.5|round }}|{{ 2.675|round(1) }}|{{ 2.1|round(0, 'ceil') }}|{{ 2.9|round(method='floor') }}|{{ 7|round }}|{{ -4|abs }}|{{ -1.5|abs }})J",
     R"J(2.0|4.0|2.7|3.0|2.0|7|4|1.5)J"},
    // default applies to undefined (and with boolean=true to anything false).
    {R"J({{ missing|default('x') }}|{{ ''|default('x') }}|{{ ''|default('x', true) }}|{{ none|d('y', boolean=true) }}|{{ 0|default(5) }})J",
     R"J(x||x|y|0)J"},
    // tojson as transformers defines it: json.dumps, non-ASCII kept unless ensure_ascii.
    {R"J({{ {'a': [1, 'x', none, true, 2.5], 'é': {}}|tojson }}|{{ 'q"\\/\n\t'|tojson }}|{{ 'é🙂'|tojson(ensure_ascii=true) }})J",
     R"J({"a": [1, "x", null, true, 2.5], "é": {}}|"q\"\\/\n\t"|"\u00e9\ud83d\ude42")J"},
    {R"J({{ {'b': 1, 'a': [1, 2], 'c': {}, 'd': []}|tojson(indent=2) }})J",
     "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    2\n  ],\n  \"c\": {},\n  \"d\": []\n}"},
    {R"J({{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}|{{ [1]|tojson(indent='\t') }}|{{ (1, 2)|tojson }}|{{ "\x01"|tojson }})J",
     "{\"a\":2,\"b\":1}|[\n\t1\n]|[1, 2]|\"\\u0001\""},
};

const TemplateCase kTests[] = {
    {R"J({{ 1 is defined }}{{ x is defined }}{{ x is undefined }}{{ none is none }}{{ 0 is none }}{{ none is not none }})J",
     R"J(TrueFalseTrueTrueFalseFalse)J"},
    {R"J({{ 'a' is string }}{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is boolean }}{{ true is number }})J",
     R"J(TrueTrueTrueTrueFalseTrueTrue)J"},
    {R"J({{ {} is mapping }}{{ [] is mapping }}{{ [] is iterable }}{{ 'a' is iterable }}{{ {} is iterable }}{{ 1 is iterable }}{{ [] is sequence }})J",
     R"J(TrueFalseTrueTrueTrueFalseTrue)J"},
    {R"J({{ 3 is odd }}{{ 3 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(2) }}{{ 1 is eq 1 }}{{ 2 is gt(1) }}{{ 2 is in [1, 2] }}{{ 'ab' is lower }}{{ 'AB' is upper }})J",
     R"J(TrueFalseTrueFalseTrueTrueTrueTrueTrue)J"},
    {R"J({{ true is true }}{{ 1 is true }}{{ false is false }}{{ range is callable }}{{ none is sameas none }}{{ 'x' is not string }})J",
     R"J(TrueFalseTrueTrueTrueFalse)J"},
};

const TemplateCase kMethods[] = {
    {R"J([{{ '\n x \n'.strip() }}]|[{{ '\n\nx\n'.strip('\n') }}]|[{{ '  x '.lstrip() }}]|[{{ 'x\n\n'.rstrip('\n') }}]|[{{ 'abcxa'.strip('ab') }}])J",
     R"J([x]|[x]|[x ]|[x]|[cx])J"},
    {R"J({{ 'a</think>b</think>c'.split('</think>') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a b  c'.split(none, 1) }}|{{ 'x'.split('x') }})J",
     R"J(['a', 'b', 'c']|['a', 'b']|['a', 'b,c']|['a', 'b  c']|['', ''])J"},
    {R"J({{ '<tool>x'.startswith('<tool>') }}{{ 'abc'.endswith('bc') }}{{ 'abc'.startswith(('x', 'a')) }}{{ 'abc'.endswith('abcd') }})J",
     R"J(TrueTrueTrueFalse)J"},
    {R"J({{ 'aXbX'.replace('X', '-') }}|{{ 'aaa'.replace('a', 'b', 1) }}|{{ 'ab'.replace('', '.') }}|{{ 'héllo'.find('l') }}|{{ 'x'.find('y') }}|{{ '-'.join(['a', 'b']) }})J",
     R"J(a-b-|baa|.a.b.|2|-1|a-b)J"},
    {R"J({{ 'hello wORLD'.title() }}|{{ "they're".title() }}|{{ 'hELLO'.capitalize() }}|{{ 'Ab'.upper() }}{{ 'Ab'.lower() }})J",
     R"J(Hello World|They'Re|Hello|ABab)J"},
    {R"J({% set d = {'a': 1, 'b': none} %}{{ d.get('a') }}|{{ d.get('b', 2) }}|{{ d.get('c') }}|{{ d.get('c', 'dflt') }}|{{ d.keys()|list }}|{{ d.values()|list }}|{{ d.items()|list }})J",
     R"J(1|None|None|dflt|['a', 'b']|[1, None]|[('a', 1), ('b', None)])J"},
};

TEST(ChatFilters, BehaveAsInJinja2) {
  for (const TemplateCase& c : kFilters) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

TEST(ChatFilters, TestsBehaveAsInJinja2) {
  for (const TemplateCase& c : kTests) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

TEST(ChatFilters, StringAndDictMethodsBehaveAsInPython) {
  for (const TemplateCase& c : kMethods) EXPECT_EQ(render_template(c.source), c.expected) << c.source;
}

}  // namespace
}  // namespace rf::test
