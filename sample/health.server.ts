import { Injectable, Logger, OnApplicationBootstrap, OnApplicationShutdown } from '@nestjs/common';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { QueueHealth } from '../lib';

/**
 * `GET /health` on 127.0.0.1: 200 with `QueueHealth.check(2000)`'s report as JSON when healthy,
 * 503 with it when not. The sample has no HTTP platform installed, so this is plain `node:http`;
 * a real app would use a controller and @nestjs/terminus (docs/observability.md):
 *
 *   @Get('health') @HealthCheck()
 *   check() {
 *     return this.health.check([() => this.queue.isHealthy('sluice', { timeoutMs: 2_000 })]);
 *   }
 *   // AppModule: imports: [TerminusModule, QueueModule.forRoot(…)], controllers: [HealthController]
 *
 * Port: SAMPLE_HEALTH_PORT, else 0 (any free port; see `url`), so two runs never collide.
 */
@Injectable()
export class HealthServer implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('Health');
  private server?: Server;

  constructor(private readonly health: QueueHealth) {}

  /** Where the endpoint listens, once the application has bootstrapped. */
  get url(): string {
    const address = this.server?.address() as AddressInfo | null | undefined;
    if (!address) throw new Error('the health server is not listening');
    return `http://127.0.0.1:${address.port}/health`;
  }

  async onApplicationBootstrap(): Promise<void> {
    const port = Number(process.env.SAMPLE_HEALTH_PORT ?? 0);
    if (!Number.isInteger(port) || port < 0 || port > 65_535)
      throw new Error(`SAMPLE_HEALTH_PORT must be a port number, got "${process.env.SAMPLE_HEALTH_PORT}"`);
    const server = createServer((req, res) => void this.respond(req, res));
    // Awaited, so a taken port fails the bootstrap instead of surfacing as an unhandled 'error'.
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.server = server;
    this.logger.log(`GET ${this.url}`);
  }

  async onApplicationShutdown(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = undefined;
    // close() waits for open connections: drop the idle keep-alive ones a client (fetch) left.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeIdleConnections();
    });
  }

  private async respond(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'GET' || req.url?.split('?')[0] !== '/health') {
      res.writeHead(404).end();
      return;
    }
    // check() never rejects and settles within its timeout, so a probe never hangs on Redis.
    const report = await this.health.check(2_000);
    res.writeHead(report.healthy ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(report));
  }
}
