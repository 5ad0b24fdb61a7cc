# Turns the Redis store's Lua scripts into a C++ header, so the binary carries
# them and src/redis/scripts/*.lua stay their only source.
#
#   cmake -DSCRIPTS_DIR=<dir with *.lua> -DOUTPUT=<header> -P embed_lua.cmake
#
# The header defines floodgate::redis::kEmbeddedLua, one {name, source} per
# file in name order (name = file name without .lua), each source a raw
# string literal of the file's exact bytes, except that a line
# `--! include <file>` is replaced by the bytes of SCRIPTS_DIR/include/<file>
# (code several scripts share: Redis only loads self-contained scripts). The
# included files are not scripts of their own and include nothing themselves.
# Redis's line numbers in a script's errors count the expanded source.
cmake_minimum_required(VERSION 3.25)

if(NOT SCRIPTS_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_lua.cmake needs -DSCRIPTS_DIR and -DOUTPUT")
endif()

set(include_line "(^|\n)--! include ([^\n]*)\n?")

# Sets `out` to `source` (read from `path`) with its include lines expanded.
function(expand_includes path source out)
  set(done "")
  set(rest "${source}")
  while(TRUE)
    string(REGEX MATCH "${include_line}" line "${rest}")
    if(line STREQUAL "")
      break()
    endif()
    set(lead "${CMAKE_MATCH_1}")  # the newline ending the line before, if any
    string(STRIP "${CMAKE_MATCH_2}" name)
    set(included "${SCRIPTS_DIR}/include/${name}")
    if(name STREQUAL "" OR NOT EXISTS "${included}" OR IS_DIRECTORY "${included}")
      message(FATAL_ERROR "${path}: `--! include ${name}`: no file ${included}")
    endif()
    file(READ "${included}" text)
    string(REGEX MATCH "${include_line}" nested "${text}")
    if(NOT nested STREQUAL "")
      message(FATAL_ERROR "${included} (included by ${path}) includes a file itself: unsupported")
    endif()
    string(FIND "${rest}" "${line}" at)
    string(LENGTH "${line}" length)
    string(LENGTH "${lead}" lead_length)
    math(EXPR keep "${at} + ${lead_length}")
    math(EXPR after "${at} + ${length}")
    string(SUBSTRING "${rest}" 0 ${keep} before)
    string(SUBSTRING "${rest}" ${after} -1 rest)
    string(APPEND done "${before}${text}")
  endwhile()
  set(${out} "${done}${rest}" PARENT_SCOPE)
endfunction()

set(delimiter "floodgate_lua")
file(GLOB scripts "${SCRIPTS_DIR}/*.lua")
list(SORT scripts)
if(NOT scripts)
  message(FATAL_ERROR "no Lua scripts in ${SCRIPTS_DIR}")
endif()

set(body "")
foreach(path IN LISTS scripts)
  get_filename_component(name "${path}" NAME_WE)
  file(READ "${path}" source)
  expand_includes("${path}" "${source}" source)
  string(FIND "${source}" ")${delimiter}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw-string delimiter ')${delimiter}\"'")
  endif()
  string(APPEND body "    {\"${name}\", R\"${delimiter}(${source})${delimiter}\"},\n")
endforeach()

set(content "// Generated from src/redis/scripts/*.lua by cmake/embed_lua.cmake. Do not edit.
#pragma once

#include <string_view>

namespace floodgate::redis {

struct EmbeddedLua {
  std::string_view name;    // the file name without .lua, e.g. \"gcra\"
  std::string_view source;  // the file's bytes, its include lines expanded
};

inline constexpr EmbeddedLua kEmbeddedLua[] = {
${body}};

}  // namespace floodgate::redis
")

file(WRITE "${OUTPUT}" "${content}")
