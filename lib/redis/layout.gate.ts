import { SluiceError } from '../errors/sluice.error';

/** The layouts a call may run at (inclusive), and the key that records the namespace's own. */
export interface LayoutGate {
  /** The namespace's `schema` key (RedisKeys.schema). */
  marker: string;
  lowest: number;
  highest: number;
}

/**
 * A script call sent before the namespace's layout was known did not run: the namespace is at
 * another layout (`found`: its number, or 'none'), or the scripts go through EVALSHA here, which
 * has no at-layout variants (`found` undefined). Internal: the boot that sent it takes the slow
 * path (migration first, then the same calls), and no caller outside it sees this.
 */
export class LayoutRefusedError extends SluiceError {
  constructor(
    readonly script: string,
    readonly found?: string,
  ) {
    super(
      found === undefined
        ? `${script} was not sent ahead of the layout check: the scripts run through EVALSHA`
        : `${script} refused: the namespace is at key layout ${found}`,
    );
  }
}
