// What `floodgate --version` prints. Defined in a source cmake/version.cmake
// writes at build time: the version of CMake's project() and the short
// commit the tree was built at ("unknown" outside a git checkout).
#pragma once

namespace floodgate::app {

extern const char kVersion[];
extern const char kCommit[];

}  // namespace floodgate::app
