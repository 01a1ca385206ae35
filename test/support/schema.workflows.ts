import { type } from 'arktype';
import * as v from 'valibot';
import { z } from 'zod';
import { defineWorkflow, InputValidationError, RunContext, Workflow } from '../../lib';

// Workflows validated by Standard Schemas of the three libraries, shared by the e2e test
// (test/e2e/schema.spec.ts) and the harness's (test/unit/schema-harness.spec.ts).

const Line = z.object({ sku: z.string(), qty: z.number().int().positive() });

/** zod, through a contract: a default and a transform on the input, a transform on the output. */
export const ZodOrderInput = z.object({
  items: z.array(Line).min(1),
  note: z.string().default('none'),
  placedAt: z.string().transform((text) => new Date(text)),
});
export const ZodOrderResult = z
  .object({ units: z.number(), note: z.string(), year: z.number() })
  .transform((result) => ({ ...result, label: `${result.units} units` }));
export const ZodOrder = defineWorkflow('schema.zod', { input: ZodOrderInput, output: ZodOrderResult, attempts: 3 });

@Workflow(ZodOrder)
export class ZodOrderWorkflow {
  async run(input: z.output<typeof ZodOrderInput>): Promise<z.input<typeof ZodOrderResult>> {
    // The schema's output: the default filled in, placedAt a Date.
    if (!(input.placedAt instanceof Date)) throw new Error('placedAt is not a Date');
    return { units: input.items.reduce((sum, line) => sum + line.qty, 0), note: input.note, year: input.placedAt.getUTCFullYear() };
  }
}

/** valibot, on the decorator: an optional with a default. */
export const ValibotInput = v.object({ name: v.pipe(v.string(), v.minLength(2)), tags: v.optional(v.array(v.string()), []) });
export const ValibotOutput = v.object({ greeting: v.string() });

@Workflow('schema.valibot', { input: ValibotInput, output: ValibotOutput })
export class ValibotWorkflow {
  async run(input: v.InferOutput<typeof ValibotInput>): Promise<v.InferInput<typeof ValibotOutput>> {
    return { greeting: `hi ${input.name} (${input.tags.length} tags)` };
  }
}

/** arktype, on the decorator. */
export const ArkInput = type({ id: 'string', count: 'number.integer >= 0' });
export const ArkOutput = type({ doubled: 'number' });

@Workflow('schema.arktype', { input: ArkInput, output: ArkOutput })
export class ArkWorkflow {
  async run(input: typeof ArkInput.infer): Promise<typeof ArkOutput.inferIn> {
    return { doubled: input.count * 2 };
  }
}

/** Async schemas (zod with async refinements: its validate returns a promise). */
export const AsyncInput = z.object({ user: z.string() }).refine(
  async (value) => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return value.user !== 'banned';
  },
  { message: 'user is banned', path: ['user'] },
);
export const AsyncOutput = z.object({ ok: z.boolean() }).refine(async (value) => value.ok, { message: 'must be ok', path: ['ok'] });

@Workflow('schema.async', { input: AsyncInput, output: AsyncOutput })
export class AsyncWorkflow {
  async run(input: { user: string }): Promise<{ ok: boolean }> {
    return { ok: input.user !== 'not-ok' };
  }
}

/** A result its output schema refuses. */
@Workflow('schema.bad-output', { output: z.object({ total: z.number() }), attempts: 3 })
export class BadOutputWorkflow {
  calls = 0;
  async run(): Promise<{ total: number }> {
    this.calls++;
    return { total: 'lots' as unknown as number };
  }
}

/** Enqueued by name by a producer that does not know its schema (version skew). */
@Workflow('schema.skew', { input: z.object({ n: z.number() }), attempts: 3 })
export class SkewWorkflow {
  calls = 0;
  async run(input: { n: number }): Promise<number> {
    this.calls++;
    return input.n;
  }
}

/**
 * Invokes the zod contract's workflow and continues as new, both first with inputs their schema
 * refuses (caught), then with good ones; the second incarnation returns what the first saw.
 */
const ParentInput = z.object({ round: z.number(), carried: z.string().default('{}') });

@Workflow('schema.parent', { input: ParentInput })
export class ParentWorkflow {
  async run(input: z.output<typeof ParentInput>, ctx: RunContext<z.input<typeof ParentInput>>): Promise<Record<string, unknown>> {
    if (input.round === 1) return { round: 1, ...(JSON.parse(input.carried) as object) };
    const child = await ctx.invoke(ZodOrder, { items: [{ sku: 'a', qty: -1 }], placedAt: '2026-01-01' }).catch(describe);
    const next = await ctx.continueAsNew({ round: 'one' as unknown as number }).catch(describe);
    const good = await ctx.invoke(ZodOrder, { items: [{ sku: 'a', qty: 2 }], placedAt: '2026-05-01T00:00:00Z' });
    return ctx.continueAsNew({ round: 1, carried: JSON.stringify({ child, next, good }) });
  }
}

function describe(error: unknown): { name: string; message: string; issues?: unknown } {
  const { name, message } = error as Error;
  return { name, message, ...(error instanceof InputValidationError && { issues: error.issues }) };
}
