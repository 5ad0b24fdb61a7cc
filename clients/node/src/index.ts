// floodgate-client: a promise API over floodgate's RESP front, a Store for
// express-rate-limit, and Express middleware.

export {
  createClient,
  FloodgateClient,
  type AcquireOptions,
  type AcquireResult,
  type CheckOptions,
  type CheckResult,
  type ClientOptions,
  type LimitState,
  type ReserveOptions,
  type ReserveResult,
  type SettleResult,
  type SubjectState,
} from './client';
export {
  FloodgateConnectionError,
  FloodgateReplyError,
  FloodgateTimeoutError,
  isUnavailable,
} from './errors';
export { ceilSeconds, rateLimitFields, reservationFields } from './headers';
export {
  floodgate,
  openAIUsage,
  type FloodgateRequest,
  type MiddlewareOptions,
  type ReserveMiddlewareOptions,
  type SettleFunction,
  type SettleOutcome,
} from './middleware';
export { FloodgateStore, type ClientRateLimitInfo, type StoreOptions } from './store';
export type { TlsOptions } from './connection';
export type { RespValue } from './resp';
