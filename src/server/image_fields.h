#pragma once
// Reading what the image routes share from a request (rbee's jobs, OpenAI's images, A1111's): the
// limits every route holds requests to, images sent as base64, sizes, seeds and LoRA lists. Each
// failure is a 400 naming the field.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/image_file.h"
#include "models/stable_diffusion/pipeline.h"
#include "server/image_service.h"

namespace rf::server {

using nlohmann::json;

// What any image request may ask for.
struct ImageLimits {
  static constexpr int kMinSteps = 1, kMaxSteps = 150;
  static constexpr double kMaxGuidance = 30;
  static constexpr int kMinSide = 64, kMaxSide = 2048, kSideMultiple = 8;
  static constexpr double kMaxLoraStrength = 10;
  static constexpr int kMaxImages = 8;  // a request's n or batch_size
};


// An image sent as base64 (standard, padded; a "data:image/...;base64," prefix is allowed), decoded
// as RGB, or as a gray mask.
Image image_from_base64(std::string_view text, const std::string& field);
Image mask_from_base64(std::string_view text, const std::string& field);
// The same from a required JSON string field.
Image image_field(const json& body, const char* name);
Image mask_field(const json& body, const char* name);

// A side in pixels: a multiple of 8 from 64 to 2048.
int side(long long value, const std::string& field);
// The prompt (required, a string) and the optional negative prompt.
void prompt_fields(const json& body, stable_diffusion::GenerationOptions& options, const char* prompt,
                   const char* negative);
// A seed: a non-negative integer below 2^64; nullopt when not given.
std::optional<std::uint64_t> seed_field(const json& body, const char* name);
// A random seed, for requests that give none.
std::uint64_t random_seed();

// The init image (and mask) of image to image and inpainting; a mask of another size than the
// image is a 400 naming `mask_field_name`.
stable_diffusion::InitImage init_image(const Image& image, const Image* mask, double strength,
                                       const std::string& mask_field_name);

// rbee's "loras": [{"path", "strength"}], each resolved by the service.
std::vector<stable_diffusion::LoraFile> lora_list(const json& body, const char* name, const ImageService& service);

}  // namespace rf::server
