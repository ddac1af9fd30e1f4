#include "models/stable_diffusion/expected_tensors.h"

#include <fmt/format.h>

#include <utility>

namespace rf::stable_diffusion {

namespace {

using Shape = std::vector<std::uint64_t>;

std::uint64_t dim(int value) { return static_cast<std::uint64_t>(value); }

std::string join(const std::string& path, const std::string& name) {
  if (path.empty()) return name;
  return name.empty() ? path : path + "." + name;
}

// A module's name in diffusers' layout and in the single file's; most share theirs, so one name
// converts implicitly.
struct Names {
  Names(const char* both) : name(both), original(both) {}
  Names(std::string both) : name(both), original(std::move(both)) {}
  Names(std::string diffusers, std::string single_file)
      : name(std::move(diffusers)), original(std::move(single_file)) {}
  std::string name, original;
};

// The parameters of one module, named below its path in both layouts.
class Module {
 public:
  Module(std::vector<Parameter>& out, Names path) : out_(&out), path_(std::move(path)) {}

  Module child(const Names& names) const {
    return Module(*out_, {join(path_.name, names.name), join(path_.original, names.original)});
  }

  // One tensor: `name` below this module in diffusers' layout, `stored.name` below it in the file.
  void tensor(const std::string& name, Shape shape, StoredAs stored) const {
    stored.name = join(path_.original, stored.name);
    out_->push_back({join(path_.name, name), std::move(shape), std::move(stored)});
  }

  // A layer's weight of `shape` and, with `bias`, its bias of shape[0].
  void layer(const Names& names, Shape shape, bool bias = true) const {
    const auto out = shape[0];
    tensor(join(names.name, "weight"), std::move(shape), {join(names.original, "weight")});
    if (bias) tensor(join(names.name, "bias"), {out}, {join(names.original, "bias")});
  }
  void norm(const Names& names, int channels) const { layer(names, {dim(channels)}); }
  void linear(const Names& names, int out, int in, bool bias = true) const { layer(names, {dim(out), dim(in)}, bias); }
  void conv(const Names& names, int out, int in, int kernel) const {
    layer(names, {dim(out), dim(in), dim(kernel), dim(kernel)});
  }

