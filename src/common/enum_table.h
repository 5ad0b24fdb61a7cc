// EnumTable: what each value of an enum stands for (its name in the
// config's, the logs' or a protocol's words, a number of milliseconds …),
// written as one table of rows, and looked up both ways.
//
// Why a table rather than a `switch` of `case X: return "x";`: the names
// of an enum are data, and the same switch written for every enum was
// the most repeated code in the tree. A table reads as a list, serves the
// way back from a name too (ValueOf), and a row per value is what a
// reader scans for. What a switch gave, a warning when a value has no
// case, the tests of each table give: every enum's names are asserted
// where the enum is tested, and a value with no row answers `otherwise`.
//
// The tables are small (under a dozen rows) and looked up by a linear
// scan: no hashing, no allocation, constexpr where the caller is.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>

namespace floodgate {

// One row: `key` stands for `value`.
template <typename K, typename V>
struct EnumRow {
  K key;
  V value;
};

// The value of `key` in `table`, or `otherwise` when no row has it.
template <typename K, typename V, size_t N>
constexpr V ValueIn(const EnumRow<K, V> (&table)[N], K key, std::type_identity_t<V> otherwise) {
  for (const EnumRow<K, V>& row : table) {
    if (row.key == key) return row.value;
  }
  return otherwise;
}

// The key of the first row whose value is `value`, if any (a name read
// back into its enum).
template <typename K, typename V, size_t N>
constexpr std::optional<K> KeyIn(const EnumRow<K, V> (&table)[N], const V& value) {
  for (const EnumRow<K, V>& row : table) {
    if (row.value == value) return row.key;
  }
  return std::nullopt;
}

// The common case: an enum's names.
template <typename E>
using EnumName = EnumRow<E, std::string_view>;

}  // namespace floodgate
