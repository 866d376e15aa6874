import assert from 'node:assert/strict';
import { describe, it } from 'node:test';

import { ApiError, IContainerItem, IObjects, ITableInfo, IVolumeListing } from '../src/api';
import {
  CatalogApi,
  CatalogModel,
  copyText,
  formatSize,
  ITreeNode,
  loadTarget,
  parseOpenState,
  Row,
  volumePath
} from '../src/catalogModel';

/** A catalog server in memory that records every request (the tree must load lazily). */
class FakeApi implements CatalogApi {
  calls: string[] = [];
  failures = new Map<string, ApiError>();
  catalogList: IContainerItem[] = [{ name: 'main', full_name: 'main', kind: 'catalog', comment: 'the demo' }];
  gates = new Map<string, Promise<void>>();

  private async answer<T>(call: string, value: () => T): Promise<T> {
    this.calls.push(call);
    await this.gates.get(call);
    const failure = this.failures.get(call);
    if (failure) {
      throw failure;
    }
    return value();
  }

  catalogs(): Promise<IContainerItem[]> {
    return this.answer('catalogs', () => this.catalogList);
  }

  schemas(catalog: string): Promise<IContainerItem[]> {
    return this.answer(`schemas ${catalog}`, () => [
      { name: 'ml', full_name: `${catalog}.ml`, kind: 'schema' as const },
      { name: 'raw', full_name: `${catalog}.raw`, kind: 'schema' as const }
    ]);
  }

  objects(schema: string): Promise<IObjects> {
    return this.answer(`objects ${schema}`, () => ({
      tables: [
        { name: 'iris', full_name: `${schema}.iris`, kind: 'table' as const, readable: true },
        { name: 'secret', full_name: `${schema}.secret`, kind: 'table' as const, readable: false }
      ],
      volumes: [{ name: 'images', full_name: `${schema}.images`, kind: 'volume' as const, readable: true }]
    }));
  }

  table(name: string): Promise<ITableInfo> {
    return this.answer(`table ${name}`, () => ({
      full_name: name,
      version: 0,
      columns: [
        { name: 'sepal_length', type: 'double', nullable: true },
        { name: 'species', type: 'string', nullable: false }
      ],
      preview: { columns: ['sepal_length', 'species'], rows: [] }
    }));
  }

  /** Folders listed in pages of `pageSize` files named f0000, f0001, ... (path -> how many files). */
  big = new Map<string, number>();
  pageSize = 200;

  volume(path: string, after?: string | null): Promise<IVolumeListing> {
    const call = after ? `volume ${path} after ${after}` : `volume ${path}`;
    return this.answer(call, () => {
      const count = this.big.get(path);
      if (count !== undefined) {
        const start = after ? Number(after) + 1 : 0;
        const end = Math.min(count, start + this.pageSize);
        const entries = [];
        for (let i = start; i < end; i++) {
          const name = `f${String(i).padStart(4, '0')}`;
          entries.push({ name, path: `${path}/${name}`, kind: 'file' as const, size: i });
        }
        return { path, entries, total: count, next: end < count ? String(end - 1) : null };
      }
      return path.endsWith('/images')
        ? {
            path,
            entries: [
              { name: 'circle', path: `${path}/circle`, kind: 'directory' as const, size: null },
              { name: 'labels.csv', path: `${path}/labels.csv`, kind: 'file' as const, size: 105020 }
            ],
            total: 2,
            next: null
          }
        : {
            path,
            entries: [{ name: '0.png', path: `${path}/0.png`, kind: 'file' as const, size: 200 }],
            total: 1,
            next: null
          };
    });
  }
}

function describeRows(rows: Row[]): string[] {
  return rows.map(row =>
    row.type === 'node'
      ? `${'  '.repeat(row.depth)}${row.expanded ? '-' : '+'} ${row.node.kind} ${row.node.name}`
      : `${'  '.repeat(row.depth)}! ${row.kind}: ${row.text}`
  );
}

function node(model: CatalogModel, id: string): ITreeNode {
  const found = model.find(id);
  assert.ok(found, `no node ${id}`);
  return found;
}

async function openedDemo(): Promise<{ api: FakeApi; model: CatalogModel }> {
  const api = new FakeApi();
  const model = new CatalogModel(api);
  await model.refresh();
  await model.expand(node(model, 'catalog:main'));
  await model.expand(node(model, 'schema:main.ml'));
  return { api, model };
}

