import { Logger } from '@nestjs/common';
import { RunContext, Workflow } from '../lib';
import { InventoryService } from './inventory.service';

export interface StockReportInput {
  /** SKUs with fewer units on hand than this are flagged for reordering. */
  reorderBelow: number;
}

export interface StockReport {
  levels: Record<string, number>;
  /** SKUs under the reorder point. */
  reorder: string[];
}

/** Id of the schedule declared below; its runs are `stock-report@<occurrence ms>`. */
export const STOCK_REPORT_SCHEDULE = 'stock-report';

/**
 * A periodic sweep of the warehouse: reports stock levels and the SKUs to reorder. Nobody
 * enqueues it: the schedule declared here is written to Redis at worker bootstrap and fires
 * every 2 seconds (6 fields, seconds first — a real deployment would sweep hourly or so).
 * `overlap: false`: an occurrence is skipped while the previous sweep is still running.
 */
@Workflow('inventory.stock-report', {
  schedules: [{ id: STOCK_REPORT_SCHEDULE, cron: '*/2 * * * * *', input: { reorderBelow: 990 }, overlap: false }],
})
export class StockReportWorkflow {
  private readonly logger = new Logger('StockReport');

  constructor(private readonly inventory: InventoryService) {}

  async run(input: StockReportInput, ctx: RunContext): Promise<StockReport> {
    const levels = this.inventory.levels();
    const reorder = Object.keys(levels).filter((sku) => levels[sku] < input.reorderBelow);
    const summary = Object.entries(levels)
      .map(([sku, units]) => `${sku} ${units}`)
      .join(', ');
    this.logger.log(`${ctx.runId}: ${summary}; reorder: ${reorder.join(', ') || 'nothing'}`);
    return { levels, reorder };
  }
}
