import { Injectable } from '@nestjs/common';
import { LEAN_RECORDS_LAYOUT } from './layout.versions';

/**
 * The key layout this process found its namespace at when it bootstrapped (`MigrationRunner`), so
 * an enqueue knows whether to store a lean run record (layout 4) without reading `schema` in each
 * script call. Unknown until the bootstrap's migration or check is done: enqueues meanwhile store
 * full records, which every version reads. A namespace moved to layout 4 later is seen at the
 * next restart; full records written until then read the same.
 */
@Injectable()
export class NamespaceLayout {
  private layout: number | undefined;

  /** Records the layout read or reached at bootstrap. */
  found(layout: number | undefined): void {
    this.layout = layout;
  }

  /** Whether new runs are stored as lean records (see lua/includes/records.lua). */
  get leanRecords(): boolean {
    return (this.layout ?? 0) >= LEAN_RECORDS_LAYOUT;
  }
}
