// AUTOMATIC1111's API on an image model, as its front ends call it: POST /sdapi/v1/txt2img and
// /sdapi/v1/img2img (answered when the images are made: {"images", "parameters", "info"}), and GET
// /sdapi/v1/samplers, /schedulers, /sd-models and /progress.
//
// Fields take A1111's API defaults (steps 50, cfg_scale 7, sampler "Euler", seed -1 = random). A
// field A1111 has but rocmforge does not do (hires fix, face restoration, scripts, subseeds, ...)
// is accepted only at the value that leaves it off, and refused with a 400 naming it otherwise, so
// that nothing asked for is dropped without a word. Batches: batch_size x n_iter images, image i
// with seed + i, which is how A1111 seeds them too.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "models/stable_diffusion/generation_parameters.h"
#include "server/api_error.h"
#include "server/base64.h"
#include "server/image_fields.h"
#include "server/json_fields.h"
#include "server/routes.h"

namespace rf::server {

namespace sd = stable_diffusion;

namespace {

using nlohmann::json;

const std::initializer_list<std::string_view> kTxt2ImgFields = {
    "prompt", "negative_prompt", "steps", "cfg_scale", "width", "height", "seed", "sampler_name", "sampler_index",
    "scheduler", "batch_size", "n_iter", "eta"};
const std::initializer_list<std::string_view> kImg2ImgFields = {"init_images", "mask", "denoising_strength",
                                                                "inpainting_mask_invert"};

// A1111's fields that rocmforge does not do, with the values that leave them off.
const std::vector<std::pair<std::string_view, std::vector<json>>> kOffFields = {
    {"enable_hr", {false}}, {"restore_faces", {false}}, {"tiling", {false}}, {"subseed", {-1, 0}},
    {"subseed_strength", {0}}, {"seed_resize_from_h", {-1, 0}}, {"seed_resize_from_w", {-1, 0}},
    {"styles", {json::array()}}, {"script_name", {""}}, {"script_args", {json::array()}},
    {"alwayson_scripts", {json::object()}}, {"override_settings", {json::object()}},
    {"override_settings_restore_afterwards", {true, false}}, {"send_images", {true}}, {"save_images", {false}},
    {"do_not_save_samples", {true, false}}, {"do_not_save_grid", {true, false}}, {"s_churn", {0}}, {"s_tmin", {0}},
    {"s_noise", {1}}, {"refiner_checkpoint", {""}}, {"refiner_switch_at", {0}}, {"disable_extra_networks", {false}},
    {"firstphase_width", {0}}, {"firstphase_height", {0}}, {"denoising_strength", {}}, {"mask_blur", {0, 4}},
    {"inpainting_fill", {1}}, {"inpaint_full_res", {false, 0}}, {"resize_mode", {0}}, {"include_init_images", {false}},
    // The hires fix's own settings do nothing while enable_hr is false.
    {"hr_scale", {}}, {"hr_upscaler", {}}, {"hr_second_pass_steps", {}}, {"hr_resize_x", {}}, {"hr_resize_y", {}},
    {"hr_sampler_name", {}}, {"hr_scheduler", {}}, {"hr_prompt", {}}, {"hr_negative_prompt", {}},
    {"hr_checkpoint_name", {}}};

// Refuses a field neither rocmforge's nor one of kOffFields at a value that leaves it off (an empty
// list of values: any value, the field does nothing here). `denoising_strength` belongs to img2img.
void check_fields(const json& body, bool img2img) {
  for (const auto& [key, value] : body.items()) {
    if (std::ranges::find(kTxt2ImgFields, key) != kTxt2ImgFields.end()) continue;
    if (img2img && std::ranges::find(kImg2ImgFields, key) != kImg2ImgFields.end()) continue;
    const auto off = std::ranges::find(kOffFields, key, [](const auto& f) { return f.first; });
    if (off == kOffFields.end()) bad_field(key, "is not a field rocmforge's A1111 API takes");
    if (value.is_null() || off->second.empty()) continue;
    if (std::ranges::find(off->second, value) == off->second.end()) {
      bad_field(key, fmt::format("is {}: rocmforge does not do this; leave it at {}", value.dump(), off->second.front().dump()));
    }
  }
}

// "Euler a", "DPM++ 2M Karras" (A1111's older names, the schedule folded in) or "euler_a".
void sampler_fields(const json& body, sd::SamplerOptions& sampler) {
  const auto name = string_field(body, "sampler_name");
  const std::string chosen = name ? *name : string_field(body, "sampler_index").value_or("Euler");
  const std::string field = name ? "sampler_name" : "sampler_index";
  std::optional<sd::SigmaSchedule> folded;
  const auto find = [&](std::string_view label) -> std::optional<sd::SamplerKind> {
    for (const auto& [short_name, kind] : sd::kSamplerNames)
      if (label == sd::sampler_label(kind) || label == short_name) return kind;
    return std::nullopt;
  };
  std::optional<sd::SamplerKind> kind = find(chosen);
  if (!kind && chosen.ends_with(" Karras")) {
    kind = find(std::string_view(chosen).substr(0, chosen.size() - 7));
    folded = sd::SigmaSchedule::karras;
  }
  if (!kind) bad_field(field, fmt::format("'{}' is not a sampler here (GET /sdapi/v1/samplers lists them)", chosen));
  sampler.kind = *kind;
  sampler.sigmas = folded.value_or(sd::SigmaSchedule::model_default);
  if (const auto schedule = string_field(body, "scheduler"); schedule && *schedule != "Automatic" && *schedule != "automatic") {
    std::optional<sd::SigmaSchedule> found;
    for (auto s : {sd::SigmaSchedule::karras, sd::SigmaSchedule::exponential, sd::SigmaSchedule::sgm_uniform}) {
      const std::string_view label = sd::schedule_label(s);
      std::string lower(label);
      std::ranges::transform(lower, lower.begin(), [](unsigned char c) { return c == ' ' ? '_' : std::tolower(c); });
      if (*schedule == label || *schedule == lower) found = s;
    }
    if (!found) bad_field("scheduler", fmt::format("'{}' is not a schedule here (GET /sdapi/v1/schedulers lists them)", *schedule));
    sampler.sigmas = *found;
  }
}

// A1111's extra-network tags, <lora:NAME> or <lora:NAME:STRENGTH>, taken out of the prompt as A1111
// takes them, each LoRA looked up in the worker's LoRA folder.
std::vector<sd::LoraFile> take_lora_tags(std::string& prompt, const ImageService& model) {
  std::vector<sd::LoraFile> loras;
  for (std::size_t at; (at = prompt.find("<lora:")) != std::string::npos;) {
    const std::size_t end = prompt.find('>', at);
    if (end == std::string::npos) bad_field("prompt", "has a <lora: tag without its closing '>'");
    const std::string tag = prompt.substr(at + 6, end - at - 6);
    const std::size_t colon = tag.find(':');
    double strength = 1.0;
    if (colon != std::string::npos) {
      if (tag.find(':', colon + 1) != std::string::npos) {
        bad_field("prompt", fmt::format("<lora:{}>: one strength for the whole LoRA; separate text-encoder and UNet "
                                        "strengths are not supported", tag));
      }
      const std::string number = tag.substr(colon + 1);
      char* stop = nullptr;
      strength = std::strtod(number.c_str(), &stop);
      if (number.empty() || *stop != '\0' || !(std::abs(strength) <= ImageLimits::kMaxLoraStrength)) {
        bad_field("prompt", fmt::format("<lora:{}>: the strength must be a number from -{} to {}", tag,
                                        ImageLimits::kMaxLoraStrength, ImageLimits::kMaxLoraStrength));
      }
    }
    loras.push_back(model.lora(tag.substr(0, colon), strength, "prompt"));
    prompt.erase(at, end - at + 1);
  }
  return loras;
}

ImageJobRequest request_of(const json& body, const ImageService& model, bool img2img) {
  check_fields(body, img2img);
  ImageJobRequest r;
  sd::GenerationOptions& o = r.options;
  o.prompt = string_field(body, "prompt").value_or("");
  r.loras = take_lora_tags(o.prompt, model);
  o.negative_prompt = string_field(body, "negative_prompt").value_or("");
  o.sampler.steps = static_cast<int>(integer_field(body, "steps", ImageLimits::kMinSteps, ImageLimits::kMaxSteps).value_or(50));
  sampler_fields(body, o.sampler);
  o.sampler.eta = number_field(body, "eta", 0, 1).value_or(0);
  o.guidance = number_field(body, "cfg_scale", 0, ImageLimits::kMaxGuidance).value_or(7);
  const long long seed = integer_field(body, "seed", -1, std::numeric_limits<long long>::max()).value_or(-1);
  o.seed = seed < 0 ? random_seed() : static_cast<std::uint64_t>(seed);
  o.rng = sd::Rng::torch_cuda;  // A1111's default: seeds drawn as its GPU draws them
  const long long batch = integer_field(body, "batch_size", 1, ImageLimits::kMaxImages).value_or(1);
  const long long iterations = integer_field(body, "n_iter", 1, ImageLimits::kMaxImages).value_or(1);
  if (batch * iterations > ImageLimits::kMaxImages) {
    bad_field("n_iter", fmt::format("batch_size x n_iter is {}, past {} images a request", batch * iterations, ImageLimits::kMaxImages));
  }
  o.batch = static_cast<int>(batch * iterations);
  if (!img2img) {
    o.width = side(integer_field(body, "width", LLONG_MIN, LLONG_MAX).value_or(512), "width");
    o.height = side(integer_field(body, "height", LLONG_MIN, LLONG_MAX).value_or(512), "height");
    r.operation = ImageOperation::generation;
    return r;
  }
  const auto images = body.find("init_images");
  if (images == body.end() || !images->is_array() || images->size() != 1 || !(*images)[0].is_string()) {
    bad_field("init_images", "must be a list of one base64 image");
  }
  const Image image = image_from_base64((*images)[0].get<std::string>(), "init_images");
  side(image.width, "init_images");
  side(image.height, "init_images");
  std::optional<Image> mask;
  if (const auto m = string_field(body, "mask")) {
    mask = mask_from_base64(*m, "mask");
    if (integer_field(body, "inpainting_mask_invert", 0, 1).value_or(0) == 1) {
      for (std::uint8_t& v : mask->pixels) v = 255 - v;
    }
  }
  const double strength = number_field(body, "denoising_strength", 0, 1).value_or(0.75);
  o.init = init_image(image, mask ? &*mask : nullptr, strength, "mask");
  r.operation = mask ? ImageOperation::inpaint : ImageOperation::transform;
  return r;
}

json info_of(const ImageJobRequest& r, const ImageEvent& done, const std::string& model_name) {
  const sd::GenerationOptions& o = r.options;
  return {{"prompt", o.prompt}, {"negative_prompt", o.negative_prompt}, {"seed", done.seeds.front()},
          {"all_seeds", done.seeds}, {"all_prompts", std::vector<std::string>(o.batch, o.prompt)},
          {"width", o.width}, {"height", o.height},
          {"sampler_name", sd::sampler_label(o.sampler.kind)}, {"cfg_scale", o.guidance}, {"steps", o.sampler.steps},
          {"batch_size", o.batch}, {"sd_model_name", model_name}, {"infotexts", done.infotexts},
          {"denoising_strength", o.init ? json(o.init->strength) : json(nullptr)}};
}

void generate(ServerContext& context, const httplib::Request& req, httplib::Response& res, bool img2img) {
  const auto model = context.require_image_model();
  const json body = parse_body(req.body);
  ImageJobRequest r = request_of(body, *model, img2img);
  r.options = model->resolve(std::move(r.options));
  const ImageEvent done = model->run(r, [&] { return context.stopping(); });
  json images = json::array();
  for (std::size_t i = 0; i < done.images.size(); ++i) images.push_back(base64_encode(done.png(i)));
  const json info = info_of(r, done, model->worker().model_name());
  send_json(res, {{"images", images}, {"parameters", body}, {"info", info.dump()}});
}

json progress(const ServerContext& context, bool skip_image) {
  const auto model = context.require_image_model();
  const auto job = model->worker().running();
  const int waiting = model->worker().metrics().waiting;
  json state = {{"skipped", false}, {"interrupted", false}, {"job", ""}, {"job_count", waiting + (job ? 1 : 0)},
                {"job_timestamp", "0"}, {"job_no", 0}, {"sampling_step", job ? job->step() : 0},
                {"sampling_steps", job ? job->steps() : 0}};
  const double done = job && job->steps() ? static_cast<double>(job->step()) / job->steps() : 0.0;
  json current = nullptr;
  if (job && !skip_image) {
    if (const auto png = job->latest_preview(); !png.empty()) current = base64_encode(png);
  }
  const double rate = model->worker().metrics().last_steps_per_second;
  const double eta = job && rate > 0 ? (job->steps() - job->step()) / rate : 0.0;
  return {{"progress", done}, {"eta_relative", eta}, {"state", state}, {"current_image", current}, {"textinfo", nullptr}};
}

json samplers() {
  json out = json::array();
  for (const auto& [name, kind] : sd::kSamplerNames) {
    out.push_back({{"name", sd::sampler_label(kind)}, {"aliases", {name}}, {"options", json::object()}});
  }
  return out;
}

json schedulers() {
  json out = json::array();
  for (auto s : {sd::SigmaSchedule::model_default, sd::SigmaSchedule::karras, sd::SigmaSchedule::exponential,
                 sd::SigmaSchedule::sgm_uniform}) {
    const std::string_view label = sd::schedule_label(s);
    std::string name(label);
    std::ranges::transform(name, name.begin(), [](unsigned char c) { return c == ' ' ? '_' : std::tolower(c); });
    out.push_back({{"name", name}, {"label", label}, {"aliases", nullptr}, {"default_rho", -1}, {"need_inner_model", false}});
  }
  return out;
}

}  // namespace

void add_a1111_routes(httplib::Server& http, ServerContext& context) {
  http.Post("/sdapi/v1/txt2img", guarded([&](const httplib::Request& req, httplib::Response& res) {
    generate(context, req, res, false);
  }));
  http.Post("/sdapi/v1/img2img", guarded([&](const httplib::Request& req, httplib::Response& res) {
    generate(context, req, res, true);
  }));
  http.Get("/sdapi/v1/progress", guarded([&](const httplib::Request& req, httplib::Response& res) {
    send_json(res, progress(context, req.get_param_value("skip_current_image") == "true"));
  }));
  http.Get("/sdapi/v1/samplers", guarded([&](const httplib::Request&, httplib::Response& res) {
    context.require_image_model();
    send_json(res, samplers());
  }));
  http.Get("/sdapi/v1/schedulers", guarded([&](const httplib::Request&, httplib::Response& res) {
    context.require_image_model();
    send_json(res, schedulers());
  }));
  http.Get("/sdapi/v1/sd-models", guarded([&](const httplib::Request&, httplib::Response& res) {
    const auto model = context.require_image_model();
    send_json(res, json::array({{{"title", model->id()}, {"model_name", model->id()}, {"hash", nullptr},
                                 {"sha256", nullptr}, {"filename", model->id()}, {"config", nullptr}}}));
  }));
}

}  // namespace rf::server
