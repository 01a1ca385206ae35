import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { QueueAdmin, QueueClient, QueueHealth, QueueModule, QueueSchedules, RunEvents } from '../../lib';
import { RunWaiter } from '../../lib/client/run.waiter';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { SluiceServices } from '../../lib/sluice.services';
import { WorkerOrchestrator } from '../../lib/worker/worker.orchestrator';

/**
 * QueueModule builds its services in one factory (SluiceServices) and registers a token for each
 * service that is exported, has a lifecycle hook or is looked up: each token must resolve to the
 * one graph the others use. Compiled without init: no Redis connection is opened.
 */
describe('SluiceServices', () => {
  it("every token resolves to the services' one graph", async () => {
    const app = await Test.createTestingModule({
      imports: [QueueModule.forRoot({ connection: { url: 'redis://127.0.0.1:1' }, namespace: 'services', worker: { enabled: false } })],
    }).compile();
    const services = app.get(SluiceServices);
    expect(app.get(QueueClient)).toBe(services.client);
    expect(app.get(QueueAdmin)).toBe(services.admin);
    expect(app.get(QueueSchedules)).toBe(services.schedules);
    expect(app.get(RunEvents)).toBe(services.events);
    expect(app.get(QueueHealth)).toBe(services.health);
    expect(app.get(RunWaiter)).toBe(services.waiter);
    expect(app.get(RedisConnections)).toBe(services.connections);
    // The health check reads the orchestrator Nest gives its lifecycle hooks to, not a copy.
    expect((services.health as unknown as { orchestrator: unknown }).orchestrator).toBe(app.get(WorkerOrchestrator));
    await app.close();
  });
});
