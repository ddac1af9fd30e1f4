#pragma once
// JSON Schema's `pattern` keyword as GBNF: the bytes of a JSON string literal's inside whose
// decoded value an ECMAScript regular expression finds a match in.
#include <string>
#include <string_view>

namespace rf::grammar {

// A GBNF expression (parenthesized, no rule references, no trailing whitespace) for the bytes
// between a JSON string's quotes whose decoded value matches the ECMAScript regular expression
// `pattern` as JSON Schema's `pattern` keyword means it: a search, anchored only where the
// pattern says ^ or $. Throws rf::Error naming what is not supported (back-references,
// look-around, ...).
//
// The expression may refuse some matching strings, never accepts a non-matching one: it writes
// each character one way (\" \\ \n \r \t, \b or \u0008 and \f or \u000C, \u00XX for other
// controls and DEL, everything else as its UTF-8 bytes); `.` and negated classes take no
// character beyond U+FFFF (one code point here, two UTF-16 units to ECMAScript); and \s takes
// only ASCII whitespace, since engines differ on the other spaces (\S excludes all of them).
std::string json_pattern_expression(std::string_view pattern);

}  // namespace rf::grammar
