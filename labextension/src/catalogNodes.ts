/**
 * The catalog tree's nodes and what is derived from one node alone: its `%uc_load` target, the text
 * "Copy name" copies, its tooltip, and how its name is cut to fit. Pure functions, no DOM.
 */

export type NodeKind = 'catalog' | 'schema' | 'table' | 'volume' | 'column' | 'directory' | 'file';

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
  /** Null until loaded; for folders, the pages loaded so far. */
  children: ITreeNode[] | null;
  expanded: boolean;
  loading: boolean;
  /** Why the children (or their next page) could not be loaded (the server's message). */
  error: string | null;
  /** Folders: the token of the next page of entries, null when every entry is loaded. */
  next: string | null;
  /** Folders: how many entries the server counts (shown beside "Show more"). */
  total: number | null;
  /** Folders: the next page is on its way. */
  loadingMore: boolean;
}

export interface INodeFields {
  id: string;
  kind: NodeKind;
  name: string;
  fullName?: string | null;
  path?: string | null;
  comment?: string | null;
  readable?: boolean;
  detail?: string;
}

export function makeNode(fields: INodeFields, parent: ITreeNode | null): ITreeNode {
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
    next: null,
    total: null,
    loadingMore: false
  };
}

const EXPANDABLE: ReadonlySet<NodeKind> = new Set(['catalog', 'schema', 'table', 'volume', 'directory']);

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

/**
 * The tooltip of a row: the full name or path (a column's as `table.column: type`), its comment, and
 * why it is dimmed. A name cut to fit the sidebar is always whole here.
 */
export function tooltip(node: ITreeNode): string {
  const lines =
    node.kind === 'column' ? [`${node.fullName}.${node.name}: ${node.detail}`] : [copyText(node)];
  if (node.kind === 'file' && node.detail) {
    lines[0] += ` (${node.detail})`;
  }
  if (node.comment) {
    lines.push(node.comment);
  }
  if (!node.readable) {
    lines.push('You may not read this object.');
  }
  return lines.join('\n');
}

/**
 * A name as [head, tail] for an ellipsis in the middle: the view shows the head from its start and
 * the tail up to its end, shrinking both in proportion, with the "…" where they meet
 * (`scan_0199_…band_07.json`), so a name's start and end both stay visible however narrow the
 * sidebar. The head holds 60% of the characters: names differ at their start (numbers, dates) as
 * often as at their end. Names of 12 characters or fewer are not split. Splits between code points,
 * never inside a surrogate pair.
 */
export function splitName(name: string): [string, string] {
  const chars = Array.from(name);
  if (chars.length <= 12) {
    return [name, ''];
  }
  const head = Math.ceil(chars.length * 0.6);
  return [chars.slice(0, head).join(''), chars.slice(head).join('')];
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

/** `12,345`: counts with thousands separators, the same in every locale. */
export function formatCount(count: number): string {
  return String(Math.trunc(count)).replace(/\B(?=(\d{3})+(?!\d))/g, ',');
}
