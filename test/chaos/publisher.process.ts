import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueClient, QueueModule } from '../../lib';

/**
 * A producer-only Sluice app in its own OS process, without any workflow class: it publishes
 * from what Redis holds of the subscriptions alone (test/chaos/event-triggers.spec.ts).
 * env: REDIS_URL, NS, EVENT, EVENT_ID, CALLS (concurrent publishes of that id).
 * IPC out: { ready: true } after init; { published: [{ published, runs: [{ workflow, id, created }] }] }
 * once its calls settled (or { error } if one rejected); { stopped: true } before exiting 0 on 'stop'.
 * IPC in: 'go' publishes; 'stop' closes the app and exits 0.
 */
const env = (name: string) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};
const send = (message: object) => process.send?.(message);

@Module({ imports: [QueueModule.forRoot({ connection: { url: env('REDIS_URL') }, namespace: env('NS'), worker: { enabled: false } })] })
class PublisherModule {}

async function main(): Promise<void> {
  const app = await NestFactory.createApplicationContext(PublisherModule, { logger: false });
  const client = app.get(QueueClient);
  process.on('message', (message) => {
    if (message === 'go') {
      const calls = Array.from({ length: Number(env('CALLS')) }, () =>
        client.publish(env('EVENT'), { from: process.pid }, { id: env('EVENT_ID') }),
      );
      Promise.all(calls).then(
        (results) =>
          send({
            published: results.map((r) => ({
              published: r.published,
              runs: r.runs.map(({ workflow, id, created }) => ({ workflow, id, created })),
            })),
          }),
        (error: unknown) => send({ error: String(error) }),
      );
    } else if (message === 'stop') {
      void app.close().then(() => {
        send({ stopped: true });
        process.exit(0);
      });
    }
  });
  send({ ready: true });
}

void main();
