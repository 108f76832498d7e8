# Sanitizer and fuzzer builds (docs/hardening.md). Both are off by default and
# change nothing in a normal build.
#   -DFUSEJIT_SANITIZE=address,undefined   ASan + UBSan (any UBSan finding aborts)
#   -DFUSEJIT_SANITIZE=thread              TSan
#   -DFUSEJIT_BUILD_FUZZERS=ON             libFuzzer targets (clang only), ASan + UBSan
set(FUSEJIT_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread | empty")
option(FUSEJIT_BUILD_FUZZERS "Build the libFuzzer targets in tests/fuzz (clang only)" OFF)

if(FUSEJIT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "FUSEJIT_BUILD_FUZZERS needs clang (-DCMAKE_CXX_COMPILER=clang++-14)")
  endif()
  if(NOT FUSEJIT_SANITIZE)
    set(FUSEJIT_SANITIZE "address,undefined")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()

if(FUSEJIT_SANITIZE)
  add_compile_options(-fsanitize=${FUSEJIT_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${FUSEJIT_SANITIZE})
  if(FUSEJIT_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
  message(STATUS "fusejit: sanitizers ${FUSEJIT_SANITIZE}")
endif()
