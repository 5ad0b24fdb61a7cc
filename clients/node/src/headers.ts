// The response header fields floodgate's HTTP front sends with a decision
// (src/server/http/http_routes.cc AppendCheckResponse), built from FG.CHECK's
// answer: IETF RateLimit-Policy and RateLimit, Retry-After on a denial; and
// the fields a reservation (FG.RESERVE's answer) can tell.

import type { CheckResult, ReserveResult } from './client';

/** A structured-field string's content: `\` and `"` escaped, non-ASCII as `?`. */
function sfString(text: string): string {
  let out = '';
  for (const ch of text) {
    const code = ch.codePointAt(0) ?? 0;
    if (ch === '\\' || ch === '"') out += '\\' + ch;
    else if (code < 0x20 || code > 0x7e) out += '?'.repeat(Buffer.byteLength(ch, 'utf8'));
    else out += ch;
  }
  return out;
}

/** Milliseconds to whole seconds, rounded up; 0 for 0 or less (as the HTTP front). */
export function ceilSeconds(ms: number): number {
  return ms <= 0 ? 0 : Math.ceil(ms / 1000);
}

/**
 * The header fields for `result` on `rule`. `windowMs` is the binding
 * limit's period (RESP does not carry it): RateLimit-Policy has `w=` only
 * when it is given. A fallback decision does not know the subject's state:
 * Floodgate-Fallback names why, in place of RateLimit.
 */
export function rateLimitFields(
  rule: string,
  result: CheckResult,
  windowMs?: number,
): Record<string, string> {
  const name = `"${sfString(rule)}"`;
  const fields: Record<string, string> = {};
  fields['RateLimit-Policy'] =
    `${name};q=${result.limit}` + (windowMs !== undefined ? `;w=${ceilSeconds(windowMs)}` : '');
  if (result.fallback === '') {
    fields['RateLimit'] = `${name};r=${result.remaining};t=${ceilSeconds(result.resetAfterMs)}`;
  } else {
    fields['Floodgate-Fallback'] = result.fallback;
  }
  if (!result.allowed && result.retryAfterMs >= 0) {
    fields['Retry-After'] = String(ceilSeconds(result.retryAfterMs));
  }
  return fields;
}

/**
 * The header fields for FG.RESERVE's answer on `rule`: RateLimit (`r=`
 * never below 0, though a subject in debt has less), and Retry-After on a
 * denial, from `resetAfterMs` (FG.RESERVE tells no closer figure). No
 * RateLimit-Policy: the reply does not carry the limit.
 */
export function reservationFields(rule: string, result: ReserveResult): Record<string, string> {
  const name = `"${sfString(rule)}"`;
  const fields: Record<string, string> = {
    RateLimit: `${name};r=${Math.max(0, result.remaining)};t=${ceilSeconds(result.resetAfterMs)}`,
  };
  if (!result.admitted && result.resetAfterMs >= 0) {
    fields['Retry-After'] = String(ceilSeconds(result.resetAfterMs));
  }
  return fields;
}
