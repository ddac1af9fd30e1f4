#include "grammar/number_range.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <vector>

#include "util/error.h"

namespace rf::grammar {

namespace {

// GBNF for the decimal digits of the numbers of equal length from `low` to `high` (as strings).
void same_length_digits(const std::string& low, const std::string& high, const std::string& prefix,
                        std::vector<std::string>& out) {
  const std::size_t n = low.size();
  if (n == 0) {
    out.push_back(prefix.empty() ? "\"\"" : prefix);
    return;
  }
  auto with = [&](const std::string& piece) { return prefix.empty() ? piece : prefix + " " + piece; };
  const std::string rest_low = low.substr(1), rest_high = high.substr(1);
  if (low[0] == high[0]) return same_length_digits(rest_low, rest_high, with(fmt::format("\"{}\"", low[0])), out);
  const std::string nines(n - 1, '9'), zeros(n - 1, '0');
  auto digits = [](char a, char b) { return a == b ? fmt::format("\"{}\"", a) : fmt::format("[{}-{}]", a, b); };
  auto any = [&](std::size_t k) { return k == 0 ? std::string() : fmt::format(" [0-9]{{{}}}", k); };
  // The first digit's low end with what may follow it, the digits between with anything, the high end.
  char first = low[0], last = high[0];
  if (rest_low != zeros) {
    same_length_digits(rest_low, nines, with(fmt::format("\"{}\"", low[0])), out);
    ++first;
  }
  if (rest_high != nines) --last;
  if (first <= last) out.push_back(with(digits(first, last) + any(n - 1)));
  if (rest_high != nines) same_length_digits(zeros, rest_high, with(fmt::format("\"{}\"", high[0])), out);
}

// GBNF alternatives for the decimal integers from `low` to `high` (0 <= low <= high), no leading zeros.
std::vector<std::string> digit_ranges(long long low, long long high) {
  std::vector<std::string> out;
  // By length: 0-9, 10-99, 100-999, ...
  for (long long shortest = 0, longest = 9;; shortest = longest + 1, longest = longest * 10 + 9) {
    const long long a = std::max(low, shortest), b = std::min(high, longest);
    if (a <= b) same_length_digits(std::to_string(a), std::to_string(b), "", out);
    if (longest >= high) break;
  }
  return out;
}

constexpr long long kMostIntegral = 9'999'999'999'999'999;  // kMaxIntegralDigits nines

// The digit strings D after a decimal point with lo <= 0.D <= hi: whether D may be empty (no
// fraction written), and GBNF alternatives for the non-empty ones.
struct FractionDigits {
  bool empty_ok = false;
  std::vector<std::string> alternatives;

