import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { QueueModule, Workflow, QueueClient } from './lib';
import { startRedisServer } from './test/support/redis-server';
let tStart = 0; const marks: Record<string, number[]> = {};
const mark = (k: string) => (marks[k] ??= []).push(performance.now() - tStart);
@Workflow('rt') class Rt { run(i: number) { mark('run'); return i; } }
(async () => {
  const r = await startRedisServer();
  @Module({ imports: [QueueModule.forRoot({ connection: { url: r.url }, namespace: 'rt' })], providers: [Rt] }) class M {}
  const app = await NestFactory.createApplicationContext(M, { logger: ['error'] });
  const c = app.get(QueueClient);
  for (let i = 0; i < 300; i++) await c.run(Rt, i);
  for (const k of Object.keys(marks)) delete marks[k];
  const tot: number[] = [];
  for (let i = 0; i < 2000; i++) { tStart = performance.now(); await c.run(Rt, i); tot.push(performance.now() - tStart); }
  const avg = (a: number[]) => (a.reduce((x, y) => x + y, 0) / a.length).toFixed(3);
  console.log('total', avg(tot), 'run() start->handler', avg(marks.run));
  await app.close(); await r.stop(); process.exit(0);
})();
