// Express (and plain node:http) middleware: one FG.CHECK per request; the
// decision's header fields as floodgate's HTTP front sends them; 429 with
// an RFC 9457 problem body when denied, next() when admitted. With
// `reserve`, FG.RESERVE before the handler instead, and FG.SETTLE once the
// response is complete, with the cost the settle callback reads from it.

import type { IncomingMessage, ServerResponse } from 'node:http';

import type { CheckResult, FloodgateClient, ReserveResult, SettleResult } from './client';
import { isUnavailable } from './errors';
import { ceilSeconds, rateLimitFields, reservationFields } from './headers';

type PerRequest<Req, T> = T | ((req: Req) => T);

/**
 * What a request really cost, from its response: `body` is what the
 * handler sent (see ReserveMiddlewareOptions.maxBodyBytes). A finite number
 * >= 0 is settled (rounded up to an integer); undefined (or a throw) settles
 * at the estimate.
 */
export type SettleFunction<Req extends IncomingMessage = IncomingMessage> = (
  req: Req,
  res: ServerResponse,
  body: unknown,
) => number | undefined | Promise<number | undefined>;

export interface ReserveMiddlewareOptions<Req extends IncomingMessage = IncomingMessage> {
  /** Units to reserve before the handler runs (an integer >= 1), or how to tell them from the request. */
  estimate: number | ((req: Req) => number | Promise<number>);
  /**
   * What the request really cost, once its response is complete (e.g.
   * openAIUsage). Without it, or when it gives undefined, the reservation
   * is settled at its estimate.
   */
  settle?: SettleFunction<Req>;
  /** Until an unsettled reservation settles at its estimate by itself; floodgate's default 5 min. */
  ttlMs?: number;
  /**
   * The most bytes of a response body kept for `settle` when the handler
   * did not send it with res.json(): past it (a long stream) `body` is
   * undefined. Default 1 MiB.
   */
  maxBodyBytes?: number;
}

/** Told once per reservation the middleware settles (or failed to). */
export interface SettleOutcome {
  rule: string;
  key: string;
  reservation: string;
  estimate: number;
  /** The figure sent with FG.SETTLE: the settle callback's, or the estimate. */
  actual: number;
  /** Whether `actual` came from the response (false: the estimate, as a fallback). */
  fromResponse: boolean;
  /** FG.SETTLE's answer; undefined when it failed. */
  result?: SettleResult;
  /** Why FG.SETTLE failed (unreachable, or floodgate's error reply). */
  error?: Error;
}

export interface MiddlewareOptions<Req extends IncomingMessage = IncomingMessage> {
  client: FloodgateClient;
  /** The floodgate rule that decides. */
  rule: string;
  /** The subject: a user id, an API key, an IP address (`req => req.ip`). */
  key: (req: Req) => string | Promise<string>;
  /** Units a request consumes; default 1. Not with `reserve`. */
  cost?: PerRequest<Req, number>;
  tier?: PerRequest<Req, string | undefined>;
  /** The rule's priority class of the request (PRIORITY), e.g. 'critical', 'default', 'batch'. */
  priority?: PerRequest<Req, string | undefined>;
  /** Hold a request that would be denied for up to this long, as FG.CHECK ... WAIT. Not with `reserve`. */
  waitMs?: number;
  /** The rule's (binding limit's) period, for RateLimit-Policy's `w=`; left out when not given. */
  windowMs?: number;
  /**
   * Reserve (FG.RESERVE) an estimate before the handler in place of a
   * check, and settle it (FG.SETTLE) from the response once it is complete.
   */
  reserve?: ReserveMiddlewareOptions<Req>;
  /**
   * When floodgate cannot be reached or does not answer in time: 'allow'
   * (default) calls next() without header fields; 'deny' answers 429 with
   * `Floodgate-Fallback: unreachable`. An error floodgate answers (an
   * unknown rule, a bad key) goes to next(error) either way.
   */
  onError?: 'allow' | 'deny';
  /**
   * Told about every unreachable-floodgate error, every failed settle and
   * every settle callback that threw (default: nothing is logged).
   */
  logger?: (error: Error) => void;
  /** With `reserve`: told how each reservation was settled, once FG.SETTLE has answered. */
  onSettle?: (outcome: SettleOutcome) => void;
}

