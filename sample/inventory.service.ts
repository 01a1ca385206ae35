import { Injectable } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { NonRetryableError } from '../lib';

export interface Reservation {
  id: string;
  sku: string;
  quantity: number;
}

/** A stand-in for a warehouse API (in memory, with a little latency). */
@Injectable()
export class InventoryService {
  private readonly stock = new Map<string, number>([
    ['SKU-MUG', 1_000],
    ['SKU-TEE', 1_000],
    ['SKU-CAP', 1_000],
  ]);

  async reserve(sku: string, quantity: number): Promise<Reservation> {
    await latency(50);
    const available = this.stock.get(sku);
    // No retry can make an unknown SKU exist: fail the run for good.
    if (available === undefined) throw new NonRetryableError(`unknown SKU ${sku}`);
    if (available < quantity) throw new NonRetryableError(`only ${available} of ${sku} left, ${quantity} requested`);
    this.stock.set(sku, available - quantity);
    return { id: `res_${randomUUID().slice(0, 8)}`, sku, quantity };
  }

  /** Units on hand per SKU: what the scheduled stock report reads. */
  levels(): Record<string, number> {
    return Object.fromEntries(this.stock);
  }

  async ship(reservation: Reservation, giftWrap: boolean): Promise<string> {
    await latency(giftWrap ? 500 : 50); // gift wrapping takes a while
    return `TRK-${randomUUID().slice(0, 8).toUpperCase()}`;
  }
}

export function latency(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