 private:
  std::vector<Parameter>* out_;
  Names path_;
};

void unet_resnet(const Module& m, int in, int out, int time_embed) {
  m.norm({"norm1", "in_layers.0"}, in);
  m.conv({"conv1", "in_layers.2"}, out, in, 3);
  m.linear({"time_emb_proj", "emb_layers.1"}, out, time_embed);
  m.norm({"norm2", "out_layers.0"}, out);
  m.conv({"conv2", "out_layers.3"}, out, out, 3);
  if (in != out) m.conv({"conv_shortcut", "skip_connection"}, out, in, 1);
}

void attention(const Module& m, int channels, int context) {
  m.linear("to_q", channels, channels, false);
  m.linear("to_k", channels, context, false);
  m.linear("to_v", channels, context, false);
  m.linear("to_out.0", channels, channels);
}

// diffusers' Transformer2DModel, LDM's SpatialTransformer: named alike below the block.
void spatial_transformer(const Module& m, int channels, int depth, const UnetConfig& config) {
  const auto projection = [&](const char* name) {
    if (config.linear_projection) {
      m.linear(name, channels, channels);
    } else {
      m.conv(name, channels, channels, 1);
    }
  };
  m.norm("norm", channels);
  projection("proj_in");
  for (int k = 0; k < depth; ++k) {
    const auto block = m.child(fmt::format("transformer_blocks.{}", k));
    block.norm("norm1", channels);
    attention(block.child("attn1"), channels, channels);
    block.norm("norm2", channels);
    attention(block.child("attn2"), channels, config.cross_attention_dim);
    block.norm("norm3", channels);
    block.linear("ff.net.0.proj", 8 * channels, channels);  // GEGLU: a value and a gate, 4x wide each
    block.linear("ff.net.2", channels, 4 * channels);
  }
  projection("proj_out");
}

// The down blocks (LDM's input_blocks 1...); returns the widths of the skip connections they leave
// for the up blocks, conv_in's first.
std::vector<int> unet_down(const Module& root, const UnetConfig& c) {
  std::vector<int> skips{c.levels[0].channels};
  int channels = skips[0], input_block = 1;
  for (std::size_t i = 0; i < c.levels.size(); ++i) {
    const auto& level = c.levels[i];
    for (int j = 0; j < c.layers_per_block; ++j, ++input_block) {
      const auto original = fmt::format("input_blocks.{}", input_block);
      unet_resnet(root.child({fmt::format("down_blocks.{}.resnets.{}", i, j), original + ".0"}), channels,
                  level.channels, c.time_embed_dim());
      if (level.attention) {
        spatial_transformer(root.child({fmt::format("down_blocks.{}.attentions.{}", i, j), original + ".1"}),
                            level.channels, level.transformer_depth, c);
      }
      channels = level.channels;
      skips.push_back(channels);
    }
    if (i + 1 < c.levels.size()) {
      root.conv(
          {fmt::format("down_blocks.{}.downsamplers.0.conv", i), fmt::format("input_blocks.{}.0.op", input_block++)},
          channels, channels, 3);
      skips.push_back(channels);
    }
  }
  return skips;
}

void unet_mid(const Module& root, const UnetConfig& c) {
  const int channels = c.levels.back().channels;
  unet_resnet(root.child({"mid_block.resnets.0", "middle_block.0"}), channels, channels, c.time_embed_dim());
  spatial_transformer(root.child({"mid_block.attentions.0", "middle_block.1"}), channels, c.mid_transformer_depth, c);
  unet_resnet(root.child({"mid_block.resnets.1", "middle_block.2"}), channels, channels, c.time_embed_dim());
}

// The up blocks (LDM's output_blocks), lowest resolution first, each ResNet reading a skip.
void unet_up(const Module& root, const UnetConfig& c, std::vector<int> skips) {
  const auto levels = c.levels.size();
  int channels = c.levels.back().channels, output_block = 0;
  for (std::size_t u = 0; u < levels; ++u) {
    const auto& level = c.levels[levels - 1 - u];
    for (int j = 0; j <= c.layers_per_block; ++j, ++output_block) {
      const auto original = fmt::format("output_blocks.{}", output_block);
      unet_resnet(root.child({fmt::format("up_blocks.{}.resnets.{}", u, j), original + ".0"}), channels + skips.back(),
                  level.channels, c.time_embed_dim());
      skips.pop_back();
      if (level.attention) {
        spatial_transformer(root.child({fmt::format("up_blocks.{}.attentions.{}", u, j), original + ".1"}),
                            level.channels, level.transformer_depth, c);
      }
      channels = level.channels;
    }
    if (u + 1 < levels) {
      // LDM puts the upsampler after the block's last ResNet and its attention, if any.
      const auto original = fmt::format("output_blocks.{}.{}.conv", output_block - 1, level.attention ? 2 : 1);
      root.conv({fmt::format("up_blocks.{}.upsamplers.0.conv", u), original}, channels, channels, 3);
    }
  }
}

void vae_resnet(const Module& m, int in, int out) {
  m.norm("norm1", in);
  m.conv("conv1", out, in, 3);
  m.norm("norm2", out);
  m.conv("conv2", out, out, 3);
  if (in != out) m.conv({"conv_shortcut", "nin_shortcut"}, out, in, 1);
}

// The single file keeps the projections as 1x1 convolutions [C, C, 1, 1]: the same bytes.
void vae_mid(const Module& m, const VaeConfig& c, int channels) {
  vae_resnet(m.child({"mid_block.resnets.0", "mid.block_1"}), channels, channels);
  if (c.mid_attention) {
    const auto attention = m.child({"mid_block.attentions.0", "mid.attn_1"});
    attention.norm({"group_norm", "norm"}, channels);
    attention.linear({"to_q", "q"}, channels, channels);
    attention.linear({"to_k", "k"}, channels, channels);
    attention.linear({"to_v", "v"}, channels, channels);
    attention.linear({"to_out.0", "proj_out"}, channels, channels);
  }
  vae_resnet(m.child({"mid_block.resnets.1", "mid.block_2"}), channels, channels);
}

void vae_encoder(const Module& m, const VaeConfig& c) {
  const auto& widths = c.block_out_channels;
  int channels = widths[0];
  m.conv("conv_in", channels, c.in_channels, 3);
  for (std::size_t i = 0; i < widths.size(); ++i) {
    for (int j = 0; j < c.layers_per_block; ++j) {
      vae_resnet(m.child({fmt::format("down_blocks.{}.resnets.{}", i, j), fmt::format("down.{}.block.{}", i, j)}),
                 channels, widths[i]);
      channels = widths[i];
    }
    if (i + 1 < widths.size()) {
      m.conv({fmt::format("down_blocks.{}.downsamplers.0.conv", i), fmt::format("down.{}.downsample.conv", i)},
             channels, channels, 3);
    }
  }
  vae_mid(m, c, channels);
  m.norm({"conv_norm_out", "norm_out"}, channels);
  m.conv("conv_out", 2 * c.latent_channels, channels, 3);  // the latent distribution's mean and log-variance
}

// LDM numbers the decoder's levels as the encoder's (up.{n-1} runs first); diffusers in run order.
void vae_decoder(const Module& m, const VaeConfig& c) {
  const auto& widths = c.block_out_channels;
  const auto levels = widths.size();
  int channels = widths.back();
  m.conv("conv_in", channels, c.latent_channels, 3);
  vae_mid(m, c, channels);
  for (std::size_t u = 0; u < levels; ++u) {
    const auto level = levels - 1 - u;
    for (int j = 0; j <= c.layers_per_block; ++j) {
      vae_resnet(m.child({fmt::format("up_blocks.{}.resnets.{}", u, j), fmt::format("up.{}.block.{}", level, j)}),
                 channels, widths[level]);
      channels = widths[level];
    }
    if (u + 1 < levels) {
      m.conv({fmt::format("up_blocks.{}.upsamplers.0.conv", u), fmt::format("up.{}.upsample.conv", level)}, channels,
             channels, 3);
    }
  }
  m.norm({"conv_norm_out", "norm_out"}, channels);
  m.conv("conv_out", c.out_channels, channels, 3);
}

}  // namespace

std::vector<Parameter> unet_parameters(const UnetConfig& c) {
  std::vector<Parameter> out;
  const Module root(out, "");
  const int time_embed = c.time_embed_dim(), channels = c.levels.at(0).channels;
  root.linear({"time_embedding.linear_1", "time_embed.0"}, time_embed, channels);
  root.linear({"time_embedding.linear_2", "time_embed.2"}, time_embed, time_embed);
  if (c.text_time_embedding) {
    root.linear({"add_embedding.linear_1", "label_emb.0.0"}, time_embed, c.addition_embed_input_dim);
    root.linear({"add_embedding.linear_2", "label_emb.0.2"}, time_embed, time_embed);
  }
  root.conv({"conv_in", "input_blocks.0.0"}, channels, c.in_channels, 3);
  const auto skips = unet_down(root, c);
  unet_mid(root, c);
  unet_up(root, c, skips);
  root.norm({"conv_norm_out", "out.0"}, channels);
  root.conv({"conv_out", "out.2"}, c.out_channels, channels, 3);
  return out;
}

std::vector<Parameter> vae_parameters(const VaeConfig& c) {
  std::vector<Parameter> out;
  const Module root(out, "");
  vae_encoder(root.child("encoder"), c);
  if (c.quant_conv) {
    root.conv("quant_conv", 2 * c.latent_channels, 2 * c.latent_channels, 1);
    root.conv("post_quant_conv", c.latent_channels, c.latent_channels, 1);
  }
  vae_decoder(root.child("decoder"), c);
  return out;
}

std::vector<Parameter> clip_parameters(const ClipTextConfig& c, ClipNaming original) {
  std::vector<Parameter> out;
  const bool open_clip = original == ClipNaming::open_clip;
  // A module's transformers name, and OpenCLIP's where the file is OpenCLIP's.
  const auto names = [&](std::string name, std::string open_clip_name) {
    return open_clip ? Names(std::move(name), std::move(open_clip_name)) : Names(std::move(name));
  };
  const Module root(out, "");
  const auto model = root.child(names("text_model", ""));
  const int hidden = c.hidden;
  model.layer(names("embeddings.token_embedding", "token_embedding"), {dim(c.vocab_size), dim(hidden)}, false);
  model.tensor("embeddings.position_embedding.weight", {dim(c.max_positions), dim(hidden)},
               {open_clip ? "positional_embedding" : "embeddings.position_embedding.weight"});
  for (int i = 0; i < c.layers; ++i) {
    const auto layer =
        model.child(names(fmt::format("encoder.layers.{}", i), fmt::format("transformer.resblocks.{}", i)));
    layer.norm(names("layer_norm1", "ln_1"), hidden);
    const char* projections[] = {"q", "k", "v"};
    for (int p = 0; p < 3; ++p) {
      const auto name = fmt::format("self_attn.{}_proj", projections[p]);
      if (!open_clip) {
        layer.linear(name, hidden, hidden);
        continue;
      }
      // OpenCLIP (torch's MultiheadAttention) stacks q, k and v in one projection.
      layer.tensor(name + ".weight", {dim(hidden), dim(hidden)}, {"attn.in_proj_weight", 3, p});
      layer.tensor(name + ".bias", {dim(hidden)}, {"attn.in_proj_bias", 3, p});
    }
    layer.linear(names("self_attn.out_proj", "attn.out_proj"), hidden, hidden);
    layer.norm(names("layer_norm2", "ln_2"), hidden);
    layer.linear(names("mlp.fc1", "mlp.c_fc"), c.intermediate, hidden);
    layer.linear(names("mlp.fc2", "mlp.c_proj"), hidden, c.intermediate);
  }
  model.norm(names("final_layer_norm", "ln_final"), hidden);
  if (c.projection_dim > 0) {
    root.tensor("text_projection.weight", {dim(c.projection_dim), dim(hidden)},
                {open_clip ? "text_projection" : "text_projection.weight", 1, 0, open_clip});
  }
  return out;
}

}  // namespace rf::stable_diffusion
