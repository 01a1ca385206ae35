/**
 * The same headers on every dashboard answer: a strict Content-Security-Policy (the page runs only
 * its own script and style, loads nothing from elsewhere, cannot be framed), no MIME sniffing, no
 * referrer, no caching of API answers.
 */
export const SECURITY_HEADERS: Record<string, string> = {
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'self'; form-action 'none'; frame-ancestors 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
  'Cache-Control': 'no-store',
};

/** Sets a header on an Express response or a Fastify reply (both have `header(name, value)`). */
export function setHeader(response: unknown, name: string, value: string): void {
  (response as { header(name: string, value: string): unknown }).header(name, value);
}
