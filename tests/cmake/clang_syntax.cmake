# Checks that the library, the `halfgrad` command and the fuzz targets compile with clang too:
# each translation unit of the GCC tree (its compile_commands.json: the library's unity units
# and the files compiled alone, every Highway target included) goes through
# `clang++ -fsyntax-only` with the same flags, which parses and instantiates everything but
# generates no code. The library's unity units go through as one translation unit (as
# scripts/unity_check.sh compiles them; 11 CPU-s against 29 one by one), with the flags of the
# engine's. The fuzz targets (fuzz/*.cpp, built only by scripts/fuzz.sh) take the flags of
# demos/halfgrad.cpp. The precompiled-header flags are dropped (GCC's .gch is not clang's).
#
#   cmake -D CLANGXX=clang++ -D SOURCE_DIR=<source> -D BINARY_DIR=<GCC tree> -P clang_syntax.cmake
file(READ ${BINARY_DIR}/compile_commands.json commands)
string(JSON count LENGTH "${commands}")
math(EXPR last "${count} - 1")

# True if `path` starts with `prefix` (no regex: a checkout's path may hold regex characters).
function(starts_with path prefix out)
  string(FIND "${path}" "${prefix}" at)
  if(at EQUAL 0)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

# The compiler's arguments without the compiler, the output, -c and the precompiled header.
function(clang_arguments command out)
  separate_arguments(words UNIX_COMMAND "${command}")
  list(POP_FRONT words)
  set(kept "")
  set(skip_next FALSE)
  foreach(word IN LISTS words)
    if(skip_next)
      set(skip_next FALSE)
    elseif(word STREQUAL "-o" OR word STREQUAL "-include")
      set(skip_next TRUE)
    elseif(NOT word STREQUAL "-c" AND NOT word STREQUAL "-Winvalid-pch")
      list(APPEND kept "${word}")
    endif()
  endforeach()
  set(${out} "${kept}" PARENT_SCOPE)
endfunction()

# Runs clang on one translation unit (`file`, the last of `arguments`) in `directory`; counts it
# in `checked` and, if it fails, adds it to `failed`.
set(checked 0)
set(failed "")
function(check directory arguments)
  list(GET arguments -1 file)
  execute_process(COMMAND ${CLANGXX} -fsyntax-only -Wno-unknown-warning-option ${arguments}
    WORKING_DIRECTORY ${directory} RESULT_VARIABLE status OUTPUT_VARIABLE output ERROR_VARIABLE output)
  if(output)
    message("${file}:\n${output}")
  endif()
  if(NOT status EQUAL 0)
    set(failed ${failed} "${file}" PARENT_SCOPE)
  endif()
  math(EXPR count "${checked} + 1")
  set(checked ${count} PARENT_SCOPE)
endfunction()

set(cli_arguments "")
set(unity_units "")
foreach(i RANGE ${last})
  string(JSON file GET "${commands}" ${i} file)
  string(JSON command GET "${commands}" ${i} command)
  string(JSON directory GET "${commands}" ${i} directory)
  starts_with("${file}" "${SOURCE_DIR}/halfgrad/" library_file)
  starts_with("${file}" "${BINARY_DIR}/CMakeFiles/halfgrad" library_target)
  string(FIND "${file}" "/Unity/" unity)
  if(library_target AND NOT unity EQUAL -1)
    list(APPEND unity_units "${file}")
    string(FIND "${file}" "/CMakeFiles/halfgrad.dir/" engine)
    if(NOT unity_arguments OR NOT engine EQUAL -1)  # the engine's flags include the numerics library's
      clang_arguments("${command}" unity_arguments)
      list(REMOVE_AT unity_arguments -1)
      set(unity_directory "${directory}")
    endif()
  elseif(library_file OR file STREQUAL "${SOURCE_DIR}/demos/halfgrad.cpp")
    clang_arguments("${command}" arguments)
    check("${directory}" "${arguments}")
    if(file STREQUAL "${SOURCE_DIR}/demos/halfgrad.cpp")
      list(REMOVE_AT arguments -1)
      set(cli_arguments "${arguments}")
      set(cli_directory "${directory}")
    endif()
  endif()
endforeach()
if(unity_units)
  set(combined "${BINARY_DIR}/clang_syntax_library.cpp")
  list(TRANSFORM unity_units PREPEND "#include \"")
  list(TRANSFORM unity_units APPEND "\"\n")
  string(JOIN "" text ${unity_units})
  file(WRITE "${combined}" "${text}")
  check("${unity_directory}" "${unity_arguments};${combined}")
endif()
if(NOT cli_arguments)
  message(FATAL_ERROR "${BINARY_DIR}/compile_commands.json has no command for demos/halfgrad.cpp")
endif()
file(GLOB fuzz_sources ${SOURCE_DIR}/fuzz/*.cpp)
foreach(file IN LISTS fuzz_sources)
  check("${cli_directory}" "${cli_arguments};${file}")
endforeach()

if(failed)
  list(JOIN failed "\n  " failed)
  message(FATAL_ERROR "clang++ (${CLANGXX}) could not compile:\n  ${failed}")
endif()
message("clang++ compiled all ${checked} translation units (syntax and semantics)")
