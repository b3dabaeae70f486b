# halfgrad_unity_groups(): the unity builds' translation units as named groups of files, for the
# library (CMakeLists.txt) and the test files (tests/CMakeLists.txt).
#
# CMake's default unity mode batches a target's files in list order, so a new file moves every
# later file into another unit, and which headers a unit instantiates together changes with it
# (the test files once got CLI11 in a second unit: +40 CPU-s under ASan). Grouped, a new file
# joins the unit of its folder and moves no other.
#
#   halfgrad_unity_groups(SOURCES <files> ROOT <dir> GROUPS <folder>=<group>...
#                         [CONTENT_GROUP <group> CONTENT_REGEX <regex>])
#
# A file's group is the one GROUPS names for its first folder under ROOT (a folder not named is
# a group of its own). With CONTENT_GROUP, a file with a line that matches CONTENT_REGEX goes
# to that group instead: the files that instantiate the same costly headers then share a unit.
# The targets must set UNITY_BUILD_MODE GROUP; files with SKIP_UNITY_BUILD_INCLUSION stay alone.
function(halfgrad_unity_groups)
  cmake_parse_arguments(PARSE_ARGV 0 arg "" "ROOT;CONTENT_GROUP;CONTENT_REGEX" "SOURCES;GROUPS")
  foreach(src IN LISTS arg_SOURCES)
    get_filename_component(path ${src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    file(RELATIVE_PATH relative ${arg_ROOT} ${path})
    string(REGEX REPLACE "/.*" "" group "${relative}")
    set(named ${arg_GROUPS})
    list(FILTER named INCLUDE REGEX "^${group}=")
    if(named)
      string(REGEX REPLACE "^[^=]*=" "" group "${named}")
    endif()
    if(arg_CONTENT_GROUP)
      file(STRINGS ${path} matches REGEX "${arg_CONTENT_REGEX}")
      if(matches)
        set(group ${arg_CONTENT_GROUP})
      endif()
    endif()
    set_source_files_properties(${src} PROPERTIES UNITY_GROUP ${group})
  endforeach()
endfunction()
