// OpenAI's images API on an image model: POST /v1/images/generations (JSON) and POST
// /v1/images/edits (multipart), answered when the images are made: {"created", "data":
// [{"b64_json"}]}. Extensions OpenAI lacks: seed, negative_prompt, steps, guidance_scale and, for
// edits, strength. Only b64_json is served ("url" would need files kept on the server).
//
// Edits follow OpenAI's masks: a mask's fully transparent pixels are the ones to repaint; a mask
// without transparency is read as white = repaint. Without a mask, an image with transparent pixels
// has them repainted (DALL-E 2's rule), and an opaque one is redrawn whole at `strength`.
#include <chrono>

#include <fmt/format.h>

#include "models/stable_diffusion/samplers.h"
#include "server/api_error.h"
#include "server/base64.h"
#include "server/image_fields.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace rf::server {

namespace sd = stable_diffusion;

namespace {

// "WxH", each side as image requests allow.
std::pair<int, int> size_field(const std::string& value) {
  int width = 0, height = 0;
  char x = 0, rest = 0;
  if (std::sscanf(value.c_str(), "%d%c%d%c", &width, &x, &height, &rest) != 3 || x != 'x') {
    bad_field("size", fmt::format("must be \"WIDTHxHEIGHT\", e.g. \"512x512\", got \"{}\"", value));
  }
  return {side(width, "size"), side(height, "size")};
}

// What generations and edits share, read from `fields` (the JSON body, or the multipart fields as
// strings made JSON values).
ImageJobRequest common_request(const json& fields, const ImageService& model, ImageOperation op) {
  if (const auto name = string_field(fields, "model"); name && !model.answers_to(*name)) {
    throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", *name, model.id()), "model",
                   "model_not_found");
  }
  if (const auto format = string_field(fields, "response_format"); format && *format != "b64_json") {
    bad_field("response_format", "must be \"b64_json\": this server returns images in the response, not as URLs");
  }
  string_field(fields, "user");  // checked for its type: OpenAI's end-user id, for the caller's own records
  ImageJobRequest r;
  r.operation = op;
  r.preview_every = 0;
  sd::GenerationOptions& o = r.options;
  prompt_fields(fields, o, "prompt", "negative_prompt");
  o.batch = static_cast<int>(integer_field(fields, "n", 1, ImageLimits::kMaxImages).value_or(1));
  o.sampler.kind = sd::SamplerKind::euler_ancestral;
  o.sampler.steps = static_cast<int>(integer_field(fields, "steps", ImageLimits::kMinSteps, ImageLimits::kMaxSteps).value_or(20));
  o.guidance = number_field(fields, "guidance_scale", 0, ImageLimits::kMaxGuidance).value_or(7.5);
  o.seed = seed_field(fields, "seed").value_or(random_seed());
  if (const auto size = string_field(fields, "size"); size && *size != "auto") std::tie(o.width, o.height) = size_field(*size);
  return r;
}

json response(const ImageEvent& done) {
  json data = json::array();
  for (std::size_t i = 0; i < done.images.size(); ++i) data.push_back({{"b64_json", base64_encode(done.png(i))}});
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return {{"created", std::chrono::duration_cast<std::chrono::seconds>(now).count()}, {"data", std::move(data)}};
}

void generations(ServerContext& context, const httplib::Request& req, httplib::Response& res) {
  const auto model = context.require_image_model();
  const json body = parse_body(req.body);
  refuse_unknown_fields(body, {"prompt", "n", "size", "response_format", "model", "user", "seed", "negative_prompt",
                               "steps", "guidance_scale"});
  ImageJobRequest r = common_request(body, *model, ImageOperation::generation);
  if (!r.options.width) r.options.width = r.options.height = model->native_size();
  r.options = model->resolve(std::move(r.options));
  send_json(res, response(model->run(std::move(r), [&] { return context.stopping(); })));
}

