#include "models/stable_diffusion/generation_parameters.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace rf::stable_diffusion {
namespace {

// Python's str(float): the shortest digits that read back as the same double, positional for
// decimal exponents -4 to 15 ("0.0001", "7.0"), scientific outside ("1e-05", "1.5e+16").
std::string python_float(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[32];
  const char* end = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific).ptr;
  const std::string_view shortest(buffer, static_cast<std::size_t>(end - buffer));  // [-]d[.ddd]e(+|-)dd
  const bool negative = shortest[0] == '-';
  const std::size_t e = shortest.find('e');
  std::string digits;
  for (const char c : shortest.substr(negative, e - negative)) {
    if (c != '.') digits += c;
  }
  const int exponent = std::stoi(std::string(shortest.substr(e + 1)));
  const std::string sign = negative ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    const std::string mantissa = digits.size() > 1 ? digits.substr(0, 1) + "." + digits.substr(1) : digits;
    return fmt::format("{}{}e{}{:02}", sign, mantissa, exponent < 0 ? '-' : '+', std::abs(exponent));
  }
  if (exponent < 0) return sign + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  const auto whole = static_cast<std::size_t>(exponent) + 1;
  if (digits.size() <= whole) return sign + digits + std::string(whole - digits.size(), '0') + ".0";
  return sign + digits.substr(0, whole) + "." + digits.substr(whole);
}

