import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { cellText, previewSummary } from '../src/tablePreview';

describe('previewSummary', () => {
  const info = (rows: number | null, shown: number) => ({
    full_name: 'main.ml.iris',
    version: 3,
    rows,
    columns: [],
    preview: { columns: ['a'], rows: Array.from({ length: shown }, (_, i) => [i]) }
  });

  it('says how many rows the table holds and how many are shown', () => {
    assert.equal(previewSummary(info(3000, 10)), '3,000 rows, version 3; the first 10');
    assert.equal(previewSummary(info(2, 2)), '2 rows, version 3; all of them');
    assert.equal(previewSummary(info(1, 1)), '1 row, version 3; all of them');
    assert.equal(previewSummary(info(0, 0)), '0 rows, version 3');
    assert.equal(previewSummary(info(null, 10)), 'rows not counted in its log, version 3; the first 10');
  });

  it('shows values as text', () => {
    assert.deepEqual([null, 'setosa', 5.1, true, [1, 2]].map(cellText), ['', 'setosa', '5.1', 'true', '[1,2]']);
  });
});
