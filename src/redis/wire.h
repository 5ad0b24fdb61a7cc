// RESP on the client side: commands encoded as RESP arrays, a bounded
// hiredis reply reader, and owned reply objects.
//
// Replies are hiredis `redisReply` trees (the type every hiredis user knows),
// but built by our own allocation functions so that no bytes from the
// network can make the reader abort or exhaust memory: hiredis 0.14's
// default functions abort() when an allocation fails, and a reply header
// announcing two billion elements would make them try.
#pragma once

#include <hiredis/hiredis.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace floodgate::redis {

// Frees a reply tree built by a reader from NewReplyReader (or CopyReply).
struct ReplyDeleter {
  void operator()(redisReply* reply) const;
};
using OwnedReply = std::unique_ptr<redisReply, ReplyDeleter>;

struct ReaderDeleter {
  void operator()(redisReader* reader) const { redisReaderFree(reader); }
};
using ReaderPtr = std::unique_ptr<redisReader, ReaderDeleter>;

// Arrays in a reply may hold at most this many elements; a larger header is
// a protocol error (the connection is reset). Far above any reply the store
// asks for (SCAN and CLUSTER SLOTS replies are small).
inline constexpr int kMaxReplyElements = 1 << 22;

// A reader whose replies are freed with ReplyDeleter. Null only when out of
// memory.
ReaderPtr NewReplyReader();

// Appends `args` to `out` as one RESP command (an array of bulk strings).
void AppendCommand(std::string& out, std::span<const std::string_view> args);
void AppendCommand(std::string& out, std::span<const std::string> args);

// A deep copy of `reply` (for callers that keep a reply past its callback).
OwnedReply CopyReply(const redisReply& reply);

// A short human-readable form for messages and tests: "OK", "(error) ERR x",
// "(integer) 3", "\"bulk\"", "(nil)", "[1, \"a\"]". Long strings and arrays are cut.
std::string DescribeReply(const redisReply* reply);

// Whether `reply` is an error reply whose text starts with `prefix` followed
// by a space or the end (e.g. IsErrorWithPrefix(r, "MOVED")).
bool IsErrorWithPrefix(const redisReply* reply, std::string_view prefix);

// Whether `reply` says the server is a replica refusing a write: READONLY,
// also as the error of a write inside a script ("... READONLY You can't
// write against a read only replica ...").
bool IsReadOnlyError(const redisReply* reply);

}  // namespace floodgate::redis
