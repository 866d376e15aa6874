/**
 * `IUcApi` over HTTP: every request goes through `ServerConnection.makeRequest`, so the server's
 * token/cookie authentication and XSRF protection apply as for JupyterLab's own requests.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import {
  ApiError,
  IContainerItem,
  ILoadLine,
  IObjects,
  IPoolInfo,
  ITableInfo,
  IUcApi,
  IVolumeListing,
  IWho,
  PAGE_SIZE
} from './api';

/** Where the server extension answers, below the server's base URL. */
export const API_PATH = 'uc-jupyter/api';

export class ServerApi implements IUcApi {
  constructor(
    private readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()
  ) {}

  async catalogs(): Promise<IContainerItem[]> {
    return (await this.get<{ items: IContainerItem[] }>('catalogs')).items;
  }

  async schemas(catalog: string): Promise<IContainerItem[]> {
    return (await this.get<{ items: IContainerItem[] }>('schemas', { catalog })).items;
  }

  objects(schema: string): Promise<IObjects> {
    return this.get<IObjects>('objects', { schema });
  }

  table(name: string, rows = 10): Promise<ITableInfo> {
    return this.get<ITableInfo>('table', { name, rows: String(rows) });
  }

  volume(path: string, after: string | null = null): Promise<IVolumeListing> {
    const limit = String(PAGE_SIZE);
    return this.get<IVolumeListing>('volume', after ? { path, limit, after } : { path, limit });
  }

  who(): Promise<IWho> {
    return this.get<IWho>('who');
  }

  loadLine(source: string): Promise<ILoadLine> {
    return this.get<ILoadLine>('load-line', { source });
  }

  async pools(): Promise<IPoolInfo[]> {
    return (await this.get<{ pools: IPoolInfo[] }>('pools')).pools;
  }

  /** GET `endpoint?query` as JSON; a non-2xx answer rejects with the server's `message`. */
  async get<T>(endpoint: string, query: Record<string, string> = {}): Promise<T> {
    const url =
      URLExt.join(this.settings.baseUrl, API_PATH, endpoint) + URLExt.objectToQueryString(query);
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, { method: 'GET' }, this.settings);
    } catch (error) {
      const detail = error instanceof Error ? error.message : String(error);
      throw new ApiError(0, `cannot reach the Jupyter server: ${detail}`);
    }
    const text = await response.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = null;
    }
    if (!response.ok) {
      const message =
        body && typeof body === 'object' && typeof (body as { message?: unknown }).message === 'string'
          ? (body as { message: string }).message
          : `${endpoint}: HTTP ${response.status} ${response.statusText}`.trim();
      throw new ApiError(response.status, message);
    }
    if (body === null) {
      throw new ApiError(response.status, `${endpoint}: the server sent no JSON`);
    }
    return body as T;
  }
}