// A1111's quote(): a value holding ',', ':' or a newline becomes a JSON string, as Python's
// json.dumps(value, ensure_ascii=False) writes it.
std::string quote(const std::string& value) {
  if (value.find_first_of(",:\n") == std::string::npos) return value;
  return nlohmann::json(value).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string unquote(std::string_view value) {
  try {
    const auto parsed = nlohmann::json::parse(value);
    if (parsed.is_string()) return parsed.get<std::string>();
  } catch (const nlohmann::json::exception&) {
    // A1111 keeps a value that is not valid JSON as it is.
  }
  return std::string(value);
}

// What Python's str.strip() removes, within ASCII.
bool is_python_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

std::string_view strip(std::string_view text) {
  while (!text.empty() && is_python_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_python_space(text.back())) text.remove_suffix(1);
  return text;
}

// A1111's "Lora hashes": "name: hash, ..." for the LoRAs with a hash, ':' and ',' taken out of names.
std::string lora_hashes(const std::vector<LoraUse>& loras) {
  std::string out;
  for (const auto& lora : loras) {
    if (lora.hash.empty()) continue;
    std::string name;
    for (const char c : lora.name) {
      if (c != ':' && c != ',') name += c;
    }
    out += (out.empty() ? "" : ", ") + name + ": " + lora.hash;
  }
  return out;
}

std::string parameters_line(const GenerationParameters& p) {
  std::vector<std::pair<std::string_view, std::string>> fields = {
      {"Steps", std::to_string(p.steps)},
      {"Sampler", std::string(sampler_label(p.sampler))},
      {"Schedule type", std::string(schedule_label(p.schedule))},
      {"CFG scale", python_float(p.cfg_scale)},
      {"Seed", std::to_string(p.seed)},
      {"Size", fmt::format("{}x{}", p.width, p.height)},
  };
  const auto add = [&](std::string_view key, std::string value) {
    if (!value.empty()) fields.emplace_back(key, std::move(value));
  };
  add("Model hash", p.model_hash);
  add("Model", p.model_name);
  if (p.denoising_strength) add("Denoising strength", python_float(*p.denoising_strength));
  if (p.clip_skip > 1) add("Clip skip", std::to_string(p.clip_skip));
  if (p.rng == Rng::torch_cpu) add("RNG", "CPU");
  add("Lora hashes", lora_hashes(p.loras));
  add("Version", p.version);
  std::string line;
  for (const auto& [key, value] : fields) {
    if (!line.empty()) line += ", ";
    // A1111 writes a value equal to its key as the key alone.
    line += key == value ? value : fmt::format("{}: {}", key, quote(value));
  }
  return line;
}

bool is_word_byte(char c) {
  const auto b = static_cast<unsigned char>(c);
  return (b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || b == '_' || b >= 0x80;
}

std::size_t skip_spaces(std::string_view line, std::size_t pos) {
  while (pos < line.size() && is_python_space(line[pos])) ++pos;
  return pos;
}

// Past the closing quote of "(?:\\.|[^\\"])+" at `pos`, if that matches there.
std::optional<std::size_t> quoted_end(std::string_view line, std::size_t pos) {
  if (pos >= line.size() || line[pos] != '"') return std::nullopt;
  std::size_t i = pos + 1;
  while (i < line.size() && line[i] != '"') i += line[i] == '\\' ? 2 : 1;
  if (i >= line.size() || i == pos + 1) return std::nullopt;
  return i + 1;
}

struct PairMatch {
  std::string_view key;
  std::string_view value;
  std::size_t end;
};

// What A1111's re_param matches at `pos`:  \s*(\w[\w \-/]+):\s*("(?:\\.|[^\\"])+"|[^,]*)(?:,|$)
std::optional<PairMatch> match_pair(std::string_view line, std::size_t pos) {
  const std::size_t key = skip_spaces(line, pos);
  // A key starts at a whole character, never inside a UTF-8 sequence.
  if (key == line.size() || !is_word_byte(line[key]) || (static_cast<unsigned char>(line[key]) & 0xC0) == 0x80) {
    return std::nullopt;
  }
  std::size_t colon = key + 1;
  while (colon < line.size() && (is_word_byte(line[colon]) || line[colon] == ' ' || line[colon] == '-' || line[colon] == '/')) {
    ++colon;
  }
  if (colon - key < 2 || colon == line.size() || line[colon] != ':') return std::nullopt;
  const std::string_view name = line.substr(key, colon - key);
  const std::size_t value = skip_spaces(line, colon + 1);
  if (const auto end = quoted_end(line, value); end && (*end == line.size() || line[*end] == ',')) {
    return PairMatch{name, line.substr(value, *end - value), std::min(*end + 1, line.size())};
  }
  const std::size_t comma = std::min(line.find(',', value), line.size());
  return PairMatch{name, line.substr(value, comma - value), std::min(comma + 1, line.size())};
}

// re_param.findall(line): the matches from left to right, each search resuming where the last ended.
std::vector<PairMatch> find_pairs(std::string_view line) {
  std::vector<PairMatch> pairs;
  for (std::size_t pos = 0; pos < line.size();) {
    if (const auto match = match_pair(line, pos)) {
      pairs.push_back(*match);
      pos = match->end;
    } else {
      ++pos;
    }
  }
  return pairs;
}

}  // namespace

std::string_view sampler_label(SamplerKind sampler) {
  switch (sampler) {
    case SamplerKind::euler: return "Euler";
    case SamplerKind::euler_ancestral: return "Euler a";
    case SamplerKind::heun: return "Heun";
    case SamplerKind::dpmpp_2m: return "DPM++ 2M";
    case SamplerKind::dpmpp_2m_sde: return "DPM++ 2M SDE";
    case SamplerKind::dpmpp_2s_ancestral: return "DPM++ 2S a";
    case SamplerKind::ddim: return "DDIM";
    case SamplerKind::lcm: return "LCM";
    case SamplerKind::unipc: return "UniPC";
  }
  return "unknown";
}

std::string_view schedule_label(SigmaSchedule schedule) {
  switch (schedule) {
    case SigmaSchedule::model_default: return "Automatic";
    case SigmaSchedule::karras: return "Karras";
    case SigmaSchedule::exponential: return "Exponential";
    case SigmaSchedule::sgm_uniform: return "SGM Uniform";
  }
  return "unknown";
}

std::string format_infotext(const GenerationParameters& parameters) {
  std::string text = parameters.prompt;
  for (const auto& lora : parameters.loras) {
    text += fmt::format("{}<lora:{}:{}>", text.empty() ? "" : " ", lora.name, python_float(lora.strength));
  }
  if (!parameters.negative_prompt.empty()) text += "\nNegative prompt: " + parameters.negative_prompt;
  text += '\n';
  text += parameters_line(parameters);
  return std::string(strip(text));
}

const std::string* Infotext::find(std::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

Infotext parse_infotext(std::string_view text) {
  std::vector<std::string_view> lines;
  const std::string_view stripped = strip(text);
  for (std::size_t start = 0;;) {
    const std::size_t end = std::min(stripped.find('\n', start), stripped.size());
    lines.push_back(stripped.substr(start, end - start));
    if (end == stripped.size()) break;
    start = end + 1;
  }
  auto pairs = find_pairs(lines.back());
  if (pairs.size() >= 3) {
    lines.pop_back();
  } else {
    pairs.clear();
  }
  Infotext out;
  bool negative = false;
  for (std::string_view line : lines) {
    line = strip(line);
    if (line.starts_with("Negative prompt:")) {
      negative = true;
      line = strip(line.substr(16));
    }
    std::string& target = negative ? out.negative_prompt : out.prompt;
    if (!target.empty()) target += '\n';
    target += line;
  }
  for (const auto& pair : pairs) {
    // A1111 fails on an empty value and skips the pair.
    if (pair.value.empty()) continue;
    std::string value = pair.value.front() == '"' && pair.value.back() == '"' ? unquote(pair.value) : std::string(pair.value);
    // Later pairs replace earlier ones in place, as assignments to a Python dict do.
    const auto existing = std::find_if(out.fields.begin(), out.fields.end(), [&](const auto& f) { return f.first == pair.key; });
    if (existing != out.fields.end()) {
      existing->second = std::move(value);
    } else {
      out.fields.emplace_back(std::string(pair.key), std::move(value));
    }
  }
  return out;
}

GenerationParameters run_parameters(const GenerationOptions& o, int index, std::string model_name,
                                    const std::vector<LoraFile>& loras) {
  GenerationParameters p;
  p.prompt = o.prompt;
  p.negative_prompt = o.negative_prompt;
  p.steps = o.sampler.steps;
  p.sampler = o.sampler.kind;
  p.schedule = o.sampler.sigmas;
  p.cfg_scale = o.guidance;
  p.seed = o.batch_seeds == BatchSeeds::per_image ? o.seed + index : o.seed;
  p.width = o.width;
  p.height = o.height;
  p.model_name = std::move(model_name);
  p.rng = o.rng;
  if (o.init) p.denoising_strength = o.init->strength;
  for (const LoraFile& l : loras) p.loras.push_back({std::filesystem::path(l.path).stem().string(), l.strength, {}});
  p.version = "rocmforge " ROCMFORGE_VERSION;
  return p;
}

}  // namespace rf::stable_diffusion
