#include "server/image_fields.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "server/base64.h"
#include "server/json_fields.h"
#include "util/error.h"

namespace rf::server {

namespace sd = stable_diffusion;

namespace {

std::vector<std::uint8_t> bytes_from_base64(std::string_view text, const std::string& field) {
  if (text.starts_with("data:")) {
    const std::size_t comma = text.find(',');
    if (comma == std::string_view::npos || text.substr(0, comma).find(";base64") == std::string_view::npos) {
      bad_field(field, "is a data URL that is not base64");
    }
    text.remove_prefix(comma + 1);
  }
  if (text.empty()) bad_field(field, "is empty");
  auto bytes = base64_decode(text);
  if (!bytes) bad_field(field, "is not valid base64 (the standard alphabet, padded)");
  return std::move(*bytes);
}

template <class Decode>
Image decoded(std::string_view text, const std::string& field, Decode decode) {
  const std::vector<std::uint8_t> bytes = bytes_from_base64(text, field);
  try {
    return decode(bytes, field);
  } catch (const Error& e) {
    bad_field(field, fmt::format("does not hold an image rocmforge can read: {}", e.what()));
  }
}

std::string required_string(const json& body, const char* name) {
  auto value = string_field(body, name);
  if (!value) bad_field(name, "is required");
  return std::move(*value);
}

}  // namespace

Image image_from_base64(std::string_view text, const std::string& field) {
  return decoded(text, field, [](const auto& bytes, const std::string& name) { return decode_image(bytes, name); });
}

Image mask_from_base64(std::string_view text, const std::string& field) {
  return decoded(text, field, [](const auto& bytes, const std::string& name) { return decode_mask(bytes, name); });
}

Image image_field(const json& body, const char* name) { return image_from_base64(required_string(body, name), name); }
Image mask_field(const json& body, const char* name) { return mask_from_base64(required_string(body, name), name); }

int side(long long value, const std::string& field) {
  if (value < ImageLimits::kMinSide || value > ImageLimits::kMaxSide || value % ImageLimits::kSideMultiple) {
    bad_field(field, fmt::format("must be a multiple of {} from {} to {}, got {}", ImageLimits::kSideMultiple,
                                 ImageLimits::kMinSide, ImageLimits::kMaxSide, value));
  }
  return static_cast<int>(value);
}

void prompt_fields(const json& body, sd::GenerationOptions& options, const char* prompt, const char* negative) {
  options.prompt = required_string(body, prompt);
  options.negative_prompt = string_field(body, negative).value_or("");
}

std::optional<std::uint64_t> seed_field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_unsigned()) bad_field(name, "must be an integer from 0 to 18446744073709551615");
  return it->get<std::uint64_t>();
}

std::uint64_t random_seed() {
  static thread_local std::mt19937_64 generator{std::random_device{}()};
  return generator() >> 32;  // 32 bits, as A1111 draws its seeds, so that the seed fits every tool
}

sd::InitImage init_image(const Image& image, const Image* mask, double strength, const std::string& mask_field_name) {
  sd::InitImage init{sd::from_rgb8(image), {}, strength};
  if (mask) {
    if (mask->width != image.width || mask->height != image.height) {
      bad_field(mask_field_name, fmt::format("is {}x{}, the image {}x{}: they must be the same size", mask->width,
                                             mask->height, image.width, image.height));
    }
    init.mask.resize(mask->pixels.size());
    std::ranges::transform(mask->pixels, init.mask.begin(), [](std::uint8_t v) { return v / 255.0f; });
  }
  return init;
}

std::vector<sd::LoraFile> lora_list(const json& body, const char* name, const ImageService& service) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return {};
  if (!it->is_array()) bad_field(name, "must be a list of {\"path\", \"strength\"}");
  std::vector<sd::LoraFile> loras;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const json& entry = (*it)[i];
    const std::string field = fmt::format("{}[{}]", name, i);
    if (!entry.is_object()) bad_field(field, "must be an object {\"path\", \"strength\"}");
    for (const auto& [key, value] : entry.items()) {
      if (key != "path" && key != "strength") bad_field(field + "." + key, "is not a field of a LoRA");
    }
    const auto path = string_field(entry, "path");
    if (!path) bad_field(field + ".path", "is required");
    double strength = 1.0;
    if (const auto s = entry.find("strength"); s != entry.end() && !s->is_null()) {
      if (!s->is_number()) bad_field(field + ".strength", "must be a number");
      strength = s->get<double>();
      if (!(std::abs(strength) <= ImageLimits::kMaxLoraStrength)) {
        bad_field(field + ".strength", fmt::format("must be between {} and {}, got {}", -ImageLimits::kMaxLoraStrength,
                                                   ImageLimits::kMaxLoraStrength, strength));
      }
    }
    loras.push_back(service.lora(*path, strength, field + ".path"));
  }
  return loras;
}

}  // namespace rf::server
