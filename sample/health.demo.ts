import { Injectable, Logger } from '@nestjs/common';
import type { QueueHealthReport } from '../lib';
import { DemoReport } from './demo.report';
import { HealthServer } from './health.server';

/** Asks the sample's own health endpoint, as a load balancer or probe would. Returns the failed checks. */
@Injectable()
export class HealthDemo {
  private readonly logger = new Logger('Demo');
  private readonly report = new DemoReport(this.logger);

  constructor(private readonly server: HealthServer) {}

  async runAll(): Promise<string[]> {
    this.report.section('10. health: GET /health answers with QueueHealth.check()');
    // Over HTTP, not by calling QueueHealth directly: the status code is what a probe acts on.
    const response = await fetch(this.server.url, { signal: AbortSignal.timeout(5_000) });
    const body = (await response.json()) as QueueHealthReport;
    this.logger.log(`GET ${this.server.url} → ${response.status} ${JSON.stringify(body)}`);
    this.report.check(response.status === 200 && body.healthy === true, 'the endpoint answered 200 with healthy: true');
    this.report.check(body.redis.up && body.worker.state === 'running', "Redis is up and the worker's state is running");
    return this.report.problems;
  }
}
