// A1111's infotext: every expected string below is written by hand from stable-diffusion-webui
// v1.10's create_infotext (modules/processing.py) and quote()/parse_generation_parameters
// (modules/infotext_utils.py), then read back as A1111 reads it.
#include "models/stable_diffusion/generation_parameters.h"

#include <gtest/gtest.h>

namespace rf::stable_diffusion {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

struct Case {
  std::string what;
  GenerationParameters parameters;
  std::string infotext;
  std::string prompt_read;  // what parse_infotext reads back as the prompt
  Fields fields;            // and from the last line
};

std::vector<Case> cases() {
  std::vector<Case> out;

  GenerationParameters txt2img;
  txt2img.prompt = "a photo of a cat, best quality, (masterpiece:1.2)";
  txt2img.negative_prompt = "blurry, lowres";
  txt2img.sampler = SamplerKind::euler_ancestral;
  txt2img.seed = 1234567890;
  txt2img.model_hash = "6ce0161689";
  txt2img.model_name = "v1-5-pruned-emaonly";
  txt2img.version = "rocmforge 0.1.0";
  out.push_back({"txt2img with a negative prompt", txt2img,
                 "a photo of a cat, best quality, (masterpiece:1.2)\n"
                 "Negative prompt: blurry, lowres\n"
                 "Steps: 20, Sampler: Euler a, Schedule type: Automatic, CFG scale: 7.0, Seed: 1234567890, "
                 "Size: 512x512, Model hash: 6ce0161689, Model: v1-5-pruned-emaonly, Version: rocmforge 0.1.0",
                 txt2img.prompt,
                 {{"Steps", "20"}, {"Sampler", "Euler a"}, {"Schedule type", "Automatic"}, {"CFG scale", "7.0"},
                  {"Seed", "1234567890"}, {"Size", "512x512"}, {"Model hash", "6ce0161689"},
                  {"Model", "v1-5-pruned-emaonly"}, {"Version", "rocmforge 0.1.0"}}});

  GenerationParameters img2img;
  img2img.prompt = "oil painting of a harbour at dusk";
  img2img.steps = 30;
  img2img.sampler = SamplerKind::dpmpp_2m;
  img2img.schedule = SigmaSchedule::karras;
  img2img.cfg_scale = 7.5;
  img2img.seed = 42;
  img2img.width = 768;
  img2img.model_name = "sd_xl_base_1.0";
  img2img.denoising_strength = 0.75;
  img2img.clip_skip = 2;
  img2img.rng = Rng::torch_cpu;
  img2img.loras = {{"add_detail", 0.8, "0123456789ab"}, {"film,grain", 1.0, "ba9876543210"}, {"no_hash", 0.5, ""}};
  img2img.version = "rocmforge 0.1.0";
  // A1111 drops ':' and ',' from names in "Lora hashes", which then needs quoting.
  out.push_back({"img2img with denoising strength and LoRAs", img2img,
                 "oil painting of a harbour at dusk <lora:add_detail:0.8> <lora:film,grain:1.0> <lora:no_hash:0.5>\n"
                 "Steps: 30, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 7.5, Seed: 42, Size: 768x512, "
                 "Model: sd_xl_base_1.0, Denoising strength: 0.75, Clip skip: 2, RNG: CPU, "
                 "Lora hashes: \"add_detail: 0123456789ab, filmgrain: ba9876543210\", Version: rocmforge 0.1.0",
                 "oil painting of a harbour at dusk <lora:add_detail:0.8> <lora:film,grain:1.0> <lora:no_hash:0.5>",
                 {{"Steps", "30"}, {"Sampler", "DPM++ 2M"}, {"Schedule type", "Karras"}, {"CFG scale", "7.5"},
                  {"Seed", "42"}, {"Size", "768x512"}, {"Model", "sd_xl_base_1.0"}, {"Denoising strength", "0.75"},
                  {"Clip skip", "2"}, {"RNG", "CPU"}, {"Lora hashes", "add_detail: 0123456789ab, filmgrain: ba9876543210"},
                  {"Version", "rocmforge 0.1.0"}}});

  GenerationParameters quotes;
  quotes.prompt = "a \"quoted\" word\nsecond line: with a colon";
  quotes.negative_prompt = "bad hands\nbad feet";
  quotes.steps = 25;
  quotes.sampler = SamplerKind::heun;
  quotes.schedule = SigmaSchedule::exponential;
  quotes.cfg_scale = 6;
  quotes.seed = 7;
  quotes.width = 640;
  quotes.height = 448;
  quotes.model_name = "my \"best\", model";
  // The prompts' lines go as they are; a value with ',' is a JSON string; a '"' alone is not quoted.
  quotes.model_hash = "say \"hi\"";
  out.push_back({"prompts with newlines and quotes", quotes,
                 "a \"quoted\" word\nsecond line: with a colon\n"
                 "Negative prompt: bad hands\nbad feet\n"
                 "Steps: 25, Sampler: Heun, Schedule type: Exponential, CFG scale: 6.0, Seed: 7, Size: 640x448, "
                 "Model hash: say \"hi\", Model: \"my \\\"best\\\", model\"",
                 quotes.prompt,
                 {{"Steps", "25"}, {"Sampler", "Heun"}, {"Schedule type", "Exponential"}, {"CFG scale", "6.0"},
                  {"Seed", "7"}, {"Size", "640x448"}, {"Model hash", "say \"hi\""}, {"Model", "my \"best\", model"}}});

  GenerationParameters plain;
  plain.prompt = "  a lighthouse  ";
  plain.steps = 4;
  plain.sampler = SamplerKind::lcm;
  plain.schedule = SigmaSchedule::sgm_uniform;
  plain.cfg_scale = 1;
  plain.width = plain.height = 1024;
  // No negative prompt, no model, no version: those lines and pairs are left out. The text is
  // stripped as a whole, so the prompt keeps the spaces before the newline; reading strips each line.
  out.push_back({"empty negative prompt", plain,
                 "a lighthouse  \nSteps: 4, Sampler: LCM, Schedule type: SGM Uniform, CFG scale: 1.0, Seed: 0, Size: 1024x1024",
                 "a lighthouse",
                 {{"Steps", "4"}, {"Sampler", "LCM"}, {"Schedule type", "SGM Uniform"}, {"CFG scale", "1.0"},
                  {"Seed", "0"}, {"Size", "1024x1024"}}});
  return out;
}

TEST(GenerationParameters, WritesWhatA1111Writes) {
  for (const auto& c : cases()) EXPECT_EQ(format_infotext(c.parameters), c.infotext) << c.what;
}

TEST(GenerationParameters, ReadsBackWhatItWrites) {
  for (const auto& c : cases()) {
    const Infotext back = parse_infotext(format_infotext(c.parameters));
    EXPECT_EQ(back.fields, c.fields) << c.what;
    EXPECT_EQ(back.prompt, c.prompt_read) << c.what;
    EXPECT_EQ(back.negative_prompt, c.parameters.negative_prompt) << c.what;
  }
}

TEST(GenerationParameters, NumbersAsPythonPrintsFloats) {
  const std::pair<double, std::string> numbers[] = {{7, "7.0"},          {7.5, "7.5"},         {0.1, "0.1"},
                                                    {0.0001, "0.0001"}, {0.00001, "1e-05"},   {12.25, "12.25"},
                                                    {1e16, "1e+16"},    {1.5e16, "1.5e+16"}, {123456.789, "123456.789"},
                                                    {-2.5, "-2.5"},     {1e15, "1000000000000000.0"}};
  for (const auto& [value, text] : numbers) {
    GenerationParameters p;
    p.cfg_scale = value;
    const std::string infotext = format_infotext(p);
    EXPECT_NE(infotext.find("CFG scale: " + text + ","), std::string::npos) << infotext;
  }
}

TEST(GenerationParameters, LabelsAsA1111ShowsThem) {
  const std::pair<SamplerKind, std::string_view> samplers[] = {
      {SamplerKind::euler, "Euler"},         {SamplerKind::euler_ancestral, "Euler a"},
      {SamplerKind::heun, "Heun"},           {SamplerKind::dpmpp_2m, "DPM++ 2M"},
      {SamplerKind::dpmpp_2m_sde, "DPM++ 2M SDE"}, {SamplerKind::dpmpp_2s_ancestral, "DPM++ 2S a"},
      {SamplerKind::ddim, "DDIM"},           {SamplerKind::lcm, "LCM"},
      {SamplerKind::unipc, "UniPC"}};
  for (const auto& [kind, label] : samplers) EXPECT_EQ(sampler_label(kind), label);
  EXPECT_EQ(schedule_label(SigmaSchedule::model_default), "Automatic");
  EXPECT_EQ(schedule_label(SigmaSchedule::karras), "Karras");
  EXPECT_EQ(schedule_label(SigmaSchedule::exponential), "Exponential");
  EXPECT_EQ(schedule_label(SigmaSchedule::sgm_uniform), "SGM Uniform");
}

// An infotext as A1111 v1.10 with extensions writes it: Windows line ends, a quoted value with a
// comma and an escaped newline, pairs rocmforge does not write.
TEST(GenerationParameters, ParsesA1111Infotexts) {
  const Infotext info = parse_infotext(
      "\r\n masterpiece, 1girl,\r\n  (detailed eyes:1.3) <lora:add_detail:0.7>\r\n"
      "Negative prompt: worst quality, \r\n  lowres\r\n"
      "Steps: 28, Sampler: DPM++ 2M, Schedule type: Karras, CFG scale: 5, Seed: 3141592653, Size: 832x1216, "
      "Model hash: 31e35c80fc, Model: sd_xl_base_1.0, Denoising strength: 0.4, Hires upscale: 1.5, "
      "Hires upscaler: R-ESRGAN 4x+, ADetailer prompt: \"a face,\\nsmiling \\\"widely\\\"\", "
      "Lora hashes: \"add_detail: 0123456789ab\", Version: v1.10.1\r\n");
  EXPECT_EQ(info.prompt, "masterpiece, 1girl,\n(detailed eyes:1.3) <lora:add_detail:0.7>");
  EXPECT_EQ(info.negative_prompt, "worst quality,\nlowres");
  const Fields want = {{"Steps", "28"}, {"Sampler", "DPM++ 2M"}, {"Schedule type", "Karras"}, {"CFG scale", "5"},
                       {"Seed", "3141592653"}, {"Size", "832x1216"}, {"Model hash", "31e35c80fc"},
                       {"Model", "sd_xl_base_1.0"}, {"Denoising strength", "0.4"}, {"Hires upscale", "1.5"},
                       {"Hires upscaler", "R-ESRGAN 4x+"}, {"ADetailer prompt", "a face,\nsmiling \"widely\""},
                       {"Lora hashes", "add_detail: 0123456789ab"}, {"Version", "v1.10.1"}};
  EXPECT_EQ(info.fields, want);
  ASSERT_NE(info.find("Seed"), nullptr);
  EXPECT_EQ(*info.find("Seed"), "3141592653");
  EXPECT_EQ(info.find("Clip skip"), nullptr);
}

TEST(GenerationParameters, ParsesAsA1111AtTheEdges) {
  // Fewer than 3 pairs on the last line: it is prompt text.
  Infotext info = parse_infotext("a sign that says: hello, world\nStyle: none, Mood: calm");
  EXPECT_EQ(info.prompt, "a sign that says: hello, world\nStyle: none, Mood: calm");
  EXPECT_TRUE(info.fields.empty());
  // An empty value is skipped (A1111 fails on it); a later duplicate replaces the first in place; a
  // quoted value followed by more text is taken as it stands; one-letter keys do not match.
  info = parse_infotext("p\nSteps: 20, Model: , Seed: 1, Steps: 30, Model hash: \"ab\" cd, x: 1, Size: 1x1");
  EXPECT_EQ(info.prompt, "p");
  const Fields want = {{"Steps", "30"}, {"Seed", "1"}, {"Model hash", "\"ab\" cd"}, {"Size", "1x1"}};
  EXPECT_EQ(info.fields, want);
  // A quoted value that is not valid JSON stays as it is; an empty text has nothing.
  EXPECT_EQ(parse_infotext("Steps: 1, Seed: 2, Model: \"a\\qb\"").fields.back().second, "\"a\\qb\"");
  info = parse_infotext("");
  EXPECT_TRUE(info.prompt.empty() && info.negative_prompt.empty() && info.fields.empty());
  // Keys and values beyond ASCII.
  info = parse_infotext("\u732b\nSteps: 2, Sampler: Euler, Modèle: caf\u00e9, Seed: 3");
  EXPECT_EQ(info.prompt, "\u732b");
  EXPECT_EQ(info.fields[2], (std::pair<std::string, std::string>{"Modèle", "caf\u00e9"}));
}

}  // namespace
}  // namespace rf::stable_diffusion
