#pragma once
// A1111's infotext: the "parameters" text that AUTOMATIC1111's stable-diffusion-webui writes into
// every PNG it makes and reads back from a PNG dropped on it (PNG Info, "Send to txt2img"), built
// and parsed as v1.10 does (modules/processing.py create_infotext; modules/infotext_utils.py quote
// and parse_generation_parameters):
//
//   a cat in a cafe <lora:detail:0.8>                   the prompt, any number of lines
//   Negative prompt: blurry                             only when there is one; may span lines
//   Steps: 20, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7.0, Seed: 1, Size: 512x512, ...
//
// The last line's pairs come in A1111's order: Steps, Sampler, Schedule type, CFG scale, Seed,
// Size, Model hash, Model, Denoising strength, Clip skip, RNG, Lora hashes, Version. Numbers are
// written as Python's str() writes them (int 20, float 7.0 and 0.75). A value holding ',', ':' or a
// newline is quoted as a JSON string, as A1111's quote() does ('"' alone is not quoted). The whole
// text is stripped of the whitespace around it, as A1111 strips it.
//
// LoRAs: A1111 reads a LoRA's name and strength back only from a <lora:name:strength> tag in the
// prompt, and its hash from "Lora hashes" (used to find the file when names differ). So each LoRA
// used is written as a tag appended to the prompt line, and those with a hash go in "Lora hashes".
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/stable_diffusion/lora.h"
#include "models/stable_diffusion/pipeline.h"
#include "models/stable_diffusion/samplers.h"
#include "models/stable_diffusion/schedule.h"

namespace rf::stable_diffusion {


struct LoraUse {
  std::string name;       // as the tag names it
  double strength = 1.0;
  std::string hash;       // A1111's short hash, or empty: left out of "Lora hashes"
};

struct GenerationParameters {
  std::string prompt;           // without LoRA tags: `loras` appends them
  std::string negative_prompt;  // empty: no "Negative prompt:" line
  int steps = 20;
  SamplerKind sampler = SamplerKind::euler;
  SigmaSchedule schedule = SigmaSchedule::model_default;
  double cfg_scale = 7.0;
  std::uint64_t seed = 0;
  int width = 512;
  int height = 512;
  std::string model_hash;                    // "Model hash" (A1111: sha256's first 10 hex digits); left out when empty
  std::string model_name;                    // "Model": the checkpoint's file name without extension; left out when empty
  std::optional<double> denoising_strength;  // img2img and inpainting only
  int clip_skip = 1;                         // written when above 1, as A1111 does
  Rng rng = Rng::torch_cuda;  // A1111's "RNG": GPU, its default, is left out of the text; CPU is not
  std::vector<LoraUse> loras;
  std::string version;  // "Version", e.g. "rocmforge 0.1.0"; left out when empty
};

// The infotext A1111 would write for these parameters.
std::string format_infotext(const GenerationParameters& parameters);

// What a run of `options` (as Pipeline::resolve returned them) wrote for image `index` of its batch:
// that image's own seed where seeds are per image; where the batch shares one generator, no seed
// remakes image i > 0 alone, so every image names the batch's. LoRAs are named by their files' stems.
GenerationParameters run_parameters(const GenerationOptions& options, int index, std::string model_name,
                                    const std::vector<LoraFile>& loras);

// An infotext read back, as A1111's parse_generation_parameters reads it before its own defaults
// and conversions: the prompt and negative prompt (each line stripped of surrounding whitespace, so
// indentation inside a prompt is lost, as in A1111), and the last line's pairs in order, quoted
// values unquoted. Unlike A1111, "Size" stays one value ("512x512") and no field is added for
// what the text leaves out. A last line of fewer than 3 pairs is part of the prompt, as in A1111.
struct Infotext {
  std::string prompt;
  std::string negative_prompt;
  std::vector<std::pair<std::string, std::string>> fields;

  const std::string* find(std::string_view key) const;  // null when absent
};

// Parses any text (an infotext that is not one gives a prompt and no fields); never fails. Python's
// \w and \s in A1111's pattern are taken as ASCII letters, digits and '_' plus every non-ASCII
// character, and ASCII whitespace.
Infotext parse_infotext(std::string_view text);

// The names A1111's UI shows: "Euler a", "DPM++ 2M", ...; "Automatic", "Karras", ...
std::string_view sampler_label(SamplerKind sampler);
std::string_view schedule_label(SigmaSchedule schedule);

}  // namespace rf::stable_diffusion