// The multipart form's text fields as JSON: numbers where the field is numeric.
json form_fields(const httplib::Request& req) {
  static const std::set<std::string> numeric = {"n", "steps", "guidance_scale", "seed", "strength"};
  json fields = json::object();
  for (const auto& [name, part] : req.files) {
    if (!part.filename.empty() || name == "image" || name == "mask") continue;
    if (!numeric.contains(name)) {
      fields[name] = part.content;
      continue;
    }
    try {
      fields[name] = json::parse(part.content);
    } catch (const json::exception&) {
      bad_field(name, "must be a number");
    }
  }
  return fields;
}

// A mask as the pipeline takes it (white = repaint) from OpenAI's (transparent = repaint).
Image repaint_mask(const std::vector<std::uint8_t>& png, const std::string& field) {
  try {
    if (auto alpha = decode_alpha(png, field)) {
      for (std::uint8_t& a : alpha->pixels) a = a == 0 ? 255 : 0;
      return std::move(*alpha);
    }
    return decode_mask(png, field);
  } catch (const Error& e) {
    bad_field(field, fmt::format("does not hold an image rocmforge can read: {}", e.what()));
  }
}

std::vector<std::uint8_t> file_part(const httplib::Request& req, const char* name) {
  const auto it = req.files.find(name);
  if (it == req.files.end()) return {};
  return {it->second.content.begin(), it->second.content.end()};
}

void edits(ServerContext& context, const httplib::Request& req, httplib::Response& res) {
  const auto model = context.require_image_model();
  if (!req.is_multipart_form_data()) throw ApiError(400, "images/edits takes multipart/form-data (image, mask, prompt, ...)");
  const json fields = form_fields(req);
  refuse_unknown_fields(fields, {"prompt", "n", "size", "response_format", "model", "user", "seed", "negative_prompt",
                                 "steps", "guidance_scale", "strength"});
  for (const auto& [name, part] : req.files) {
    if (name != "image" && name != "mask" && !fields.contains(name)) bad_field(name, "is not a field this request takes");
  }
  const std::vector<std::uint8_t> image_bytes = file_part(req, "image"), mask_bytes = file_part(req, "mask");
  if (image_bytes.empty()) bad_field("image", "is required: the image to edit");
  Image image;
  try {
    image = decode_image(image_bytes, "image");
  } catch (const Error& e) {
    bad_field("image", fmt::format("does not hold an image rocmforge can read: {}", e.what()));
  }
  std::optional<Image> mask;
  if (!mask_bytes.empty()) {
    mask = repaint_mask(mask_bytes, "mask");
  } else if (auto alpha = decode_alpha(image_bytes, "image"); alpha && std::ranges::count(alpha->pixels, 0)) {
    for (std::uint8_t& a : alpha->pixels) a = a == 0 ? 255 : 0;
    mask = std::move(*alpha);
  }
  ImageJobRequest r = common_request(fields, *model, mask ? ImageOperation::inpaint : ImageOperation::transform);
  if (r.options.width && (r.options.width != image.width || r.options.height != image.height)) {
    bad_field("size", fmt::format("is {}x{}, the image {}x{}: edits keep the image's size", r.options.width,
                                  r.options.height, image.width, image.height));
  }
  r.options.width = r.options.height = 0;
  side(image.width, "image");
  side(image.height, "image");
  const double strength = number_field(fields, "strength", 0, 1).value_or(mask ? 1.0 : 0.8);
  r.options.init = init_image(image, mask ? &*mask : nullptr, strength, "mask");
  r.options = model->resolve(std::move(r.options));
  send_json(res, response(model->run(std::move(r), [&] { return context.stopping(); })));
}

}  // namespace

json image_model_card(const ImageService& model) {
  return {{"id", model.id()},       {"object", "model"},
          {"created", model.created()}, {"owned_by", "rocmforge"},
          {"kind", "image"},        {"architecture", sd::architecture_name(model.config().architecture)},
          {"native_size", model.native_size()}};
}

void add_image_routes(httplib::Server& http, ServerContext& context) {
  http.Post("/v1/images/generations", guarded([&](const httplib::Request& req, httplib::Response& res) {
    generations(context, req, res);
  }));
  http.Post("/v1/images/edits", guarded([&](const httplib::Request& req, httplib::Response& res) { edits(context, req, res); }));
}

}  // namespace rf::server
