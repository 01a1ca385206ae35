import { Injectable, Logger } from '@nestjs/common';
import { isDeepStrictEqual } from 'node:util';
import { QueueClient, WorkflowFailedError } from '../lib';
import { FulfilmentJournal } from './fulfilment.journal';
import { latency } from './inventory.service';
import { OrderInput, OrderWorkflow } from './order.workflow';
import { PaymentGateway } from './payment.gateway';
import { DemoReport } from './demo.report';
import { RunLogListener } from './run-log.listener';

const WAIT = { timeoutMs: 15_000 };

/**
 * The producer side: enqueues orders through the injected `QueueClient`, awaits their results
 * and checks that what happened is what Sluice promises. Returns the failed checks.
 */
@Injectable()
export class OrderDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(
    private readonly client: QueueClient,
    private readonly journal: FulfilmentJournal,
    private readonly payments: PaymentGateway,
    private readonly runLog: RunLogListener,
  ) {}

  async runAll(): Promise<string[]> {
    await this.idempotentEnqueue();
    await this.retryResumesAfterFinishedSteps();
    await this.nonRetryableFailure();
    await this.priorityUnderTheCap();
    await this.delayedRun();
    await this.tenantsShareFairly();
    await this.runEventsHeard();
    return this.report.problems;
  }

  /** 1. A caller-given id is an idempotency key: the second enqueue returns the same run. */
  private async idempotentEnqueue(): Promise<void> {
    this.report.section('1. idempotent enqueue: the same id twice is one run');
    const order = orderOf('A-100', 'SKU-MUG', 'tok_visa');
    const first = await this.client.enqueue(OrderWorkflow, order, { id: 'order-A-100' });
    const again = await this.client.enqueue(OrderWorkflow, order, { id: 'order-A-100' });
    this.logger.log(`enqueue #1 → run ${first.id} (created: ${first.created}); enqueue #2 → run ${again.id} (created: ${again.created})`);
    this.report.check(first.created && !again.created && again.id === first.id, 'the second enqueue returned the existing run');
    const [a, b] = await Promise.all([first.result(WAIT), again.result(WAIT)]);
    this.logger.log(`result: ${JSON.stringify(a)}`);
    this.report.check(isDeepStrictEqual(a, b), 'both handles resolve to the same result');
    this.report.check(this.journal.attemptsOf('A-100', 'run started').length === 1, 'the order was fulfilled once');
  }

  /** 2. A flaky payment: attempt 2 replays reserveStock and the invoice number, and runs the rest. */
  private async retryResumesAfterFinishedSteps(): Promise<void> {
    this.report.section('2. retry: the payment gateway times out once, finished steps are not re-executed');
    // A caller-given id, so the run's events can be picked out below.
    const result = await this.client.run(OrderWorkflow, orderOf('B-200', 'SKU-TEE', 'tok_flaky'), { id: 'order-B-200', ...WAIT });
    this.logger.log(`result: ${JSON.stringify(result)}`);
    const ran = (event: string) => this.journal.attemptsOf('B-200', event);
    this.logger.log(
      `executed in attempts — reserveStock ${fmt(ran('step reserveStock executed'))}, invoice-number ${fmt(ran('step invoice-number executed'))}, ` +
        `chargePayment ${fmt(ran('step chargePayment executed'))}, shipOrder ${fmt(ran('step shipOrder executed'))}`,
    );
    this.report.check(result.attempt === 2, 'the run completed on attempt 2');
    this.report.check(
      isDeepStrictEqual(ran('step reserveStock executed'), [1]),
      'reserveStock executed once (attempt 1), replayed on attempt 2',
    );
    this.report.check(
      isDeepStrictEqual(ran('step invoice-number executed'), [1]),
      'ctx.step invoice-number executed once; attempt 2 reused its value',
    );
    this.report.check(
      isDeepStrictEqual(ran('step chargePayment executed'), [1, 2]),
      'chargePayment failed on attempt 1 and executed again on attempt 2',
    );
    this.report.check(isDeepStrictEqual(ran('step shipOrder executed'), [2]), 'shipOrder executed once');
    this.report.check(this.payments.chargesFor(result.invoiceNo) === 1, 'the customer was charged exactly once');
    // Attempt 2 ran after the 'retrying' event was emitted, so it has been heard by now.
    const retries = this.runLog.retries.filter((e) => e.runId === 'order-B-200');
    this.report.check(
      retries.length === 1 && retries[0].attempt === 1 && retries[0].error.name === 'GatewayTimeoutError',
      "the @OnWorkflowEvent('retrying') listener heard attempt 1's GatewayTimeoutError",
    );
  }

  /** 3. NonRetryableError fails the run at once; the waiter gets WorkflowFailedError. */
  private async nonRetryableFailure(): Promise<void> {
    this.report.section('3. NonRetryableError: a declined card fails the run at once, no retries');
    const handle = await this.client.enqueue(OrderWorkflow, orderOf('C-300', 'SKU-CAP', 'tok_declined'));
    try {
      const result = await handle.result(WAIT);
      this.report.check(false, `expected WorkflowFailedError, got result ${JSON.stringify(result)}`);
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      this.logger.log(`caught ${error.name}: ${error.message} (causeName: ${error.causeName})`);
      this.report.check(error.causeName === 'NonRetryableError', 'the cause is the NonRetryableError thrown by the gateway');
    }
    const info = await this.client.get(handle.id);
    this.logger.log(`client.get → state ${info?.state}, attempts ${info?.attempts}/${info?.maxAttempts}, error ${info?.error?.name}`);
    this.report.check(info?.state === 'failed' && info.attempts === 1, 'the run failed after a single attempt');
  }

  /**
   * 4. The workflow cap (`concurrency: 5`) is held by five slow gift-wrapped orders; three bulk
   * orders and then a priority order queue up behind them. When slots free up, the priority
   * order goes first.
   */
  private async priorityUnderTheCap(): Promise<void> {
    this.report.section('4. priority: with the cap of 5 full, a priority order overtakes the queue');
    const slow = ['D-401', 'D-402', 'D-403', 'D-404', 'D-405'].map((id) => ({
      input: { ...orderOf(id, 'SKU-MUG', 'tok_visa'), giftWrap: true },
    }));
    const slowHandles = await this.client.enqueueMany(OrderWorkflow, slow);
    await this.untilActive(slowHandles.map((h) => h.id));
    this.logger.log('5 gift-wrapped orders are active: the cap is full');
    const bulk = ['D-406', 'D-407', 'D-408'].map((id) => ({ input: orderOf(id, 'SKU-TEE', 'tok_visa') }));
    const bulkHandles = await this.client.enqueueMany(OrderWorkflow, bulk);
    const vip = await this.client.enqueue(OrderWorkflow, orderOf('E-500', 'SKU-CAP', 'tok_visa'), { priority: 10 });
    const queued = await Promise.all([...bulkHandles, vip].map((h) => this.client.get(h.id)));
    this.logger.log(
      `queued behind the cap: ${queued.map((i) => `${(i?.input as OrderInput).orderId} (priority ${i?.priority}, ${i?.state})`).join(', ')}`,
    );
    this.report.check(
      queued.every((i) => i?.state === 'waiting'),
      'the bulk and priority orders wait while the cap is full',
    );
    await Promise.all([...slowHandles, ...bulkHandles, vip].map((h) => h.result(WAIT)));
    const order = this.journal.startOrder().filter((id) => ['D-406', 'D-407', 'D-408', 'E-500'].includes(id));
    this.logger.log(`start order after the cap freed up: ${order.join(' → ')}`);
    this.report.check(order[0] === 'E-500', 'the priority order started first');
    this.logger.log(`most runs in flight at once: ${this.journal.maxInFlight}`);
    this.report.check(this.journal.maxInFlight <= 5, 'never more than 5 runs of order.fulfil active (worker concurrency is 10)');
  }

  /** 5. A delayed run starts no earlier than its delay. */
  private async delayedRun(): Promise<void> {
    this.report.section('5. delay: an order enqueued with { delayMs: "1s" }');
    const handle = await this.client.enqueue(OrderWorkflow, orderOf('F-600', 'SKU-MUG', 'tok_visa'), { delayMs: '1s' });
    this.logger.log(`client.get → state ${(await this.client.get(handle.id))?.state}`);
    await handle.result(WAIT);
    const info = await this.client.get(handle.id);
    const waitedMs = (info?.startedAt?.getTime() ?? 0) - (info?.createdAt.getTime() ?? 0);
    this.logger.log(`client.get → state ${info?.state}; started ${waitedMs} ms after it was enqueued`);
    this.report.check(info?.state === 'completed' && waitedMs >= 1_000, 'the delayed order started no earlier than 1 s after enqueue');
  }

  /**
   * 6. Groups: each tenant may have 2 orders in flight (`groupConcurrency: 2`, fleet-wide), and
   * tenants take turns, so one tenant's backlog does not hold another's order back. A runtime
   * `setLimits` gives one tenant more room.
   */
  private async tenantsShareFairly(): Promise<void> {
    this.report.section('6. groups: tenant "acme" has a backlog of 6 slow orders, "globex" places 1');
    const giftWrapped = (id: string) => ({ input: { ...orderOf(id, 'SKU-MUG', 'tok_visa'), giftWrap: true }, opts: { group: 'acme' } });
    const acme = await this.client.enqueueMany(OrderWorkflow, ['G-701', 'G-702', 'G-703', 'G-704', 'G-705', 'G-706'].map(giftWrapped));
    const globex = await this.client.enqueue(OrderWorkflow, orderOf('H-800', 'SKU-TEE', 'tok_visa'), { group: 'globex' });
    let acmePeak = 0;
    let globexDone = false;
    const globexResult = globex.result(WAIT).then(() => (globexDone = true));
    while (!globexDone) {
      const stats = await this.client.stats({ workflow: OrderWorkflow, groups: true });
      acmePeak = Math.max(acmePeak, stats.workflows['order.fulfil'].groups?.acme?.active ?? 0);
      await latency(10);
    }
    await globexResult;
    const acmeLeft = (await Promise.all(acme.map((h) => this.client.get(h.id)))).filter((i) => i?.state !== 'completed').length;
    this.logger.log(`globex's order finished while ${acmeLeft} of acme's 6 were not done; acme peaked at ${acmePeak} in flight`);
    this.report.check(acmePeak <= 2, 'acme never had more than its 2 slots');
    this.report.check(acmeLeft > 0, "globex's order did not wait for acme's backlog");
    const previous = await this.client.setLimits({ workflow: 'order.fulfil', group: 'acme', limit: 4 });
    this.logger.log(
      `setLimits acme → 4 (was ${previous ?? 'the default'}); limits now ${JSON.stringify(await this.client.getLimits({ workflow: 'order.fulfil', group: 'acme' }))}`,
    );
    await Promise.all(acme.map((h) => h.result(WAIT)));
    const stats = await this.client.stats({ workflow: OrderWorkflow });
    this.logger.log(`client.stats → ${JSON.stringify(stats.workflows['order.fulfil'])}`);
    this.report.check(stats.workflows['order.fulfil'].active === 0 && stats.workflows['order.fulfil'].waiting === 0, 'every order is done');
  }

  /**
   * 7. What RunLogListener heard, against the running totals in Redis. Events are emitted once
   * the outcome is committed, but a waiter can be told of it first: allow them a moment to land.
   */
  private async runEventsHeard(): Promise<void> {
    this.report.section('7. run events: what the @OnWorkflowEvent listener heard of order.fulfil');
    const totals = (await this.client.stats({ workflow: OrderWorkflow })).workflows['order.fulfil'];
    const heardAll = () => this.runLog.completed.length === totals.completed && this.runLog.failedForGood.length === totals.failed;
    const deadline = Date.now() + 2_000;
    while (!heardAll() && Date.now() < deadline) await latency(10);
    const [failed] = this.runLog.failedForGood;
    this.logger.log(
      `heard ${this.runLog.completed.length} completed, ${this.runLog.retries.length} retrying, ${this.runLog.failedForGood.length} failed for good (${failed?.runId}: ${failed?.error.name}); ` +
        `client.stats → completed ${totals.completed}, failed ${totals.failed}`,
    );
    this.report.check(heardAll(), 'the listener heard every completion and failure for good that Redis counted');
    this.report.check(
      this.runLog.completed.some((e) => e.runId === 'order-B-200' && e.attempt === 2),
      'it heard the flaky order complete on attempt 2',
    );
    this.report.check(
      failed?.attempt === 1 && failed.error.name === 'NonRetryableError',
      "it heard the declined order's failure for good, on attempt 1",
    );
  }

  private async untilActive(ids: string[]): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      const infos = await Promise.all(ids.map((id) => this.client.get(id)));
      if (infos.every((info) => info?.state === 'active')) return;
      await latency(10);
    }
    throw new Error('the gift-wrapped orders never became active');
  }
}

function orderOf(orderId: string, sku: string, card: OrderInput['card']): OrderInput {
  return { orderId, sku, quantity: 1, amountCents: 2_500, card };
}

function fmt(attempts: number[]): string {
  return attempts.length ? `[${attempts.join(', ')}]` : 'never';
}
