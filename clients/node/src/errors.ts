// The errors a floodgate client rejects with. Every one is an Error; the
// class says whether floodgate answered (FloodgateReplyError) or could not
// be reached in time (FloodgateConnectionError, FloodgateTimeoutError).

/** Floodgate answered with an error reply: the message is the server's. */
export class FloodgateReplyError extends Error {
  /** The reply's code: "ERR", "NOPERM", "NOAUTH", ... */
  readonly code: string;
  /** The command that got the error (its name only: keys are not logged). */
  readonly command: string;

  constructor(line: string, command: string) {
    const space = line.indexOf(' ');
    const code = space > 0 && /^[A-Z]+$/.test(line.slice(0, space)) ? line.slice(0, space) : 'ERR';
    super(space > 0 && code === line.slice(0, space) ? line.slice(space + 1) : line);
    this.name = 'FloodgateReplyError';
    this.code = code;
    this.command = command;
  }
}

/** The connection could not be made, or closed before the reply came. */
export class FloodgateConnectionError extends Error {
  /** The system error's code when there is one (ECONNREFUSED, ECONNRESET, ...). */
  readonly code: string | undefined;

  constructor(message: string, code?: string) {
    super(message);
    this.name = 'FloodgateConnectionError';
    this.code = code;
  }
}

/** No reply within the command's timeout; the connection is dropped. */
export class FloodgateTimeoutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FloodgateTimeoutError';
  }
}

/** Whether `error` means floodgate could not be asked (as opposed to it saying no). */
export function isUnavailable(error: unknown): boolean {
  return error instanceof FloodgateConnectionError || error instanceof FloodgateTimeoutError;
}
