import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { applyEdit, insertionEdit, loadLine, quoteArg } from '../src/loadLine';

/** `source` with `|` marking the cursor -> the text after inserting, with `|` at the new cursor. */
function insert(marked: string, line = '%uc_load main.ml.iris'): string {
  const offset = marked.indexOf('|');
  const source = marked.replace('|', '');
  const edit = insertionEdit(source, offset, line);
  const text = applyEdit(source, edit);
  return `${text.slice(0, edit.cursor)}|${text.slice(edit.cursor)}`;
}

describe('loadLine', () => {
  it('names tables and volume paths as they are', () => {
    assert.equal(loadLine('main.ml.iris'), '%uc_load main.ml.iris');
    assert.equal(loadLine('/Volumes/main/ml/images/circle'), '%uc_load /Volumes/main/ml/images/circle');
  });

  it('quotes what the magic\'s shlex parser would split', () => {
    assert.equal(quoteArg('/Volumes/main/ml/my images'), "'/Volumes/main/ml/my images'");
    assert.equal(quoteArg("it's"), `'it'"'"'s'`);
    assert.equal(quoteArg(''), "''");
    assert.equal(loadLine('/Volumes/c/s/v/a b.png'), "%uc_load '/Volumes/c/s/v/a b.png'");
  });
});

describe('insertionEdit', () => {
  it('fills an empty cell', () => {
    assert.equal(insert('|'), '%uc_load main.ml.iris|');
  });

  it('fills the blank line the cursor is on', () => {
    assert.equal(insert('import x\n|\nprint(x)'), 'import x\n%uc_load main.ml.iris|\nprint(x)');
    assert.equal(insert('import x\n  |  '), 'import x\n%uc_load main.ml.iris|');
  });

  it('adds a new line after the cursor\'s line when it has content', () => {
    assert.equal(insert('frame = |x'), 'frame = x\n%uc_load main.ml.iris|');
    assert.equal(insert('a = 1|\nb = 2'), 'a = 1\n%uc_load main.ml.iris|\nb = 2');
    assert.equal(insert('|a = 1\nb = 2'), 'a = 1\n%uc_load main.ml.iris|\nb = 2');
  });

  it('clamps a cursor outside the text', () => {
    const edit = insertionEdit('abc', 99, 'L');
    assert.equal(applyEdit('abc', edit), 'abc\nL');
    assert.equal(applyEdit('abc', insertionEdit('abc', -5, 'L')), 'abc\nL');
  });
});