/** What the middleware leaves on the request. */
export interface FloodgateRequest {
  /** FG.CHECK's decision (without `reserve`). */
  floodgate?: CheckResult;
  /** FG.RESERVE's answer (with `reserve`). */
  floodgateReservation?: ReserveResult;
}

type Next = (error?: unknown) => void;

const kDefaultMaxBodyBytes = 1024 * 1024;

function valueFor<Req, T>(option: PerRequest<Req, T> | undefined, req: Req): T | undefined {
  return typeof option === 'function' ? (option as (req: Req) => T)(req) : option;
}

function sendProblem(res: ServerResponse, status: number, body: Record<string, unknown>): void {
  res.statusCode = status;
  res.setHeader('Content-Type', 'application/problem+json');
  res.end(JSON.stringify({ type: 'about:blank', title: 'Too Many Requests', status, ...body }));
}

/**
 * The ready settle callback for OpenAI-style JSON responses: the body's
 * `usage.total_tokens`. The body is the value given to res.json(), or the
 * bytes sent when the response's Content-Type is JSON; anything else (a
 * stream of events, a body past maxBodyBytes, no usage) gives undefined:
 * the reservation settles at its estimate.
 */
export function openAIUsage(_req: IncomingMessage, res: ServerResponse, body: unknown): number | undefined {
  let doc = body;
  if (Buffer.isBuffer(body) || typeof body === 'string') {
    const type = res.getHeader('content-type');
    if (typeof type !== 'string' || !/json/i.test(type)) return undefined;
    try {
      doc = JSON.parse(body.toString());
    } catch {
      return undefined;
    }
  }
  const usage = (doc as { usage?: { total_tokens?: unknown } } | null | undefined)?.usage;
  const total = usage?.total_tokens;
  return typeof total === 'number' && Number.isFinite(total) && total >= 0 ? total : undefined;
}

/**
 * Keeps what the handler sends on `res`: the value given to res.json()
 * (Express), else the bytes of res.write() and res.end() up to `limit`.
 */
function captureBody(res: ServerResponse, limit: number): () => unknown {
  const chunks: Buffer[] = [];
  let size = 0;
  let overflow = false;
  let json: { value: unknown } | undefined;
  const keep = (chunk: unknown, encoding: unknown): void => {
    if (overflow || json !== undefined || chunk === undefined || chunk === null) return;
    if (typeof chunk === 'function') return;
    let bytes: Buffer;
    if (typeof chunk === 'string') {
      bytes = Buffer.from(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
    } else if (chunk instanceof Uint8Array) {
      bytes = Buffer.from(chunk);
    } else {
      return;
    }
    size += bytes.length;
    if (size > limit) {
      overflow = true;
      chunks.length = 0;
      return;
    }
    chunks.push(bytes);
  };
  const target = res as ServerResponse & { json?: (value: unknown) => unknown };
  if (typeof target.json === 'function') {
    const json0 = target.json;
    target.json = function (this: ServerResponse, value: unknown) {
      if (json === undefined) json = { value };
      return json0.call(this, value);
    };
  }
  const write0 = res.write;
  const end0 = res.end;
  res.write = function (this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    keep(chunk, rest[0]);
    return (write0 as (...a: unknown[]) => boolean).call(this, chunk, ...rest);
  } as typeof res.write;
  res.end = function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    keep(chunk, rest[0]);
    return (end0 as (...a: unknown[]) => ServerResponse).call(this, chunk, ...rest);
  } as typeof res.end;
  return () => (json !== undefined ? json.value : overflow ? undefined : Buffer.concat(chunks));
}

