# Registers one ctest entry per test file instead of one per Catch2 test case (the sanitized tree's
# unit tests: tests/CMakeLists.txt says why). Run after each build of the test binary, as
# Catch2's own discovery (CatchAddTests.cmake) is: `-#` gives every test case the tag [#<file
# name>], and each file whose cases the spec selects becomes the entry `<file name>.cpp`, running
# `-# [#<file name>]<spec>`. COST is the file's number of cases, so ctest -j starts the large
# files first. Variables: TEST_EXECUTABLE, TEST_SPEC, TEST_LABEL, CTEST_FILE.
execute_process(COMMAND "${TEST_EXECUTABLE}" "-#" --list-tags "${TEST_SPEC}"
  OUTPUT_VARIABLE listing RESULT_VARIABLE result)
if(result LESS 0)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --list-tags failed: ${result}\n${listing}")
endif()
# Lines of Catch2 v2's tag list: "  <count>  [#<file name>]" (other tags are ignored).
string(REGEX MATCHALL "\n *[0-9]+ +\\[#[^]\n]+\\]" lines "${listing}")
set(script "")
foreach(line IN LISTS lines)
  string(REGEX REPLACE "^\n *([0-9]+) +\\[#([^]]+)\\]$" "\\1;\\2" fields "${line}")
  list(GET fields 0 cases)
  list(GET fields 1 file)
  string(APPEND script "add_test([==[${file}.cpp]==] [==[${TEST_EXECUTABLE}]==] [==[-#]==] [==[[#${file}]${TEST_SPEC}]==] -w NoTests)\n"
    "set_tests_properties([==[${file}.cpp]==] PROPERTIES LABELS ${TEST_LABEL} COST ${cases})\n")
endforeach()
if(script STREQUAL "")
  message(FATAL_ERROR "${TEST_EXECUTABLE} lists no test file for ${TEST_SPEC}:\n${listing}")
endif()
file(WRITE "${CTEST_FILE}" "${script}")
