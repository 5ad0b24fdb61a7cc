// Type-checked by `npm run build` (not run): the package's declarations
// in dist/ fit express-rate-limit's Store and Express's middleware types,
// and the client's `tls` takes Node's tls.connect options.

import express from 'express';
import { rateLimit, type Store } from 'express-rate-limit';

import {
  createClient,
  floodgate,
  FloodgateStore,
  openAIUsage,
  type CheckResult,
  type ReserveResult,
  type SettleOutcome,
  type TlsOptions,
} from '../dist/index';

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
// Reservations: an estimate from the request, settled from the response.
app.post(
  '/v1/chat/completions',
  express.json(),
  floodgate<express.Request>({
    client,
    rule: 'tokens',
    key: (req) => req.get('authorization') ?? '',
    priority: 'batch',
    reserve: {
      estimate: (req) => Number(req.body?.max_tokens ?? 256),
      settle: openAIUsage,
      ttlMs: 60_000,
    },
    onSettle: (outcome: SettleOutcome) => void outcome.result?.charged,
  }),
  (req, res) => {
    const reservation: ReserveResult | undefined = (req as { floodgateReservation?: ReserveResult })
      .floodgateReservation;
    res.json({ reservation: reservation?.reservation, usage: { total_tokens: 3 } });
  },
);
app.use(floodgate({ client, rule: 'tokens', key: () => 'k', reserve: { estimate: 5, settle: async () => 4 } }));
void client.check('api', 'k', { priority: 'critical' });
void client.reserve('tokens', 'k', 100, { ttlMs: 1000, tier: 'pro', priority: 'batch' }).then(async (r) => {
  if (r.reservation !== null) {
    const s: { charged: number; remaining: number } = await client.settle('tokens', 'k', r.reservation, 42);
    void s;
  }
});
