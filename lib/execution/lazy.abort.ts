/**
 * An AbortController made only when something asks for its signal: most runs never look at
 * `ctx.signal`, and a controller per run is measurable on the hot path.
 */
export class LazyAbort {
  private controller?: AbortController;
  private wasAborted = false;
  private why: unknown;
  /** Told of the abort (once), without making the controller: the executor ends a cancelled attempt at once. */
  onAbort?: (reason: unknown) => void;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.wasAborted) this.controller.abort(this.why);
    }
    return this.controller.signal;
  }

  /** Whether it was aborted, read without making the controller. */
  get aborted(): boolean {
    return this.wasAborted;
  }

  /** Why it was aborted, or undefined. */
  get reason(): unknown {
    return this.why;
  }

  abort(reason: unknown): void {
    if (this.wasAborted) return;
    this.wasAborted = true;
    this.why = reason;
    this.controller?.abort(reason);
    this.onAbort?.(reason);
  }
}
