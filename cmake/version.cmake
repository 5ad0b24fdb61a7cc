# Writes the version source of `floodgate --version` (cmake -P, run at every
# build): the project's version and the commit the tree is at, or "unknown"
# outside a git checkout. The file is rewritten only when its text changes,
# so a build with nothing new recompiles nothing.
#   -DSOURCE_DIR=<tree> -DVERSION=<x.y.z> -DOUTPUT=<file.cc>
set(commit unknown)
find_program(GIT_EXECUTABLE git)
if(GIT_EXECUTABLE)
  execute_process(COMMAND ${GIT_EXECUTABLE} -C ${SOURCE_DIR} rev-parse --short HEAD
    OUTPUT_VARIABLE out RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(rc EQUAL 0 AND out MATCHES "^[0-9a-f]+$")
    set(commit ${out})
  endif()
endif()
set(text "// Written by cmake/version.cmake at build time.
#include \"app/version.h\"

namespace floodgate::app {
const char kVersion[] = \"${VERSION}\";
const char kCommit[] = \"${commit}\";
}  // namespace floodgate::app
")
set(old "")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT old STREQUAL text)
  file(WRITE ${OUTPUT} "${text}")
endif()
