import 'reflect-metadata';
import { Test } from '@nestjs/testing';
import { QueueAdmin, QueueClient, QueueHealth, QueueModule, QueueSchedules, RunEvents } from '../../lib';
import { RedisConnections } from '../../lib/redis/redis.connections';
import { RedisKeys } from '../../lib/redis/redis.keys';
import { SluiceServices } from '../../lib/sluice.services';
import { WorkerOrchestrator } from '../../lib/worker/worker.orchestrator';

/**
 * QueueModule builds its services in one factory (SluiceServices), which carries their lifecycle
 * hooks, and registers a token for each service that is exported or looked up by the dashboard:
 * each token must resolve to the one graph the others use, and no other service may be a Nest
 * provider (its hooks would run twice, or a second copy would). Compiled without init: no Redis
 * connection is opened.
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
    expect(app.get(RedisConnections)).toBe(services.connections);
    expect(app.get(RedisKeys)).toBe(services.keys);
    // The health check reads the orchestrator SluiceServices gives its lifecycle hooks to, not a copy.
    expect((services.health as unknown as { orchestrator: unknown }).orchestrator).toBe(services.orchestrator);
    expect(() => app.get(WorkerOrchestrator)).toThrow();
    await app.close();
  });
});
