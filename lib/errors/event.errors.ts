import { SluiceError } from './sluice.error';

/** `publish(name, payload, { id })` with an id published before under another event name. Nothing was written. */
export class EventIdConflictError extends SluiceError {
  constructor(
    /** The event id given to `publish`. */
    readonly eventId: string,
    /** The name the id was published under before. */
    readonly existingName: string,
    /** The name this `publish` gave. */
    readonly eventName: string,
  ) {
    super(
      `event id "${eventId}" was published as "${existingName}", not "${eventName}": an event id names one event per namespace ` +
        'while its record is kept (resultTtlMs). Nothing was written',
    );
  }
}
