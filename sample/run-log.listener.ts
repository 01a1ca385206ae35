import { Injectable, Logger } from '@nestjs/common';
import { OnWorkflowEvent, RunFailedEvent, RunOutcomeEvent, RunRetryingEvent } from '../lib';

/** The `@Workflow` name of OrderWorkflow: the stock report's runs are not logged here. */
const ORDERS = 'order.fulfil';

/**
 * Logs the order workflow's run events. Declared with `@OnWorkflowEvent` rather than wired by
 * hand with `RunEvents.on`: Sluice adds these handlers at module init, before the worker starts,
 * so not even the first run's events can be missed. The handlers run on the worker's path, so
 * they only log and keep what they heard (for OrderDemo to check; a real app would feed metrics
 * or alerts instead of keeping lists).
 */
@Injectable()
export class RunLogListener {
  private readonly logger = new Logger('RunLog');
  readonly completed: RunOutcomeEvent[] = [];
  readonly retries: RunRetryingEvent[] = [];
  readonly failedForGood: RunFailedEvent[] = [];

  @OnWorkflowEvent('completed', { workflow: ORDERS })
  onCompleted(event: RunOutcomeEvent): void {
    this.completed.push(event);
    this.logger.log(`${event.runId} completed on attempt ${event.attempt} (${event.durationMs} ms)`);
  }

  @OnWorkflowEvent('retrying', { workflow: ORDERS })
  onRetrying(event: RunRetryingEvent): void {
    this.retries.push(event);
    this.logger.warn(
      `${event.runId} attempt ${event.attempt} failed (${event.error.name}: ${event.error.message}); retrying in ${event.delayMs} ms`,
    );
  }

  // 'failed' fires for every failed attempt; those that will be retried are onRetrying's. Sluice
  // warns of a failure for good too: this line stands in for the alert an app would raise.
  @OnWorkflowEvent('failed', { workflow: ORDERS })
  onFailed(event: RunFailedEvent): void {
    if (event.willRetry) return;
    this.failedForGood.push(event);
    this.logger.warn(`${event.runId} failed for good on attempt ${event.attempt}: ${event.error.name}: ${event.error.message}`);
  }
}
