// The promise API over floodgate's RESP front: FG.CHECK, FG.STATE, the
// lease commands, FG.RESERVE and FG.SETTLE, FG.RESET and FG.REFUND, each
// reply turned into an object.

import { RespConnection, TlsOptions } from './connection';
import { RespValue } from './resp';

export interface ClientOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** floodgate's RESP port; default 6479. */
  port?: number;
  /** Sent with AUTH on every connection (floodgate's `auth` or admin token). */
  password?: string;
  /** Connections in the pool; each command goes to the least busy. Default 2. */
  connections?: number;
  /** Default 1000. */
  connectTimeoutMs?: number;
  /** Time for a reply, on top of any WAIT the command asks for. Default 2000. */
  commandTimeoutMs?: number;
  /**
   * TLS to a RESP front with `listen_tls.resp`, as ioredis's `tls`: the
   * options of Node's `tls.connect` (`ca`, `cert`, `key`, `servername`,
   * ...), or `true` to trust Node's default CAs. The server's certificate
   * is verified (`rejectUnauthorized` defaults to true). Default: plaintext.
   */
  tls?: boolean | TlsOptions;
}

/** FG.CHECK's answer. */
export interface CheckResult {
  allowed: boolean;
  /** The binding (most restrictive) limit's size. */
  limit: number;
  /** Units left in the binding limit after this check; -1 for a fallback decision. */
  remaining: number;
  /** 0 when allowed; -1 when never (a cost over the limit's capacity). */
  retryAfterMs: number;
  /** Until the binding limit is fully reset; -1 for a fallback decision. */
  resetAfterMs: number;
  /** "" for a real decision, else why floodgate decided without the state ("backend_error", "store_full"). */
  fallback: string;
}

export interface CheckOptions {
  /** Units this request consumes; default 1, 0 peeks. */
  cost?: number;
  tier?: string;
  /** The rule's priority class this request is in (FG.CHECK ... PRIORITY), e.g. "batch". */
  priority?: string;
  /** Hold a request that would be denied for up to this long (FG.CHECK ... WAIT). */
  waitMs?: number;
}

/** One limit of FG.STATE's answer. */
export interface LimitState {
  limit: number;
  used: number;
  remaining: number;
  resetAfterMs: number;
}

/** FG.STATE's answer: the subject's state without consuming. */
export interface SubjectState {
  limits: LimitState[];
  /** The subject's override, as its limits are written ([] when none). */
  override: string[];
  /** Time left on a block of the subject (0 when not blocked). */
  blockedForMs: number;
  blockReason: string;
  /**
   * A rule with quota slices: what this server holds of the subject's
   * slices (`held`, unspent) and was granted in the current window
   * (`taken`); `limits[i].used` is the shared count, slices included.
   */
  slices?: { held: number; taken: number };
}

export interface AcquireOptions {
  ttlMs?: number;
  tier?: string;
  waitMs?: number;
}

/** FG.ACQUIRE's answer. */
export interface AcquireResult {
  acquired: boolean;
  /** The lease id when acquired, else null. */
  lease: string | null;
  inFlight: number;
  limit: number;
  /** The lease's time to live when acquired, else 0. */
  ttlMs: number;
  /** When refused: until one more lease could fit (-1: never); 0 when acquired. */
  retryAfterMs: number;
}

export interface ReserveOptions {
  /** Until the reservation settles at its estimate by itself; floodgate's default 300000 (5 min). */
  ttlMs?: number;
  tier?: string;
  /** The rule's priority class the reservation is in, e.g. "batch". */
  priority?: string;
}

/** FG.RESERVE's answer. */
export interface ReserveResult {
  admitted: boolean;
  /**
   * The reservation's id, for settle(), when admitted; else null (and null
   * too when a fallback decision admitted without keeping a reservation).
   */
  reservation: string | null;
  /** Units left in the binding limit (the estimate taken off when admitted). */
  remaining: number;
  /** Until the binding limit is fully reset. */
  resetAfterMs: number;
}

/** FG.SETTLE's answer. */
export interface SettleResult {
  /** What the reservation finally cost the subject. */
  charged: number;
  /** Units left in the binding limit; negative when the subject is in debt. */
  remaining: number;
}

const kDefaultPort = 6479;

