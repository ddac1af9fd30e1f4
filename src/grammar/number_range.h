#pragma once
// GBNF for the decimal numbers within bounds, for JSON schemas' minimum and maximum: integers
// spelled out range by range (no leading zeros, no "-0"), and numbers with a fraction compared
// digit by digit against the bounds' own decimal digits, so that a bound like 0.1 holds exactly
// rather than as the double nearest it.
#include <optional>
#include <string>
#include <string_view>

namespace rf::grammar {

// A number as its decimal digits: `integral` without leading zeros ("0" for none), `fraction`
// without trailing zeros.
struct Decimal {
  bool negative = false;
  std::string integral = "0";
  std::string fraction;
};

// -1, 0 or 1 as a is below, equal to or above b.
int compare(const Decimal& a, const Decimal& b);

// Reads JSON's number syntax (with an exponent or not); throws rf::Error on anything else.
Decimal parse_decimal(std::string_view text);

struct NumberBound {
  Decimal value;
  bool exclusive = false;
};

// The longest integral part the grammars write: 16 digits, as a double holds exactly.
inline constexpr int kMaxIntegralDigits = 16;

// Alternatives (GBNF, joined by " | ") for the integers from `low` to `high`, either unbounded
// within 16 digits; nullopt when none lies between them.
std::optional<std::string> integer_range(std::optional<long long> low, std::optional<long long> high);

// The same for numbers with an optional fraction of at most 16 digits and no exponent.
// Bounds are refused (rf::Error) past 16 integral or fractional digits.
std::optional<std::string> number_range(const std::optional<NumberBound>& low, const std::optional<NumberBound>& high);

}  // namespace rf::grammar
