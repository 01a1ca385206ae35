import { createHash, timingSafeEqual } from 'node:crypto';
import { type ExecutionContext, UnauthorizedException } from '@nestjs/common';
import { QueueConfigError } from '../errors';
import { checkOptionKeys } from '../util/option-keys';
import { setHeader } from './dashboard.headers';
import type { DashboardGuardFn } from './dashboard.options';

/** Options of {@link basicAuthGuard}. */
export interface BasicAuthOptions {
  /** The user name to accept: non-empty, without `:`. */
  username: string;
  /** The password to accept: non-empty (e.g. from an environment variable that is set). */
  password: string;
  /** The realm the browser's sign-in prompt names (default `'Sluice'`). */
  realm?: string;
}

const digest = (text: string) => createHash('sha256').update(text).digest();

/**
 * A dashboard guard for HTTP Basic authentication: a request without the right credentials gets a
 * 401 with `WWW-Authenticate: Basic`, so a browser asks for them and then sends them with every
 * request of the page. Serve it over HTTPS (Basic sends the password in every request).
 *
 * ```ts
 * SluiceDashboardModule.forRoot({ path: '/sluice', guard: basicAuthGuard({ username: 'ops', password: process.env.SLUICE_PASSWORD! }) })
 * ```
 */
export function basicAuthGuard(options: BasicAuthOptions): DashboardGuardFn {
  checkOptionKeys(options, ['username', 'password', 'realm'], 'basicAuthGuard options');
  const { username, password, realm = 'Sluice' } = options ?? ({} as BasicAuthOptions);
  if (typeof username !== 'string' || username === '' || username.includes(':'))
    throw new QueueConfigError('basicAuthGuard: username must be a non-empty string without ":"');
  if (typeof password !== 'string' || password === '')
    throw new QueueConfigError('basicAuthGuard: password must be a non-empty string (e.g. from an environment variable that is set)');
  if (typeof realm !== 'string' || /["\\\r\n]/.test(realm))
    throw new QueueConfigError('basicAuthGuard: realm must be a string without quotes, backslashes or line breaks');
  const expected = digest(`${username}:${password}`);
  return (request: { headers: Record<string, string | string[] | undefined> }, context: ExecutionContext) => {
    const header = request.headers.authorization;
    const match = typeof header === 'string' ? /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header.trim()) : null;
    // Compared as digests of equal length, in constant time.
    if (match && timingSafeEqual(digest(Buffer.from(match[1], 'base64').toString('utf8')), expected)) return true;
    setHeader(context.switchToHttp().getResponse(), 'WWW-Authenticate', `Basic realm="${realm}", charset="UTF-8"`);
    throw new UnauthorizedException('Sign in to see the Sluice dashboard');
  };
}
