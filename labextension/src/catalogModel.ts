/**
 * The catalog tree: catalogs > schemas > tables and volumes > columns, folders and files.
 *
 * Children are fetched when a node is first expanded (lazy), kept until `refresh()`, which reloads
 * the catalogs and re-expands what was open. `rows()` flattens what is open into the rows a view
 * draws, filtered by the search text. Failures are kept as messages on the node whose children
 * failed (or on the model, for the catalogs) so the view shows them. No DOM, no JupyterLab.
 */
import { errorMessage, IUcApi } from './api';

export type NodeKind =
  | 'catalog'
  | 'schema'
  | 'table'
  | 'volume'
  | 'column'
  | 'directory'
  | 'file';

export interface ITreeNode {
  /** Unique in the tree: `<kind>:<full name or path>` (columns: `column:<table>#<column>`). */
  readonly id: string;
  readonly kind: NodeKind;
  readonly name: string;
  /** `catalog.schema.table` for catalogs, schemas, tables and volumes; the column's table. */
  readonly fullName: string | null;
  /** `/Volumes/c/s/v/...` for volumes, folders and files. */
  readonly path: string | null;
  readonly comment: string;
  /** False when the principal may not read the object (shown dimmed). */
  readonly readable: boolean;
  /** A short note drawn after the name: a column's type, a file's size. */
  readonly detail: string;
  readonly parent: ITreeNode | null;
  readonly depth: number;
  /** Null until loaded. */
  children: ITreeNode[] | null;
  expanded: boolean;
  loading: boolean;
  /** Why the children could not be loaded (the server's message). */
  error: string | null;
  /** The server listed only part of a folder. */
  truncated: boolean;
}

/** A row of the flattened tree: a node, or a message under the node it belongs to. */
export type Row =
  | { type: 'node'; node: ITreeNode; depth: number; expanded: boolean }
  | {
      type: 'message';
      kind: 'loading' | 'error' | 'empty' | 'truncated';
      text: string;
      depth: number;
      owner: ITreeNode | null;
    };

const EXPANDABLE: ReadonlySet<NodeKind> = new Set([
  'catalog',
  'schema',
  'table',
  'volume',
  'directory'
]);

export function isExpandable(node: ITreeNode): boolean {
  return EXPANDABLE.has(node.kind);
}

/** What `%uc_load` takes for this node (a table's name, a volume path), or null. */
export function loadTarget(node: ITreeNode): string | null {
  switch (node.kind) {
    case 'table':
      return node.fullName;
    case 'volume':
    case 'directory':
    case 'file':
      return node.path;
    default:
      return null;
  }
}

/** What "Copy name" copies: the full name, the path, or a column's name. */
export function copyText(node: ITreeNode): string {
  return node.path ?? (node.kind === 'column' ? node.name : node.fullName) ?? node.name;
}

/** `/Volumes/c/s/v` for the volume `c.s.v`. */
export function volumePath(fullName: string): string {
  return `/Volumes/${fullName.split('.').join('/')}`;
}

/** `1.5 KB`-style sizes. */
export function formatSize(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) {
    return '';
  }
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

interface INodeFields {
  id: string;
  kind: NodeKind;
  name: string;
  fullName?: string | null;
  path?: string | null;
  comment?: string | null;
  readable?: boolean;
  detail?: string;
}

function makeNode(fields: INodeFields, parent: ITreeNode | null): ITreeNode {
  return {
    id: fields.id,
    kind: fields.kind,
    name: fields.name,
    fullName: fields.fullName ?? null,
    path: fields.path ?? null,
    comment: fields.comment ?? '',
    readable: fields.readable ?? true,
    detail: fields.detail ?? '',
    parent,
    depth: parent ? parent.depth + 1 : 0,
    children: null,
    expanded: false,
    loading: false,
    error: null,
    truncated: false
  };
}

export type CatalogApi = Pick<IUcApi, 'catalogs' | 'schemas' | 'objects' | 'table' | 'volume'>;

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

  /** Lists the catalogs again (everything is fetched anew) and reopens what was open. */
  async refresh(): Promise<void> {
    const open = this.expandedIds();
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
      await Promise.all(reopen.map(node => this.expand(node)));
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
      if (!pathOnly && node.truncated) {
        rows.push({ type: 'message', kind: 'truncated', text: 'More entries not shown', depth, owner: node });
      }
    };
    for (const root of this._roots ?? []) {
      if (filter === '' || relevant(root)) {
        emit(root, filter !== '');
      }
    }
    return rows;
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
        const listing = await this.api.volume(node.path ?? '');
        node.truncated = Boolean(listing.truncated);
        return listing.entries.map(e =>
          makeNode(
            {
              id: `${e.kind}:${e.path}`,
              kind: e.kind === 'directory' ? 'directory' : 'file',
              name: e.name,
              path: e.path,
              detail: e.kind === 'file' ? formatSize(e.size) : ''
            },
            node
          )
        );
      }
      default:
        return [];
    }
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
