// Network lists as the operator writes them: a file of one network a line
// (a list's `file:`), or the strings of an inline list (its `cidrs:`),
// read into a CidrSet.
//
// Contract:
//  - A file line holds one network as ParseCidr reads it (cidr.h), or
//    nothing. A '#' starts a comment to the end of the line (a network
//    never holds one), and spaces, tabs and a CR around the network are
//    dropped, so files written on Windows and files with trailing comments
//    ("203.0.113.0/24  # scanner, 2024-05") read as they look.
//  - An inline entry is one network, spaces around it dropped; no comments
//    (YAML has its own).
//  - The first bad line or entry fails the whole list with
//    INVALID_ARGUMENT, naming where it is and quoting it:
//      deny.txt:17: '10.0.0.0/33': prefix length 33 is past 32 for IPv4
//      lists.partners.cidrs[3]: '10.0.0.0/33': prefix length 33 is past 32 for IPv4
//    (lines count from 1, entries from 0, as the config's other lists do).
//    A list is used whole or not at all: half a deny list is worse than
//    the last good one.
//  - Bounds (CidrListBounds): past one, RESOURCE_EXHAUSTED naming it. A file
//    is read as it streams, a line at a time: it never sits in memory whole.
//  - An empty list (no file lines with a network) is an empty set.
//
// Thread-compatible: the functions share nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "floodgate/status.h"
#include "service/lists/cidr_set.h"

namespace floodgate::service {

// The defaults are the production bounds; tests lower them.
struct CidrListBounds {
  // Lines of a file (blank and comment lines count: they cost reading too)
  // or entries of an inline list. Ten times the largest public lists, a
  // full BGP table included.
  size_t max_lines = 10'000'000;
  // Bytes of a file: 10M lines of ~50 bytes, the longest IPv6 network with
  // a short comment.
  uint64_t max_file_bytes = uint64_t{512} << 20;
  // Bytes of one line, CR and comment included: a network is at most 49.
  size_t max_line_bytes = 4096;
};

// Reads the list file at `path`; messages name the file as `path` is
// written. A file that cannot be opened or read is INVALID_ARGUMENT with
// the system's reason, as a config file is.
Result<CidrSet> LoadCidrListFile(const std::string& path, const CidrListBounds& bounds = {});

// The same from the text of a file; `name` stands for the file in messages.
Result<CidrSet> ParseCidrListText(std::string_view text, std::string_view name,
                                  const CidrListBounds& bounds = {});

// An inline list; `name` names it in messages ("lists.partners.cidrs").
Result<CidrSet> BuildCidrList(const std::vector<std::string>& entries, std::string_view name,
                              const CidrListBounds& bounds = {});

}  // namespace floodgate::service
