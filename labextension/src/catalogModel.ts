/**
 * The catalog tree: catalogs > schemas > tables and volumes > columns, folders and files.
 *
 * Children are fetched when a node is first expanded (lazy), kept until `refresh()`, which reloads
 * the catalogs and re-expands what was open (folders with as many entries as they showed). A
 * folder's entries come one page of `PAGE_SIZE` at a time; `more()` appends the next page. `rows()`
 * flattens what is open into the rows a view draws, filtered by the search text, and ends a folder
 * that has more entries with a "Show more" row. Failures are kept as messages on the node whose
 * children failed (or on the model, for the catalogs) so the view shows them. No DOM, no JupyterLab.
 */
import { errorMessage, IUcApi, IVolumeListing, PAGE_SIZE } from './api';
import { formatCount, formatSize, isExpandable, ITreeNode, makeNode, volumePath } from './catalogNodes';

export type { ITreeNode, NodeKind } from './catalogNodes';
export {
  copyText,
  formatCount,
  formatSize,
  isExpandable,
  loadTarget,
  splitName,
  tooltip,
  volumePath
} from './catalogNodes';

/** A row of the flattened tree: a node, or a message under the node it belongs to. */
export type Row =
  | { type: 'node'; node: ITreeNode; depth: number; expanded: boolean }
  | {
      type: 'message';
      kind: 'loading' | 'error' | 'empty' | 'more';
      text: string;
      depth: number;
      owner: ITreeNode | null;
    };

export type CatalogApi = Pick<IUcApi, 'catalogs' | 'schemas' | 'objects' | 'table' | 'volume'>;

/**
 * What is open in the tree, to reopen it later (after a reload of the page): the open nodes' ids and,
 * for folders with several pages loaded, how many entries they showed. Plain JSON.
 */
export interface IOpenState {
  open: string[];
  loaded: [string, number][];
}

/** An {@link IOpenState} read back from its JSON text; null for anything else (never throws). */
export function parseOpenState(text: string | null): IOpenState | null {
  if (!text) {
    return null;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) {
    return null;
  }
  const { open, loaded } = value as { open?: unknown; loaded?: unknown };
  const isLoaded = (item: unknown): item is [string, number] =>
    Array.isArray(item) && item.length === 2 && typeof item[0] === 'string' && Number.isInteger(item[1]);
  if (!Array.isArray(open) || !open.every(id => typeof id === 'string')) {
    return null;
  }
  if (!Array.isArray(loaded) || !loaded.every(isLoaded)) {
    return null;
  }
  return { open, loaded };
}

export class CatalogModel {
  private _roots: ITreeNode[] | null = null;
  private _loading = false;
  private _error: string | null = null;
  private _filter = '';
  private _selected: string | null = null;
  /** Bumped by refresh(): answers to requests of an older generation are dropped. */
  private _generation = 0;
  private _pending = new Map<string, Promise<void>>();
  private _listeners = new Set<() => void>();

  constructor(private readonly api: CatalogApi) {}

  get roots(): readonly ITreeNode[] | null {
    return this._roots;
  }

  /** The catalogs are being listed. */
  get loading(): boolean {
    return this._loading;
  }

  /** Why the catalogs could not be listed. */
  get error(): string | null {
    return this._error;
  }

  get filter(): string {
    return this._filter;
  }

  get selected(): ITreeNode | null {
    return this._selected === null ? null : this.find(this._selected);
  }

  /** Calls `listener` after every change; returns the function that stops it. */
  onChange(listener: () => void): () => void {
    this._listeners.add(listener);
    return () => this._listeners.delete(listener);
  }

  select(node: ITreeNode | null): void {
    const id = node ? node.id : null;
    if (id !== this._selected) {
      this._selected = id;
      this.changed();
    }
  }

  setFilter(text: string): void {
    const filter = text.trim();
    if (filter !== this._filter) {
      this._filter = filter;
      this.changed();
    }
  }

  find(id: string): ITreeNode | null {
    const visit = (nodes: readonly ITreeNode[] | null): ITreeNode | null => {
      for (const node of nodes ?? []) {
        if (node.id === id) {
          return node;
        }
        const found = visit(node.children);
        if (found) {
          return found;
        }
      }
      return null;
    };
    return visit(this._roots);
  }

  /** What is open now (see {@link IOpenState}): saved by the browser, given back to `refresh`. */
  openState(): IOpenState {
    return { open: [...this.expandedIds()], loaded: [...this.loadedCounts()] };
  }

