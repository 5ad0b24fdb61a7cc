// The RESP2 encoder and incremental parser, alone: every reply type, a
// stream split at every byte, and bytes that are not RESP.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { encodeCommand, RespErrorReply, RespParser, RespProtocolError } = require('../dist/resp.js');
const { rateLimitFields } = require('../dist/index.js');

test('commands are arrays of bulk strings, lengths in bytes', () => {
  assert.equal(
    encodeCommand(['FG.CHECK', 'api', 'ключ', 5]).toString('utf8'),
    '*4\r\n$8\r\nFG.CHECK\r\n$3\r\napi\r\n$8\r\nключ\r\n$1\r\n5\r\n',
  );
});

const STREAM =
  '+OK\r\n:-12\r\n$5\r\nhe\r\nl\r\n$-1\r\n$0\r\n\r\n-ERR unknown rule \'x\'\r\n' +
  '*2\r\n*3\r\n:1\r\n:2\r\n$1\r\na\r\n*0\r\n*-1\r\n';

function check(replies) {
  assert.equal(replies.length, 8);
  assert.equal(replies[0], 'OK');
  assert.equal(replies[1], -12);
  assert.equal(replies[2].toString(), 'he\r\nl');
  assert.equal(replies[3], null);
  assert.equal(replies[4].toString(), '');
  assert.ok(replies[5] instanceof RespErrorReply);
  assert.equal(replies[5].line, "ERR unknown rule 'x'");
  assert.equal(replies[6][0][2].toString(), 'a');
  assert.deepEqual(replies[6][0].slice(0, 2), [1, 2]);
  assert.deepEqual(replies[6][1], []);
  assert.equal(replies[7], null);
}

test('a stream in one chunk', () => {
  check(new RespParser().push(Buffer.from(STREAM)));
});

test('a stream split at every byte boundary', () => {
  const bytes = Buffer.from(STREAM);
  for (let cut = 1; cut < bytes.length; cut++) {
    const parser = new RespParser();
    const replies = [...parser.push(bytes.subarray(0, cut)), ...parser.push(bytes.subarray(cut))];
    check(replies);
  }
  const parser = new RespParser();
  const replies = [];
  for (const b of bytes) replies.push(...parser.push(Buffer.from([b])));
  check(replies);
});

test('bytes that are not RESP are refused', () => {
  assert.throws(() => new RespParser().push(Buffer.from('HTTP/1.1 400\r\n')), RespProtocolError);
  assert.throws(() => new RespParser().push(Buffer.from(':12a\r\n')), RespProtocolError);
  assert.throws(() => new RespParser().push(Buffer.from('$99999999999\r\n')), RespProtocolError);
});

test('RateLimit fields: the HTTP front\'s format, names escaped, seconds rounded up', () => {
  const denied = { allowed: false, limit: 5, remaining: 0, retryAfterMs: 1001, resetAfterMs: 59001, fallback: '' };
  assert.deepEqual(rateLimitFields('a"b\\c', denied, 60000), {
    'RateLimit-Policy': '"a\\"b\\\\c";q=5;w=60',
    RateLimit: '"a\\"b\\\\c";r=0;t=60',
    'Retry-After': '2',
  });
  const never = { ...denied, retryAfterMs: -1 };
  assert.equal(rateLimitFields('api', never)['Retry-After'], undefined);
  const fallback = { allowed: true, limit: 5, remaining: -1, retryAfterMs: 0, resetAfterMs: -1, fallback: 'backend_error' };
  assert.deepEqual(rateLimitFields('api', fallback), {
    'RateLimit-Policy': '"api";q=5',
    'Floodgate-Fallback': 'backend_error',
  });
});
