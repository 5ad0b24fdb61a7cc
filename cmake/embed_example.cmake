# Turns examples/floodgate.yaml into a C++ header, so that `floodgate serve`
# with no --config serves the example rules wherever it runs, and the file
# stays their only source.
#
#   cmake -DINPUT=<floodgate.yaml> -DOUTPUT=<file.h> -P embed_example.cmake
#
# The header defines floodgate::app::kExampleConfig, the file's bytes.
cmake_minimum_required(VERSION 3.25)

if(NOT INPUT OR NOT OUTPUT)
  message(FATAL_ERROR "embed_example.cmake needs -DINPUT and -DOUTPUT")
endif()

set(delimiter "floodgate_yaml")
file(READ "${INPUT}" source)
string(FIND "${source}" ")${delimiter}\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} contains the raw-string delimiter ')${delimiter}\"'")
endif()

file(WRITE "${OUTPUT}" "// Made from examples/floodgate.yaml by cmake/embed_example.cmake at build time. Do not edit.
#pragma once

#include <string_view>

namespace floodgate::app {

inline constexpr std::string_view kExampleConfig = R\"${delimiter}(${source})${delimiter}\";

}  // namespace floodgate::app
")
