import type { Logger } from '@nestjs/common';

/** How the demos report: section headings, and checks that pass (✔) or are collected as problems (✘). */
export class DemoReport {
  readonly problems: string[] = [];

  constructor(private readonly logger: Logger) {}

  section(title: string): void {
    this.logger.log(`──── ${title}`);
  }

  check(ok: boolean, what: string): void {
    if (ok) {
      this.logger.log(`✔ ${what}`);
    } else {
      this.logger.error(`✘ ${what}`);
      this.problems.push(what);
    }
  }
}
