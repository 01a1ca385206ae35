import { Injectable, Logger } from '@nestjs/common';
import { QueueClient, RunContext, Workflow } from '../lib';
import { DemoReport } from './demo.report';

const WAIT = { timeoutMs: 15_000 };

/**
 * Rebuilds a product's search entry. A burst of edits to one product should rebuild it once, with
 * its latest data: the workflow declares a debounce keyed by the product, so every enqueue by
 * class gets it (docs/dedupe.md).
 */
@Workflow('sample.reindex', {
  attempts: 2,
  dedupe: { key: (input: { sku: string }) => `sku:${input.sku}`, ttlMs: 300, maxWaitMs: 2_000, mode: 'debounce' },
})
export class ReindexWorkflow {
  async run(input: { sku: string; title: string }, ctx: RunContext) {
    return ctx.step('index', () => ({ sku: input.sku, indexed: input.title }));
  }
}

/** 18. Debounce and throttle per key. Returns the failed checks. */
@Injectable()
export class DedupeDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly client: QueueClient) {}

  async runAll(): Promise<string[]> {
    await this.debounce();
    await this.throttle();
    return this.report.problems;
  }

  /** Five quick edits of one product: one run, started 300 ms after the last, with the last title. */
  private async debounce(): Promise<void> {
    this.report.section('18. dedupe: five quick edits of one product reindex it once, with the last title');
    const handles = [];
    for (const title of ['Mug', 'Mug, blue', 'Mug, blue, 300 ml', 'Mug (blue, 300 ml)', 'Blue mug, 300 ml']) {
      handles.push(await this.client.enqueue(ReindexWorkflow, { sku: 'MUG-1', title }));
    }
    this.logger.log(`outcomes: ${handles.map((h) => `${h.dedupe?.outcome}#${h.dedupe?.seq}`).join(', ')}`);
    this.report.check(new Set(handles.map((h) => h.id)).size === 1, 'every enqueue got the same run');
    const result = await handles[0].result(WAIT);
    this.report.check(
      (result as { indexed: string }).indexed === 'Blue mug, 300 ml',
      `the run indexed the last title: ${JSON.stringify(result)}`,
    );
    const info = await this.client.get(handles[0].id);
    this.report.check(info?.dedupe?.count === 5 && info.dedupe.inputSeq === 5, 'get() shows 5 enqueues folded, the input of the 5th');
  }

  /** A throttle given on the enqueue: callers within a second share one run and its result. */
  private async throttle(): Promise<void> {
    this.report.section('18. dedupe: run() throttled per key, three callers share one run');
    const dedupe = { key: 'sku:CUP-9', ttlMs: 1_000, mode: 'throttle' as const };
    const results = await Promise.all(
      ['Cup', 'Cup!', 'Cup!!'].map((title) => this.client.run(ReindexWorkflow, { sku: 'CUP-9', title }, { ...WAIT, dedupe })),
    );
    this.report.check(
      new Set(results.map((r) => JSON.stringify(r))).size === 1,
      `every caller got the one result: ${JSON.stringify(results[0])}`,
    );
  }
}
