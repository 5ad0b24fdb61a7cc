// How a failed request is counted and answered: the kind that
// floodgate_errors_total{kind} counts and the HTTP status, by operation and
// status code. One table for every front (RESP replies carry the status's
// message, HTTP answers with the status; both count the kind), so that the
// same failure reads the same on each.
#pragma once

#include <string_view>

#include "floodgate/status.h"

namespace floodgate::server {

enum class Operation {
  kCheck,        // FG.CHECK, /v1/check: the request names what it needs
  kSet,          // expiring sets: a full set conflicts with the set's state
  kOtp,          // OTP issue and verify
  kAdmin,        // the control plane: its input, or the store keeping its records
  kReservation,  // reserve and settle: a settled reservation conflicts with the ledger
};

struct ErrorLabel {
  std::string_view kind;  // floodgate_errors_total's label
  int http_status;
};

// For a failed (not OK) status.
ErrorLabel LabelError(Operation op, const Status& s);

}  // namespace floodgate::server
