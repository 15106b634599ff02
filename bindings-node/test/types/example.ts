// A typed example of the public API; `tsc -p test/types` must accept it (and reject the
// lines marked @ts-expect-error). Never run, only type-checked.
import Redis from 'ioredis';
import {
  connect,
  Client,
  Lease,
  LockError,
  TimeoutError,
  NotHeldError,
  CancelledError,
  type ErrorCode,
} from 'lockgate';

async function example(): Promise<void> {
  const client: Client = await connect('redis://127.0.0.1:6379', { keyPrefix: 'app:' });
  const lock = client.lock('orders:42', { leaseMs: 10_000, autoRenew: true });

  const lease: Lease = await lock.acquire({ timeoutMs: 5_000, signal: AbortSignal.timeout(10_000) });
  const token: bigint = lease.fencingToken;
  const held: boolean = lease.isHeld;
  const left: number = lease.remainingMs;
  await fetch('https://example.invalid/', { signal: lease.signal }).catch(() => undefined);
  await lease.extend(20_000);
  const wasHeld: boolean = await lease.release();

  const maybe: Lease | null = await lock.tryAcquire();
  if (maybe) await maybe.release();

  const total: number = await lock.using(async (l) => {
    l.signal.throwIfAborted();
    return Number(l.fencingToken % 1000n);
  });

  try {
    await lock.acquire({ timeoutMs: 100 });
  } catch (err) {
    if (err instanceof TimeoutError) {
      const code: 'TIMEOUT' = err.code;
      const retry: boolean = err.retryable;
      void code, retry;
    } else if (err instanceof NotHeldError || err instanceof CancelledError) {
      const code: ErrorCode = err.code;
      void code;
    } else if (err instanceof LockError) {
      void err.code;
    }
  }

  const existing = new Redis();
  const byo = await connect(existing);
  await byo.close();

  // @ts-expect-error leases are bigint-tokened, not number
  const wrong: number = lease.fencingToken;
  // @ts-expect-error option names are checked
  client.lock('x', { lease: 1000 });
  // @ts-expect-error timeouts are numbers of milliseconds
  await lock.acquire({ timeoutMs: '5s' });

  void token, held, left, wasHeld, total, wrong;
  await client.close();
}

void example;
