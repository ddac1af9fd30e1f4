#pragma once
// Python's str operations over UTF-8, by code point as Python counts characters.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rf::jinja::text {

bool is_space(char32_t c);               // str.isspace(), which is also what \s and str.strip() use
std::size_t length(std::string_view s);  // in code points

enum class Side { Left, Right, Both };
// str.strip/lstrip/rstrip: whitespace, or any of the characters of `chars` when given.
std::string strip(std::string_view s, Side side, std::optional<std::string_view> chars = std::nullopt);
// str.split(sep, maxsplit); whitespace runs when sep is absent. maxsplit < 0: no limit.
std::vector<std::string> split(std::string_view s, std::optional<std::string_view> sep, long long maxsplit);
// str.replace(old, new, count); count < 0: all.
std::string replace(std::string_view s, std::string_view old_part, std::string_view new_part, long long count);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);  // first character upper, the rest lower
std::string title(std::string_view s);       // str.title(): each run of letters capitalized
// jinja2's title filter: words start after whitespace or one of -({[<
std::string title_words(std::string_view s);

}  // namespace rf::jinja::text
