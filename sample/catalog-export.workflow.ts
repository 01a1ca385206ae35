import { RunContext, Workflow } from '../lib';

export interface ExportInput {
  /** Pages of the catalog to export, one step each. */
  pages: number;
  /** Pause between pages in ms (the "work"), so the demo can act on a run in flight. */
  pageMs: number;
}

/** Pages each export run has written, by run id: the demo counts side effects (a real one writes files). */
export const exportedPages = new Map<string, number[]>();

/**
 * A long export in steps, the kind of run operators stop, pause and re-drive: one step per page,
 * progress after each, and it honours `ctx.signal` (a cancel aborts the wait between pages at
 * once). Starts are rate-limited fleet-wide (at most 20 a second: the export API downstream is
 * metered); completed runs are indexed so `listRuns` can page them.
 */
@Workflow('catalog.export', { attempts: 2, rateLimit: { max: 20, perMs: 1_000 }, indexCompleted: true })
export class CatalogExportWorkflow {
  async run(input: ExportInput, ctx: RunContext): Promise<{ pages: number }> {
    for (let page = 1; page <= input.pages; page++) {
      await ctx.step(`page-${page}`, async ({ signal }) => {
        await abortableDelay(input.pageMs, signal);
        exportedPages.set(ctx.runId, [...(exportedPages.get(ctx.runId) ?? []), page]);
        return page;
      });
      await ctx.progress({ page, of: input.pages });
    }
    return { pages: input.pages };
  }
}

function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}
