// The RateLimitService client both scripts here use: @grpc/grpc-js with the
// messages loaded at run time by @grpc/proto-loader from the repository's
// proto/ files (no generated code shared with the server).
'use strict';

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// The channel's credentials: TLS when FG_GRPC_CA names the CA file to
// trust (with FG_GRPC_CERT and FG_GRPC_KEY, a client certificate too),
// plaintext otherwise.
function credentials() {
  const ca = process.env.FG_GRPC_CA;
  if (!ca) return grpc.credentials.createInsecure();
  const read = (name) => (process.env[name] ? fs.readFileSync(process.env[name]) : null);
  return grpc.credentials.createSsl(fs.readFileSync(ca), read('FG_GRPC_KEY'), read('FG_GRPC_CERT'));
}

// A client of 127.0.0.1:<port>. Messages use the proto's field names, enums
// as names, and include default values.
function connect(port) {
  const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
    includeDirs: [path.join(__dirname, '..', '..', '..', 'proto')],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
  });
  const rls = grpc.loadPackageDefinition(definition).envoy.service.ratelimit.v3;
  return new rls.RateLimitService(`127.0.0.1:${port}`, credentials());
}

module.exports = { connect };