  /**
   * Lists the catalogs again (everything is fetched anew) and reopens what was open, or what
   * `restore` says was (a page reloaded: the state the browser saved). Ids that no longer exist
   * (a volume dropped since) are skipped.
   */
  async refresh(restore?: IOpenState): Promise<void> {
    const open = restore ? new Set(restore.open) : this.expandedIds();
    const loaded = restore ? new Map(restore.loaded) : this.loadedCounts();
    const generation = ++this._generation;
    this._pending.clear();
    this._loading = true;
    this._error = null;
    this.changed();
    let roots: ITreeNode[];
    try {
      const catalogs = await this.api.catalogs();
      roots = catalogs.map(c =>
        makeNode(
          { id: `catalog:${c.full_name}`, kind: 'catalog', name: c.name, fullName: c.full_name, comment: c.comment },
          null
        )
      );
    } catch (error) {
      if (generation === this._generation) {
        this._loading = false;
        this._error = errorMessage(error);
        this.changed();
      }
      return;
    }
    if (generation !== this._generation) {
      return;
    }
    this._roots = roots;
    this._loading = false;
    this.changed();
    // Reopen parents before children: ids are reopened level by level.
    let level = roots;
    while (level.length > 0 && generation === this._generation) {
      const reopen = level.filter(node => open.has(node.id));
      await Promise.all(reopen.map(node => this.reopen(node, loaded.get(node.id) ?? 0, generation)));
      level = reopen.flatMap(node => (node.expanded ? node.children ?? [] : []));
    }
  }

  async toggle(node: ITreeNode): Promise<void> {
    if (node.expanded) {
      this.collapse(node);
    } else {
      await this.expand(node);
    }
  }

  collapse(node: ITreeNode): void {
    if (node.expanded) {
      node.expanded = false;
      this.changed();
    }
  }

  /** Opens `node`, loading its children the first time (or after a failure). */
  async expand(node: ITreeNode): Promise<void> {
    if (!isExpandable(node)) {
      return;
    }
    if (!node.expanded) {
      node.expanded = true;
      this.changed();
    }
    if (node.children !== null) {
      return;
    }
    const pending = this._pending.get(node.id);
    if (pending) {
      return pending;
    }
    const load = this.load(node, this._generation);
    this._pending.set(node.id, load);
    try {
      await load;
    } finally {
      if (this._pending.get(node.id) === load) {
        this._pending.delete(node.id);
      }
    }
  }

  /**
   * Loads the next page of a folder's entries and appends it. Does nothing when every entry is
   * loaded or a page is already on its way; a failure is kept as the node's error (the "Show more"
   * row stays, to try again).
   */
  async more(node: ITreeNode): Promise<void> {
    if (node.next === null || node.loadingMore || node.children === null) {
      return;
    }
    const generation = this._generation;
    node.loadingMore = true;
    node.error = null;
    this.changed();
    try {
      const listing = await this.api.volume(node.path ?? '', node.next);
      if (generation !== this._generation) {
        return;
      }
      const known = new Set(node.children.map(child => child.id));
      const fresh = this.entryNodes(node, listing).filter(child => !known.has(child.id));
      node.children = [...node.children, ...fresh];
      node.next = listing.next ?? null;
      node.total = listing.total ?? null;
    } catch (error) {
      if (generation !== this._generation) {
        return;
      }
      node.error = errorMessage(error);
    } finally {
      node.loadingMore = false;
    }
    this.changed();
  }

  /** The rows to draw: open nodes' children in order, with the search text applied. */
  rows(): Row[] {
    const rows: Row[] = [];
    const filter = this._filter.toLowerCase();
    const matches = (node: ITreeNode) => node.name.toLowerCase().includes(filter);
    // Whether a node or one of its loaded descendants matches the filter.
    const memo = new Map<ITreeNode, boolean>();
    const relevant = (node: ITreeNode): boolean => {
      let hit = memo.get(node);
      if (hit === undefined) {
        hit = matches(node) || (node.children ?? []).some(relevant);
        memo.set(node, hit);
      }
      return hit;
    };
    const emit = (node: ITreeNode, filtered: boolean) => {
      // Under a filter, a node that does not match itself is shown only as the way to its matches.
      const pathOnly = filtered && !matches(node);
      const expanded = pathOnly ? true : node.expanded;
      rows.push({ type: 'node', node, depth: node.depth, expanded });
      if (!expanded) {
        return;
      }
      const depth = node.depth + 1;
      if (!pathOnly) {
        if (node.loading) {
          rows.push({ type: 'message', kind: 'loading', text: 'Loading…', depth, owner: node });
        }
        if (node.error !== null) {
          rows.push({ type: 'message', kind: 'error', text: node.error, depth, owner: node });
        }
        if (node.children !== null && node.children.length === 0 && node.error === null) {
          rows.push({ type: 'message', kind: 'empty', text: emptyText(node), depth, owner: node });
        }
      }
      const childFiltered = pathOnly;
      for (const child of node.children ?? []) {
        if (!childFiltered || relevant(child)) {
          emit(child, childFiltered);
        }
      }
      if (!pathOnly && node.children !== null && node.next !== null) {
        rows.push(
          node.loadingMore
            ? { type: 'message', kind: 'loading', text: 'Loading more…', depth, owner: node }
            : { type: 'message', kind: 'more', text: moreText(node), depth, owner: node }
        );
      }
    };
    for (const root of this._roots ?? []) {
      if (filter === '' || relevant(root)) {
        emit(root, filter !== '');
      }
    }
    return rows;
  }

