import type { LoggerService } from '@nestjs/common';

export interface LogLine {
  level: 'log' | 'warn' | 'error' | 'debug' | 'verbose' | 'fatal';
  message: string;
  context?: string;
  at: number;
}

/**
 * A Nest logger that records every line (`app.useLogger(capture)`), for tests that assert on what
 * Sluice logs. Nest's logger override is process-wide: in a Jest file it sees every app's lines.
 * With SLUICE_TEST_LOGS set it also prints them.
 */
export class LogCapture implements LoggerService {
  readonly lines: LogLine[] = [];

  log(message: unknown, context?: string): void {
    this.add('log', message, context);
  }
  warn(message: unknown, context?: string): void {
    this.add('warn', message, context);
  }
  error(message: unknown, ...rest: unknown[]): void {
    // Nest passes (message, stack?, context?) for errors.
    this.add('error', message, rest.length ? String(rest[rest.length - 1]) : undefined);
  }
  debug(message: unknown, context?: string): void {
    this.add('debug', message, context);
  }
  verbose(message: unknown, context?: string): void {
    this.add('verbose', message, context);
  }
  fatal(message: unknown, context?: string): void {
    this.add('fatal', message, context);
  }

  /** Lines at `level` (optionally only those after `since`, an index into `lines`) matching `pattern`. */
  find(level: LogLine['level'], pattern: RegExp | string = /./, since = 0): LogLine[] {
    const test = typeof pattern === 'string' ? (m: string) => m.includes(pattern) : (m: string) => pattern.test(m);
    return this.lines.slice(since).filter((line) => line.level === level && test(line.message));
  }

  /** A mark to pass as `since`. */
  mark(): number {
    return this.lines.length;
  }

  private add(level: LogLine['level'], message: unknown, context?: string): void {
    const line = { level, message: String(message), context, at: Date.now() };
    this.lines.push(line);
    if (process.env.SLUICE_TEST_LOGS) process.stdout.write(`[${level}] ${context ?? ''} ${line.message}\n`);
  }
}
