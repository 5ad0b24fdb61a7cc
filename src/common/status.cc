// Status names and formatting.
#include "floodgate/status.h"

#include "common/enum_table.h"

namespace floodgate {

constexpr EnumRow<StatusCode, const char*> kStatusCodeNames[] = {
    {StatusCode::kOk, "OK"},
    {StatusCode::kInvalidArgument, "INVALID_ARGUMENT"},
    {StatusCode::kNotFound, "NOT_FOUND"},
    {StatusCode::kResourceExhausted, "RESOURCE_EXHAUSTED"},
    {StatusCode::kUnavailable, "UNAVAILABLE"},
    {StatusCode::kDeadlineExceeded, "DEADLINE_EXCEEDED"},
    {StatusCode::kInternal, "INTERNAL"},
    {StatusCode::kAlreadyExists, "ALREADY_EXISTS"},
    {StatusCode::kFailedPrecondition, "FAILED_PRECONDITION"}};

const char* StatusCodeName(StatusCode code) { return ValueIn(kStatusCodeNames, code, "UNKNOWN"); }

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(StatusCodeName(code_)) + ": " + message_;
}

}  // namespace floodgate
