/**
 * "Insert %uc_load": the line for a catalog object, and where it goes in a cell. Pure functions.
 *
 * The line itself is made by the server (`load-line?source=`, uc_jupyter/server/load_lines.py), the
 * one place that knows the magic's options and looks into a folder to choose them: a table gets
 * `df = %uc_load main.ml.iris --to pandas`, a folder of images in class folders
 * `loader = %uc_load /Volumes/c/s/v/folder --decode image --labels folder --shuffle`, another
 * folder `ds = %uc_load /Volumes/c/s/v/folder --to dataset`. Here it is only asked for and placed.
 */
import { IUcApi } from './api';

/** The `%uc_load` line for a table name or a `/Volumes` path, as the server makes it. */
export async function lineFor(api: Pick<IUcApi, 'loadLine'>, target: string): Promise<string> {
  return (await api.loadLine(target)).line;
}

/** The line that makes `%uc_load` exist in a kernel. */
export const LOAD_EXTENSION = '%load_ext uc_jupyter';

/**
 * `line`, with {@link LOAD_EXTENSION} above it when no cell of the notebook (`cells`: their sources)
 * loads the extension: in a kernel without it the magic fails ("Line magic function `%uc_load` not
 * found"). Written into the notebook rather than loaded by a kernel-wide setting, so the notebook
 * runs the same for a colleague whose kernels do not load it.
 */
export function withExtension(line: string, cells: readonly string[]): string {
  const loads = /^\s*%(re)?load_ext\s+uc_jupyter\s*$/m;
  return cells.some(source => loads.test(source)) ? line : `${LOAD_EXTENSION}\n${line}`;
}

/** A replacement of `source[start:end]` by `text`; the cursor goes to `cursor` afterwards. */
export interface IEdit {
  start: number;
  end: number;
  text: string;
  cursor: number;
}

/**
 * Where `line` goes in a cell whose text is `source` with the cursor at `offset`:
 * - an empty cell, or a cursor on a blank line: the line replaces that blank line;
 * - otherwise: a new line right after the cursor's line (nothing already there is split or moved).
 * The cursor ends at the end of the inserted line.
 */
export function insertionEdit(source: string, offset: number, line: string): IEdit {
  const at = Math.max(0, Math.min(offset, source.length));
  const lineStart = source.lastIndexOf('\n', at - 1) + 1;
  const newline = source.indexOf('\n', at);
  const lineEnd = newline === -1 ? source.length : newline;
  if (source.slice(lineStart, lineEnd).trim() === '') {
    return { start: lineStart, end: lineEnd, text: line, cursor: lineStart + line.length };
  }
  const text = `\n${line}`;
  return { start: lineEnd, end: lineEnd, text, cursor: lineEnd + text.length };
}

/** `source` after `edit`. */
export function applyEdit(source: string, edit: IEdit): string {
  return source.slice(0, edit.start) + edit.text + source.slice(edit.end);
}
