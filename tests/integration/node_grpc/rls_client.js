// The RateLimitService client both scripts here use: @grpc/grpc-js with the
// messages loaded at run time by @grpc/proto-loader from the repository's
// proto/ files (no generated code shared with the server).
'use strict';

const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

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
  return new rls.RateLimitService(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
}

module.exports = { connect };
