#include "grammar/gbnf.h"

#include <gtest/gtest.h>

#include "grammar/matches.h"
#include "util/error.h"

namespace rf::grammar {
namespace {

struct Case {
  const char* text;
  bool in;
};

void expect_language(std::string_view gbnf, std::initializer_list<Case> cases) {
  const Grammar grammar = parse_gbnf(gbnf);
  for (const auto& c : cases) EXPECT_EQ(matches(grammar, c.text), c.in) << "text: '" << c.text << "' in\n" << gbnf;
}

std::string error_of(std::string_view gbnf) {
  return error_message([&] { parse_gbnf(gbnf); });
}

TEST(Gbnf, LiteralsAlternativesAndGroups) {
  expect_language(R"(root ::= "ab" ("c" | "de")  # a comment
)", {{"abc", true}, {"abde", true}, {"ab", false}, {"abd", false}, {"abcd", false}, {"", false}});
}

TEST(Gbnf, RepetitionOperators) {
  expect_language(R"(root ::= "a"* "b"+ "c"? "d"{2} "e"{1,2} "f"{2,})",
                  {{"bddeff", true}, {"aaabbbcddeeffff", true}, {"ddeff", false}, {"bdeff", false},
                   {"bddeeeff", false}, {"bddef", false}});
}

TEST(Gbnf, ClassesTakeUtf8) {
  expect_language(R"(root ::= [a-c0-9]+ [^a-z]  .)",
                  {{"a1Zé", true}, {"b€😀", true}, {"c\xC3", false}, {"az", false}, {"aé€", true}, {"a\xED\xA0\x80!", false}});
  expect_language(R"(root ::= [é-ë] "\u00e9" "\x41" "\n" [\]\-])", {{"êéA\n]", true}, {"êéA\n-", true}, {"eéA\n]", false}});
}

TEST(Gbnf, RulesSpanLinesAndReferEachOther) {
  expect_language(R"(
root  ::= value
value ::= object | array | "1"
object ::=
  "{" (
     pair
     ("," pair)*
  )? "}"
pair ::= "\"k\":" value
array ::= "[" (value ("," value)*)? "]"
)", {{"{}", true}, {R"({"k":1,"k":[1,{"k":[]}]})", true}, {"[1,]", false}, {R"({"k":})", false}});
}

TEST(Gbnf, MistakesNameTheirPlace) {
  EXPECT_NE(error_of("root ::= \"a\n").find("not closed"), std::string::npos) << error_of("root ::= \"a");
  EXPECT_NE(error_of("root ::= item").find("'item' is used but never defined"), std::string::npos);
  EXPECT_NE(error_of("main ::= \"a\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n  \"b\" \\q").find("line 2 column 7"), std::string::npos) << error_of("root ::= \"a\"\n  \"b\" \\q");
  EXPECT_NE(error_of("root ::= \"\\q\"").find("unknown escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("expected ')'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,2}").find("below its minimum"), std::string::npos);
  EXPECT_NE(error_of("").find("empty"), std::string::npos);
}

}  // namespace
}  // namespace rf::grammar
