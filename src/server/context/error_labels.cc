// LabelError: see error_labels.h.
#include "server/context/error_labels.h"

namespace floodgate::server {

ErrorLabel LabelError(Operation op, const Status& s) {
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
      return {"bad_request", 400};
    case StatusCode::kNotFound:
      // Sets have no "not found": an absent set is empty.
      if (op != Operation::kSet) return {"not_found", 404};
      break;
    case StatusCode::kResourceExhausted:
      // A full set is the request's conflict with the set; a full store is
      // the server's trouble.
      if (op == Operation::kSet) return {"set_full", 409};
      return {"store_full", 503};
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      // A reservation settled already: the request's conflict with the
      // state, as a full set's.
      return {"conflict", 409};
    default:
      break;
  }
  // A check fails only on its own input; sets and OTP also on the store.
  if (op == Operation::kCheck) return {"bad_request", 400};
  return {"backend", 503};
}

}  // namespace floodgate::server
