// Express (and plain node:http) middleware: one FG.CHECK per request; the
// decision's header fields as floodgate's HTTP front sends them; 429 with
// an RFC 9457 problem body when denied, next() when admitted.

import type { IncomingMessage, ServerResponse } from 'node:http';

import type { CheckResult, FloodgateClient } from './client';
import { isUnavailable } from './errors';
import { ceilSeconds, rateLimitFields } from './headers';

type PerRequest<Req, T> = T | ((req: Req) => T);

export interface MiddlewareOptions<Req extends IncomingMessage = IncomingMessage> {
  client: FloodgateClient;
  /** The floodgate rule that decides. */
  rule: string;
  /** The subject: a user id, an API key, an IP address (`req => req.ip`). */
  key: (req: Req) => string | Promise<string>;
  /** Units a request consumes; default 1. */
  cost?: PerRequest<Req, number>;
  tier?: PerRequest<Req, string | undefined>;
  /** Hold a request that would be denied for up to this long, as FG.CHECK ... WAIT. */
  waitMs?: number;
  /** The rule's (binding limit's) period, for RateLimit-Policy's `w=`; left out when not given. */
  windowMs?: number;
  /**
   * When floodgate cannot be reached or does not answer in time: 'allow'
   * (default) calls next() without header fields; 'deny' answers 429 with
   * `Floodgate-Fallback: unreachable`. An error floodgate answers (an
   * unknown rule, a bad key) goes to next(error) either way.
   */
  onError?: 'allow' | 'deny';
  /** Told about every unreachable-floodgate error (default: nothing is logged). */
  logger?: (error: Error) => void;
}

/** What the middleware leaves on the request. */
export interface FloodgateRequest {
  floodgate?: CheckResult;
}

type Next = (error?: unknown) => void;

function valueFor<Req, T>(option: PerRequest<Req, T> | undefined, req: Req): T | undefined {
  return typeof option === 'function' ? (option as (req: Req) => T)(req) : option;
}

function sendProblem(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.end(JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status, ...body }));
}

/** The middleware; use it as `app.use(floodgate({...}))` or on a route. */
export function floodgate<Req extends IncomingMessage = IncomingMessage>(
  options: MiddlewareOptions<Req>,
): (req: Req, res: ServerResponse, next: Next) => Promise<void> {
  const { client, rule } = options;
  if (typeof options.key !== 'function') throw new TypeError('floodgate: key must be a function');
  const onError = options.onError ?? 'allow';
  if (onError !== 'allow' && onError !== 'deny') {
    throw new TypeError(`floodgate: onError must be 'allow' or 'deny', got '${String(onError)}'`);
  }
  return async (req: Req, res: ServerResponse, next: Next): Promise<void> => {
    let result: CheckResult;
    try {
      const key = String(await options.key(req));
      result = await client.check(rule, key, {
        cost: valueFor(options.cost, req),
        tier: valueFor(options.tier, req),
        waitMs: options.waitMs,
      });
    } catch (error) {
      if (!isUnavailable(error)) return next(error);
      options.logger?.(error as Error);
      if (onError === 'allow') return next();
      res.setHeader('Floodgate-Fallback', 'unreachable');
      return sendProblem(res, 429, {
        detail: `the rate limiter is unreachable and rule '${rule}' fails closed`,
        rule,
      });
    }
    (req as Req & FloodgateRequest).floodgate = result;
    for (const [name, value] of Object.entries(rateLimitFields(rule, result, options.windowMs))) {
      res.setHeader(name, value);
    }
    if (result.allowed) return next();
    sendProblem(res, 429, {
      detail:
        result.retryAfterMs < 0
          ? `rate limited by rule '${rule}': the request costs more than the limit allows`
          : `rate limited by rule '${rule}': retry after ${ceilSeconds(result.retryAfterMs)} s`,
      rule,
      limit: result.limit,
      remaining: result.remaining,
      retry_after_ms: result.retryAfterMs,
      reset_after_ms: result.resetAfterMs,
    });
  };
}
