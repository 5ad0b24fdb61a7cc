// Status and Result<T>: how every fallible floodgate call reports failure.
//
// The request path never throws; errors travel as values and are turned into
// HTTP/RESP/gRPC errors at the protocol edge.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace floodgate {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is malformed or out of range
  kNotFound,            // e.g. an unknown rule
  kResourceExhausted,   // a configured bound was reached (entries, members, …)
  kUnavailable,         // a backend cannot be reached
  kDeadlineExceeded,    // a backend did not answer in time
  kInternal,            // a bug: an invariant did not hold
  kAlreadyExists,       // what was to be made is there already (a repeated id)
  kFailedPrecondition,  // the state does not allow it (a reservation settled already)
};

// Returns the upper-snake name of `code`, e.g. "INVALID_ARGUMENT".
const char* StatusCodeName(StatusCode code);

// A code plus a human-readable message. Cheap to copy when ok. Thread-compatible.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "INVALID_ARGUMENT: message", or "OK".
  std::string ToString() const;

  friend bool operator==(const Status&, const Status&) = default;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return Status(StatusCode::kInvalidArgument, std::move(m));
}
inline Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status ResourceExhaustedError(std::string m) {
  return Status(StatusCode::kResourceExhausted, std::move(m));
}
inline Status UnavailableError(std::string m) {
  return Status(StatusCode::kUnavailable, std::move(m));
}
inline Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status AlreadyExistsError(std::string m) {
  return Status(StatusCode::kAlreadyExists, std::move(m));
}
inline Status FailedPreconditionError(std::string m) {
  return Status(StatusCode::kFailedPrecondition, std::move(m));
}

// Either a T or a non-ok Status. Thread-compatible.
template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}         // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {}  // NOLINT: must not be ok

  bool ok() const { return v_.index() == 0; }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<1>(v_);
  }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace floodgate
