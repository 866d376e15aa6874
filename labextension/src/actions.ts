/**
 * The catalog's context actions: "Insert %uc_load" puts the server's line for the object
 * (`df = %uc_load main.ml.iris --to pandas`, `loader = %uc_load /Volumes/... --decode image ...`) into
 * the active cell of the current notebook (at the cursor; on a new line when the cursor's line has content);
 * disabled, its label says why ("open a notebook first"). "Preview rows" shows a table's row count and
 * first rows; "Copy name" copies the full name or path, "Refresh catalog" reloads the tree. Each is a command
 * (in the tree's context menu and the command palette) that takes an optional `id` argument, the
 * `data-uc-id` of a tree row; without it, the row right-clicked or else the selected row.
 */
import { JupyterFrontEnd } from '@jupyterlab/application';
import { Clipboard, Dialog, ICommandPalette, Notification, showDialog } from '@jupyterlab/apputils';
import { INotebookTracker, NotebookActions } from '@jupyterlab/notebook';
import { copyIcon, refreshIcon } from '@jupyterlab/ui-components';
import { Widget } from '@lumino/widgets';

import { errorMessage, IUcApi } from './api';
import { copyText, ITreeNode, loadTarget } from './catalogNodes';
import { CatalogBrowser, ITEM_CLASS } from './catalogView';
import { insertionEdit, lineFor, withExtension } from './loadLine';
import { PREVIEW_ROWS, previewNode } from './tablePreview';

export const CommandIDs = {
  insertLoad: 'uc-jupyter:insert-uc-load',
  preview: 'uc-jupyter:preview-table',
  copyName: 'uc-jupyter:copy-name',
  refresh: 'uc-jupyter:refresh-catalog',
  show: 'uc-jupyter:show-catalog'
} as const;

/**
 * Puts `line` into the current notebook's active cell, with `%load_ext uc_jupyter` above it when no
 * cell loads the extension yet; false when no notebook is open.
 */
export function insertIntoNotebook(app: JupyterFrontEnd, tracker: INotebookTracker, line: string): boolean {
  const panel = tracker.currentWidget;
  if (!panel) {
    return false;
  }
  const notebook = panel.content;
  const cells = notebook.model ? Array.from(notebook.model.cells, cell => cell.sharedModel.getSource()) : [];
  line = withExtension(line, cells);
  if (!notebook.activeCell || notebook.activeCell.model.type !== 'code') {
    NotebookActions.insertBelow(notebook);
    if (notebook.activeCell && notebook.activeCell.model.type !== 'code') {
      NotebookActions.changeCellType(notebook, 'code');
    }
  }
  const cell = notebook.activeCell;
  if (!cell) {
    return false;
  }
  const source = cell.model.sharedModel.getSource();
  const editor = cell.editor;
  const offset = editor ? editor.getOffsetAt(editor.getCursorPosition()) : source.length;
  const edit = insertionEdit(source, offset, line);
  cell.model.sharedModel.updateSource(edit.start, edit.end, edit.text);
  app.shell.activateById(panel.id);
  notebook.mode = 'edit';
  const position = editor?.getPositionAt(edit.cursor);
  if (editor && position) {
    editor.setCursorPosition(position);
    editor.focus();
  }
  return true;
}

export function addCatalogActions(
  app: JupyterFrontEnd,
  browser: CatalogBrowser,
  tracker: INotebookTracker,
  palette: ICommandPalette | null,
  api: Pick<IUcApi, 'loadLine' | 'table'>
): void {
  const { commands } = app;
  const model = browser.model;

  const target = (args: { id?: unknown }): ITreeNode | null => {
    if (typeof args.id === 'string') {
      return model.find(args.id);
    }
    const row = app.contextMenuHitTest(node => node.classList.contains(ITEM_CLASS));
    return (row ? browser.nodeOf(row) : null) ?? model.selected;
  };

  commands.addCommand(CommandIDs.insertLoad, {
    label: args => {
      const node = target(args);
      if (node === null || loadTarget(node) === null) {
        return 'Insert %uc_load (on a table, volume, folder or file)';
      }
      return tracker.currentWidget === null ? 'Insert %uc_load (open a notebook first)' : 'Insert %uc_load';
    },
    caption: 'Insert a %uc_load line for this table or volume path into the active notebook cell',
    isEnabled: args => {
      const node = target(args);
      return node !== null && loadTarget(node) !== null && tracker.currentWidget !== null;
    },
    execute: async args => {
      const node = target(args);
      const source = node ? loadTarget(node) : null;
      if (source === null) {
        Notification.warning('Select a table, volume, folder or file in the catalog first.', { autoClose: 5000 });
        return;
      }
      let line: string;
      try {
        line = await lineFor(api, source);
      } catch (error) {
        Notification.error(`Cannot write a %uc_load line for ${source}: ${errorMessage(error)}`, { autoClose: 8000 });
        return;
      }
      if (!insertIntoNotebook(app, tracker, line)) {
        Notification.warning('Open a notebook first: %uc_load goes into its active cell.', { autoClose: 5000 });
      }
    }
  });

  commands.addCommand(CommandIDs.preview, {
    label: 'Preview rows',
    caption: 'Show how many rows the table holds and its first rows',
    isVisible: args => target(args)?.kind === 'table',
    isEnabled: args => {
      const node = target(args);
      return node !== null && node.kind === 'table' && node.readable !== false;
    },
    execute: async args => {
      const node = target(args);
      const name = node?.kind === 'table' ? node.fullName : null;
      if (!name) {
        return;
      }
      try {
        const info = await api.table(name, PREVIEW_ROWS);
        const body = new Widget({ node: previewNode(info) });
        await showDialog({ title: name, body, buttons: [Dialog.okButton({ label: 'Close' })] });
      } catch (error) {
        Notification.error(`Cannot preview ${name}: ${errorMessage(error)}`, { autoClose: 8000 });
      }
    }
  });

  commands.addCommand(CommandIDs.copyName, {
    label: 'Copy name',
    caption: 'Copy the full name or the path',
    icon: copyIcon,
    isEnabled: args => target(args) !== null,
    execute: args => {
      const node = target(args);
      if (node) {
        Clipboard.copyToSystem(copyText(node));
      }
    }
  });

  commands.addCommand(CommandIDs.refresh, {
    label: 'Refresh catalog',
    caption: 'List the catalogs again and reopen what was open',
    icon: refreshIcon,
    execute: () => model.refresh()
  });

  commands.addCommand(CommandIDs.show, {
    label: 'Show Unity Catalog browser',
    execute: () => app.shell.activateById(browser.id)
  });

  const selector = `#${browser.id} .${ITEM_CLASS}`;
  app.contextMenu.addItem({ command: CommandIDs.insertLoad, selector, rank: 1 });
  app.contextMenu.addItem({ command: CommandIDs.preview, selector, rank: 2 });
  app.contextMenu.addItem({ command: CommandIDs.copyName, selector, rank: 3 });
  app.contextMenu.addItem({ command: CommandIDs.refresh, selector: `#${browser.id}`, rank: 10 });

  if (palette) {
    const category = 'Unity Catalog';
    palette.addItem({ command: CommandIDs.show, category });
    palette.addItem({ command: CommandIDs.refresh, category });
  }
}
