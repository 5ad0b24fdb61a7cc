// Fuzzes network lists: ParseCidr and the list reader never crash; every
// network either accepts prints canonically and parses back as itself; a
// set built from a list holds each of its networks, and finds it (or a
// longer one inside it) for the network's own address.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/cidr.h"
#include "service/lists/cidr_list_file.h"
#include "service/lists/cidr_set.h"

namespace {

using floodgate::Cidr;

void CheckRoundTrip(const Cidr& network) {
  const int max_len = network.is_v4() ? floodgate::kMaxPrefixLenV4 : floodgate::kMaxPrefixLenV6;
  if (network.prefix_len() < 0 || network.prefix_len() > max_len) __builtin_trap();
  const std::string text = network.ToString();
  auto again = floodgate::ParseCidr(text);
  if (!again.ok() || !(*again == network) || again->ToString() != text) __builtin_trap();
  if (!network.Contains(network.address())) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  auto one = floodgate::ParseCidr(text);
  if (one.ok()) CheckRoundTrip(*one);

  // Small bounds, so the fuzzer reaches them too.
  floodgate::service::CidrListBounds bounds;
  bounds.max_lines = 64;
  bounds.max_line_bytes = 256;
  bounds.max_file_bytes = 4096;
  auto set = floodgate::service::ParseCidrListText(text, "fuzz", bounds);
  if (!set.ok()) return 0;
  for (const Cidr& network : set->Networks()) {
    CheckRoundTrip(network);
    if (!set->Contains(network.address())) __builtin_trap();
    const auto match = set->LongestMatch(network.address());
    if (!match || match->prefix_len() < network.prefix_len() ||
        !network.Contains(match->address())) {
      __builtin_trap();
    }
  }
  return 0;
}
