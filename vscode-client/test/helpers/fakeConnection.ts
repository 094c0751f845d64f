/** An in-memory RpcConnection: records requests, answers from per-method responders. */

import type { CancellationTokenLike, RpcConnection } from '../../src/client';
import type { Disposable } from '../../src/events';

export interface RecordedRequest {
  method: string;
  /** Exactly the arguments after the method, to check nothing undefined is passed. */
  args: unknown[];
}

type Responder = (params: unknown, token?: CancellationTokenLike) => unknown;

export class FakeConnection implements RpcConnection {
  readonly requests: RecordedRequest[] = [];
  readonly handlers = new Map<string, (params: unknown) => void>();
  readonly responders = new Map<string, Responder>();

  sendRequest(method: string, ...args: unknown[]): Promise<unknown> {
    this.requests.push({ method, args });
    const responder = this.responders.get(method);
    if (!responder) return Promise.resolve(null);
    try {
      return Promise.resolve(responder(args[0], args[1] as CancellationTokenLike | undefined));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  onNotification(method: string, handler: (params: unknown) => void): Disposable {
    this.handlers.set(method, handler);
    return {
      dispose: () => {
        if (this.handlers.get(method) === handler) this.handlers.delete(method);
      },
    };
  }

  /** Deliver a notification as the server would. */
  notify(method: string, params: unknown): void {
    this.handlers.get(method)?.(params);
  }
}

/** An error shaped like vscode-jsonrpc's ResponseError. */
export function responseError(code: number, message: string): Error {
  return Object.assign(new Error(message), { code });
}

/** A promise with its resolve/reject exposed. */
export function deferred<T>(): { promise: Promise<T>; resolve: (value: T) => void; reject: (error: unknown) => void } {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}
