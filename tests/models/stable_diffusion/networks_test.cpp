// The networks and text-to-image on the CPU backend against diffusers, within 1e-4 of the largest
// reference value (fp32 throughout) and images at 45 dB PSNR or better.
#include "backend/cpu/image_backend.h"
#include "models/stable_diffusion/tiny_models.h"
#include "util/thread_pool.h"

namespace rf::stable_diffusion::tiny {
namespace {

class CpuNetworks : public Networks {
 protected:
  CpuNetworks() : Networks({1e-4, 45.0, 1e-4}) { use(backend_); }
  ThreadPool pool_{2};
  cpu::CpuImageBackend backend_{pool_};
};

TEST_P(CpuNetworks, TextEncoderMatchesTransformers) { check_text_encoders(); }
TEST_P(CpuNetworks, UnetMatchesDiffusers) { check_unet(); }
TEST_P(CpuNetworks, VaeMatchesDiffusers) { check_vae(); }
TEST_P(CpuNetworks, TiledVaeMatchesDiffusers) { check_vae_tiling(); }
INSTANTIATE_TEST_SUITE_P(TinyModels, CpuNetworks, ::testing::Values("sd15", "sd2", "sdxl", "sd15_inpaint"));

class CpuTextToImage : public CpuNetworks {};
TEST_P(CpuTextToImage, MatchesDiffusers) { check_text_to_image(); }
TEST_P(CpuTextToImage, ImageToImageMatchesDiffusers) { check_image_to_image(); }
INSTANTIATE_TEST_SUITE_P(TinyModels, CpuTextToImage, ::testing::Values("sd15", "sd2", "sdxl"));

class CpuInpainting : public CpuNetworks {};
TEST_P(CpuInpainting, MatchesDiffusers) { check_inpainting(); }
INSTANTIATE_TEST_SUITE_P(TinyModels, CpuInpainting, ::testing::Values("sd15_inpaint"));

class CpuLora : public CpuNetworks {};
TEST_P(CpuLora, MatchesDiffusers) { check_lora(); }
INSTANTIATE_TEST_SUITE_P(TinyModels, CpuLora, ::testing::Values("sd15"));

}  // namespace
}  // namespace rf::stable_diffusion::tiny
