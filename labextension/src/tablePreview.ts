/**
 * "Preview rows" on a table: how many rows it holds and its first rows, in a dialog. The text is made
 * here by pure functions (tested without a browser); `previewNode` only puts it into a DOM table.
 */
import { ITableInfo } from './api';
import { formatCount } from './catalogNodes';

/** How many rows to ask for: the server's default, a screenful. */
export const PREVIEW_ROWS = 10;

/** '3,000 rows, version 0; the first 10' (or 'rows not counted in its log' when the log has no counts). */
export function previewSummary(info: ITableInfo): string {
  const rows = info.rows;
  const count = rows === null || rows === undefined ? 'rows not counted in its log' : counted(rows, 'row');
  const version = info.version === null ? '' : `, version ${info.version}`;
  const shown = info.preview?.rows.length ?? 0;
  const first = shown === 0 ? '' : shown === rows ? '; all of them' : `; the first ${shown}`;
  return `${count}${version}${first}`;
}

function counted(count: number, what: string): string {
  return `${formatCount(count)} ${what}${count === 1 ? '' : 's'}`;
}

/** A value as the table shows it: text as it is, null as an empty cell, the rest as JSON. */
export function cellText(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The preview as a DOM node: the summary line, then a table of the first rows. */
export function previewNode(info: ITableInfo): HTMLElement {
  const body = document.createElement('div');
  body.className = 'uc-TablePreview';
  const summary = document.createElement('p');
  summary.className = 'uc-TablePreview-summary';
  summary.textContent = previewSummary(info);
  body.append(summary);
  const preview = info.preview;
  if (preview && preview.rows.length > 0) {
    const table = document.createElement('table');
    const head = table.createTHead().insertRow();
    for (const name of preview.columns) {
      const cell = document.createElement('th');
      cell.textContent = name;
      head.append(cell);
    }
    const rows = table.createTBody();
    for (const values of preview.rows) {
      const row = rows.insertRow();
      for (const value of values) {
        row.insertCell().textContent = cellText(value);
      }
    }
    body.append(table);
  }
  return body;
}
