# SPDX-License-Identifier: MIT
# Warnings, sanitizers and include roots applied in one place to every lazycache target.

set(LC_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wimplicit-fallthrough -Werror=unused-result -Wno-missing-field-initializers)
if(LC_WERROR)
  list(APPEND LC_WARNINGS -Werror)
endif()

if(LC_SANITIZE)
  add_compile_options(-fsanitize=${LC_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${LC_SANITIZE})
endif()

# lc_target_defaults(TARGET): warnings + the repository root as include root ("common/status.h").
function(lc_target_defaults target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${LC_WARNINGS}>)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
endfunction()

# lc_add_library(NAME SRCS a.cpp b.cpp DEPS x y)
function(lc_add_library name)
  cmake_parse_arguments(A "" "" "SRCS;DEPS" ${ARGN})
  if(NOT A_SRCS)
    # A module with only headers so far.
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${name} INTERFACE ${A_DEPS})
    return()
  endif()
  add_library(${name} STATIC ${A_SRCS})
  lc_target_defaults(${name})
  target_link_libraries(${name} PUBLIC ${A_DEPS})
endfunction()

# lc_add_test(NAME SRCS ... DEPS ... [LABELS ...] [TIMEOUT s]): a Catch2 v2 test binary
# registered with CTest as one test per binary.
function(lc_add_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${A_SRCS})
  lc_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${A_DEPS} lc_catch_main)
  add_test(NAME ${name} COMMAND ${name})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${A_TIMEOUT} LABELS "${A_LABELS}")
endfunction()
