import type Redis from 'ioredis';
import { InvalidInputError, InvalidNameError, InvalidOptionError, ListRunsOptions, UnknownWorkflowError, Workflow } from '../../lib';
import { createApp, dropNamespace, rawRedis, TestApp, uniqueNamespace } from '../support/app';
import { namespaceKeys } from '../support/workflows';
import { rejection } from '../support/rejection';

@Workflow('adm.echo')
class EchoWorkflow {
  async run(input: unknown): Promise<unknown> {
    return input;
  }
}

describe('bad input to listRuns, retry, retryAll, remove and @Workflow({ keep })', () => {
  let t: TestApp;
  let namespace: string;
  let redis: Redis;
  let keysBefore: string[];

  beforeAll(async () => {
    namespace = uniqueNamespace('adm');
    t = await createApp([EchoWorkflow], { namespace, worker: { enabled: false } });
    redis = rawRedis();
    keysBefore = (await namespaceKeys(redis, namespace)).sort();
  });
  afterAll(async () => {
    await t.close();
    await dropNamespace(redis, namespace);
    await redis.quit();
  });
  afterEach(async () => {
    // Nothing written by any rejected call.
    expect((await namespaceKeys(redis, namespace)).sort()).toEqual(keysBefore);
  });

  const list = (opts: unknown) => () => t.client.listRuns(opts as ListRunsOptions);

  it.each([
    ['no options', undefined, InvalidInputError, 'opts'],
    ['null options', null, InvalidInputError, 'opts'],
    ['no workflow', { state: 'failed' }, InvalidInputError, 'opts.workflow'],
    ['a workflow name with a colon', { workflow: 'a:b', state: 'failed' }, InvalidNameError, 'workflow'],
    ['a state that is not listable', { workflow: 'adm.echo', state: 'finished' }, InvalidOptionError, 'opts.state'],
    ['no state', { workflow: 'adm.echo' }, InvalidOptionError, 'opts.state'],
    ['a bad group', { workflow: 'adm.echo', state: 'waiting', group: 'x y' }, InvalidNameError, 'opts.group'],
    ['limit 0', { workflow: 'adm.echo', state: 'failed', limit: 0 }, InvalidOptionError, 'opts.limit'],
    ['limit 1001', { workflow: 'adm.echo', state: 'failed', limit: 1001 }, InvalidOptionError, 'opts.limit'],
    ['a fractional limit', { workflow: 'adm.echo', state: 'failed', limit: 2.5 }, InvalidOptionError, 'opts.limit'],
    ['a bad order', { workflow: 'adm.echo', state: 'failed', order: 'up' }, InvalidOptionError, 'opts.order'],
    ['a non-numeric finished cursor', { workflow: 'adm.echo', state: 'failed', cursor: 'abc' }, InvalidOptionError, 'opts.cursor'],
    ['a score cursor for delayed', { workflow: 'adm.echo', state: 'delayed', cursor: '123' }, InvalidOptionError, 'opts.cursor'],
    ['a delayed cursor with a bad id', { workflow: 'adm.echo', state: 'delayed', cursor: '123 a{b}' }, InvalidOptionError, 'opts.cursor'],
    ['a negative waiting cursor', { workflow: 'adm.echo', state: 'waiting', cursor: '-1' }, InvalidOptionError, 'opts.cursor'],
    ['a numeric cursor', { workflow: 'adm.echo', state: 'active', cursor: 5 }, InvalidOptionError, 'opts.cursor'],
  ])('listRuns: %s', async (_label, opts, type, field) => {
    const error = await rejection(list(opts));
    expect(error).toBeInstanceOf(type);
    expect((error as InvalidInputError).field).toBe(field);
  });

  it('listRuns: a workflow no worker registered', async () => {
    expect(await rejection(list({ workflow: 'adm.unknown', state: 'failed' }))).toBeInstanceOf(UnknownWorkflowError);
  });

  it.each([
    ['retry', (id: unknown) => t.client.retry(id as string)],
    ['remove', (id: unknown) => t.client.remove(id as string)],
  ])('%s: a bad run id', async (_name, call) => {
    for (const id of [undefined, '', 'a b', 'x'.repeat(201), 42]) {
      const error = await rejection(() => call(id));
      expect(error).toBeInstanceOf(InvalidNameError);
      expect((error as InvalidNameError).field).toBe('runId');
    }
  });

  it.each([
    ['no options', undefined, InvalidInputError, 'opts'],
    ['no workflow', { state: 'failed' }, InvalidInputError, 'opts.workflow'],
    ['state completed', { workflow: 'adm.echo', state: 'completed' }, InvalidOptionError, 'opts.state'],
    ['limit 0', { workflow: 'adm.echo', state: 'failed', limit: 0 }, InvalidOptionError, 'opts.limit'],
    ['a string limit', { workflow: 'adm.echo', state: 'failed', limit: '5' }, InvalidOptionError, 'opts.limit'],
  ])('retryAll: %s', async (_label, opts, type, field) => {
    const error = await rejection(() => t.client.retryAll(opts as never));
    expect(error).toBeInstanceOf(type);
    expect((error as InvalidInputError).field).toBe(field);
  });

  it.each([
    ['a negative count', { completed: -1 }, "@Workflow('adm.keep') keep.completed"],
    ['a fractional count', { failed: 1.5 }, "@Workflow('adm.keep') keep.failed"],
    ['a string count', { completed: '10' }, "@Workflow('adm.keep') keep.completed"],
    ['an unknown key', { cancelled: 5 }, "@Workflow('adm.keep') keep.cancelled"],
    ['null', null, "@Workflow('adm.keep') keep"],
    ['a number', 5, "@Workflow('adm.keep') keep"],
  ])('@Workflow keep: %s', (_label, keep, field) => {
    let caught: unknown;
    try {
      Workflow('adm.keep', { keep: keep as never });
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(InvalidOptionError);
    expect((caught as InvalidOptionError).field).toBe(field);
  });

  it('@Workflow keep: valid counts pass, 0 included', () => {
    expect(() => Workflow('adm.keep', { keep: { completed: 0, failed: 100_000 } })).not.toThrow();
    expect(() => Workflow('adm.keep', { keep: {} })).not.toThrow();
  });
});
