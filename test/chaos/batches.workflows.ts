import { appendFileSync } from 'node:fs';
import { join } from 'node:path';
import { BatchContext, Workflow } from '../../lib';

/**
 * The batch workflow of test/chaos/batches.spec.ts, shared by the forked workers
 * (batches.process.ts), the test's in-process rescuer and its producer. Each attempt does one
 * memoized step that "charges" every member — one line `<member id> charge <pid>` per member in
 * the effects file of its process, written synchronously, so it survives a SIGKILL — then, in a
 * worker started with BATCH_HOLD=1, tells the test it holds the batch and never returns (the test
 * kills it there); elsewhere it records `<member id> done <pid>` and returns one result per input.
 */
export const BATCH_WORKFLOW = 'chaos.batch';

function effect(member: string, what: string): void {
  appendFileSync(join(process.env.FX_DIR!, `fx-${process.pid}.log`), `${member} ${what} ${process.pid}\n`);
}

@Workflow(BATCH_WORKFLOW, { batch: { maxSize: 5, maxWaitMs: 200 }, attempts: 5 })
export class ChaosBatch {
  async run(inputs: number[], ctx: BatchContext<number>): Promise<Array<{ n: number; charged: number }>> {
    const charged = await ctx.step('charge', () => {
      for (const id of ctx.batch.memberIds) effect(id, 'charge');
      return process.pid;
    });
    if (process.env.BATCH_HOLD === '1') {
      process.send?.({ held: ctx.runId, members: ctx.batch.memberIds });
      await new Promise(() => undefined);
    }
    for (const id of ctx.batch.memberIds) effect(id, 'done');
    return inputs.map((n) => ({ n: n * 10, charged }));
  }
}
