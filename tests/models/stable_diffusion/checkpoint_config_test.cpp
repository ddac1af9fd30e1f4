// The configs: a folder's as its JSON files say, and a single file's inferred from its shapes,
// which equal the folder's but for the fields no shape tells (single_file.h), listed exactly.
#include <algorithm>

#include "checkpoint_fixture.h"
#include "models/stable_diffusion/config_json.h"

namespace rf::stable_diffusion {
namespace {

using nlohmann::json;

// diffusers' per-block fields: an int for every level, or a list.
std::vector<int> per_level(const json& value, std::size_t levels) {
  return value.is_array() ? value.get<std::vector<int>>() : std::vector<int>(levels, value.get<int>());
}

void expect_unet_as_json(const UnetConfig& unet, const json& j) {
  const auto widths = j["block_out_channels"].get<std::vector<int>>();
  ASSERT_EQ(unet.levels.size(), widths.size());
  const auto heads = per_level(j["attention_head_dim"], widths.size());  // num_attention_heads is null
  const auto depths = per_level(j["transformer_layers_per_block"], widths.size());
  for (std::size_t i = 0; i < widths.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(unet.levels[i].channels, widths[i]);
    EXPECT_EQ(unet.levels[i].attention, j["down_block_types"][i] == "CrossAttnDownBlock2D");
    EXPECT_EQ(unet.levels[i].heads, heads[i]);
    EXPECT_EQ(unet.levels[i].transformer_depth, depths[i]);
  }
  EXPECT_EQ(unet.mid_heads, heads.back());
  EXPECT_EQ(unet.mid_transformer_depth, depths.back());
  EXPECT_EQ(unet.in_channels, j["in_channels"]);
  EXPECT_EQ(unet.layers_per_block, j["layers_per_block"]);
  EXPECT_EQ(unet.cross_attention_dim, j["cross_attention_dim"]);
  EXPECT_EQ(unet.linear_projection, j["use_linear_projection"]);
  EXPECT_EQ(unet.upcast_attention, j["upcast_attention"]);
  EXPECT_EQ(unet.norm_groups, j["norm_num_groups"]);
  EXPECT_EQ(unet.text_time_embedding, j["addition_embed_type"] == "text_time");
  if (unet.text_time_embedding) {
    EXPECT_EQ(unet.addition_time_embed_dim, j["addition_time_embed_dim"]);
    EXPECT_EQ(unet.addition_embed_input_dim, j["projection_class_embeddings_input_dim"]);
  }
}

void expect_text_as_json(const ClipTextConfig& text, const json& j, const json& tokenizer, bool projection) {
  EXPECT_EQ(text.hidden, j["hidden_size"]);
  EXPECT_EQ(text.layers, j["num_hidden_layers"]);
  EXPECT_EQ(text.heads, j["num_attention_heads"]);
  EXPECT_EQ(text.intermediate, j["intermediate_size"]);
  EXPECT_EQ(text.quick_gelu, j["hidden_act"] == "quick_gelu");
  EXPECT_EQ(text.projection_dim, projection ? j["projection_dim"].get<int>() : 0);
  EXPECT_EQ(text.padding, tokenizer["pad_token"] == "!" ? ClipPadding::Zero : ClipPadding::EndOfText);
}

TEST(SdConfig, FolderConfigsAsTheirJson) {
  for (const auto* arch : fixture::kArchitectures) {
    SCOPED_TRACE(arch);
    const auto dir = fixture::folder(arch);
    const auto config = Checkpoint::open(dir, fixture::options()).config();
    const auto index = fixture::read_json(dir + "/model_index.json");
    expect_unet_as_json(config.unet, fixture::read_json(dir + "/unet/config.json"));
    const auto vae = fixture::read_json(dir + "/vae/config.json");
    EXPECT_EQ(config.vae.block_out_channels, vae["block_out_channels"].get<std::vector<int>>());
    EXPECT_EQ(config.vae.scaling_factor, vae["scaling_factor"].get<float>());
    EXPECT_EQ(config.vae.force_upcast, vae["force_upcast"]);
    expect_text_as_json(config.text_encoder, fixture::read_json(dir + "/text_encoder/config.json"),
                        fixture::read_json(dir + "/tokenizer/tokenizer_config.json"), false);
    ASSERT_EQ(config.text_encoder_2.has_value(), index.contains("text_encoder_2"));
    if (config.text_encoder_2) {
      expect_text_as_json(*config.text_encoder_2, fixture::read_json(dir + "/text_encoder_2/config.json"),
                          fixture::read_json(dir + "/tokenizer_2/tokenizer_config.json"), true);
    }
    const auto scheduler = fixture::read_json(dir + "/scheduler/scheduler_config.json");
    EXPECT_EQ(config.scheduler.prediction,
              scheduler["prediction_type"] == "v_prediction" ? Prediction::v : Prediction::epsilon);
    EXPECT_EQ(config.scheduler.steps_offset, scheduler["steps_offset"]);
    EXPECT_EQ(config.force_zeros_for_empty_prompt, index.value("force_zeros_for_empty_prompt", false));
  }
}

// The brief's spot checks, as the fixture generator's docstring describes the models.
TEST(SdConfig, FolderSpotChecks) {
  const auto sdxl = Checkpoint::open(fixture::folder("sdxl"), fixture::options()).config();
  EXPECT_EQ(sdxl.architecture, Architecture::sdxl);
  ASSERT_EQ(sdxl.unet.levels.size(), 3u);
  EXPECT_EQ(sdxl.unet.levels[2].transformer_depth, 2);
  EXPECT_EQ(sdxl.unet.levels[2].heads, 2);
  EXPECT_FALSE(sdxl.unet.levels[0].attention);
  EXPECT_EQ(sdxl.unet.mid_transformer_depth, 2);
  EXPECT_EQ(sdxl.unet.addition_embed_input_dim, 8 * 6 + sdxl.text_encoder_2->projection_dim);
  EXPECT_TRUE(sdxl.force_zeros_for_empty_prompt);
  EXPECT_EQ(sdxl.text_encoder.padding, ClipPadding::EndOfText);
  EXPECT_EQ(sdxl.text_encoder_2->padding, ClipPadding::Zero);
  EXPECT_FALSE(sdxl.text_encoder_2->quick_gelu);
  EXPECT_EQ(sdxl.text_encoder_2->projection_dim, sdxl.text_encoder_2->hidden + 4);
  EXPECT_FLOAT_EQ(sdxl.vae.scaling_factor, 0.13025f);

  const auto sd2 = Checkpoint::open(fixture::folder("sd2"), fixture::options()).config();
  EXPECT_EQ(sd2.architecture, Architecture::sd2);
  EXPECT_TRUE(sd2.unet.linear_projection);
  EXPECT_TRUE(sd2.unet.upcast_attention);
  EXPECT_EQ(sd2.scheduler.prediction, Prediction::v);
  EXPECT_EQ(sd2.text_encoder.padding, ClipPadding::Zero);
  EXPECT_EQ(sd2.text_encoder.projection_dim, 0);

  const auto sd15 = Checkpoint::open(fixture::folder("sd15"), fixture::options()).config();
  EXPECT_EQ(sd15.architecture, Architecture::sd1);
  EXPECT_FALSE(sd15.unet.linear_projection);
  EXPECT_EQ(sd15.scheduler.spacing, Spacing::leading);
  EXPECT_FALSE(sd15.force_zeros_for_empty_prompt);

  EXPECT_EQ(Checkpoint::open(fixture::folder("sd15_inpaint"), fixture::options()).config().unet.in_channels, 9);
}

// Which fields a single file's shapes cannot tell, and why: the config inferred from them differs
// from the folder's in exactly these (the fixtures' tiny models break the published rules).
const std::pair<std::string_view, std::string_view> kUnreadable[] = {
    {"heads", "no shape holds them: the published rule, SD 1.x 8, SD 2.x and SDXL channels / 64"},
    {"sample_size", "the published training size; the fixture's images are 64 px"},
    {"force_upcast", "true in every fixture (AutoencoderKL's default); the published SD 1.x/2.x never upcast"},
};

std::vector<std::string> expected_differences(const std::string& arch) {
  std::vector<std::string> unet = {"unet.mid_heads", "unet.sample_size"};
  std::vector<std::string> vae = {"vae.force_upcast", "vae.sample_size"};
  // SD 1.x's 8 heads differ from the fixtures' 1 everywhere; channels / 64 rounds up to the fixtures'
  // 1 head but not to their 2 (sd2 level 1, sdxl level 2); SDXL's VAE upcasts, as the fixture's.
  if (arch == "sd2") unet.insert(unet.begin(), "unet.levels[1].heads");
  if (arch == "sdxl") {
    unet.insert(unet.begin(), "unet.levels[2].heads");
    std::erase(vae, "vae.force_upcast");
  }
  if (arch == "sd15" || arch == "sd15_inpaint") {
    unet.insert(unet.begin(), {"unet.levels[0].heads", "unet.levels[1].heads"});
  }
  unet.insert(unet.end(), vae.begin(), vae.end());
  return unet;
}

// The inferred config with the fields of kUnreadable copied from the folder's.
PipelineConfig with_unreadable_fields(PipelineConfig inferred, const PipelineConfig& folder) {
  for (std::size_t i = 0; i < inferred.unet.levels.size() && i < folder.unet.levels.size(); ++i) {
    inferred.unet.levels[i].heads = folder.unet.levels[i].heads;
  }
  inferred.unet.mid_heads = folder.unet.mid_heads;
  inferred.text_encoder.heads = folder.text_encoder.heads;
  if (inferred.text_encoder_2 && folder.text_encoder_2) inferred.text_encoder_2->heads = folder.text_encoder_2->heads;
  inferred.unet.sample_size = folder.unet.sample_size;
  inferred.vae.sample_size = folder.vae.sample_size;
  inferred.vae.force_upcast = folder.vae.force_upcast;
  return inferred;
}

TEST(SdConfig, InferredFromShapesDiffersOnlyWhereShapesCannotTell) {
  for (const auto& [field, why] : kUnreadable) fmt::print("  {:<13} {}\n", field, why);
  for (const auto* arch : fixture::kArchitectures) {
    SCOPED_TRACE(arch);
    const auto inferred = Checkpoint::open(fixture::single_file(arch), fixture::options()).config();
    const auto folder = Checkpoint::open(fixture::folder(arch), fixture::options()).config();
    const auto differences = fixture::differences(inferred, folder);
    std::vector<std::string> names;
    for (const auto& d : differences) names.push_back(d.substr(0, d.find(':')));
    fmt::print("  {:<13} inferred vs folder: {}\n", arch, fmt::join(differences, "; "));
    EXPECT_EQ(names, expected_differences(arch));
    const auto patched = with_unreadable_fields(inferred, folder);
    EXPECT_TRUE(patched == folder) << fmt::format("{}", fmt::join(fixture::differences(patched, folder), "\n"));
  }
}

TEST(SdConfig, SchedulerJson) {
  const auto sd15 = fixture::read_json(fixture::folder("sd15") + "/scheduler/scheduler_config.json");
  const auto config = scheduler_config_from_json(sd15, "sd15");
  EXPECT_EQ(config.beta_schedule, BetaSchedule::scaled_linear);
  EXPECT_EQ(config.beta_start, sd15["beta_start"].get<double>());
  EXPECT_EQ(config.beta_end, sd15["beta_end"].get<double>());
  EXPECT_EQ(config.set_alpha_to_one, false);
  EXPECT_THROW(scheduler_config_from_json(json{{"trained_betas", {0.1, 0.2}}}, "s"), Error);
  EXPECT_THROW(scheduler_config_from_json(json{{"rescale_betas_zero_snr", true}}, "s"), Error);
  try {
    scheduler_config_from_json(json{{"beta_schedule", "squaredcos_cap_v2"}}, "x/scheduler_config.json");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("x/scheduler_config.json: \"beta_schedule\": unknown beta schedule"), 0u)
        << e.what();
  }
}

}  // namespace
}  // namespace rf::stable_diffusion
