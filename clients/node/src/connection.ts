// One RESP connection to floodgate: commands pipelined, replies matched to
// them in order, connected on first use and again after it closes, in clear
// or over TLS.

import * as net from 'node:net';
import * as tls from 'node:tls';

import { FloodgateConnectionError, FloodgateReplyError, FloodgateTimeoutError } from './errors';
import { encodeCommand, RespErrorReply, RespParser, RespProtocolError, RespValue } from './resp';

export interface ConnectionOptions {
  host: string;
  port: number;
  /** Sent as `AUTH password` first on every new connection. */
  password?: string;
  connectTimeoutMs: number;
  /** TLS with these options; plaintext without. */
  tls?: TlsOptions;
}

/**
 * Node's `tls.connect` options but where to connect (`ca`, `cert`, `key`,
 * `servername`, `rejectUnauthorized`, `minVersion`, ...): ioredis's `tls`.
 */
export type TlsOptions = Omit<tls.ConnectionOptions, 'host' | 'port' | 'path' | 'socket'>;

// The alerts a server sends when it wants a client certificate and got
// none, or got one its client CAs did not sign (TLS 1.3, then 1.2).
const kClientCertRefused = new Set([
  'ERR_SSL_TLSV13_ALERT_CERTIFICATE_REQUIRED',
  'ERR_SSL_TLSV1_ALERT_UNKNOWN_CA',
  'ERR_SSL_SSLV3_ALERT_BAD_CERTIFICATE',
  'ERR_SSL_SSLV3_ALERT_HANDSHAKE_FAILURE',
]);

// Why a TLS connection failed, for a user who sees only this message:
// OpenSSL's reason rather than its error stack, and what to check. The text
// follows "floodgate at host:port". `handshaken`: this client accepted the
// server; `answered`: a reply came.
function tlsFailure(error: Error | undefined, handshaken: boolean, answered: boolean): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code ?? '';
  // On the error, or only in its text when a write failed on it (EPROTO
  // "...:SSL routines:function:reason:file:line:").
  const reason =
    error === undefined
      ? undefined
      : ((error as { reason?: string }).reason ??
        /:SSL routines:[^:]*:([^:]+)/.exec(error.message)?.[1]);
  // The socket's own: ECONNREFUSED, ECONNRESET, ...
  const socketError = reason === undefined && /^E[A-Z]+$/.test(code);
  const clientCertHint =
    'does it require a client certificate (tls.cert, tls.key) that its client_ca_file signed?';
  if (kClientCertRefused.has(code)) {
    return `: TLS: floodgate refused this client (${reason}): ${clientCertHint}`;
  }
  if (!handshaken) {
    if (error === undefined) return ' closed the connection during the TLS handshake';
    if (socketError) return `: ${error.message}`;
    if (reason === 'wrong version number') {
      return `: TLS handshake failed (${reason}): the port does not speak TLS ` +
        '(floodgate serves TLS on a front only when its listen_tls says so)';
    }
    // Node's verify codes have no ERR_SSL_ prefix (UNABLE_TO_VERIFY_LEAF_SIGNATURE,
    // SELF_SIGNED_CERT_IN_CHAIN, CERT_HAS_EXPIRED, ERR_TLS_CERT_ALTNAME_INVALID).
    if (code !== '' && !code.startsWith('ERR_SSL_')) {
      return `: TLS handshake failed: floodgate's certificate was not accepted: ${error.message} ` +
        `(${code}); is tls.ca the CA that signed it, and the host (or tls.servername) ` +
        'one of its names?';
    }
    return `: TLS handshake failed: ${reason ?? error.message.trim()}`;
  }
  // A TLS 1.3 server checks the client's certificate after the client's
  // handshake is over, and its alert can be lost to the reset that follows:
  // then a close before any reply is all this client sees of a refusal.
  if (!answered && (error === undefined || code === 'ECONNRESET' || code === 'EPIPE')) {
    const what = error === undefined ? 'closed' : error.message;
    return ` ended the TLS connection before any reply (${what}): ${clientCertHint}`;
  }
  if (error === undefined) return ' closed the connection';
  return socketError ? `: ${error.message}` : `: TLS: ${reason ?? error.message.trim()}`;
}

interface Pending {
  command: string;
  resolve: (value: RespValue) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout | undefined;
}

interface Link {
  socket: net.Socket;
  parser: RespParser;
  pending: Pending[];
  /** A reply came on it (what a refused TLS client never sees). */
  answered: boolean;
}

/**
 * A pipelined connection. Commands sent while it connects are written once
 * it is up; a command in flight when it closes is rejected (never re-sent:
 * FG.CHECK consumes, so a retry could count twice), and the next command
 * opens a new connection. A command with no reply within its timeout is
 * rejected and the connection dropped, since every later reply on it would
 * be late too. Not thread-safe (Node's single thread only).
 */
export class RespConnection {
  // The current socket and what was sent on it; a new one after a close.
  private link: Link | null = null;
  private closed = false;

  constructor(private readonly options: ConnectionOptions) {}

  /** Commands sent and not yet answered. */
  get inFlight(): number {
    return this.link?.pending.length ?? 0;
  }

