/**
 * A tiny event emitter with VS Code's shape (`event(listener) -> Disposable`), so the
 * client, model and mirror need no `vscode` import and run in plain node.
 */

export interface Disposable {
  dispose(): void;
}

export type Listener<T> = (value: T) => void;

/** Registers a listener; dispose the result to unregister it. */
export type Event<T> = (listener: Listener<T>) => Disposable;

export class Emitter<T> {
  private readonly listeners = new Set<Listener<T>>();

  /** Subscribe; a listener registered twice is called twice (each has its own disposable). */
  readonly event: Event<T> = (listener) => {
    // Wrap so the same function can be registered twice and each disposable removes one.
    const entry: Listener<T> = (value) => listener(value);
    this.listeners.add(entry);
    return { dispose: () => this.listeners.delete(entry) };
  };

  fire(value: T): void {
    // Copy: a listener may unsubscribe (or subscribe another) while we iterate.
    for (const listener of [...this.listeners]) {
      try {
        listener(value);
      } catch (error) {
        // One faulty listener must not starve the others (or the JSON-RPC reader
        // that called us) of the event.
        console.error('terminal-registry: an event listener threw', error);
      }
    }
  }

  get listenerCount(): number {
    return this.listeners.size;
  }

  dispose(): void {
    this.listeners.clear();
  }
}

/** A disposable that disposes several at once. */
export function combineDisposables(...items: Disposable[]): Disposable {
  return {
    dispose: () => {
      for (const item of items.splice(0)) item.dispose();
    },
  };
}
