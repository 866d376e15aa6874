/**
 * The `%uc_load` line for a catalog object, and where it goes in a cell. Pure functions.
 *
 * A table is loaded by its full name (`%uc_load main.ml.iris`), a volume, folder or file by its path
 * (`%uc_load /Volumes/main/ml/images/circle`). Names the magic's shlex parser would split are quoted.
 */

const PLAIN = /^[A-Za-z0-9_./:@%+=,-]+$/;

/** `value` as one shell-like word (single quotes when it holds spaces, quotes or other specials). */
export function quoteArg(value: string): string {
  if (value !== '' && PLAIN.test(value)) {
    return value;
  }
  return `'${value.replace(/'/g, `'"'"'`)}'`;
}

/** `%uc_load <target>`. */
export function loadLine(target: string): string {
  return `%uc_load ${quoteArg(target)}`;
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
