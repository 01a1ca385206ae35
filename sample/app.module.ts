import { Module } from '@nestjs/common';
import type { IncomingMessage } from 'node:http';
import { QueueModule } from '../lib';
import { SluiceDashboardModule } from '../lib/dashboard';
import { DASHBOARD_PATH, DashboardDemo } from './dashboard.demo';
import { FulfilmentJournal } from './fulfilment.journal';
import { HealthDemo } from './health.demo';
import { HealthServer } from './health.server';
import { InventoryService } from './inventory.service';
import { OrderDemo } from './order.demo';
import { OrderWorkflow } from './order.workflow';
import { PaymentGateway } from './payment.gateway';
import { RunLogListener } from './run-log.listener';
import { ScheduleDemo } from './schedule.demo';
import { StockReportWorkflow } from './stock-report.workflow';
import { CatalogExportWorkflow } from './catalog-export.workflow';
import { TenantSyncWorkflow } from './tenant-sync.workflow';
import { RunControlDemo } from './run-control.demo';
import { OrderApprovalWorkflow } from './order-approval.workflow';
import { ApprovalDemo } from './approval.demo';
import { DedupeDemo, ReindexWorkflow } from './dedupe.demo';
import { DeliveryWorkflow, LoyaltyWorkflow, ReceiptWorkflow, TriggersDemo } from './triggers.demo';
import { AuditLogWorkflow, BatchDemo } from './batch.demo';

export const SAMPLE_NAMESPACE = 'sample';

@Module({
  imports: [
    // The async form, as an app would use with ConfigService: options are built at bootstrap.
    QueueModule.forRootAsync({
      useFactory: () => {
        const url = process.env.REDIS_URL;
        if (!url) throw new Error('REDIS_URL is not set');
        return {
          connection: { url },
          namespace: SAMPLE_NAMESPACE,
          worker: { concurrency: 10, shutdownTimeoutMs: 5_000 },
          defaults: { resultTtlMs: 60 * 60_000 },
          // RunLogListener logs retried attempts (with the backoff): Sluice's own line would repeat it.
          logging: { attemptFailed: 'debug' },
        };
      },
    }),
    // The dashboard on the app's HTTP server, actions enabled. The guard here lets in requests
    // from this machine only; a real app passes its own auth guard class (docs/dashboard.md).
    // A browser here connects from loopback even for a page of another site whose name was
    // rebound to 127.0.0.1: `allowedHosts: []` also keeps the Host to loopback names.
    SluiceDashboardModule.forRoot({
      path: DASHBOARD_PATH,
      readOnly: false,
      allowedHosts: [],
      guard: (request: IncomingMessage | { raw?: IncomingMessage }) =>
        isLoopback(('raw' in request && request.raw ? request.raw : (request as IncomingMessage)).socket.remoteAddress),
    }),
  ],
  providers: [
    OrderWorkflow,
    OrderApprovalWorkflow,
    StockReportWorkflow,
    CatalogExportWorkflow,
    TenantSyncWorkflow,
    ReindexWorkflow,
    ReceiptWorkflow,
    LoyaltyWorkflow,
    DeliveryWorkflow,
    AuditLogWorkflow,
    InventoryService,
    PaymentGateway,
    FulfilmentJournal,
    RunLogListener, // found by its @OnWorkflowEvent methods, like a @Workflow by its decorator
    HealthServer,
    OrderDemo,
    ScheduleDemo,
    HealthDemo,
    RunControlDemo,
    ApprovalDemo,
    TriggersDemo,
    DashboardDemo,
    DedupeDemo,
    BatchDemo,
  ],
})
export class AppModule {}

function isLoopback(address: string | undefined): boolean {
  return address === '127.0.0.1' || address === '::1' || address === '::ffff:127.0.0.1';
}