function asString(value: RespValue): string {
  if (Buffer.isBuffer(value)) return value.toString('utf8');
  if (typeof value === 'string') return value;
  if (value === null) return '';
  throw new Error(`floodgate sent ${JSON.stringify(value)} where a string belongs`);
}

function asNumber(value: RespValue): number {
  if (typeof value === 'number') return value;
  throw new Error(`floodgate sent ${JSON.stringify(value)} where an integer belongs`);
}

function asArray(value: RespValue, length?: number): RespValue[] {
  if (Array.isArray(value) && (length === undefined || value.length === length)) return value;
  throw new Error(`floodgate sent an unexpected reply: ${JSON.stringify(value)}`);
}

/**
 * A floodgate client: a small pool of pipelined RESP connections. Every
 * method returns a promise; a reply error rejects with FloodgateReplyError
 * (the server's message), an unreachable or silent server with
 * FloodgateConnectionError / FloodgateTimeoutError.
 */
/** FG.CHECK's and FG.REFUND's reply: allowed, limit, remaining, retry_after_ms, reset_after_ms. */
function decision(reply: RespValue[], fallback: string): CheckResult {
  return {
    allowed: asNumber(reply[0]) === 1,
    limit: asNumber(reply[1]),
    remaining: asNumber(reply[2]),
    retryAfterMs: asNumber(reply[3]),
    resetAfterMs: asNumber(reply[4]),
    fallback,
  };
}

export class FloodgateClient {
  readonly host: string;
  readonly port: number;
  private readonly pool: RespConnection[];
  private readonly commandTimeoutMs: number;

  constructor(options: ClientOptions = {}) {
    this.host = options.host ?? '127.0.0.1';
    this.port = options.port ?? kDefaultPort;
    this.commandTimeoutMs = options.commandTimeoutMs ?? 2000;
    const size = Math.max(1, options.connections ?? 2);
    this.pool = [];
    for (let i = 0; i < size; i++) {
      this.pool.push(
        new RespConnection({
          host: this.host,
          port: this.port,
          password: options.password,
          connectTimeoutMs: options.connectTimeoutMs ?? 1000,
          tls: options.tls === true ? {} : options.tls || undefined,
        }),
      );
    }
  }

  /** Sends any command; resolves with the raw reply (bulk strings as Buffers). */
  command(args: ReadonlyArray<string | number>, extraTimeoutMs = 0): Promise<RespValue> {
    let best = this.pool[0];
    for (const c of this.pool) if (c.inFlight < best.inFlight) best = c;
    const timeout = this.commandTimeoutMs > 0 ? this.commandTimeoutMs + extraTimeoutMs : 0;
    return best.send(args, timeout);
  }

  /** FG.CHECK rule key [COST n] [TIER t] [PRIORITY p] [WAIT ms]: decide and consume. */
  async check(rule: string, key: string, options: CheckOptions = {}): Promise<CheckResult> {
    const args: Array<string | number> = ['FG.CHECK', rule, key];
    if (options.cost !== undefined) args.push('COST', options.cost);
    if (options.tier !== undefined) args.push('TIER', options.tier);
    if (options.priority !== undefined) args.push('PRIORITY', options.priority);
    if (options.waitMs !== undefined && options.waitMs > 0) args.push('WAIT', options.waitMs);
    args.push('VERBOSE');
    const reply = asArray(await this.command(args, options.waitMs ?? 0), 6);
    return decision(reply, asString(reply[5]));
  }

  /** FG.STATE rule key [TIER t]: the subject's state, consuming nothing (an admin command). */
  async state(rule: string, key: string, options: { tier?: string } = {}): Promise<SubjectState> {
    const args: Array<string | number> = ['FG.STATE', rule, key];
    if (options.tier !== undefined) args.push('TIER', options.tier);
    const raw = await this.command(args);
    // A fifth element for a rule with slices.
    const reply = asArray(raw, Array.isArray(raw) && raw.length === 5 ? 5 : 4);
    const state: SubjectState = {
      limits: asArray(reply[0]).map((l) => {
        const f = asArray(l, 4).map(asNumber);
        return { limit: f[0], used: f[1], remaining: f[2], resetAfterMs: f[3] };
      }),
      override: asArray(reply[1]).map(asString),
      blockedForMs: asNumber(reply[2]),
      blockReason: asString(reply[3]),
    };
    if (reply.length === 5) {
      const f = asArray(reply[4], 2).map(asNumber);
      state.slices = { held: f[0], taken: f[1] };
    }
    return state;
  }

