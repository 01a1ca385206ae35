import type { INestApplication, ModuleMetadata, Provider } from '@nestjs/common';
import { ExpressAdapter } from '@nestjs/platform-express';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import { QueueClient, QueueModule, type QueueModuleOptions } from '../../lib';
import { SluiceDashboardModule, type SluiceDashboardOptions } from '../../lib/dashboard';
import { testConnection } from './app';

export type HttpAdapterName = 'express' | 'fastify';

export interface DashboardApp {
  app: INestApplication;
  client: QueueClient;
  /** http://127.0.0.1:<port> */
  origin: string;
  close(): Promise<void>;
}

/** A real Nest HTTP app on a free loopback port, with QueueModule and the dashboard mounted. */
export async function createDashboardApp(
  adapter: HttpAdapterName,
  providers: Provider[],
  queue: Partial<QueueModuleOptions> & { namespace: string },
  dashboard: SluiceDashboardOptions,
  extra: { imports?: ModuleMetadata['imports']; providers?: Provider[]; controllers?: ModuleMetadata['controllers']; host?: string } = {},
): Promise<DashboardApp> {
  const module = await Test.createTestingModule({
    imports: [
      QueueModule.forRoot({ connection: testConnection(), ...queue }),
      SluiceDashboardModule.forRoot(dashboard),
      ...(extra.imports ?? []),
    ],
    providers: [...providers, ...(extra.providers ?? [])],
    controllers: extra.controllers ?? [],
  }).compile();
  const app = module.createNestApplication(adapter === 'express' ? new ExpressAdapter() : new FastifyAdapter(), {
    logger: process.env.SLUICE_TEST_LOGS ? ['log', 'warn', 'error'] : false,
  });
  await app.listen(0, extra.host ?? '127.0.0.1');
  const address = app.getHttpServer().address() as { port: number };
  return { app, client: app.get(QueueClient), origin: `http://127.0.0.1:${address.port}`, close: () => app.close() };
}
