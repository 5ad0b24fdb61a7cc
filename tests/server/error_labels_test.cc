// LabelError: the kind counted and the HTTP status, for each operation.
#include "server/context/error_labels.h"

#include <gtest/gtest.h>

namespace floodgate::server {
namespace {

void Expect(Operation op, const Status& s, std::string_view kind, int http_status) {
  const ErrorLabel label = LabelError(op, s);
  EXPECT_EQ(label.kind, kind) << s.ToString();
  EXPECT_EQ(label.http_status, http_status) << s.ToString();
}

TEST(ErrorLabelsTest, Check) {
  Expect(Operation::kCheck, InvalidArgumentError("x"), "bad_request", 400);
  Expect(Operation::kCheck, NotFoundError("x"), "not_found", 404);
  Expect(Operation::kCheck, ResourceExhaustedError("x"), "store_full", 503);
}

TEST(ErrorLabelsTest, Sets) {
  Expect(Operation::kSet, InvalidArgumentError("x"), "bad_request", 400);
  Expect(Operation::kSet, ResourceExhaustedError("x"), "set_full", 409);
  Expect(Operation::kSet, UnavailableError("x"), "backend", 503);
  Expect(Operation::kSet, NotFoundError("x"), "backend", 503);
}

TEST(ErrorLabelsTest, Otp) {
  Expect(Operation::kOtp, InvalidArgumentError("x"), "bad_request", 400);
  Expect(Operation::kOtp, NotFoundError("x"), "not_found", 404);
  Expect(Operation::kOtp, ResourceExhaustedError("x"), "store_full", 503);
  Expect(Operation::kOtp, UnavailableError("x"), "backend", 503);
}

}  // namespace
}  // namespace floodgate::server
