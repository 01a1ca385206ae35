import { join } from 'node:path';
import { describeUndocumented, ENTRY_POINTS, undocumentedApi } from '../support/tsdoc-coverage';

/**
 * Every export of `nest-sluice`, `nest-sluice/testing` and `nest-sluice/dashboard`, and every public
 * member of what they export, has a TSDoc comment: the API reference (TypeDoc, `npm run docs`) is
 * made of them.
 */
describe('TSDoc on the public API', () => {
  it('every exported symbol and public member of the three entry points is documented', () => {
    const missing = undocumentedApi(ENTRY_POINTS);
    if (missing.length > 0) {
      throw new Error(`${missing.length} exported symbols or public members have no TSDoc comment:\n${describeUndocumented(missing)}`);
    }
  });

  it('fails on a deliberate break: reports exactly the undocumented exports and members, by file:line', () => {
    const root = join(__dirname, '..', 'fixtures', 'tsdoc');
    expect(describeUndocumented(undocumentedApi(['index.ts'], root)).split('\n')).toEqual([
      'Documented.undocumented (named.ts:5)',
      'Documented.bare (named.ts:13)',
      'Documented.bareMethod (named.ts:22)',
      'Undocumented (named.ts:25)',
      'Shape.no (named.ts:32)',
      'Shape.nested.shallow (named.ts:37)',
      'undocumentedFunction (star.ts:4)',
      'Options.b (star.ts:13)',
      'Mode.Off (star.ts:20)',
    ]);
  });
});
