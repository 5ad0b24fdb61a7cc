// RESP2 on the wire: commands out as arrays of bulk strings, replies in
// through an incremental parser that takes the bytes as they come (a reply
// split anywhere, several replies in one chunk).

/** A reply: simple string, integer, bulk (null when absent), array, or error. */
export type RespValue = string | number | Buffer | null | RespValue[] | RespErrorReply;

/** An error reply (`-ERR message`), kept apart from values until it is delivered. */
export class RespErrorReply {
  constructor(readonly line: string) {}
}

/** Encodes one command as a RESP array of bulk strings. */
export function encodeCommand(args: ReadonlyArray<string | number | Buffer>): Buffer {
  const parts: Buffer[] = [Buffer.from(`*${args.length}\r\n`)];
  for (const arg of args) {
    const bytes = Buffer.isBuffer(arg) ? arg : Buffer.from(String(arg), 'utf8');
    parts.push(Buffer.from(`$${bytes.length}\r\n`), bytes, Buffer.from('\r\n'));
  }
  return Buffer.concat(parts);
}

/** Thrown by the parser on bytes that are not RESP2; the connection is then dropped. */
export class RespProtocolError extends Error {}

// Bounds on what a reply may claim, so a corrupt stream cannot make the
// parser wait for (or allocate) gigabytes.
const kMaxBulkBytes = 64 * 1024 * 1024;
const kMaxArrayLength = 1024 * 1024;

/**
 * Incremental RESP2 reply parser. `push(chunk)` returns every reply that is
 * complete so far, in order; a partial reply waits for more bytes.
 * Not thread-safe (one per connection, as everything in Node).
 */
export class RespParser {
  private buffer: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): RespValue[] {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    const replies: RespValue[] = [];
    let offset = 0;
    for (;;) {
      const parsed = this.parseAt(offset);
      if (parsed === undefined) break;
      replies.push(parsed.value);
      offset = parsed.next;
    }
    this.buffer = this.buffer.subarray(offset);
    return replies;
  }

  /** Drops any partial reply (after a reconnect). */
  reset(): void {
    this.buffer = Buffer.alloc(0);
  }

  // One reply starting at `at`, or undefined when its bytes are not all here.
  private parseAt(at: number): { value: RespValue; next: number } | undefined {
    if (at >= this.buffer.length) return undefined;
    const end = this.buffer.indexOf('\r\n', at);
    if (end < 0) return undefined;
    const type = String.fromCharCode(this.buffer[at]);
    const line = this.buffer.toString('utf8', at + 1, end);
    const next = end + 2;
    switch (type) {
      case '+':
        return { value: line, next };
      case '-':
        return { value: new RespErrorReply(line), next };
      case ':':
        return { value: this.integer(line), next };
      case '$': {
        const length = this.integer(line);
        if (length === -1) return { value: null, next };
        if (length < 0 || length > kMaxBulkBytes) {
          throw new RespProtocolError(`bad bulk length ${line}`);
        }
        if (next + length + 2 > this.buffer.length) return undefined;
        const value = Buffer.from(this.buffer.subarray(next, next + length));
        return { value, next: next + length + 2 };
      }
      case '*': {
        const length = this.integer(line);
        if (length === -1) return { value: null, next };
        if (length < 0 || length > kMaxArrayLength) {
          throw new RespProtocolError(`bad array length ${line}`);
        }
        const items: RespValue[] = [];
        let cursor = next;
        for (let i = 0; i < length; i++) {
          const item = this.parseAt(cursor);
          if (item === undefined) return undefined;
          items.push(item.value);
          cursor = item.next;
        }
        return { value: items, next: cursor };
      }
      default:
        throw new RespProtocolError(`unexpected reply type byte 0x${this.buffer[at].toString(16)}`);
    }
  }

  private integer(line: string): number {
    if (!/^-?\d+$/.test(line)) throw new RespProtocolError(`bad integer '${line}'`);
    return Number(line);
  }
}