describe('CatalogModel', () => {
  it('lists catalogs first and loads children only when a node is expanded', async () => {
    const api = new FakeApi();
    const model = new CatalogModel(api);
    assert.equal(model.roots, null);
    await model.refresh();
    assert.deepEqual(api.calls, ['catalogs']);
    assert.deepEqual(describeRows(model.rows()), ['+ catalog main']);

    await model.expand(node(model, 'catalog:main'));
    await model.expand(node(model, 'schema:main.ml'));
    assert.deepEqual(api.calls, ['catalogs', 'schemas main', 'objects main.ml']);
    assert.deepEqual(describeRows(model.rows()), [
      '- catalog main',
      '  - schema ml',
      '    + table iris',
      '    + table secret',
      '    + volume images',
      '  + schema raw'
    ]);
  });

  it('shows a table\'s columns and a volume\'s folders and files', async () => {
    const { model } = await openedDemo();
    await model.expand(node(model, 'table:main.ml.iris'));
    await model.expand(node(model, 'volume:/Volumes/main/ml/images'));
    await model.expand(node(model, 'directory:/Volumes/main/ml/images/circle'));
    assert.deepEqual(describeRows(model.rows()).slice(2), [
      '    - table iris',
      '      + column sepal_length',
      '      + column species',
      '    + table secret',
      '    - volume images',
      '      - directory circle',
      '        + file 0.png',
      '      + file labels.csv',
      '  + schema raw'
    ]);
    const species = node(model, 'column:main.ml.iris#species');
    assert.equal(species.detail, 'string not null');
    assert.equal(node(model, 'file:/Volumes/main/ml/images/labels.csv').detail, '103 KB');
  });

  it('fetches children once; collapsing and expanding again reuses them', async () => {
    const { api, model } = await openedDemo();
    const iris = node(model, 'table:main.ml.iris');
    await Promise.all([model.expand(iris), model.expand(iris)]);
    await model.toggle(iris);
    assert.equal(iris.expanded, false);
    await model.toggle(iris);
    assert.equal(iris.expanded, true);
    assert.equal(api.calls.filter(c => c === 'table main.ml.iris').length, 1);
  });

  it('marks unreadable objects and shows the server\'s message when they are opened', async () => {
    const { api, model } = await openedDemo();
    const secret = node(model, 'table:main.ml.secret');
    assert.equal(secret.readable, false);
    assert.equal(node(model, 'table:main.ml.iris').readable, true);
    api.failures.set('table main.ml.secret', new ApiError(403, 'root lacks SELECT on main.ml.secret'));
    await model.expand(secret);
    assert.equal(secret.error, 'root lacks SELECT on main.ml.secret');
    assert.ok(describeRows(model.rows()).includes('      ! error: root lacks SELECT on main.ml.secret'));
    // Opening it again after the failure asks again.
    api.failures.clear();
    model.collapse(secret);
    await model.expand(secret);
    assert.equal(secret.error, null);
    assert.equal(secret.children?.length, 2);
  });

  it('keeps a failure to list the catalogs as the panel\'s error', async () => {
    const api = new FakeApi();
    api.failures.set('catalogs', new ApiError(0, 'cannot reach the Jupyter server: Failed to fetch'));
    const model = new CatalogModel(api);
    await model.refresh();
    assert.equal(model.error, 'cannot reach the Jupyter server: Failed to fetch');
    assert.deepEqual(model.rows(), []);
    api.failures.clear();
    await model.refresh();
    assert.equal(model.error, null);
    assert.equal(model.rows().length, 1);
  });

  it('shows loading while children are on their way and says when there are none', async () => {
    const api = new FakeApi();
    let release = () => {};
    api.gates.set('schemas main', new Promise<void>(resolve => (release = resolve)));
    const model = new CatalogModel(api);
    await model.refresh();
    const expanding = model.expand(node(model, 'catalog:main'));
    assert.deepEqual(describeRows(model.rows()), ['- catalog main', '  ! loading: Loading…']);
    release();
    await expanding;
    assert.equal(describeRows(model.rows()).length, 3);

    api.catalogList = [{ name: 'empty', full_name: 'empty', kind: 'catalog' }];
    api.schemas = async () => [];
    await model.refresh();
    await model.expand(node(model, 'catalog:empty'));
    assert.deepEqual(describeRows(model.rows()), ['- catalog empty', '  ! empty: No schemas']);
  });

  it('refresh fetches everything again and reopens what was open', async () => {
    const { api, model } = await openedDemo();
    await model.expand(node(model, 'table:main.ml.iris'));
    const before = describeRows(model.rows());
    api.calls = [];
    await model.refresh();
    assert.deepEqual(api.calls, ['catalogs', 'schemas main', 'objects main.ml', 'table main.ml.iris']);
    assert.deepEqual(describeRows(model.rows()), before);
  });

  it('drops answers that arrive after a refresh started', async () => {
    const { api, model } = await openedDemo();
    let release = () => {};
    api.gates.set('table main.ml.iris', new Promise<void>(resolve => (release = resolve)));
    const stale = model.expand(node(model, 'table:main.ml.iris'));
    const refreshing = model.refresh();
    release();
    await Promise.all([stale, refreshing]);
    const iris = node(model, 'table:main.ml.iris');
    assert.equal(iris.expanded, true);
    assert.equal(iris.children?.length, 2);
    assert.equal(iris.loading, false);
  });

  it('filters loaded nodes by name and shows the way to each match', async () => {
    const { model } = await openedDemo();
    await model.expand(node(model, 'volume:/Volumes/main/ml/images'));
    model.collapse(node(model, 'catalog:main'));
    model.setFilter('LABEL');
    assert.deepEqual(describeRows(model.rows()), [
      '- catalog main',
      '  - schema ml',
      '    - volume images',
      '      + file labels.csv'
    ]);
    // A matching node shows its open subtree as it is.
    model.setFilter('images');
    assert.deepEqual(describeRows(model.rows()), [
      '- catalog main',
      '  - schema ml',
      '    - volume images',
      '      + directory circle',
      '      + file labels.csv'
    ]);
    model.setFilter('nothing like it');
    assert.deepEqual(model.rows(), []);
    model.setFilter('  ');
    assert.equal(describeRows(model.rows())[0], '+ catalog main');
  });

  it('tells listeners about every change and stops when asked', async () => {
    const model = new CatalogModel(new FakeApi());
    let calls = 0;
    const stop = model.onChange(() => calls++);
    await model.refresh();
    assert.ok(calls >= 2);
    stop();
    const seen = calls;
    model.setFilter('x');
    assert.equal(calls, seen);
  });

  it('keeps the selection by id across a refresh', async () => {
    const { model } = await openedDemo();
    model.select(node(model, 'table:main.ml.iris'));
    await model.refresh();
    assert.equal(model.selected?.id, 'table:main.ml.iris');
    assert.notEqual(model.selected, null);
  });
});

