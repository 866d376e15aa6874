/** The left-sidebar catalog browser and its context actions. */
import { ILayoutRestorer, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { PageConfig } from '@jupyterlab/coreutils';
import { INotebookTracker } from '@jupyterlab/notebook';

import { errorMessage } from './api';
import { addCatalogActions } from './actions';
import { CatalogModel, parseOpenState } from './catalogModel';
import { CatalogBrowser } from './catalogView';
import { ServerApi } from './client';

/** Where the tree's open state is kept across reloads of the page: this browser's, per server. */
const OPEN_STATE_KEY = `uc-jupyter:catalog-open:${PageConfig.getBaseUrl()}`;

/** Keeps what is open in `localStorage` as it changes, and hands it to the first listing. */
function keepOpenState(browser: CatalogBrowser): void {
  let storage: Storage | null = null;
  try {
    storage = window.localStorage;
  } catch {
    return; // storage refused (a privacy setting): the tree starts closed, as before
  }
  browser.restore = parseOpenState(storage.getItem(OPEN_STATE_KEY));
  let saved = JSON.stringify(browser.restore);
  browser.model.onChange(() => {
    if (browser.model.roots === null) {
      return; // still listing: nothing opened or closed yet
    }
    const now = JSON.stringify(browser.model.openState());
    if (now !== saved) {
      saved = now;
      try {
        storage?.setItem(OPEN_STATE_KEY, now);
      } catch {
        // full or refused: the next change tries again
      }
    }
  });
}

export const catalogPlugin: JupyterFrontEndPlugin<void> = {
  id: 'uc-jupyter-labextension:catalog',
  description: 'A Unity Catalog browser in the left sidebar, with "Insert %uc_load" and "Copy name".',
  autoStart: true,
  requires: [INotebookTracker],
  optional: [ICommandPalette, ILayoutRestorer],
  activate: (
    app: JupyterFrontEnd,
    tracker: INotebookTracker,
    palette: ICommandPalette | null,
    restorer: ILayoutRestorer | null
  ) => {
    const api = new ServerApi();
    const model = new CatalogModel(api);
    const browser = new CatalogBrowser(model);
    keepOpenState(browser);
    api.who().then(
      who => browser.setWho(who.principal, who.catalog),
      error => browser.setWho('?', `cannot tell who lists the catalog: ${errorMessage(error)}`)
    );
    app.shell.add(browser, 'left', { rank: 650 });
    if (restorer) {
      restorer.add(browser, browser.id);
    }
    addCatalogActions(app, browser, tracker, palette, api);
  }
};
