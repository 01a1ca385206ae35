import { createHash } from 'node:crypto';
import { MAX_ID_LENGTH } from '../util/names';

/**
 * A child's id when `invoke` gives none: the parent's id and the call's memo key, so every replay
 * of the parent names the same child — and, once the parent continued as new, its incarnation
 * (`@<generation>`), so a later incarnation's first invoke does not find an earlier one's child
 * (memo keys restart with the memo). Past the id length limit, a digest of them.
 */
export function childId(parentId: string, key: string, generation = 0): string {
  const suffix = generation > 0 ? `@${generation}` : '';
  const id = `${parentId}/${key}${suffix}`;
  if (id.length <= MAX_ID_LENGTH) return id;
  return `child-${createHash('sha256')
    .update(parentId)
    .update('\n')
    .update(key + suffix)
    .digest('base64url')}`;
}