describe('CatalogModel paging', () => {
  const circle = '/Volumes/main/ml/images/circle';

  async function openedBig(count: number): Promise<{ api: FakeApi; model: CatalogModel; folder: ITreeNode }> {
    const { api, model } = await openedDemo();
    api.big.set(circle, count);
    await model.expand(node(model, 'volume:/Volumes/main/ml/images'));
    const folder = node(model, `directory:${circle}`);
    await model.expand(folder);
    return { api, model, folder };
  }

  /** The last `n` rows before the schema that follows images' schema (`+ schema raw`). */
  const tail = (model: CatalogModel, n: number) => describeRows(model.rows()).slice(-n - 1, -1);

  it('shows the first page of a big folder and a "Show more" row that loads the next', async () => {
    const { api, model, folder } = await openedBig(450);
    assert.equal(folder.children?.length, 200);
    assert.deepEqual(tail(model, 3), [
      '        + file f0199',
      '        ! more: Show 200 more (200 of 450)',
      '      + file labels.csv'
    ]);
    await model.more(folder);
    assert.deepEqual(tail(model, 3), [
      '        + file f0399',
      '        ! more: Show 50 more (400 of 450)',
      '      + file labels.csv'
    ]);
    await model.more(folder);
    assert.equal(folder.children?.length, 450);
    assert.deepEqual(tail(model, 2), ['        + file f0449', '      + file labels.csv']);
    assert.deepEqual(
      api.calls.filter(c => c.startsWith(`volume ${circle}`)),
      [`volume ${circle}`, `volume ${circle} after 199`, `volume ${circle} after 399`]
    );
    await model.more(folder); // nothing more to load: no request
    assert.equal(api.calls.filter(c => c.startsWith(`volume ${circle}`)).length, 3);
  });

  it('says it is loading and asks once when "Show more" is pressed twice', async () => {
    const { api, model, folder } = await openedBig(450);
    let release = () => {};
    api.gates.set(`volume ${circle} after 199`, new Promise<void>(resolve => (release = resolve)));
    const first = model.more(folder);
    const second = model.more(folder);
    assert.deepEqual(tail(model, 2), ['        ! loading: Loading more…', '      + file labels.csv']);
    release();
    await Promise.all([first, second]);
    assert.equal(folder.children?.length, 400);
    assert.equal(api.calls.filter(c => c === `volume ${circle} after 199`).length, 1);
  });

  it('keeps a failed page as the folder\'s error and lets it be tried again', async () => {
    const { api, model, folder } = await openedBig(450);
    api.failures.set(`volume ${circle} after 199`, new ApiError(403, 'alice lacks READ VOLUME on main.ml.images'));
    await model.more(folder);
    assert.equal(folder.children?.length, 200);
    assert.deepEqual(tail(model, 3), [
      '        + file f0199',
      '        ! more: Show 200 more (200 of 450)',
      '      + file labels.csv'
    ]);
    assert.ok(describeRows(model.rows()).includes('        ! error: alice lacks READ VOLUME on main.ml.images'));
    api.failures.clear();
    await model.more(folder);
    assert.equal(folder.children?.length, 400);
    assert.equal(folder.error, null);
  });

  it('reloads as many entries as were shown when refreshed', async () => {
    const { api, model, folder } = await openedBig(450);
    await model.more(folder);
    api.calls = [];
    await model.refresh();
    const again = node(model, `directory:${circle}`);
    assert.notEqual(again, folder);
    assert.equal(again.children?.length, 400);
    assert.deepEqual(
      api.calls.filter(c => c.startsWith(`volume ${circle}`)),
      [`volume ${circle}`, `volume ${circle} after 199`]
    );
  });

  it('hides the "Show more" row of a folder shown only as the way to a filter match', async () => {
    const { model } = await openedBig(450);
    model.setFilter('f0150');
    assert.deepEqual(describeRows(model.rows()), [
      '- catalog main',
      '  - schema ml',
      '    - volume images',
      '      - directory circle',
      '        + file f0150'
    ]);
  });
});

