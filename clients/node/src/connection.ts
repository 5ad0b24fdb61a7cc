// One RESP connection to floodgate: commands pipelined, replies matched to
// them in order, connected on first use and again after it closes.

import * as net from 'node:net';

import { FloodgateConnectionError, FloodgateReplyError, FloodgateTimeoutError } from './errors';
import { encodeCommand, RespErrorReply, RespParser, RespProtocolError, RespValue } from './resp';

export interface ConnectionOptions {
  host: string;
  port: number;
  /** Sent as `AUTH password` first on every new connection. */
  password?: string;
  connectTimeoutMs: number;
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
    const socket = net.createConnection({ host: this.options.host, port: this.options.port });
    socket.setNoDelay(true);
    const link: Link = { socket, parser: new RespParser(), pending: [] };
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
    socket.once('connect', () => clearTimeout(connectTimer));
    socket.on('data', (chunk: Buffer) => this.onData(link, chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      lastError = error;
    });
    socket.on('close', () => {
      clearTimeout(connectTimer);
      if (this.link === link) this.link = null;
      const cause =
        lastError instanceof FloodgateConnectionError || lastError instanceof FloodgateTimeoutError
          ? lastError
          : new FloodgateConnectionError(
              lastError !== undefined
                ? `floodgate at ${this.address()}: ${lastError.message}`
                : `floodgate at ${this.address()} closed the connection`,
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
