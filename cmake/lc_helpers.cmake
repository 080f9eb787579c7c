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

# Hardening of the shipped binary (Debian's build flags; lintian --pedantic's hardening-no-bindnow
# and hardening-no-fortify-functions): full RELRO with immediate binding for every optimised
# build without sanitizers, and fortified libc calls plus the stack protector for the CLI's own
# sources (lc_harden(TARGET), tools/). Not the libraries yet: with _FORTIFY_SOURCE glibc marks
# calls such as fchmodat warn_unused_result, which -Werror=unused-result turns into errors at
# sites that ignore them on purpose. Not at -O0 (_FORTIFY_SOURCE needs optimisation) nor with
# sanitizers (it hides calls from ASan's interceptors).
option(LC_HARDEN "Hardening flags (RELRO, BIND_NOW; fortify and stack protector in tools/) in optimised builds" ON)
if(LC_HARDEN AND NOT LC_SANITIZE)
  set(LC_HARDENED $<CONFIG:Release,RelWithDebInfo,MinSizeRel>)
else()
  set(LC_HARDENED 0)  # $<0:...> is empty
endif()
add_link_options($<${LC_HARDENED}:LINKER:-z,relro> $<${LC_HARDENED}:LINKER:-z,now>)
function(lc_harden target)
  target_compile_options(${target} PRIVATE $<${LC_HARDENED}:-U_FORTIFY_SOURCE> $<${LC_HARDENED}:-D_FORTIFY_SOURCE=2>
                         $<${LC_HARDENED}:-fstack-protector-strong>)
endfunction()

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
