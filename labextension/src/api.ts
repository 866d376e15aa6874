/**
 * The REST contract of the uc_jupyter server extension (`<base_url>uc-jupyter/api/`), as types,
 * and the interface the models talk to. No JupyterLab imports: models and their tests use only this.
 */

/** A catalog or a schema (`catalogs`, `schemas?catalog=C`). */
export interface IContainerItem {
  name: string;
  full_name: string;
  kind: 'catalog' | 'schema';
  comment?: string | null;
}

/** A table or a volume (`objects?schema=C.S`). */
export interface IObjectItem {
  name: string;
  full_name: string;
  kind: 'table' | 'volume';
  comment?: string | null;
  /** False when the current principal may not read it (no SELECT / READ VOLUME). */
  readable?: boolean;
}

export interface IObjects {
  tables: IObjectItem[];
  volumes: IObjectItem[];
}

export interface IColumn {
  name: string;
  type: string;
  nullable: boolean;
}

/** `who`: the principal the browser lists as, and which catalog it lists. */
export interface IWho {
  principal: string;
  catalog: string;
}

/** `table?name=C.S.T&rows=N`. */
export interface ITableInfo {
  full_name: string;
  version: number | null;
  /** Its rows, from the Delta log (null: a file's count is not logged). */
  rows?: number | null;
  columns: IColumn[];
  preview?: { columns: string[]; rows: unknown[][] };
}

export interface IVolumeEntry {
  name: string;
  path: string;
  kind: 'directory' | 'file';
  size?: number | null;
}

/** `volume?path=/Volumes/C/S/V/dir&limit=200&after=<next>`: one page of a folder, folders first, then by name. */
export interface IVolumeListing {
  path: string;
  entries: IVolumeEntry[];
  /** How many entries the folder has in all. */
  total?: number;
  /** The `after` of the following page; null on the last page. */
  next?: string | null;
}

/** How many entries the sidebar asks for per page of a folder (`volume?...&limit=`). */
export const PAGE_SIZE = 200;

/** `load-line?source=main.ml.iris`: the line "Insert %uc_load" writes (made by the server, one place). */
export interface ILoadLine {
  source: string;
  line: string;
}

export interface IRankInfo {
  rank: number;
  pid: number;
  device: string;
  alive: boolean;
}

/** One rank pool of one kernel (`pools`). */
export interface IPoolInfo {
  kernel_id: string | null;
  pid: number;
  pool: number;
  updated: number;
  size: number;
  state: 'stopped' | 'idle' | 'busy' | string;
  devices: string | string[];
  backend: string;
  master_port: number | null;
  ranks: IRankInfo[];
}

/** Everything the sidebar and the status item ask the server. */
export interface IUcApi {
  catalogs(): Promise<IContainerItem[]>;
  schemas(catalog: string): Promise<IContainerItem[]>;
  objects(schema: string): Promise<IObjects>;
  table(name: string, rows?: number): Promise<ITableInfo>;
  who(): Promise<IWho>;
  /** One page of a folder: the first, or the one after the token `after`. */
  volume(path: string, after?: string | null): Promise<IVolumeListing>;
  loadLine(source: string): Promise<ILoadLine>;
  pools(): Promise<IPoolInfo[]>;
}

/** A failed request: `status` is the HTTP status (0 when the server could not be reached). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** The one-line message to show for anything a request rejected with. */
export function errorMessage(error: unknown): string {
  if (error instanceof Error) {
    return error.message || error.name;
  }
  return String(error);
}
