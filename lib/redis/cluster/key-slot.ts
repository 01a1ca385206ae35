/** CRC16-XMODEM lookup table (polynomial 0x1021), the checksum Redis Cluster hashes keys with. */
const TABLE = new Uint16Array(256).map((_, byte) => {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  return crc & 0xffff;
});

/** The Redis Cluster slot count. */
export const CLUSTER_SLOTS = 16_384;

/**
 * The cluster slot of a key, as Redis computes it: CRC16 of the key's hash tag (the part between
 * the first `{` and the next `}`, when not empty) or of the whole key, modulo 16,384. Sluice uses
 * it to find which shard owns a namespace: every key of a namespace has the tag `{prefix:namespace}`.
 */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key, 'utf8');
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ byte) & 0xff];
  return crc % CLUSTER_SLOTS;
}
