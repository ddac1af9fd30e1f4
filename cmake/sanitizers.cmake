# ROCMFORGE_SANITIZE (the `sanitize` preset): everything built with AddressSanitizer and
# UndefinedBehaviorSanitizer, stopping at the first finding. With clang it also carries libFuzzer's
# coverage instrumentation and builds the fuzz targets (tests/fuzz); gcc builds the sanitized
# suite alone.
option(ROCMFORGE_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
set(ROCMFORGE_FUZZ OFF)
if(ROCMFORGE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    add_compile_options(-fsanitize=fuzzer-no-link)
    set(ROCMFORGE_FUZZ ON)
  endif()
endif()

# ROCMFORGE_TSAN (the `tsan` preset): ThreadSanitizer, for the multithreaded parts (the engine's
# scheduler and the server); it cannot be combined with ASan.
option(ROCMFORGE_TSAN "Build with ThreadSanitizer" OFF)
if(ROCMFORGE_TSAN)
  if(ROCMFORGE_SANITIZE)
    message(FATAL_ERROR "ROCMFORGE_TSAN and ROCMFORGE_SANITIZE exclude each other: ThreadSanitizer cannot run beside ASan")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()
