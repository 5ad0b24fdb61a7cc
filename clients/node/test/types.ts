// Type-checked by `npm run build` (not run): the package's declarations
// in dist/ fit express-rate-limit's Store and Express's middleware types.

import express from 'express';
import { rateLimit, type Store } from 'express-rate-limit';

import { createClient, floodgate, FloodgateStore, type CheckResult } from '../dist/index';

const client = createClient({ port: 6479 });
const store: Store = new FloodgateStore({ client, rule: 'api' });
const app = express();
app.use(rateLimit({ limit: 5, windowMs: 60_000, store }));
app.use(floodgate<express.Request>({ client, rule: 'api', key: (req) => req.ip ?? '', tier: () => 'pro' }));
app.get('/', (req, res) => {
  const decision: CheckResult | undefined = (req as { floodgate?: CheckResult }).floodgate;
  res.json({ remaining: decision?.remaining });
});
