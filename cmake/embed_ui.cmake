# Turns the dashboard's files (ui/) into a C++ source, so the binary serves
# them with nothing beside it and ui/ stays their only source.
#
#   cmake -DUI_DIR=<dir> -DOUTPUT=<file.cc> -P embed_ui.cmake
#
# The source defines floodgate::server::UiAssets() (src/server/http/ui_assets.h):
# one UiAsset per file of UI_DIR (not its subdirectories; hidden files
# skipped), in name order, with its name, a Content-Type from its extension,
# its exact bytes (as \xNN escapes: any byte, NUL included, survives) and a
# strong ETag from its SHA-256. An extension without a known type is an
# error, so nothing is served with a guessed type.
cmake_minimum_required(VERSION 3.25)

if(NOT UI_DIR OR NOT OUTPUT)
  message(FATAL_ERROR "embed_ui.cmake needs -DUI_DIR and -DOUTPUT")
endif()

set(type_html "text/html; charset=utf-8")
set(type_js "text/javascript; charset=utf-8")
set(type_css "text/css; charset=utf-8")
set(type_svg "image/svg+xml")
set(type_png "image/png")
set(type_ico "image/x-icon")
set(type_json "application/json")
set(type_txt "text/plain; charset=utf-8")

file(GLOB files LIST_DIRECTORIES false "${UI_DIR}/*")
list(SORT files)

set(arrays "")
set(entries "")
set(index 0)
foreach(path IN LISTS files)
  get_filename_component(name "${path}" NAME)
  if(name MATCHES "^\\.")
    continue()
  endif()
  if(NOT name MATCHES "^[A-Za-z0-9._-]+$")
    message(FATAL_ERROR "${path}: asset names are letters, digits, '.', '_' and '-'")
  endif()
  string(REGEX MATCH "[^.]+$" ext "${name}")
  string(TOLOWER "${ext}" ext)
  set(type "${type_${ext}}")
  if(type STREQUAL "")
    message(FATAL_ERROR "${path}: no Content-Type known for .${ext} (add it to embed_ui.cmake)")
  endif()

  file(READ "${path}" hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR size "${hex_length} / 2")
  file(SHA256 "${path}" digest)
  string(SUBSTRING "${digest}" 0 32 digest)
  # 40 bytes per line of string literals; adjacent literals are joined after
  # their escapes are read, so "\x41" "\x42" stays two bytes.
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" escaped "${hex}")
  string(REGEX REPLACE "((\\\\x[0-9a-f][0-9a-f]){40})" "\\1\"\n    \"" escaped "${escaped}")
  string(APPEND arrays "// ${name}, ${size} bytes\nconstexpr char kAsset${index}[] =\n    \"${escaped}\";\n\n")
  string(APPEND entries
    "    {\"${name}\", \"${type}\", std::string_view(kAsset${index}, ${size}), \"\\\"${digest}\\\"\"},\n")
  math(EXPR index "${index} + 1")
endforeach()

if(index EQUAL 0)
  message(FATAL_ERROR "no dashboard files in ${UI_DIR}")
endif()

set(content "// Generated from ui/ by cmake/embed_ui.cmake. Do not edit.
#include <span>
#include <string_view>

#include \"server/http/ui_assets.h\"

namespace floodgate::server {
namespace {

${arrays}constexpr UiAsset kAssets[] = {
${entries}};

}  // namespace

std::span<const UiAsset> UiAssets() { return kAssets; }

}  // namespace floodgate::server
")

file(WRITE "${OUTPUT}" "${content}")
