import { InvalidNameError } from '../errors';

/**
 * Workflow, group, prefix and namespace names become parts of Redis keys and must not contain
 * `:` (the key separator), braces (the cluster hash tag) or whitespace.
 */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Run ids and step names are only ever a key suffix or a hash field, so they may also contain `:`, `/`, `@`, `#`, `=` and `+`. */
const ID = /^[A-Za-z0-9._:/@#=+-]+$/;

export const MAX_NAME_LENGTH = 100;
export const MAX_ID_LENGTH = 200;

export function checkName(value: unknown, field: string): string {
  return check(value, field, NAME, MAX_NAME_LENGTH, 'letters, digits, ".", "_" and "-", starting with a letter or digit');
}

export function checkId(value: unknown, field: string): string {
  return check(value, field, ID, MAX_ID_LENGTH, 'letters, digits and . _ : / @ # = + -');
}

function check(value: unknown, field: string, pattern: RegExp, max: number, allowed: string): string {
  if (typeof value !== 'string') throw new InvalidNameError(field, `must be a string, got ${typeof value}`);
  if (value.length === 0) throw new InvalidNameError(field, 'must not be empty');
  if (value.length > max) throw new InvalidNameError(field, `must be at most ${max} characters, got ${value.length}`);
  if (!pattern.test(value)) throw new InvalidNameError(field, `"${value}" may only contain ${allowed}`);
  return value;
}