  send(args: ReadonlyArray<string | number>, timeoutMs: number): Promise<RespValue> {
    const command = String(args[0]).toUpperCase();
    if (this.closed) {
      return Promise.reject(new FloodgateConnectionError('the floodgate client is closed'));
    }
    return new Promise<RespValue>((resolve, reject) => {
      const link = this.link !== null && !this.link.socket.destroyed ? this.link : this.open();
      const entry: Pending = { command, resolve, reject, timer: undefined };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          this.drop(
            link,
            new FloodgateTimeoutError(
              `floodgate at ${this.address()} did not answer ${command} within ${timeoutMs} ms`,
            ),
            entry,
          );
        }, timeoutMs);
      }
      link.pending.push(entry);
      link.socket.ref();
      link.socket.write(encodeCommand(args));
    });
  }

  /** Ends the connection; commands still in flight are rejected. */
  close(): Promise<void> {
    this.closed = true;
    const link = this.link;
    if (link === null || link.socket.destroyed) return Promise.resolve();
    return new Promise<void>((resolve) => {
      link.socket.once('close', () => resolve());
      link.socket.end();
      // A server that does not close its side gets a second to do so.
      setTimeout(() => link.socket.destroy(), 1000).unref();
    });
  }

  private address(): string {
    return `${this.options.host}:${this.options.port}`;
  }

  private open(): Link {
    const { host, port } = this.options;
    const tlsOptions = this.options.tls;
    // A TLSSocket takes writes before its handshake is done and sends them
    // after it, as a plain socket does before it connects.
    const socket: net.Socket =
      tlsOptions !== undefined
        ? tls.connect({ ...tlsOptions, host, port })
        : net.createConnection({ host, port });
    socket.setNoDelay(true);
    const link: Link = { socket, parser: new RespParser(), pending: [], answered: false };
    this.link = link;
    const connectTimer = setTimeout(() => {
      socket.destroy(
        new FloodgateConnectionError(
          `cannot connect to floodgate at ${this.address()}: no answer within ` +
            `${this.options.connectTimeoutMs} ms`,
          'ETIMEDOUT',
        ),
      );
    }, this.options.connectTimeoutMs);
    connectTimer.unref();
    let lastError: Error | undefined;
    // Connected means handshaken for TLS: the connect timeout bounds both.
    let handshaken = false;
    socket.once(tlsOptions !== undefined ? 'secureConnect' : 'connect', () => {
      handshaken = true;
      clearTimeout(connectTimer);
    });
    socket.on('data', (chunk: Buffer) => this.onData(link, chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      // The first says why: a failed handshake is followed by a failed write.
      if (lastError === undefined) lastError = error;
    });
    socket.on('close', () => {
      clearTimeout(connectTimer);
      if (this.link === link) this.link = null;
      const cause =
        lastError instanceof FloodgateConnectionError || lastError instanceof FloodgateTimeoutError
          ? lastError
          : new FloodgateConnectionError(
              `floodgate at ${this.address()}` +
                (tlsOptions !== undefined
                  ? tlsFailure(lastError, handshaken, link.answered)
                  : lastError !== undefined
                    ? `: ${lastError.message}`
                    : ' closed the connection'),
              (lastError as NodeJS.ErrnoException | undefined)?.code,
            );
      for (const entry of link.pending.splice(0)) {
        if (entry.timer !== undefined) clearTimeout(entry.timer);
        entry.reject(cause);
      }
    });
    if (this.options.password !== undefined) {
      // First on the wire; its failure fails the connection and so every
      // command queued behind it.
      link.pending.push({ command: 'AUTH', resolve: () => {}, reject: () => {}, timer: undefined });
      socket.write(encodeCommand(['AUTH', this.options.password]));
    }
    return link;
  }

  private onData(link: Link, chunk: Buffer): void {
    const { socket } = link;
    link.answered = true;
    let replies: RespValue[];
    try {
      replies = link.parser.push(chunk);
    } catch (error) {
      const message = error instanceof RespProtocolError ? error.message : String(error);
      socket.destroy(
        new FloodgateConnectionError(`floodgate at ${this.address()} sent a bad reply: ${message}`),
      );
      return;
    }
    for (const reply of replies) {
      const entry = link.pending.shift();
      if (entry === undefined) {
        socket.destroy(
          new FloodgateConnectionError(`floodgate at ${this.address()} sent an unasked reply`),
        );
        return;
      }
      if (entry.timer !== undefined) clearTimeout(entry.timer);
      if (reply instanceof RespErrorReply) {
        const error = new FloodgateReplyError(reply.line, entry.command);
        if (entry.command === 'AUTH') {
          socket.destroy(
            new FloodgateConnectionError(`floodgate at ${this.address()} refused AUTH: ${error.message}`),
          );
          return;
        }
        entry.reject(error);
      } else {
        entry.resolve(reply);
      }
    }
    // Idle: an open connection alone does not keep the process running.
    if (link.pending.length === 0) socket.unref();
  }

  // Rejects `entry` with `error` and drops the connection it was sent on.
  private drop(link: Link, error: Error, entry: Pending): void {
    const index = link.pending.indexOf(entry);
    if (index >= 0) {
      link.pending.splice(index, 1);
      entry.reject(error);
    }
    link.socket.destroy(
      new FloodgateConnectionError(
        `floodgate at ${this.address()}: connection dropped after a ${entry.command} timed out`,
      ),
    );
  }
}
