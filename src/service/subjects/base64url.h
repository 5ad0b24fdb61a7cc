// base64url without padding (RFC 4648 section 5), the encoding of every
// part of a JWS and of a JWK's numbers (RFC 7515 section 2).
//
// Decoding is strict: only the 64 letters of the URL-safe alphabet, no
// '=' padding, no white space, and the bits left over after the last whole
// byte must be zero. So every byte string has exactly one text that
// decodes to it: a signature with one bit flipped in its last letter is a
// different signature, never the same one written another way.
// Stateless and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace floodgate::service {

// The bytes `text` encodes, or nullopt when it is not canonical base64url
// without padding (a letter outside the alphabet, a length of 4k+1, or
// non-zero leftover bits). The empty text decodes to no bytes.
std::optional<std::string> DecodeBase64Url(std::string_view text);

// `bytes` in base64url, without padding.
std::string EncodeBase64Url(std::string_view bytes);

}  // namespace floodgate::service