describe('catalog node helpers', () => {
  it('give %uc_load targets and copied names', async () => {
    const { model } = await openedDemo();
    await model.expand(node(model, 'table:main.ml.iris'));
    await model.expand(node(model, 'volume:/Volumes/main/ml/images'));
    const iris = node(model, 'table:main.ml.iris');
    const images = node(model, 'volume:/Volumes/main/ml/images');
    const circle = node(model, 'directory:/Volumes/main/ml/images/circle');
    const column = node(model, 'column:main.ml.iris#species');
    assert.equal(loadTarget(iris), 'main.ml.iris');
    assert.equal(loadTarget(images), '/Volumes/main/ml/images');
    assert.equal(loadTarget(circle), '/Volumes/main/ml/images/circle');
    assert.equal(loadTarget(node(model, 'schema:main.ml')), null);
    assert.equal(loadTarget(column), null);
    assert.equal(copyText(iris), 'main.ml.iris');
    assert.equal(copyText(images), '/Volumes/main/ml/images');
    assert.equal(copyText(node(model, 'schema:main.ml')), 'main.ml');
    assert.equal(copyText(column), 'species');
  });

  it('format paths and sizes', () => {
    assert.equal(volumePath('main.ml.images'), '/Volumes/main/ml/images');
    assert.equal(formatSize(0), '0 B');
    assert.equal(formatSize(1023), '1023 B');
    assert.equal(formatSize(1536), '1.5 KB');
    assert.equal(formatSize(50 * 1024 * 1024), '50 MB');
    assert.equal(formatSize(null), '');
  });
});

describe('the open state kept across reloads', () => {
  it('reopens after a reload what was open, with as many entries, and skips what is gone', async () => {
    const { api, model } = await openedDemo();
    api.big.set('/Volumes/main/ml/images', 450);
    await model.expand(node(model, 'volume:/Volumes/main/ml/images'));
    await model.more(node(model, 'volume:/Volumes/main/ml/images'));
    const saved = parseOpenState(JSON.stringify(model.openState()));
    assert.ok(saved);
    assert.deepEqual(saved.loaded, [['volume:/Volumes/main/ml/images', 400]]);

    const reloaded = new CatalogModel(api); // a new page: nothing open until the state is given back
    await reloaded.refresh({ ...saved, open: [...saved.open, 'schema:main.gone'] });
    assert.deepEqual(describeRows(reloaded.rows()).slice(0, 5), [
      '- catalog main',
      '  - schema ml',
      '    + table iris',
      '    + table secret',
      '    - volume images'
    ]);
    assert.equal(node(reloaded, 'volume:/Volumes/main/ml/images').children?.length, 400);
  });

  it('reads back only a well-formed state', () => {
    assert.deepEqual(parseOpenState('{"open": ["catalog:main"], "loaded": []}'), {
      open: ['catalog:main'],
      loaded: []
    });
    for (const text of [null, '', 'not json', '[]', '{"open": "x", "loaded": []}', '{"open": [], "loaded": [["a"]]}']) {
      assert.equal(parseOpenState(text), null, String(text));
    }
  });
});
