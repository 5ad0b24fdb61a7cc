// CallFeatureScript: see feature_script_call.h.
#include "redis/feature_script_call.h"

#include "redis/reply_util.h"
#include "redis/script_call.h"

namespace floodgate::redis {

Result<OwnedReply> CallFeatureScript(Client& client, Feature feature,
                                     std::span<const std::string> keys,
                                     std::span<const std::string> args) {
  const Script& script = ScriptFor(feature);
  // EVALSHA <sha> <k> <keys...> <args...>
  std::vector<std::string> argv = {"EVALSHA", std::string(script.sha1),
                                   std::to_string(keys.size())};
  argv.insert(argv.end(), keys.begin(), keys.end());
  argv.insert(argv.end(), args.begin(), args.end());
  auto reply = client.Call(keys.front(), std::span<const std::string>(argv));
  if (reply.ok() && *reply != nullptr && IsNoScript(**reply)) {
    argv[0] = "EVAL";
    argv[1] = std::string(script.source);
    reply = client.Call(keys.front(), std::span<const std::string>(argv));
  }
  if (!reply.ok()) return reply.status();
  if (*reply == nullptr) {
    return InternalError("redis: no reply from the " + std::string(script.name) + " script");
  }
  if (Status e = ErrorReplyStatus(**reply); !e.ok()) {
    client.NoteWrongType(e.message(), keys);
    return e;
  }
  return reply;
}

}  // namespace floodgate::redis
