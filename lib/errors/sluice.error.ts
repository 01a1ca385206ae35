/** Base class of every error Sluice throws, so callers can catch the whole family at once. */
export class SluiceError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}