  bool none() const { return !empty_ok && alternatives.empty(); }
  // GBNF for D following what came before: optional when it may be empty.
  std::string suffix() const {
    if (alternatives.empty()) return "";
    return fmt::format(" ({}){}", fmt::join(alternatives, " | "), empty_ok ? "?" : "");
  }
};

const FractionDigits kAnyFraction{true, {"[0-9]{1,16}"}};

// `lo` and `hi` are a bound's remaining fraction digits (no trailing zeros); nullopt: that side is
// already decided. Each step takes one digit, so the bounds' own digits are compared exactly.
FractionDigits fraction_digits(std::optional<std::string> lo, bool lo_strict, std::optional<std::string> hi,
                               bool hi_strict) {
  if (lo && lo->empty() && !lo_strict) lo.reset();  // 0.D >= 0 always holds
  if (hi && hi->empty()) {                          // 0.D <= 0: only zeros
    if (hi_strict || lo) return {};
    return {true, {"\"0\"{1,16}"}};
  }
  if (!lo && !hi) return kAnyFraction;
  if (lo && lo->empty() && !hi) return {false, {"\"0\"{0,15} [1-9] [0-9]{0,15}"}};  // 0.D > 0
  FractionDigits out;
  out.empty_ok = !lo;
  const int lo_digit = lo && !lo->empty() ? (*lo)[0] - '0' : 0;
  const int hi_digit = hi ? (*hi)[0] - '0' : 9;
  auto tail = [](const std::string& s) { return s.empty() ? s : s.substr(1); };
  for (int d = lo_digit; d <= hi_digit; ++d) {
    const bool at_lo = lo && d == lo_digit, at_hi = hi && d == hi_digit;
    if (!at_lo && !at_hi) continue;
    const FractionDigits rest = fraction_digits(at_lo ? std::optional(tail(*lo)) : std::nullopt, lo_strict,
                                                at_hi ? std::optional(tail(*hi)) : std::nullopt, hi_strict);
    if (!rest.none()) out.alternatives.push_back(fmt::format("\"{}\"{}", d, rest.suffix()));
  }
  const int first_free = lo ? lo_digit + 1 : lo_digit, last_free = hi ? hi_digit - 1 : hi_digit;
  if (first_free <= last_free) {
    out.alternatives.push_back(fmt::format("[{}-{}] [0-9]{{0,15}}", first_free, last_free));
  }
  return out;
}

// Magnitudes m with lo <= m (<= hi), written after `sign`, added to `out`.
void magnitudes(const NumberBound& lo, const std::optional<NumberBound>& hi, const std::string& sign,
                std::vector<std::string>& out) {
  auto add = [&](const std::string& integral, const FractionDigits& fraction) {
    if (fraction.empty_ok) out.push_back(sign + integral);
    if (!fraction.alternatives.empty()) out.push_back(fmt::format("{}{} \".\" ({})", sign, integral, fmt::join(fraction.alternatives, " | ")));
  };
  auto literal = [](const std::string& digits) { return fmt::format("\"{}\"", digits); };
  const long long low = std::stoll(lo.value.integral);
  const long long high = hi ? std::stoll(hi->value.integral) : kMostIntegral;
  if (low > high) return;
  const std::string& lo_fraction = lo.value.fraction;
  if (hi && low == high) {
    add(literal(lo.value.integral), fraction_digits(lo_fraction, lo.exclusive, hi->value.fraction, hi->exclusive));
    return;
  }
  add(literal(lo.value.integral), fraction_digits(lo_fraction, lo.exclusive, std::nullopt, false));
  if (low + 1 <= high - (hi ? 1 : 0)) {
    add(fmt::format("({})", fmt::join(digit_ranges(low + 1, high - (hi ? 1 : 0)), " | ")), kAnyFraction);
  }
  if (hi) add(literal(hi->value.integral), fraction_digits(std::nullopt, false, hi->value.fraction, hi->exclusive));
}

NumberBound magnitude_of(const NumberBound& bound) {
  NumberBound m = bound;
  m.value.negative = false;
  return m;
}

void check_digits(const std::optional<NumberBound>& bound) {
  if (!bound) return;
  if (bound->value.integral.size() > kMaxIntegralDigits || bound->value.fraction.size() > 16) {
    fail("a bound must have at most 16 digits before and after the decimal point");
  }
}

}  // namespace

int compare(const Decimal& a, const Decimal& b) {
  if (a.negative != b.negative) return a.negative ? -1 : 1;
  const int sign = a.negative ? -1 : 1;
  if (a.integral.size() != b.integral.size()) return a.integral.size() < b.integral.size() ? -sign : sign;
  if (const int c = a.integral.compare(b.integral)) return c < 0 ? -sign : sign;
  if (const int c = a.fraction.compare(b.fraction)) return c < 0 ? -sign : sign;
  return 0;
}

Decimal parse_decimal(std::string_view text) {
  std::size_t i = 0;
  auto digits = [&] {
    const std::size_t from = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    return std::string(text.substr(from, i - from));
  };
  Decimal d;
  d.negative = i < text.size() && text[i] == '-';
  if (d.negative) ++i;
  std::string all = digits();
  std::size_t point = all.size();
  if (all.empty()) fail("'{}' is not a number", text);
  if (i < text.size() && text[i] == '.') {
    ++i;
    all += digits();
  }
  long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    const bool down = i < text.size() && text[i] == '-';
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) ++i;
    const std::string e = digits();
    if (e.empty() || e.size() > 3) fail("'{}' is not a number within the grammars' range", text);
    exponent = (down ? -1 : 1) * std::stol(e);
  }
  if (i != text.size()) fail("'{}' is not a number", text);
  const long shifted = static_cast<long>(point) + exponent;
  if (shifted <= 0) {
    all.insert(0, static_cast<std::size_t>(-shifted), '0');
    point = 0;
  } else {
    if (static_cast<std::size_t>(shifted) > all.size()) all.append(shifted - all.size(), '0');
    point = static_cast<std::size_t>(shifted);
  }
  const std::size_t first = std::min(all.find_first_not_of('0'), point);
  d.integral = first == point ? std::string(1, '0') : all.substr(first, point - first);
  d.fraction = all.substr(point);
  d.fraction.erase(d.fraction.find_last_not_of('0') + 1);
  if (d.integral == "0" && d.fraction.empty()) d.negative = false;
  return d;
}

std::optional<std::string> integer_range(std::optional<long long> low, std::optional<long long> high) {
  if (low && high && *low > *high) return std::nullopt;
  std::vector<std::string> choices;
  if (!low || *low < 0) {  // the negative part: "-" and a magnitude from max(1, -high) to -low
    const long long from = high && *high < 0 ? -*high : 1;
    for (auto& c : digit_ranges(from, low ? -*low : kMostIntegral)) choices.push_back("\"-\" " + c);
  }
  if (!high || *high >= 0) {
    for (auto& c : digit_ranges(low && *low > 0 ? *low : 0, high ? *high : kMostIntegral)) choices.push_back(c);
  }
  return fmt::format("{}", fmt::join(choices, " | "));
}

std::optional<std::string> number_range(const std::optional<NumberBound>& low, const std::optional<NumberBound>& high) {
  check_digits(low);
  check_digits(high);
  const NumberBound zero{}, above_zero{{}, true};
  std::vector<std::string> out;
  if (!high || !high->value.negative) magnitudes(low && !low->value.negative ? *low : zero, high, "", out);
  if (!low || low->value.negative) {
    const NumberBound lo = high && high->value.negative ? magnitude_of(*high) : above_zero;
    magnitudes(lo, low ? std::optional(magnitude_of(*low)) : std::nullopt, "\"-\" ", out);
  }
  if (out.empty()) return std::nullopt;
  return fmt::format("{}", fmt::join(out, " | "));
}

}  // namespace rf::grammar