  /** Expands `node` again after a refresh, with as many entries as it had (page after page). */
  private async reopen(node: ITreeNode, entries: number, generation: number): Promise<void> {
    await this.expand(node);
    while (
      generation === this._generation &&
      node.next !== null &&
      node.error === null &&
      (node.children?.length ?? 0) < entries
    ) {
      await this.more(node);
    }
  }

  /** How many entries each folder with several pages loaded holds. */
  private loadedCounts(): Map<string, number> {
    const counts = new Map<string, number>();
    const visit = (nodes: readonly ITreeNode[] | null) => {
      for (const node of nodes ?? []) {
        if (node.children !== null && node.total !== null) {
          counts.set(node.id, node.children.length);
        }
        visit(node.children);
      }
    };
    visit(this._roots);
    return counts;
  }

  private expandedIds(): Set<string> {
    const ids = new Set<string>();
    const visit = (nodes: readonly ITreeNode[] | null) => {
      for (const node of nodes ?? []) {
        if (node.expanded) {
          ids.add(node.id);
          visit(node.children);
        }
      }
    };
    visit(this._roots);
    return ids;
  }

  private async load(node: ITreeNode, generation: number): Promise<void> {
    node.loading = true;
    node.error = null;
    this.changed();
    try {
      const children = await this.fetchChildren(node);
      if (generation !== this._generation) {
        return;
      }
      node.children = children;
    } catch (error) {
      if (generation !== this._generation) {
        return;
      }
      node.error = errorMessage(error);
    } finally {
      node.loading = false;
    }
    this.changed();
  }

  private async fetchChildren(node: ITreeNode): Promise<ITreeNode[]> {
    switch (node.kind) {
      case 'catalog': {
        const schemas = await this.api.schemas(node.fullName ?? node.name);
        return schemas.map(s =>
          makeNode(
            { id: `schema:${s.full_name}`, kind: 'schema', name: s.name, fullName: s.full_name, comment: s.comment },
            node
          )
        );
      }
      case 'schema': {
        const { tables, volumes } = await this.api.objects(node.fullName ?? node.name);
        return [
          ...tables.map(t =>
            makeNode(
              {
                id: `table:${t.full_name}`,
                kind: 'table',
                name: t.name,
                fullName: t.full_name,
                comment: t.comment,
                readable: t.readable
              },
              node
            )
          ),
          ...volumes.map(v =>
            makeNode(
              {
                id: `volume:${volumePath(v.full_name)}`,
                kind: 'volume',
                name: v.name,
                fullName: v.full_name,
                path: volumePath(v.full_name),
                comment: v.comment,
                readable: v.readable
              },
              node
            )
          )
        ];
      }
      case 'table': {
        // Columns only: no preview rows are read for the tree.
        const info = await this.api.table(node.fullName ?? node.name, 0);
        return info.columns.map(c =>
          makeNode(
            {
              id: `column:${node.fullName}#${c.name}`,
              kind: 'column',
              name: c.name,
              fullName: node.fullName,
              detail: c.nullable ? c.type : `${c.type} not null`
            },
            node
          )
        );
      }
      case 'volume':
      case 'directory': {
        const listing = await this.api.volume(node.path ?? '', null);
        node.next = listing.next ?? null;
        node.total = listing.total ?? null;
        return this.entryNodes(node, listing);
      }
      default:
        return [];
    }
  }

  private entryNodes(folder: ITreeNode, listing: IVolumeListing): ITreeNode[] {
    return listing.entries.map(e =>
      makeNode(
        {
          id: `${e.kind}:${e.path}`,
          kind: e.kind === 'directory' ? 'directory' : 'file',
          name: e.name,
          path: e.path,
          detail: e.kind === 'file' ? formatSize(e.size) : ''
        },
        folder
      )
    );
  }

  private changed(): void {
    for (const listener of [...this._listeners]) {
      listener();
    }
  }
}

function emptyText(node: ITreeNode): string {
  switch (node.kind) {
    case 'catalog':
      return 'No schemas';
    case 'schema':
      return 'No tables or volumes';
    case 'table':
      return 'No columns';
    default:
      return 'Empty folder';
  }
}

/** `Show 200 more (200 of 100,000)`: the next page's size and how far the folder is loaded. */
function moreText(node: ITreeNode): string {
  const shown = node.children?.length ?? 0;
  if (node.total === null || node.total <= shown) {
    return 'Show more';
  }
  const next = Math.min(PAGE_SIZE, node.total - shown);
  return `Show ${formatCount(next)} more (${formatCount(shown)} of ${formatCount(node.total)})`;
}
