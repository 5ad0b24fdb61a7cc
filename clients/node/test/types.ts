// Type-checked by `npm run build` (not run): the package's declarations
// in dist/ fit express-rate-limit's Store and Express's middleware types,
// and the client's `tls` takes Node's tls.connect options.

import express from 'express';
import { rateLimit, type Store } from 'express-rate-limit';

import { createClient, floodgate, FloodgateStore, type CheckResult, type TlsOptions } from '../dist/index';

const client = createClient({ port: 6479 });
const tls: TlsOptions = { ca: Buffer.from('PEM'), cert: 'PEM', key: 'PEM', servername: 'floodgate.internal' };
createClient({ port: 6479, tls });
createClient({ port: 6479, tls: true });
// Where to connect is the client's host and port, not a TLS option.
// @ts-expect-error
createClient({ tls: { port: 6380 } });
const store: Store = new FloodgateStore({ client, rule: 'api' });
const app = express();
app.use(rateLimit({ limit: 5, windowMs: 60_000, store }));
app.use(floodgate<express.Request>({ client, rule: 'api', key: (req) => req.ip ?? '', tier: () => 'pro' }));
app.get('/', (req, res) => {
  const decision: CheckResult | undefined = (req as { floodgate?: CheckResult }).floodgate;
  res.json({ remaining: decision?.remaining });
});
