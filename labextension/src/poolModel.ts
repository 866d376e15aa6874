/**
 * The rank-pool status of the current notebook's kernel, and the poller that keeps it fresh.
 *
 * `Poller` asks at a bounded rate (every `interval` ms, one request at a time), backs off
 * exponentially while requests fail, and stops while the page is hidden; it asks once at once when
 * the page shows again. Time and visibility are injected, so tests drive them by hand.
 * No DOM, no JupyterLab.
 */
import { errorMessage, IPoolInfo } from './api';

/** The pool to show for `kernelId`: a busy one first, else the most recently updated. */
export function poolForKernel(pools: readonly IPoolInfo[], kernelId: string | null): IPoolInfo | null {
  if (!kernelId) {
    return null;
  }
  const mine = pools.filter(p => p.kernel_id === kernelId && p.state !== 'stopped');
  if (mine.length === 0) {
    return null;
  }
  const rank = (p: IPoolInfo) => [p.state === 'busy' ? 1 : 0, p.updated] as const;
  return mine.reduce((best, p) => {
    const [a, b] = [rank(p), rank(best)];
    return a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]) ? p : best;
  });
}

/** `cpu`, `cuda`, or `cpu+cuda` for a devices field that is a string or a list. */
export function deviceLabel(devices: string | readonly string[]): string {
  const list = typeof devices === 'string' ? [devices] : [...devices];
  const kinds = [...new Set(list.map(d => d.split(':')[0]).filter(d => d !== ''))];
  return kinds.join('+');
}

/** The status bar text: `Ranks: 2 cpu · idle`. */
export function poolLabel(pool: IPoolInfo): string {
  const devices = deviceLabel(pool.devices);
  return `Ranks: ${pool.size}${devices ? ` ${devices}` : ''} · ${pool.state}`;
}

/** The tooltip: backend, port and each rank's device and whether it is alive. */
export function poolTitle(pool: IPoolInfo): string {
  const head = `Rank pool of this notebook's kernel: ${pool.size} ranks, ${pool.state}, backend ${pool.backend}` +
    (pool.master_port ? `, master port ${pool.master_port}` : '');
  const ranks = pool.ranks.map(
    r => `rank ${r.rank}: pid ${r.pid} on ${r.device}${r.alive ? '' : ' (exited)'}`
  );
  return [head, ...ranks].join('\n');
}

/** Timers, injectable: `window`'s in the browser, a manual clock in tests. */
export interface IClock {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Whether the page is visible, and news when that changes (`document.visibilityState`). */
export interface IVisibility {
  visible(): boolean;
  onChange(listener: () => void): () => void;
}

export interface IPollerOptions {
  /** One request; a rejection counts as a failure. */
  poll: () => Promise<void>;
  clock: IClock;
  visibility: IVisibility;
  /** Milliseconds between requests while they succeed. */
  interval?: number;
  /** The longest wait while they fail (the wait doubles per failure up to this). */
  maxInterval?: number;
}

export class Poller {
  readonly interval: number;
  readonly maxInterval: number;
  private _running = false;
  private _inFlight = false;
  private _failures = 0;
  private _timer: unknown = null;
  private _stopVisibility: (() => void) | null = null;

  constructor(private readonly options: IPollerOptions) {
    this.interval = options.interval ?? 3000;
    this.maxInterval = options.maxInterval ?? 60000;
  }

  get running(): boolean {
    return this._running;
  }

  /** Failed requests in a row. */
  get failures(): number {
    return this._failures;
  }

  /** Whether a next request is scheduled. */
  get scheduled(): boolean {
    return this._timer !== null;
  }

  /** The wait before the next request, after `failures` failures in a row. */
  delay(failures = this._failures): number {
    return Math.min(this.maxInterval, this.interval * 2 ** failures);
  }

  /** Starts polling: one request now (if the page is visible), then at the interval. */
  start(): void {
    if (this._running) {
      return;
    }
    this._running = true;
    this._stopVisibility = this.options.visibility.onChange(() => this.visibilityChanged());
    this.tick();
  }

  stop(): void {
    this._running = false;
    this.cancel();
    this._stopVisibility?.();
    this._stopVisibility = null;
  }

  /** Asks now (e.g. after the kernel changed), then goes on at the interval. */
  refresh(): void {
    if (this._running) {
      this.cancel();
      this.tick();
    }
  }

  private visibilityChanged(): void {
    if (!this._running) {
      return;
    }
    this.cancel();
    if (this.options.visibility.visible()) {
      this.tick();
    }
  }

  private tick(): void {
    if (!this._running || this._inFlight || !this.options.visibility.visible()) {
      return;
    }
    this._inFlight = true;
    let ok = true;
    this.options
      .poll()
      .catch(() => {
        ok = false;
      })
      .then(() => {
        this._inFlight = false;
        this._failures = ok ? 0 : this._failures + 1;
        this.schedule();
      });
  }

  private schedule(): void {
    this.cancel();
    if (this._running && this.options.visibility.visible()) {
      this._timer = this.options.clock.setTimeout(() => {
        this._timer = null;
        this.tick();
      }, this.delay());
    }
  }

  private cancel(): void {
    if (this._timer !== null) {
      this.options.clock.clearTimeout(this._timer);
      this._timer = null;
    }
  }
}

/** What the status item shows: a label (null: hidden), a tooltip, the pool's state. */
export class PoolStatusModel {
  private _kernelId: string | null = null;
  private _pools: IPoolInfo[] = [];
  private _error: string | null = null;
  private _listeners = new Set<() => void>();
  private _lastLabel: string | null = null;

  constructor(private readonly fetchPools: () => Promise<IPoolInfo[]>) {}

  get kernelId(): string | null {
    return this._kernelId;
  }

  set kernelId(id: string | null) {
    if (id !== this._kernelId) {
      this._kernelId = id;
      this.changed();
    }
  }

  get error(): string | null {
    return this._error;
  }

  /** The pool of the current kernel, if it has one. */
  get pool(): IPoolInfo | null {
    return this._error === null ? poolForKernel(this._pools, this._kernelId) : null;
  }

  /** The text to show, or null to hide the item. */
  get label(): string | null {
    const pool = this.pool;
    return pool ? poolLabel(pool) : null;
  }

  get title(): string {
    const pool = this.pool;
    return pool ? poolTitle(pool) : '';
  }

  onChange(listener: () => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  /** One poll: fetches every pool (a failure hides the item and is rethrown for the poller's backoff). */
  async update(): Promise<void> {
    try {
      this._pools = await this.fetchPools();
      this._error = null;
    } catch (error) {
      this._pools = [];
      this._error = errorMessage(error);
      this.changed();
      throw error;
    }
    this.changed();
  }

  private changed(): void {
    const label = this.label;
    const key = `${label}\u0000${this.title}`;
    if (key === this._lastLabel) {
      return;
    }
    this._lastLabel = key;
    for (const listener of [...this._listeners]) {
      listener();
    }
  }
}
