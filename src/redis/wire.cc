// RESP encoding, the bounded reply reader and reply helpers. See wire.h.
#include "redis/wire.h"

#include <charconv>
#include <cstdlib>
#include <cstring>

#include "common/text.h"

namespace floodgate::redis {
namespace {

// The reader's object functions mirror hiredis's own, with every allocation
// checked (a null return makes the reader fail with an error instead of
// aborting) and every link to a parent array bounds-checked.

redisReply* NewReply(int type) {
  auto* r = static_cast<redisReply*>(std::calloc(1, sizeof(redisReply)));
  if (r != nullptr) r->type = type;
  return r;
}

void FreeReply(redisReply* r) {
  if (r == nullptr) return;
  if (r->type == REDIS_REPLY_ARRAY && r->element != nullptr) {
    for (size_t i = 0; i < r->elements; ++i) FreeReply(r->element[i]);
    std::free(r->element);
  }
  std::free(r->str);
  std::free(r);
}

// Links `r` into its parent array, or frees it and returns null when the
// reader's task does not fit the parent (never happens with a sane reader;
// checked so that it cannot write out of bounds either way).
void* Attach(const redisReadTask* task, redisReply* r) {
  if (task->parent == nullptr) return r;
  auto* parent = static_cast<redisReply*>(task->parent->obj);
  if (parent == nullptr || parent->type != REDIS_REPLY_ARRAY || task->idx < 0 ||
      static_cast<size_t>(task->idx) >= parent->elements || parent->element == nullptr) {
    FreeReply(r);
    return nullptr;
  }
  parent->element[task->idx] = r;
  return r;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  redisReply* r = NewReply(task->type);
  if (r == nullptr) return nullptr;
  r->str = static_cast<char*>(std::malloc(len + 1));
  if (r->str == nullptr) {
    std::free(r);
    return nullptr;
  }
  if (len > 0) std::memcpy(r->str, str, len);
  r->str[len] = '\0';
  r->len = len;
  return Attach(task, r);
}

void* CreateArray(const redisReadTask* task, int elements) {
  if (elements < 0 || elements > kMaxReplyElements) return nullptr;
  redisReply* r = NewReply(REDIS_REPLY_ARRAY);
  if (r == nullptr) return nullptr;
  if (elements > 0) {
    r->element = static_cast<redisReply**>(std::calloc(elements, sizeof(redisReply*)));
    if (r->element == nullptr) {
      std::free(r);
      return nullptr;
    }
  }
  r->elements = static_cast<size_t>(elements);
  return Attach(task, r);
}

void* CreateInteger(const redisReadTask* task, long long value) {
  redisReply* r = NewReply(REDIS_REPLY_INTEGER);
  if (r == nullptr) return nullptr;
  r->integer = value;
  return Attach(task, r);
}

void* CreateNil(const redisReadTask* task) {
  redisReply* r = NewReply(REDIS_REPLY_NIL);
  if (r == nullptr) return nullptr;
  return Attach(task, r);
}

void FreeObject(void* r) { FreeReply(static_cast<redisReply*>(r)); }

redisReplyObjectFunctions kFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                        FreeObject};

void AppendNumberLine(std::string& out, char type, size_t n) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), n);
  out += type;
  out.append(buf, res.ptr);
  out += "\r\n";
}

template <typename Strings>
void AppendCommandImpl(std::string& out, const Strings& args) {
  size_t total = 16;
  for (const auto& a : args) total += a.size() + 16;
  out.reserve(out.size() + total);
  AppendNumberLine(out, '*', args.size());
  for (const auto& a : args) {
    AppendNumberLine(out, '$', a.size());
    out.append(a.data(), a.size());
    out += "\r\n";
  }
}

void Describe(const redisReply* r, std::string& out, int depth) {
  constexpr size_t kMaxString = 200;
  constexpr size_t kMaxElements = 16;
  if (r == nullptr) {
    out += "(no reply)";
    return;
  }
  switch (r->type) {
    case REDIS_REPLY_STATUS:
      out.append(r->str, std::min(r->len, kMaxString));
      break;
    case REDIS_REPLY_ERROR:
      out += "(error) ";
      out.append(r->str, std::min(r->len, kMaxString));
      break;
    case REDIS_REPLY_INTEGER:
      out += "(integer) " + std::to_string(r->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_STRING:
      out += text::QuoteForMessage(std::string_view(r->str, r->len), kMaxString);
      break;
    case REDIS_REPLY_ARRAY:
      out += '[';
      for (size_t i = 0; i < r->elements && i < kMaxElements; ++i) {
        if (i > 0) out += ", ";
        Describe(r->element[i], out, depth + 1);
      }
      if (r->elements > kMaxElements) out += ", ...";
      out += ']';
      break;
    default:
      out += "(unknown reply type)";
  }
}

}  // namespace

void ReplyDeleter::operator()(redisReply* reply) const { FreeReply(reply); }

ReaderPtr NewReplyReader() { return ReaderPtr(redisReaderCreateWithFunctions(&kFunctions)); }

void AppendCommand(std::string& out, std::span<const std::string_view> args) {
  AppendCommandImpl(out, args);
}

void AppendCommand(std::string& out, std::span<const std::string> args) {
  AppendCommandImpl(out, args);
}

OwnedReply CopyReply(const redisReply& reply) {
  OwnedReply copy(NewReply(reply.type));
  if (copy == nullptr) return nullptr;
  copy->integer = reply.integer;
  if (reply.str != nullptr) {
    copy->str = static_cast<char*>(std::malloc(reply.len + 1));
    if (copy->str == nullptr) return nullptr;
    std::memcpy(copy->str, reply.str, reply.len);
    copy->str[reply.len] = '\0';
    copy->len = reply.len;
  }
  if (reply.type == REDIS_REPLY_ARRAY && reply.elements > 0 && reply.element != nullptr) {
    copy->element = static_cast<redisReply**>(std::calloc(reply.elements, sizeof(redisReply*)));
    if (copy->element == nullptr) return nullptr;
    copy->elements = reply.elements;
    for (size_t i = 0; i < reply.elements; ++i) {
      if (reply.element[i] == nullptr) continue;
      OwnedReply child = CopyReply(*reply.element[i]);
      if (child == nullptr) return nullptr;
      copy->element[i] = child.release();
    }
  }
  return copy;
}

std::string DescribeReply(const redisReply* reply) {
  std::string out;
  Describe(reply, out, 0);
  return out;
}

bool IsErrorWithPrefix(const redisReply* reply, std::string_view prefix) {
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR || reply->str == nullptr) return false;
  const std::string_view text(reply->str, reply->len);
  if (text.size() < prefix.size() || text.substr(0, prefix.size()) != prefix) return false;
  return text.size() == prefix.size() || text[prefix.size()] == ' ';
}

bool IsReadOnlyError(const redisReply* reply) {
  if (IsErrorWithPrefix(reply, "READONLY")) return true;
  if (reply == nullptr || reply->type != REDIS_REPLY_ERROR || reply->str == nullptr) return false;
  return std::string_view(reply->str, reply->len).find("READONLY You can't write") !=
         std::string_view::npos;
}

}  // namespace floodgate::redis