  /** FG.ACQUIRE rule key [TTL ms] [TIER t] [WAIT ms]: take a lease of a concurrency rule. */
  async acquire(rule: string, key: string, options: AcquireOptions = {}): Promise<AcquireResult> {
    const args: Array<string | number> = ['FG.ACQUIRE', rule, key];
    if (options.ttlMs !== undefined) args.push('TTL', options.ttlMs);
    if (options.tier !== undefined) args.push('TIER', options.tier);
    if (options.waitMs !== undefined && options.waitMs > 0) args.push('WAIT', options.waitMs);
    const reply = asArray(await this.command(args, options.waitMs ?? 0), 5);
    const acquired = asNumber(reply[0]) === 1;
    const ms = asNumber(reply[4]);
    return {
      acquired,
      lease: acquired ? asString(reply[1]) : null,
      inFlight: asNumber(reply[2]),
      limit: asNumber(reply[3]),
      ttlMs: acquired ? ms : 0,
      retryAfterMs: acquired ? 0 : ms,
    };
  }

  /** FG.RELEASE rule key lease: true when released, false when not live (released, expired, unknown). */
  async release(rule: string, key: string, lease: string): Promise<boolean> {
    return asNumber(await this.command(['FG.RELEASE', rule, key, lease])) === 1;
  }

  /** FG.RENEW rule key lease [TTL ms]: true when renewed, false when not live. */
  async renew(rule: string, key: string, lease: string, options: { ttlMs?: number } = {}): Promise<boolean> {
    const args: Array<string | number> = ['FG.RENEW', rule, key, lease];
    if (options.ttlMs !== undefined) args.push('TTL', options.ttlMs);
    return asNumber(await this.command(args)) === 1;
  }

  /**
   * FG.RESERVE rule key estimate [TTL ms] [TIER t] [PRIORITY p]: take
   * `estimate` units now (admitted only when they fit), to be settled with
   * what the work really cost once that is known. A reservation not
   * settled within its TTL settles at its estimate.
   */
  async reserve(
    rule: string,
    key: string,
    estimate: number,
    options: ReserveOptions = {},
  ): Promise<ReserveResult> {
    const args: Array<string | number> = ['FG.RESERVE', rule, key, estimate];
    if (options.ttlMs !== undefined) args.push('TTL', options.ttlMs);
    if (options.tier !== undefined) args.push('TIER', options.tier);
    if (options.priority !== undefined) args.push('PRIORITY', options.priority);
    const reply = asArray(await this.command(args), 4);
    const admitted = asNumber(reply[0]) === 1;
    return {
      admitted,
      reservation: admitted ? asString(reply[1]) || null : null,
      remaining: asNumber(reply[2]),
      resetAfterMs: asNumber(reply[3]),
    };
  }

  /**
   * FG.SETTLE rule key reservation actual: the reservation costs `actual`
   * (an integer >= 0): the difference from its estimate is charged or given
   * back. Rejects with FloodgateReplyError for a reservation that is
   * unknown, expired, another key's, or settled already.
   */
  async settle(rule: string, key: string, reservation: string, actual: number): Promise<SettleResult> {
    const reply = asArray(await this.command(['FG.SETTLE', rule, key, reservation, actual]), 2);
    return { charged: asNumber(reply[0]), remaining: asNumber(reply[1]) };
  }

  /** FG.RESET rule key: forget the subject's state on the rule (every tier). */
  async reset(rule: string, key: string): Promise<void> {
    await this.command(['FG.RESET', rule, key]);
  }

  /** FG.REFUND rule key cost: give back up to `cost` units (an admin command). */
  async refund(rule: string, key: string, cost: number): Promise<CheckResult> {
    const reply = asArray(await this.command(['FG.REFUND', rule, key, cost]), 5);
    return decision(reply, '');
  }

  /** PING: resolves when floodgate answers. */
  async ping(): Promise<void> {
    await this.command(['PING']);
  }

  /** Closes every connection; commands still in flight are rejected. */
  async close(): Promise<void> {
    await Promise.all(this.pool.map((c) => c.close()));
  }
}

/** A client for floodgate's RESP front (default 127.0.0.1:6479). */
export function createClient(options: ClientOptions = {}): FloodgateClient {
  return new FloodgateClient(options);
}
