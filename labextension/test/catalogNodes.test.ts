import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { formatCount, makeNode, splitName, tooltip } from '../src/catalogNodes';

describe('splitName', () => {
  it('cuts a long name into a head of 60% of its characters and a tail', () => {
    assert.deepEqual(splitName('tile_0001_northern_hemisphere_band_07.tif'), [
      'tile_0001_northern_hemisp',
      'here_band_07.tif'
    ]);
    assert.deepEqual(splitName('circle_00001.png'), ['circle_000', '01.png']);
  });

  it('leaves short names whole', () => {
    assert.deepEqual(splitName('iris'), ['iris', '']);
    assert.deepEqual(splitName('labels_2.csv'), ['labels_2.csv', '']);
  });

  it('never cuts a character in two', () => {
    const name = '📷'.repeat(10) + '_x.png';
    const [head, tail] = splitName(name);
    assert.equal(head + tail, name);
    assert.equal(Array.from(tail).length, 6);
    assert.ok(!/[\uD800-\uDBFF]$/.test(head));
  });
});

describe('tooltip', () => {
  const table = makeNode(
    { id: 'table:main.ml.iris', kind: 'table', name: 'iris', fullName: 'main.ml.iris', comment: 'measurements' },
    null
  );

  it('shows the whole name or path, the comment, and why a row is dimmed', () => {
    assert.equal(tooltip(table), 'main.ml.iris\nmeasurements');
    const file = makeNode(
      { id: 'file:/Volumes/c/s/v/a.png', kind: 'file', name: 'a.png', path: '/Volumes/c/s/v/a.png', detail: '1.5 KB' },
      null
    );
    assert.equal(tooltip(file), '/Volumes/c/s/v/a.png (1.5 KB)');
    const hidden = makeNode({ id: 'table:c.s.t', kind: 'table', name: 't', fullName: 'c.s.t', readable: false }, null);
    assert.equal(tooltip(hidden), 'c.s.t\nYou may not read this object.');
  });

  it('names a column with its table and type', () => {
    const column = makeNode(
      {
        id: 'column:main.ml.iris#species',
        kind: 'column',
        name: 'species',
        fullName: 'main.ml.iris',
        detail: 'string'
      },
      table
    );
    assert.equal(tooltip(column), 'main.ml.iris.species: string');
  });
});

describe('formatCount', () => {
  it('groups thousands', () => {
    assert.deepEqual([0, 200, 1000, 100000, 1234567].map(formatCount), ['0', '200', '1,000', '100,000', '1,234,567']);
  });
});
