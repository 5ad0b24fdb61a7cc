// PendingAlert: one alert event on its way to a webhook, as the delivery
// workers, the spool file (embedded store) and the Redis stream (Redis
// store) all keep it. In store/ because the store's alert log
// (store::AlertLog) carries it between the alerts (service/) and the Redis
// stream (redis/), and store/ is the one layer both may include.
#pragma once

#include <cstdint>
#include <string>

namespace floodgate {

struct PendingAlert {
  std::string event_id;
  std::string url;         // the webhook, http://
  std::string body;        // the JSON, exactly as signed
  std::string signature;   // the X-Floodgate-Signature value
  int64_t created_ms = 0;  // when it was emitted (wall clock): retries stop retry_for after
  int attempts = 0;        // POSTs made so far (by any server, on Redis)
  std::string stream_id;   // the Redis stream entry holding it; "" on the embedded store
};

}  // namespace floodgate
