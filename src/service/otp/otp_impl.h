// How the LimiterCore builds its Otp (floodgate/otp.h): on the store it
// picked.
#pragma once

#include <memory>

#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/otp.h"
#include "store/otp.h"

namespace floodgate::service {

// OTP on `store` (which must outlive the result). With the otp section
// present, the secret is config.secret, else the variable config.secret_env
// names; INVALID_ARGUMENT when it is missing or shorter than 16 bytes (OTP
// never runs with a default secret), or when the delivery's
// auth_header_env names an unset variable. Without the section, a disabled
// Otp. `clock` times the delivery webhook's requests; it must outlive the
// result.
Result<std::unique_ptr<Otp>> MakeOtp(const OtpConfig& config, store::OtpStore& store,
                                     const Clock& clock = SystemClock::Default());

}  // namespace floodgate::service