/** The middleware; use it as `app.use(floodgate({...}))` or on a route. */
export function floodgate<Req extends IncomingMessage = IncomingMessage>(
  options: MiddlewareOptions<Req>,
): (req: Req, res: ServerResponse, next: Next) => Promise<void> {
  const { client, rule, reserve } = options;
  if (typeof options.key !== 'function') throw new TypeError('floodgate: key must be a function');
  const onError = options.onError ?? 'allow';
  if (onError !== 'allow' && onError !== 'deny') {
    throw new TypeError(`floodgate: onError must be 'allow' or 'deny', got '${String(onError)}'`);
  }
  if (reserve !== undefined) {
    if (typeof reserve.estimate !== 'number' && typeof reserve.estimate !== 'function') {
      throw new TypeError('floodgate: reserve.estimate must be a number or a function');
    }
    if (reserve.settle !== undefined && typeof reserve.settle !== 'function') {
      throw new TypeError('floodgate: reserve.settle must be a function');
    }
    // FG.RESERVE takes the estimate for a cost and has no WAIT.
    if (options.cost !== undefined) throw new TypeError('floodgate: cost or reserve, not both');
    if (options.waitMs !== undefined) throw new TypeError('floodgate: waitMs or reserve, not both');
  }

  // Floodgate could not be asked: on, or a 429 that says so.
  const unreachable = (error: unknown, res: ServerResponse, next: Next): void => {
    options.logger?.(error as Error);
    if (onError === 'allow') return next();
    res.setHeader('Floodgate-Fallback', 'unreachable');
    return sendProblem(res, 429, {
      detail: `the rate limiter is unreachable and rule '${rule}' fails closed`,
      rule,
    });
  };

  const checked = async (req: Req, res: ServerResponse, next: Next): Promise<void> => {
    let result: CheckResult;
    try {
      const key = String(await options.key(req));
      result = await client.check(rule, key, {
        cost: valueFor(options.cost, req),
        tier: valueFor(options.tier, req),
        priority: valueFor(options.priority, req),
        waitMs: options.waitMs,
      });
    } catch (error) {
      if (!isUnavailable(error)) return next(error);
      return unreachable(error, res, next);
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

  if (reserve === undefined) return checked;
  const maxBodyBytes = reserve.maxBodyBytes ?? kDefaultMaxBodyBytes;

  // Settles `reservation` once: at what the settle callback reads from the
  // response when it is complete and the callback gives a figure, else at
  // the estimate. Never throws; what fails goes to the logger.
  const settleFrom = async (
    req: Req,
    res: ServerResponse,
    body: (() => unknown) | undefined,
    key: string,
    reservation: string,
    estimate: number,
  ): Promise<void> => {
    let actual: number | undefined;
    if (body !== undefined && reserve.settle !== undefined) {
      try {
        actual = await reserve.settle(req, res, body());
      } catch (error) {
        options.logger?.(error instanceof Error ? error : new Error(String(error)));
      }
    }
    const fromResponse = typeof actual === 'number' && Number.isFinite(actual) && actual >= 0;
    const amount = fromResponse ? Math.ceil(actual as number) : estimate;
    const outcome: SettleOutcome = { rule, key, reservation, estimate, actual: amount, fromResponse };
    try {
      outcome.result = await client.settle(rule, key, reservation, amount);
    } catch (error) {
      outcome.error = error as Error;
      options.logger?.(error as Error);
    }
    options.onSettle?.(outcome);
  };

  return async (req: Req, res: ServerResponse, next: Next): Promise<void> => {
    let result: ReserveResult;
    let key: string;
    let estimate: number;
    try {
      key = String(await options.key(req));
      estimate = await valueFor(reserve.estimate, req) as number;
      result = await client.reserve(rule, key, estimate, {
        ttlMs: reserve.ttlMs,
        tier: valueFor(options.tier, req),
        priority: valueFor(options.priority, req),
      });
    } catch (error) {
      if (!isUnavailable(error)) return next(error);
      return unreachable(error, res, next);
    }
    (req as Req & FloodgateRequest).floodgateReservation = result;
    for (const [name, value] of Object.entries(reservationFields(rule, result))) {
      res.setHeader(name, value);
    }
    if (!result.admitted) {
      return sendProblem(res, 429, {
        detail:
          result.resetAfterMs < 0
            ? `rate limited by rule '${rule}': an estimate of ${estimate} does not fit`
            : `rate limited by rule '${rule}': an estimate of ${estimate} does not fit; ` +
              `retry after ${ceilSeconds(result.resetAfterMs)} s`,
        rule,
        estimate,
        remaining: result.remaining,
        reset_after_ms: result.resetAfterMs,
      });
    }
    // Admitted without a reservation (a fallback decision): nothing to settle.
    if (result.reservation === null) return next();
    const reservation = result.reservation;
    const body = reserve.settle !== undefined ? captureBody(res, maxBodyBytes) : undefined;
    let settled = false;
    // 'finish': the whole response was handed to the OS; a 'close' before
    // it (the client went away, the handler never ended the response): the
    // estimate.
    const done = (complete: boolean): void => {
      if (settled) return;
      settled = true;
      void settleFrom(req, res, complete ? body : undefined, key, reservation, estimate);
    };
    res.once('finish', () => done(true));
    res.once('close', () => done(false));
    next();
  };
}
