// One ShouldRateLimit call with @grpc/grpc-js, for tests that check a
// response's exact content:
//
//   node call.js <grpc port> '<RateLimitRequest as JSON>'
//
// Prints the RateLimitResponse as JSON (proto field names, enums as names,
// defaults included) on stdout; exits 1 with the error on a failed call.
'use strict';

const { connect } = require('./rls_client');

const [port, json] = process.argv.slice(2);
if (!port || json === undefined) {
  console.error("usage: node call.js <grpc port> '<request json>'");
  process.exit(2);
}

const client = connect(port);
const deadline = new Date(Date.now() + 5000);
client.ShouldRateLimit(JSON.parse(json), { deadline }, (err, response) => {
  if (err) {
    console.error(err.message);
    process.exit(1);
  }
  console.log(JSON.stringify(response));
  client.close();
});
