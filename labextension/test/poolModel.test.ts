import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ApiError, IPoolInfo } from '../src/api';
import {
  deviceLabel,
  IClock,
  IVisibility,
  Poller,
  poolForKernel,
  poolLabel,
  PoolStatusModel,
  poolTitle
} from '../src/poolModel';

function pool(fields: Partial<IPoolInfo> = {}): IPoolInfo {
  return {
    kernel_id: 'k1',
    pid: 100,
    pool: 1,
    updated: 1000,
    size: 2,
    state: 'idle',
    devices: 'cpu',
    backend: 'gloo',
    master_port: 29500,
    ranks: [
      { rank: 0, pid: 101, device: 'cpu', alive: true },
      { rank: 1, pid: 102, device: 'cpu', alive: false }
    ],
    ...fields
  };
}

/** Timers that fire only when the test advances time. */
class ManualClock implements IClock {
  now = 0;
  private timers = new Map<number, { at: number; fn: () => void }>();
  private next = 1;

  setTimeout(fn: () => void, ms: number): unknown {
    const id = this.next++;
    this.timers.set(id, { at: this.now + ms, fn });
    return id;
  }

  clearTimeout(handle: unknown): void {
    this.timers.delete(handle as number);
  }

  get pending(): number[] {
    return [...this.timers.values()].map(t => t.at - this.now);
  }

  /** Moves time forward by `ms`, firing due timers in order, letting promises settle between them. */
  async advance(ms: number): Promise<void> {
    const end = this.now + ms;
    for (;;) {
      const due = [...this.timers.entries()].filter(([, t]) => t.at <= end).sort((a, b) => a[1].at - b[1].at);
      if (due.length === 0) {
        break;
      }
      const [id, timer] = due[0];
      this.timers.delete(id);
      this.now = timer.at;
      timer.fn();
      await settle();
    }
    this.now = end;
  }
}

class ManualVisibility implements IVisibility {
  shown = true;
  private listeners = new Set<() => void>();

  visible(): boolean {
    return this.shown;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  set(shown: boolean): void {
    this.shown = shown;
    this.listeners.forEach(l => l());
  }

  get listening(): number {
    return this.listeners.size;
  }
}

async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    await Promise.resolve();
  }
}

function setup(results: Array<'ok' | 'fail'> = []) {
  const clock = new ManualClock();
  const visibility = new ManualVisibility();
  const times: number[] = [];
  const poller = new Poller({
    clock,
    visibility,
    interval: 3000,
    maxInterval: 20000,
    poll: async () => {
      times.push(clock.now);
      if ((results.shift() ?? 'ok') === 'fail') {
        throw new Error('down');
      }
    }
  });
  return { clock, visibility, times, poller };
}

describe('pool status text', () => {
  it('shows ranks, devices and state', () => {
    assert.equal(poolLabel(pool()), 'Ranks: 2 cpu · idle');
    assert.equal(poolLabel(pool({ size: 8, devices: 'cuda', state: 'busy' })), 'Ranks: 8 cuda · busy');
    assert.equal(deviceLabel(['cuda:0', 'cuda:1']), 'cuda');
    assert.equal(deviceLabel(['cpu', 'cuda:0']), 'cpu+cuda');
    assert.equal(poolLabel(pool({ devices: [] })), 'Ranks: 2 · idle');
  });

  it('says each rank\'s device and whether it is alive in the tooltip', () => {
    assert.equal(
      poolTitle(pool()),
      "Rank pool of this notebook's kernel: 2 ranks, idle, backend gloo, master port 29500\n" +
        'rank 0: pid 101 on cpu\nrank 1: pid 102 on cpu (exited)'
    );
  });

  it('picks the current kernel\'s pool: busy first, then the newest', () => {
    const pools = [
      pool({ kernel_id: 'other', state: 'busy' }),
      pool({ pool: 1, updated: 5 }),
      pool({ pool: 2, updated: 9 }),
      pool({ pool: 3, updated: 1, state: 'stopped' })
    ];
    assert.equal(poolForKernel(pools, 'k1')?.pool, 2);
    assert.equal(poolForKernel([...pools, pool({ pool: 4, updated: 2, state: 'busy' })], 'k1')?.pool, 4);
    assert.equal(poolForKernel(pools, 'k2'), null);
    assert.equal(poolForKernel(pools, null), null);
  });
});

