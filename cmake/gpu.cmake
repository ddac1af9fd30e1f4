# The GPU backend: one kernel tree, src/backend/gpu, built as CUDA by nvcc or as HIP by ROCm's clang.
#
#   ROCMFORGE_GPU          none | cuda | hip | hip-cpu
#   ROCMFORGE_GPU_TARGETS  CUDA architectures (80;90) or AMD gfx targets (gfx90a;gfx940;gfx908;gfx1030)
#
# rf_gpu holds the .cu kernels (compiled for the device) and the .cpp host code (compiled by the C++
# compiler against the vendor's runtime headers); its public headers are plain C++, so .cpp callers
# need no GPU compiler.
#
# What CMake 3.25 needs on this project's machines, found by trying:
# - CUDA: CMake 3.25 does not know nvcc's C++20 flag (CMake 3.26 does), and CUDA sources inherit
#   CXX_STANDARD 20; we tell it the flag. The shared runtime is linked (CUDA::cudart), never both it and
#   the static one.
# - HIP: CMake's HIP language expects ROCm's own layout (<root>/lib/cmake/hip-lang, a clang that finds
#   the device libraries itself). Debian 12's HIP 5.2 packages use the multiarch layout and a clang++-15
#   that needs --rocm-path/--hip-device-lib-path, as its hipcc passes them. For that layout we point
#   CMake at a shim root whose lib/cmake/hip-lang links to the real package, pass those flags, and hand
#   CMAKE_LIBRARY_ARCHITECTURE to the compiler checks so that hip-lang's own find_dependency calls work.
#   A ROCm install under /opt/rocm needs none of this (use its clang: -DCMAKE_HIP_COMPILER=
#   /opt/rocm/llvm/bin/clang++ if `hipconfig --hipclangpath` does not already point there).
# - hip-cpu: a test of the HIP path, not a backend for users. The .cu files are compiled as C++ by the
#   host compiler against ROCm's HIP CPU runtime (third_party/hip-cpu, header-only), which runs the
#   HIP kernels on the CPU with 64-wide wavefronts; it is built on the standard parallel algorithms,
#   which libstdc++ runs on TBB.

set(ROCMFORGE_GPU none CACHE STRING "GPU backend: none, cuda, hip or hip-cpu (HIP kernels on the CPU, a test)")
set_property(CACHE ROCMFORGE_GPU PROPERTY STRINGS none cuda hip hip-cpu)
if(ROCMFORGE_GPU STREQUAL "none")
  return()
elseif(NOT ROCMFORGE_GPU MATCHES "^(cuda|hip|hip-cpu)$")
  message(FATAL_ERROR "ROCMFORGE_GPU must be none, cuda, hip or hip-cpu, not '${ROCMFORGE_GPU}'")
endif()

if(ROCMFORGE_GPU STREQUAL "cuda")
  set(default_targets "80;90")
else()
  set(default_targets "gfx90a;gfx940;gfx908;gfx1030")
endif()
set(ROCMFORGE_GPU_TARGETS "${default_targets}" CACHE STRING
    "GPU targets to compile for: CUDA architectures (80;90) or AMD gfx targets (gfx90a;gfx942;gfx1100;...)")

function(rf_use_debian_hip_layout)
  find_path(hip_lang_dir hip-lang-config.cmake
            PATHS $ENV{ROCM_PATH} /opt/rocm /usr
            PATH_SUFFIXES lib/cmake/hip-lang lib/${CMAKE_LIBRARY_ARCHITECTURE}/cmake/hip-lang
            NO_DEFAULT_PATH NO_CACHE)
  if(NOT hip_lang_dir OR hip_lang_dir MATCHES "/lib/cmake/hip-lang$")
    return()  # ROCm's own layout (or nothing found: let CMake's HIP support report it)
  endif()
  get_filename_component(rocm_root "${hip_lang_dir}/../../../.." ABSOLUTE)
  find_path(device_libs ockl.bc PATHS ${rocm_root}/lib/${CMAKE_LIBRARY_ARCHITECTURE}/amdgcn/bitcode
            NO_DEFAULT_PATH NO_CACHE REQUIRED)
  set(shim ${CMAKE_BINARY_DIR}/hip-root)
  file(MAKE_DIRECTORY ${shim}/lib/cmake)
  file(CREATE_LINK ${hip_lang_dir} ${shim}/lib/cmake/hip-lang SYMBOLIC)
  set(CMAKE_HIP_COMPILER_ROCM_ROOT ${shim} PARENT_SCOPE)
  set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES CMAKE_LIBRARY_ARCHITECTURE PARENT_SCOPE)
  string(APPEND CMAKE_HIP_FLAGS " --rocm-path=${rocm_root} --hip-device-lib-path=${device_libs}")
  set(CMAKE_HIP_FLAGS "${CMAKE_HIP_FLAGS}" PARENT_SCOPE)
  if(NOT CMAKE_HIP_COMPILER AND NOT DEFINED ENV{HIPCXX})
    # Debian's hipcc calls clang++-15, the LLVM its HIP runtime and device libraries were built with.
    find_program(debian_hip_clang clang++-15 REQUIRED NO_CACHE)
    set(CMAKE_HIP_COMPILER ${debian_hip_clang} PARENT_SCOPE)
  endif()
