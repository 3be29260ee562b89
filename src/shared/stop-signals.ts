/**
 * StopSignals: the signals that stop a foreground command (`cloudlib service`, `mount`, `webdav`), caught
 * from the moment the command starts. One that arrives while the command is still starting (its server
 * not yet listening, its mount not yet made) then stops it once it has started, cleanly, instead of
 * killing it halfway, which is what the default action of SIGTERM would do.
 *
 * Each signal is caught once: a second SIGTERM while the command stops takes the default action again.
 */
export class StopSignals {
  private readonly handlers = new Map<NodeJS.Signals, () => void>();
  private readonly first: Promise<NodeJS.Signals>;

  constructor(signals: readonly NodeJS.Signals[]) {
    this.first = new Promise((resolve) => {
      for (const signal of signals) {
        const handler = (): void => {
          this.handlers.delete(signal);
          resolve(signal);
        };
        this.handlers.set(signal, handler);
        process.once(signal, handler);
      }
    });
  }

  /** Resolves with the first of the signals to arrive (at once when one came already). */
  received(): Promise<NodeJS.Signals> {
    return this.first;
  }

  /** No longer caught (the command ends without waiting for one: it failed to start). */
  dispose(): void {
    for (const [signal, handler] of this.handlers) process.off(signal, handler);
    this.handlers.clear();
  }
}
