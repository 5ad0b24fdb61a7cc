// How the Limiter builds its Otp (floodgate/otp.h): on the embedded store
// (a MemoryStore variant) or on Redis (a Client).
#pragma once

#include <cstdint>
#include <memory>

#include "engine/memory_store.h"
#include "floodgate/clock.h"
#include "floodgate/config.h"
#include "floodgate/otp.h"
#include "redis/client.h"

namespace floodgate::service {

// OTP in `memory` under `variant` (registered with engine::OtpStore::Layout())
// when `client` is null, else on Redis through `client`. With the otp
// section present, the secret is config.secret, else the variable
// config.secret_env names; INVALID_ARGUMENT when it is missing or shorter
// than 16 bytes (OTP never runs with a default secret), or when the
// delivery's auth_header_env names an unset variable. Without the section,
// a disabled Otp. Every pointer must outlive the result.
Result<std::unique_ptr<Otp>> MakeOtp(const OtpConfig& config, const Clock& clock,
                                     engine::MemoryStore* memory, uint32_t variant,
                                     redis::Client* client);

}  // namespace floodgate::service
