import { Injectable, type PipeTransform } from '@nestjs/common';

/** A segment of only dots, percent-encoded once more by the page: `%2E` or `%2E%2E` once the framework has decoded the path. */
const DOTS = /^(?:%2e){1,2}$/i;

/**
 * Decodes a run id (or name) in the API's path the way the page encodes it (dashboard.js `seg`):
 * percent-encoded, and an id of only dots (`.` and `..` are valid run ids) encoded twice
 * (`%252E%252E`), because URL parsers (browsers, `fetch`, curl) drop dot segments from a path
 * even when they are percent-encoded once: `/api/runs/..` and `/api/runs/%2E%2E` both become
 * `/api/`. Ids never contain `%` (see checkId), so no other id reads differently.
 */
@Injectable()
export class PathSegmentPipe implements PipeTransform<string, string> {
  transform(value: string): string {
    return typeof value === 'string' && DOTS.test(value) ? value.replace(/%2e/gi, '.') : value;
  }
}
