# Turns the Redis store's Lua scripts into a C++ header, so the binary carries
# them and src/redis/scripts/*.lua stay their only source.
#
#   cmake -DSCRIPTS_DIR=<dir with *.lua> -DOUTPUT=<header> -P embed_lua.cmake
#
# The header defines floodgate::redis::kEmbeddedLua, one {name, source} per
# file in name order (name = file name without .lua), each source a raw
# string literal of the file's exact bytes.
cmake_minimum_required(VERSION 3.25)

if(NOT SCRIPTS_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_lua.cmake needs -DSCRIPTS_DIR and -DOUTPUT")
endif()

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
  std::string_view source;  // the file's bytes
};

inline constexpr EmbeddedLua kEmbeddedLua[] = {
${body}};

}  // namespace floodgate::redis
")

file(WRITE "${OUTPUT}" "${content}")