endfunction()

if(ROCMFORGE_GPU STREQUAL "cuda")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
  set(CMAKE_CUDA_ARCHITECTURES "${ROCMFORGE_GPU_TARGETS}")
  enable_language(CUDA)
  if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  find_package(CUDAToolkit REQUIRED)
elseif(ROCMFORGE_GPU STREQUAL "hip-cpu")
  find_package(TBB REQUIRED)
else()
  rf_use_debian_hip_layout()
  # Every target that links HIP objects links with clang and these targets (not CMake's default).
  set(CMAKE_HIP_ARCHITECTURES "${ROCMFORGE_GPU_TARGETS}")
  enable_language(HIP)
  find_package(hip CONFIG REQUIRED)
endif()

# src/backend/gpu's folders group the kernels by job (runtime, attention, gemm, norm, ...).
file(GLOB_RECURSE gpu_kernels CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/gpu/*.cu)
file(GLOB_RECURSE gpu_host_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/gpu/*.cpp)
# Prefill GEMM glue, one file per vendor BLAS: cuBLAS on CUDA. On HIP the project's tiled kernel
# (gemm_tiled.cu, built everywhere) serves alone: Debian's ROCm packages have no hipBLAS to glue to.
list(FILTER gpu_host_sources EXCLUDE REGEX "/gemm_(cublas|tiled_only)\\.cpp$")
if(ROCMFORGE_GPU STREQUAL "cuda")
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/gemm/gemm_cublas.cpp)
else()
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/gemm/gemm_tiled_only.cpp)
endif()
# Convolutions' vendor glue: cuDNN where the CUDA toolkit has it (NVIDIA ships it apart from the
# toolkit, so it is optional); HIP's MIOpen has no Debian package to build against.
list(FILTER gpu_host_sources EXCLUDE REGEX "/conv2d_cudnn(_absent)?\\.cpp$")
set(ROCMFORGE_CUDNN_FOUND OFF)
if(ROCMFORGE_GPU STREQUAL "cuda")
  find_path(CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(CUDNN_INCLUDE_DIR AND CUDNN_LIBRARY)
    set(ROCMFORGE_CUDNN_FOUND ON)
  endif()
endif()
if(ROCMFORGE_CUDNN_FOUND)
  message(STATUS "cuDNN: ${CUDNN_LIBRARY} (convolutions on cuDNN)")
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/conv/conv2d_cudnn.cpp)
else()
  if(ROCMFORGE_GPU STREQUAL "cuda")
    message(STATUS "cuDNN not found: convolutions on the project's implicit GEMM")
  endif()
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/conv/conv2d_cudnn_absent.cpp)
endif()
# Collectives for tensor parallelism: NCCL from the CUDA toolkit, RCCL under HIP where it is installed
# (Debian 12 has no package of it); without one, a build runs one GPU at a time and says so.
list(FILTER gpu_host_sources EXCLUDE REGEX "/communicator_(nccl|absent)\\.cpp$")
if(ROCMFORGE_GPU STREQUAL "cuda")
  find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(NCCL_LIBRARY NAMES nccl libnccl.so.2 HINTS ${CUDAToolkit_LIBRARY_DIR})
elseif(ROCMFORGE_GPU STREQUAL "hip")
  find_path(NCCL_INCLUDE_DIR rccl/rccl.h PATHS $ENV{ROCM_PATH}/include /opt/rocm/include)
  find_library(NCCL_LIBRARY NAMES rccl PATHS $ENV{ROCM_PATH}/lib /opt/rocm/lib)
endif()
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  message(STATUS "Collectives: ${NCCL_LIBRARY} (tensor parallelism)")
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/collective/communicator_nccl.cpp)
else()
  if(NOT ROCMFORGE_GPU STREQUAL "hip-cpu")
    message(STATUS "No NCCL/RCCL found: one GPU at a time (no tensor parallelism)")
  endif()
  list(APPEND gpu_host_sources ${PROJECT_SOURCE_DIR}/src/backend/gpu/collective/communicator_absent.cpp)
endif()
add_library(rf_gpu STATIC ${gpu_kernels} ${gpu_host_sources})
target_include_directories(rf_gpu PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(rf_gpu PUBLIC rf_model)
if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
  target_include_directories(rf_gpu PRIVATE ${NCCL_INCLUDE_DIR})
  target_link_libraries(rf_gpu PUBLIC ${NCCL_LIBRARY})
endif()
if(ROCMFORGE_CUDNN_FOUND)
  target_include_directories(rf_gpu PRIVATE ${CUDNN_INCLUDE_DIR})
  target_link_libraries(rf_gpu PUBLIC ${CUDNN_LIBRARY})
endif()

if(ROCMFORGE_GPU STREQUAL "cuda")
  set_target_properties(rf_gpu PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON CUDA_EXTENSIONS OFF)
  target_compile_definitions(rf_gpu PUBLIC ROCMFORGE_GPU_CUDA)
  # cuBLAS is public: the GEMM benchmark measures its peak directly.
  target_link_libraries(rf_gpu PUBLIC CUDA::cudart CUDA::cublas)
  # fmt 9 turns its constexpr off under nvcc yet still calls those functions from constexpr ones, so a
  # .cu file that includes it (util/error.h, by way of device_buffer.h) does not compile; nvcc 13 needs
  # no such caution.
  target_compile_definitions(rf_gpu PUBLIC $<$<COMPILE_LANGUAGE:CUDA>:FMT_USE_CONSTEXPR=1>)
elseif(ROCMFORGE_GPU STREQUAL "hip")
  set_source_files_properties(${gpu_kernels} PROPERTIES LANGUAGE HIP)
  set_target_properties(rf_gpu PROPERTIES HIP_STANDARD 20 HIP_STANDARD_REQUIRED ON HIP_EXTENSIONS OFF)
  target_compile_definitions(rf_gpu PUBLIC ROCMFORGE_GPU_HIP)
  target_link_libraries(rf_gpu PUBLIC hip::host)
  # clang repeats --offload-arch on the link line, where it has nothing to compile.
  target_link_options(rf_gpu INTERFACE $<$<LINK_LANGUAGE:HIP>:-Wno-unused-command-line-argument>)
endif()
if(ROCMFORGE_GPU STREQUAL "hip-cpu")
  # CMake passes -x c++ for sources whose language is set explicitly.
  set_source_files_properties(${gpu_kernels} PROPERTIES LANGUAGE CXX)
  target_compile_definitions(rf_gpu PUBLIC ROCMFORGE_GPU_HIP ROCMFORGE_GPU_HIP_CPU)
  target_include_directories(rf_gpu SYSTEM PUBLIC ${PROJECT_SOURCE_DIR}/third_party/hip-cpu/include)
  target_link_libraries(rf_gpu PUBLIC TBB::tbb Threads::Threads)
endif()

# Each model family's GPU half (models/<family>/gpu_*.cpp, host code on rf_gpu's kernels).
file(GLOB llama_gpu_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/models/llama/gpu_*.cpp)
target_sources(rf_llama PRIVATE ${llama_gpu_sources})
target_link_libraries(rf_llama PRIVATE rf_gpu)

# The engine picks the backend (engine/backend_select.cpp): it runs on rf_gpu when this is defined.
# Both link rf_gpu privately: only their GPU halves include its headers, so the GPU vendor's include
# folders and definitions reach no other source, which then compiles as in the cpu preset.
target_link_libraries(rf_engine PRIVATE rf_gpu)
target_compile_definitions(rf_engine PRIVATE ROCMFORGE_GPU_BACKEND="${ROCMFORGE_GPU}")

# The kernel timeline's CUPTI injection library (tools/kernel_trace), for tools/gpu_check.sh.
if(ROCMFORGE_GPU STREQUAL "cuda" AND TARGET CUDA::cupti)
  add_library(kernel_trace MODULE ${PROJECT_SOURCE_DIR}/tools/kernel_trace/kernel_trace.cpp)
  target_link_libraries(kernel_trace PRIVATE CUDA::cupti)
endif()
