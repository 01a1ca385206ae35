/**
 * A Redis error reply as Sluice's log lines quote it. An unknown command's reply echoes the start
 * of its arguments (`ERR unknown command 'FUNCTION', with args beginning with: 'LOAD' '#!lua …'`):
 * a script library's code or a connection's name is noise in a line, so the reply is cut there.
 */
export function quotedReply(message: string): string {
  return message.replace(/, with args beginning with:.*$/s, '');
}
