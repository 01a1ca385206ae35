// The Standard Schema V1 interface (https://standardschema.dev), copied as types: the spec is made
// to be copied, so that a library accepts zod, valibot, arktype… schemas without depending on any
// of them (nor on @standard-schema/spec at runtime). Nothing here emits code.

/**
 * A schema of any library that implements Standard Schema V1 (zod 3.24+, valibot 1, arktype 2…):
 * what `@Workflow({ input, output })` and `defineWorkflow(name, { input, output })` take.
 * `Input` is the type the schema accepts, `Output` the type it gives back (after transforms and
 * defaults).
 */
export interface StandardSchemaV1<Input = unknown, Output = Input> {
  /** The Standard Schema properties. */
  readonly '~standard': StandardSchemaV1.Props<Input, Output>;
}

/** The types of {@link StandardSchemaV1}'s properties, results and issues, as the spec names them. */
// eslint-disable-next-line @typescript-eslint/no-namespace -- the spec's own shape (StandardSchemaV1.Issue…), types only
export declare namespace StandardSchemaV1 {
  /** The Standard Schema properties. */
  export interface Props<Input = unknown, Output = Input> {
    /** The version number of the standard. */
    readonly version: 1;
    /** The vendor name of the schema library. */
    readonly vendor: string;
    /** Validates an unknown value: synchronously, or with a promise for an async schema. */
    readonly validate: (value: unknown, options?: Options) => Result<Output> | Promise<Result<Output>>;
    /** Inferred types associated with the schema. */
    readonly types?: Types<Input, Output> | undefined;
  }

  /** The result of `validate`. */
  export type Result<Output> = SuccessResult<Output> | FailureResult;

  /** The result when validation succeeds. */
  export interface SuccessResult<Output> {
    /** The typed output value. */
    readonly value: Output;
    /** A falsy value for `issues` indicates success. */
    readonly issues?: undefined;
  }

  /** Options of `validate`. */
  export interface Options {
    /** Vendor-specific parameters. */
    readonly libraryOptions?: Record<string, unknown> | undefined;
  }

  /** The result when validation fails. */
  export interface FailureResult {
    /** The issues of failed validation. */
    readonly issues: ReadonlyArray<Issue>;
  }

  /** One issue of a failed validation. */
  export interface Issue {
    /** The error message of the issue. */
    readonly message: string;
    /** The path of the issue, if any. */
    readonly path?: ReadonlyArray<PropertyKey | PathSegment> | undefined;
  }

  /** A path segment of an issue. */
  export interface PathSegment {
    /** The key representing a path segment. */
    readonly key: PropertyKey;
  }

  /** The input and output types of a schema. */
  export interface Types<Input = unknown, Output = Input> {
    /** The input type of the schema. */
    readonly input: Input;
    /** The output type of the schema. */
    readonly output: Output;
  }

  /** The input type of a schema. */
  export type InferInput<Schema extends StandardSchemaV1> = NonNullable<Schema['~standard']['types']>['input'];

  /** The output type of a schema. */
  export type InferOutput<Schema extends StandardSchemaV1> = NonNullable<Schema['~standard']['types']>['output'];
}

/** The input type of an optional schema: `Fallback` when there is none. */
export type SchemaInput<S, Fallback = unknown> = S extends StandardSchemaV1 ? StandardSchemaV1.InferInput<S> : Fallback;

/** The output type of an optional schema: `Fallback` when there is none. */
export type SchemaOutput<S, Fallback = unknown> = S extends StandardSchemaV1 ? StandardSchemaV1.InferOutput<S> : Fallback;