describe('Poller', () => {
  it('asks at once, then every interval, one request at a time', async () => {
    const { clock, times, poller } = setup();
    poller.start();
    await settle();
    await clock.advance(9000);
    assert.deepEqual(times, [0, 3000, 6000, 9000]);
    poller.start(); // starting twice changes nothing
    await clock.advance(3000);
    assert.deepEqual(times, [0, 3000, 6000, 9000, 12000]);
  });

  it('backs off while requests fail, up to the longest wait, and recovers', async () => {
    const { clock, times, poller } = setup(['fail', 'fail', 'fail', 'fail', 'fail', 'ok']);
    poller.start();
    await settle();
    assert.equal(poller.failures, 1);
    await clock.advance(6000); // 3000 * 2
    await clock.advance(12000); // 3000 * 4
    await clock.advance(20000); // 3000 * 8, capped at 20000
    await clock.advance(20000);
    await clock.advance(20000); // succeeds
    await clock.advance(3000);
    assert.deepEqual(times, [0, 6000, 18000, 38000, 58000, 78000, 81000]);
    assert.equal(poller.failures, 0);
  });

  it('stops while the page is hidden and asks again as soon as it shows', async () => {
    const { clock, visibility, times, poller } = setup();
    poller.start();
    await settle();
    await clock.advance(1000);
    visibility.set(false);
    assert.equal(poller.scheduled, false);
    await clock.advance(60000);
    assert.deepEqual(times, [0]);
    visibility.set(true);
    await settle();
    assert.deepEqual(times, [0, 61000]);
    await clock.advance(3000);
    assert.deepEqual(times, [0, 61000, 64000]);
  });

  it('does not ask when started on a hidden page', async () => {
    const { clock, visibility, times, poller } = setup();
    visibility.shown = false;
    poller.start();
    await clock.advance(10000);
    assert.deepEqual(times, []);
    visibility.set(true);
    await settle();
    assert.deepEqual(times, [10000]);
  });

  it('stop cancels the next request and lets go of visibility events', async () => {
    const { clock, visibility, times, poller } = setup();
    poller.start();
    await settle();
    assert.equal(visibility.listening, 1);
    poller.stop();
    assert.equal(visibility.listening, 0);
    assert.deepEqual(clock.pending, []);
    await clock.advance(30000);
    visibility.set(true);
    assert.deepEqual(times, [0]);
  });

  it('refresh asks now and restarts the interval', async () => {
    const { clock, times, poller } = setup();
    poller.start();
    await settle();
    await clock.advance(1000);
    poller.refresh();
    await settle();
    await clock.advance(3000);
    assert.deepEqual(times, [0, 1000, 4000]);
  });
});

describe('PoolStatusModel', () => {
  it('shows the current kernel\'s pool and hides when there is none', async () => {
    let pools = [pool()];
    const model = new PoolStatusModel(async () => pools);
    let changes = 0;
    model.onChange(() => changes++);
    await model.update();
    assert.equal(model.label, null); // no kernel yet
    model.kernelId = 'k1';
    assert.equal(model.label, 'Ranks: 2 cpu · idle');
    assert.match(model.title, /backend gloo/);
    pools = [pool({ state: 'busy' })];
    await model.update();
    assert.equal(model.label, 'Ranks: 2 cpu · busy');
    const seen = changes;
    await model.update(); // nothing new: no change
    assert.equal(changes, seen);
    pools = [];
    await model.update();
    assert.equal(model.label, null);
  });

  it('hides the item and rethrows when the server fails', async () => {
    let fail = true;
    const model = new PoolStatusModel(async () => {
      if (fail) {
        throw new ApiError(404, 'Not Found');
      }
      return [pool()];
    });
    model.kernelId = 'k1';
    await assert.rejects(model.update(), /Not Found/);
    assert.equal(model.label, null);
    assert.equal(model.error, 'Not Found');
    fail = false;
    await model.update();
    assert.equal(model.error, null);
    assert.equal(model.label, 'Ranks: 2 cpu · idle');
  });
});
