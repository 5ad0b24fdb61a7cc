// A Store for express-rate-limit (v7 and v8 share the Store interface) in
// which floodgate decides: increment() is one FG.CHECK, and its answer is
// told as the hit count that makes express-rate-limit's own comparison
// (`totalHits > limit`) come out as floodgate decided.

import type { CheckResult, FloodgateClient } from './client';

/** express-rate-limit's ClientRateLimitInfo / IncrementResponse. */
export interface ClientRateLimitInfo {
  totalHits: number;
  resetTime: Date | undefined;
}

export interface StoreOptions {
  client: FloodgateClient;
  /** The floodgate rule that decides; express-rate-limit's `limit` should be its limit. */
  rule: string;
  tier?: string;
  /** Units each request consumes; default 1. */
  cost?: number;
  /** Prepended to express-rate-limit's key to make floodgate's subject key; default "". */
  prefix?: string;
}

/**
 * The store. express-rate-limit admits when totalHits <= its `limit`; so
 * an admitted request reports floodgate's used units (limit - remaining),
 * never more than express-rate-limit's limit, and a denied one reports one
 * more than the larger of the two limits. With express-rate-limit's
 * `limit` a number, its decision is floodgate's whatever that number is;
 * its RateLimit figures are floodgate's when the number is the rule's
 * limit. resetTime is when the binding limit is fully reset, or, on a
 * denial, when floodgate says to retry (so Retry-After is floodgate's).
 */
export class FloodgateStore {
  readonly client: FloodgateClient;
  readonly rule: string;
  readonly tier: string | undefined;
  readonly cost: number;
  readonly prefix: string;
  /** Keys live in floodgate, shared by every process that uses it. */
  readonly localKeys = false;
  private erlLimit: number | undefined;

  constructor(options: StoreOptions) {
    this.client = options.client;
    this.rule = options.rule;
    this.tier = options.tier;
    this.cost = options.cost ?? 1;
    this.prefix = options.prefix ?? '';
  }

  /** Called by express-rate-limit with its options: keeps its `limit` when a number. */
  init(options: { limit?: unknown }): void {
    this.erlLimit = typeof options.limit === 'number' ? options.limit : undefined;
  }

  async increment(key: string): Promise<ClientRateLimitInfo> {
    return this.toInfo(await this.client.check(this.rule, this.prefix + key, this.checkOptions(this.cost)));
  }

  /** A peek (FG.CHECK with COST 0): the state without consuming. */
  async get(key: string): Promise<ClientRateLimitInfo | undefined> {
    return this.toInfo(await this.client.check(this.rule, this.prefix + key, this.checkOptions(0)), 0);
  }

  /**
   * Gives the request's units back (FG.REFUND, for skipSuccessfulRequests /
   * skipFailedRequests). FG.REFUND is an admin command: the client must be
   * on loopback with no admin token set, or AUTH with the admin token.
   */
  async decrement(key: string): Promise<void> {
    await this.client.refund(this.rule, this.prefix + key, this.cost);
  }

  /** FG.RESET: forgets the subject's state on the rule (every tier). */
  async resetKey(key: string): Promise<void> {
    await this.client.reset(this.rule, this.prefix + key);
  }

  private checkOptions(cost: number): { cost: number; tier?: string } {
    return this.tier === undefined ? { cost } : { cost, tier: this.tier };
  }

  // `least`: the fewest hits an admission reports (1 for a counted request, 0 for a peek).
  private toInfo(r: CheckResult, least = 1): ClientRateLimitInfo {
    const now = Date.now();
    const erlLimit = this.erlLimit ?? r.limit;
    if (!r.allowed) {
      return {
        totalHits: Math.max(erlLimit, r.limit) + 1,
        resetTime: new Date(now + Math.max(0, r.retryAfterMs >= 0 ? r.retryAfterMs : r.resetAfterMs)),
      };
    }
    // A fallback admission does not know the usage: report one hit.
    const used = r.remaining >= 0 ? r.limit - r.remaining : 1;
    return {
      totalHits: Math.min(Math.max(used, least), Math.max(erlLimit, least)),
      resetTime: new Date(now + Math.max(0, r.resetAfterMs)),
    };
  }
}
