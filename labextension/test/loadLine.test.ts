import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ApiError } from '../src/api';
import { LOAD_EXTENSION, applyEdit, insertionEdit, lineFor, withExtension } from '../src/loadLine';

/** `source` with `|` marking the cursor -> the text after inserting, with `|` at the new cursor. */
function insert(marked: string, line = '%uc_load main.ml.iris'): string {
  const offset = marked.indexOf('|');
  const source = marked.replace('|', '');
  const edit = insertionEdit(source, offset, line);
  const text = applyEdit(source, edit);
  return `${text.slice(0, edit.cursor)}|${text.slice(edit.cursor)}`;
}

describe('lineFor', () => {
  it('asks the server for the line of a table or a path', async () => {
    const asked: string[] = [];
    const api = {
      loadLine: async (source: string) => {
        asked.push(source);
        return { source, line: `df = %uc_load ${source} --to pandas` };
      }
    };
    assert.equal(await lineFor(api, 'main.ml.iris'), 'df = %uc_load main.ml.iris --to pandas');
    assert.deepEqual(asked, ['main.ml.iris']);
  });

  it('passes the server\'s one-line error on', async () => {
    const api = {
      loadLine: async () => {
        throw new ApiError(404, 'table main.ml.irsi does not exist; did you mean main.ml.iris?');
      }
    };
    await assert.rejects(lineFor(api, 'main.ml.irsi'), /did you mean main\.ml\.iris\?/);
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

describe('withExtension', () => {
  const line = 'df = %uc_load main.ml.iris --to pandas';

  it('puts %load_ext above the line in a notebook that never loads the extension', () => {
    assert.equal(withExtension(line, []), `${LOAD_EXTENSION}\n${line}`);
    assert.equal(withExtension(line, ['import pandas', '# %load_ext uc_jupyter']), `${LOAD_EXTENSION}\n${line}`);
    assert.equal(withExtension(line, ['%load_ext uc_jupyter_other']), `${LOAD_EXTENSION}\n${line}`);
  });

  it('leaves the line alone where a cell loads it already', () => {
    assert.equal(withExtension(line, ['import os\n%load_ext uc_jupyter\n']), line);
    assert.equal(withExtension(line, ['x = 1', '  %reload_ext uc_jupyter']), line);
  });
});
